"""Find and kill what a job's sandboxes left running, by their pid namespaces.

Each sandbox runs in its own pid namespace, whose init process (bubblewrap's) the kernel
manager records under ``<job_dir>/.sandbox/sandboxes`` with its start time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from autograder.sandbox.limits import RUNTIME_DIR


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
    own = os.readlink("/proc/self/ns/pid")
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
    """(start time, pid namespace) of a running process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):  # exited, waiting to be reaped
            return None
        return fields[19], os.readlink(f"/proc/{pid}/ns/pid")  # field 22: starttime
    except (OSError, IndexError):
        return None


def _processes() -> Iterable[tuple[int, str]]:
    """(pid, pid-namespace id) of every live (not zombie) process on the host."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{entry.name}/ns/pid")
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            yield int(entry.name), ns
