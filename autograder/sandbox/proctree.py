"""The host's processes as a tree of parents, read from Linux's ``/proc`` and kept current
cheaply.

A job's memory watch asks several times a second for the processes of its sandboxes: the
descendants of each sandbox's init.  Reading every process's parent at every look, as
``psutil.Process.children(recursive=True)`` does, costs about 40 microseconds per process
on the host: on a grader running a few hundred processes, several milliseconds per look.
A :class:`ProcessTree` remembers the parents it has read.  At each look it lists ``/proc``
and reads the parent of the processes that are new since the previous look, and of those
whose parent has left ``/proc``, since the kernel has given them a new one.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from dataclasses import dataclass, field


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (``/proc/<pid>/stat``), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # "pid (command) state ppid ...": the command may hold spaces and parentheses.
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


@dataclass
class ProcessTree:
    """``{pid: parent pid}`` of every process on the host, brought up to date at each look.

    A pid is forgotten when it leaves ``/proc``.  The kernel hands pids out in turn, so a
    pid comes back only after the counter has gone round every other one, never between
    two looks a fraction of a second apart.  A process whose parent has exited gets a new
    parent before the old one leaves ``/proc`` (its pid namespace's init, or the nearest
    subreaper), and it is read again then; until then, it still counts under its old,
    exited parent.
    """

    _parents: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _refresh(self) -> None:
        """Read what changed since the previous look."""
        pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        gone = self._parents.keys() - pids
        for pid in gone:
            del self._parents[pid]
        orphans = [pid for pid, parent in self._parents.items() if parent in gone]
        for pid in [*(pids - self._parents.keys()), *orphans]:
            parent = parent_of(pid)
            if parent is None:
                self._parents.pop(pid, None)
            else:
                self._parents[pid] = parent

    def descendants(self, *roots: int) -> list[int]:
        """The pids of every descendant of ``roots``, as of now (the roots not included).

        Threads may share a tree: one looks at a time."""
        children: dict[int, list[int]] = defaultdict(list)
        with self._lock:
            self._refresh()
            for pid, parent in self._parents.items():
                children[parent].append(pid)
        found, todo, seen = [], list(roots), set(roots)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in seen:  # a loop could only come from a stale parent
                    seen.add(child)
                    found.append(child)
                    todo.append(child)
        return found
