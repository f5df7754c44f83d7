"""A job's processes: the marker in their environment, finding and killing them, memory.

Every process a job starts (the kernel and its children) carries ``JOB_MARKER=<marker>``
in its initial environment, which it cannot change for the host, so the worker finds them
whatever they do to their process group.  :class:`MemoryWatch` bounds their memory
together.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

#: Environment variable that marks every process a job starts (kernel and children),
#: so that the worker can find and kill them whatever they do to their process group.
JOB_MARKER = "SPECDEC_GRADE_JOB"


DEFAULT_MEMORY_BYTES = 2 * 1024**3


class MemoryWatch(threading.Thread):
    """Enforce a memory limit on all of a job's processes together.

    RLIMIT_AS bounds each process; a submission that forks can still use many times
    the limit.  This thread sums the resident memory of every process that carries
    the job's marker, several times a second, and kills them all past ``limit``.
    """

    def __init__(self, marker: str, limit: int, interval: float = 0.2):
        super().__init__(daemon=True, name="memory-watch")
        self.marker, self.limit, self.interval = marker, limit, interval
        self.fired = False
        self.reason = ""
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            pids = marked_processes(self.marker)
            # Resident sizes count pages that forked processes share once per process;
            # their sum is only an upper bound.  Past the limit, measure the proportional
            # set size (shared pages split between their users) before deciding.
            if sum(_memory_bytes(pid, "VmRSS:") for pid in pids) <= self.limit:
                continue
            used = sum(_memory_bytes(pid, "Pss:", "smaps_rollup") for pid in pids)
            if used > self.limit:
                self.fired = True
                self.reason = (
                    f"its processes used {used / 2**30:.1f} GiB of memory together, over the "
                    f"{self.limit / 2**30:g} GiB limit; the kernel was stopped"
                )
                kill_marked_processes(self.marker)
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def _memory_bytes(pid: int, field: str, table: str = "status") -> int:
    """A memory field (in kB in /proc) of process ``pid``, in bytes; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/{table}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def marked_processes(marker: str | None = None) -> list[int]:
    """Pids of the processes whose initial environment carries ``JOB_MARKER=marker``.

    With no ``marker``: every process started for any grading job.
    """
    prefix = f"{JOB_MARKER}=".encode()
    needle = prefix + marker.encode() if marker is not None else None
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        found = needle in env if needle is not None else any(v.startswith(prefix) for v in env)
        if found:
            pids.append(int(entry.name))
    return pids


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
