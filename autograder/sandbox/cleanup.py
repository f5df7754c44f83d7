"""Find and kill what a job's sandboxes left running, by their pid namespaces.

Each sandbox runs in its own pid namespace, whose init process (bubblewrap's) the kernel
manager records under ``<job_dir>/.sandbox/sandboxes`` with its start time.  A process
found by other means (its job marker) is killed with its whole sandbox by
:func:`kill_with_sandboxes`.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from autograder.sandbox.limits import RUNTIME_DIR
from autograder.sandbox.proctree import ProcessTree


def kill_leftovers(job_dir: Path) -> int:
    """SIGKILL whatever a sandbox of this job left running; return how many processes.

    Each sandbox runs in its own pid namespace, whose init process (bubblewrap's) the
    launch records under ``<job_dir>/.sandbox``.  A process cannot leave its pid
    namespace, and killing the init kills every process in it, however detached.
    The record holds the init's start time too, so a recycled pid or namespace id
    never leads to killing anything else.
    """
    killed = 0
    for init_pid, ns in _live_sandboxes(Path(job_dir)):
        members = [pid for pid, space in _processes() if space == ns]
        try:
            os.kill(init_pid, signal.SIGKILL)
        except OSError:
            continue
        killed += len(members)
        deadline = time.monotonic() + 5
        while any(space == ns for _, space in _processes()) and time.monotonic() < deadline:
            time.sleep(0.02)
    return killed


def kill_with_sandboxes(pids: Iterable[int]) -> int:
    """SIGKILL these processes and everything in the sandboxes they run in; return how many.

    A process in a pid namespace other than ours is killed through that namespace's
    init (the process it sees as pid 1), which takes every other member with it, also
    those that cleared their environment (and so their job marker).
    """
    own = pid_namespace()
    wanted = set(pids)
    listing = list(_processes())
    spaces = {ns for pid, ns in listing if pid in wanted and ns != own}
    members = [(pid, ns) for pid, ns in listing if pid in wanted or ns in spaces]
    inits = [pid for pid, ns in members if ns in spaces and ns_pids(pid)[-1:] == [1]]
    for pid in [*inits, *wanted]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(members)


def members(job_dir: Path, tree: ProcessTree) -> list[int]:
    """Host pids of every process in this job's sandboxes: each init and its descendants.

    A process that leaves its parent is re-parented to its pid namespace's init, so the
    init's descendants are the whole namespace.  With ``tree`` kept between calls, this
    reads only what changed on the host (:mod:`~autograder.sandbox.proctree`), unlike
    :func:`running`, which is why the memory watch uses it several times a second.  It
    finds forked kernels too, whose environment has no job marker.
    """
    inits = [init_pid for init_pid, _ in _live_sandboxes(Path(job_dir))]
    return [*inits, *tree.descendants(*inits)] if inits else []


def running(job_dir: Path) -> list[int]:
    """Host pids of the processes still running in this job's sandboxes."""
    spaces = {ns for _, ns in _live_sandboxes(Path(job_dir))}
    return [pid for pid, ns in _processes() if ns in spaces]


def _live_sandboxes(job_dir: Path) -> list[tuple[int, str]]:
    """(init pid, pid namespace) of this job's sandboxes whose init is still the same."""
    try:
        lines = (job_dir / RUNTIME_DIR / "sandboxes").read_text().splitlines()
    except OSError:
        return []
    own = pid_namespace()
    live = []
    for line in lines:
        try:
            pid_text, start, ns = line.split()
            pid = int(pid_text)
        except ValueError:
            continue
        if ns != own and ns.startswith("pid:[") and process_identity(pid) == (start, ns):
            live.append((pid, ns))
    return live


def process_identity(pid: int) -> tuple[str, str] | None:
    """(start time, pid namespace) of a running (not zombie) process, or None."""
    try:
        process = psutil.Process(pid)
        if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None
        return repr(process.create_time()), pid_namespace(pid)
    except (psutil.Error, OSError):
        return None


def pid_namespace(pid: int | str = "self") -> str:
    """The pid namespace of a process, e.g. ``pid:[4026531836]`` (psutil does not say)."""
    return os.readlink(f"/proc/{pid}/ns/pid")


def ns_pids(pid: int) -> list[int]:
    """A process's pid in each pid namespace, the host's first, its own last (``NSpid``).

    Read from ``/proc/<pid>/status`` by hand (psutil does not say); [] if it is gone.
    """
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def _processes() -> Iterable[tuple[int, str]]:
    """(pid, pid-namespace id) of every live (not zombie) process on the host."""
    for process in psutil.process_iter():
        try:
            if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                continue
            yield process.pid, pid_namespace(process.pid)
        except (psutil.Error, OSError):
            continue
