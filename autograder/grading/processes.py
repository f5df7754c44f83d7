"""A job's processes: the marker in their environment, finding and killing them, memory.

Every process a job starts (the kernel and its children) carries ``JOB_MARKER=<marker>``
in its initial environment, which it cannot change for the host, so the worker finds them
whatever they do to their process group.  The marker names the worker (its pid), so that
:func:`kill_orphans` finds the processes of jobs whose worker is dead.
:class:`MemoryWatch` bounds a job's memory together.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import psutil

from autograder.sandbox import ProcessTree, kill_leftovers, kill_with_sandboxes, members
from autograder.sandbox.limits import JOB_MARKER_ENV

#: Environment variable that marks every process a job starts (kernel and children),
#: so that the worker can find and kill them whatever they do to their process group.
JOB_MARKER = JOB_MARKER_ENV


DEFAULT_MEMORY_BYTES = 2 * 1024**3


def job_marker(job_dir: Path) -> str:
    """The marker of the job graded in ``job_dir`` by this process: ``<pid>-<dir name>``."""
    return f"{os.getpid()}-{Path(job_dir).name}"


def kill_orphans() -> int:
    """SIGKILL the processes of every job whose worker is dead; return how many.

    A worker's sandboxes die with it (:mod:`autograder.sandbox.tether`); this sweep, run
    when ``grade`` starts, also covers what that cannot: a kernel run without the sandbox,
    or a tether killed outright along with its worker.  A marked process in a sandbox is
    killed with its whole sandbox.  Only jobs whose worker pid no longer runs are touched,
    so another grader's live jobs are safe.
    """
    orphans = [pid for pid, marker in _marked() if not _alive(_worker_pid(marker))]
    return kill_with_sandboxes(orphans) if orphans else 0


def _worker_pid(marker: str) -> int | None:
    head = marker.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int | None) -> bool:
    """True unless ``pid`` is certainly gone (a marker of another format counts as alive)."""
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


class MemoryWatch(threading.Thread):
    """Enforce a memory limit on all of a job's processes together.

    RLIMIT_AS bounds each process; a submission that forks can still use many times
    the limit.  This thread sums the resident memory of every process of the job,
    several times a second, and kills them all past ``limit``.  With ``job_dir`` (a
    sandboxed job) the job's processes are those in the pid namespaces of its sandboxes (a
    kernel forked from a warm parent has the parent's environment, not the job's marker,
    but it cannot leave its namespace); without, those that carry its marker.
    """

    def __init__(self, marker: str, limit: int, interval: float = 0.2, job_dir: Path | None = None):
        super().__init__(daemon=True, name="memory-watch")
        self.marker, self.limit, self.interval = marker, limit, interval
        self.job_dir = job_dir
        self._tree = ProcessTree()  # read again at each look, only where the host changed
        self.fired = False
        self.reason = ""
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            pids = self._processes()
            # Resident sizes count pages that forked processes share once per process;
            # their sum is only an upper bound.  Past the limit, measure the proportional
            # set size (shared pages split between their users) before deciding.
            if sum(_memory_bytes(pid) for pid in pids) <= self.limit:
                continue
            used = sum(_memory_bytes(pid, proportional=True) for pid in pids)
            if used > self.limit:
                self.fired = True
                self.reason = (
                    f"its processes used {used / 2**30:.1f} GiB of memory together, over the "
                    f"{self.limit / 2**30:g} GiB limit; the kernel was stopped"
                )
                kill_marked_processes(self.marker)
                if self.job_dir is not None:
                    kill_leftovers(self.job_dir)
                return

    def _processes(self) -> list[int]:
        """The job's processes: its sandboxes' namespaces when sandboxed, else by marker.

        Everything a sandboxed job runs is in a recorded pid namespace (a fresh sandbox's
        or a forked kernel's), so no scan of every process on the host is needed.
        """
        if self.job_dir is not None:
            return members(self.job_dir, self._tree)
        return marked_processes(self.marker)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def _memory_bytes(pid: int, proportional: bool = False) -> int:
    """Resident (or proportional, ``pss``) memory of process ``pid``; 0 if it is gone."""
    try:
        process = psutil.Process(pid)
        return process.memory_full_info().pss if proportional else process.memory_info().rss
    except (psutil.Error, AttributeError):  # gone, not ours, or no pss on this system
        return 0


def marked_processes(marker: str | None = None) -> list[int]:
    """Pids of the processes whose initial environment carries ``JOB_MARKER=marker``.

    With no ``marker``: every process started for any grading job.
    """
    return [pid for pid, value in _marked() if marker is None or value == marker]


def _marked() -> list[tuple[int, str]]:
    """(pid, marker) of every process that carries a job marker (this one excepted)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            value = process.environ().get(JOB_MARKER)
        except psutil.Error:  # gone, a zombie, or another user's
            continue
        if value is not None:
            found.append((process.pid, value))
    return found


def kill_marked_processes(marker: str) -> int:
    """SIGKILL every process whose initial environment carries ``JOB_MARKER=marker``."""
    killed = 0
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed
