"""The suite's markers, and the tripwires that keep them complete.

A test that starts one of these must carry its marker, so that ``-m "not kernel"`` (and
``make test-fast``) leaves out every slow test:

========== ==========================================================================
marker     what the test starts
========== ==========================================================================
kernel     a Jupyter kernel, the grading sandbox, or a grading worker pool
browser    Chromium (through Playwright)
cluster    a Dask scheduler or workers
postgres   a PostgreSQL server
hub        JupyterHub (its proxy, its single-user servers)
sandbox    needs bubblewrap (may skip only with ``SPECDEC_TEST_WITHOUT_SANDBOX=1``)
========== ==========================================================================

For a test without the marker, the tripwires make the start fail at once with
"mark it `<marker>`": in this process at the call that starts it, and in processes the
test started (a command, a pool worker) through a watcher that looks at the test's
descendants 20 times a second, kills the offending process and fails the test.  The
watcher starts with the test's first new process (``subprocess``; ``multiprocessing``'s
forkserver, spawn, or a worker forked by a running forkserver), so a test that starts no
process pays nothing for it.  It reads Linux's ``/proc`` (the grading sandbox needs Linux
too) through :class:`~autograder.sandbox.proctree.ProcessTree`, which at each look reads
only the processes that are new.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from autograder.sandbox.proctree import ProcessTree

#: The checkout, as command lines spell it (lower case): a clone may be in any folder,
#: ``~/dask-course`` or ``/srv/postgres-notes``, so its path is not a word of a command.
CHECKOUT = str(Path(__file__).resolve().parents[2]).lower()

MARKERS = {
    "kernel": "starts Jupyter kernels, the grading sandbox or a worker pool (slower)",
    "browser": "drives Chromium through Playwright (slowest)",
    "cluster": "starts a Dask scheduler and workers",
    "postgres": "starts a PostgreSQL server",
    "hub": "starts JupyterHub, its proxy and single-user servers",
    "sandbox": "needs bubblewrap",
}

#: Words in a descendant's command line that tell what it is, by marker.
COMMAND_WORDS = {
    "kernel": ("ipykernel", "bwrap", "autograder.sandbox"),
    "browser": ("chromium", "chrome", "playwright"),
    "cluster": ("dask", "distributed"),
    "postgres": ("postgres", "pg_ctl", "initdb"),
    "hub": ("bin/jupyterhub", "jupyterhub.singleuser", "configurable-http-proxy"),
}

#: How often the watcher looks at the test's descendants, in seconds: what it looks for
#: (a kernel, Chromium, a Dask worker, a database or hub server) lives for seconds.
WATCH_INTERVAL = 0.05


class UnmarkedResource(Exception):
    """A test started something its markers do not declare."""


def message(marker: str, what: str) -> str:
    return f"this test starts {what}: mark it `{marker}` (@pytest.mark.{marker})"


def pytest_configure(config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def _refuse(marker: str, what: str):
    def tripwire(*args, **kwargs):
        raise UnmarkedResource(message(marker, what))

    async def async_tripwire(*args, **kwargs):
        raise UnmarkedResource(message(marker, what))

    return tripwire, async_tripwire


def _tripwires(monkeypatch, missing: set[str]) -> None:
    """Patch, in this process, the calls that start what ``missing`` names."""
    if "kernel" in missing:
        from jupyter_client.manager import KernelManager

        _, refuse = _refuse("kernel", "a Jupyter kernel")
        monkeypatch.setattr(KernelManager, "_async_pre_start_kernel", refuse)
    if "cluster" in missing:
        import distributed

        refuse_cluster, _ = _refuse("cluster", "a Dask cluster")
        for name in ("LocalCluster", "Scheduler", "Client"):
            monkeypatch.setattr(distributed, name, refuse_cluster)
    if "browser" in missing:
        from playwright.sync_api import BrowserType

        refuse_browser, _ = _refuse("browser", "Chromium")
        for name in ("launch", "launch_persistent_context"):
            monkeypatch.setattr(BrowserType, name, refuse_browser)


def command_line(pid: int) -> str:
    """The command line of ``pid``, its arguments joined by spaces, in lower case; ``""``
    for a process that is gone or a zombie (as ``" ".join(psutil.Process(pid).cmdline())``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            raw = cmdline.read()
    except OSError:
        return ""
    return raw.removesuffix(b"\0").replace(b"\0", b" ").decode(errors="replace").lower()


def starts(cmdline: str, markers: set[str]) -> list[str]:
    """Which of ``markers`` a process with this (lower-case) command line needs: its words
    outside the checkout's own path name what it is.

    >>> sorted(starts(CHECKOUT + "/.venv/bin/python -m ipykernel_launcher", {"kernel", "cluster"}))
    ['kernel']
    >>> starts("/srv/dask-course/.venv/bin/dask worker tcp://127.0.0.1:1", {"cluster"})
    ['cluster']
    """
    words = cmdline.replace(CHECKOUT, " ")
    return [m for m in sorted(markers) if any(word in words for word in COMMAND_WORDS[m])]


@dataclass
class _Watcher:
    """Looks at this process's descendants for what ``missing`` names, until stopped.

    Each (pid, command line) pair is judged once.  A child that shows this process's own
    command line is a copy of it, read between its ``fork`` and its ``exec`` (or forked
    with no ``exec``): it is not judged, since that command line is pytest's, whose
    arguments may hold any word (``-m "not postgres"``).  It is judged once it has exec'd.
    """

    missing: set[str]
    found: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seen: set[tuple[int, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._tree = ProcessTree()
        self._own = command_line(os.getpid())
        self._seen = set(self._children())  # there before the test
        self._thread = threading.Thread(target=self._watch, name="marker-watch", daemon=True)
        self._thread.start()

    def _children(self) -> list[tuple[int, str]]:
        return [(pid, command_line(pid)) for pid in self._tree.descendants(os.getpid())]

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            self.check()

    def check(self) -> None:
        for pid, cmdline in self._children():
            if (pid, cmdline) in self._seen or not cmdline or cmdline == self._own:  # "": gone
                continue
            self._seen.add((pid, cmdline))
            for marker in starts(cmdline, self.missing):
                self.found.append(message(marker, f"`{cmdline[:120]}`"))
                try:
                    psutil.Process(pid).kill()
                except psutil.Error:
                    pass

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join()
        self.check()
        return self.found


@pytest.fixture(autouse=True)
def _markers_are_complete(request, monkeypatch):
    """Fail a test that starts what its markers do not declare (see the module docstring)."""
    marked = {m.name for m in request.node.iter_markers()}
    missing = set(COMMAND_WORDS) - marked
    if not missing:
        yield
        return
    _tripwires(monkeypatch, missing)
    watchers: list[_Watcher] = []
    lock = threading.Lock()  # processes may start from several threads at once: one watcher

    closed = threading.Event()  # after the test: a late thread starts no watcher

    def start_watching() -> None:
        with lock:
            if not watchers and not closed.is_set():
                watchers.append(_Watcher(missing))

    _watch_from_the_first_process(monkeypatch, start_watching)
    yield
    with lock:
        closed.set()
        found = [text for watcher in watchers for text in watcher.stop()]
    if found:
        pytest.fail("; ".join(dict.fromkeys(found)), pytrace=False)


def _watch_from_the_first_process(monkeypatch, start) -> None:
    """Call ``start()`` before every new process this test makes (it starts the watcher once)."""
    import multiprocessing.forkserver
    import multiprocessing.util
    import subprocess

    execute_child = subprocess.Popen._execute_child
    spawnv_passfds = multiprocessing.util.spawnv_passfds
    connect = multiprocessing.forkserver.connect_to_new_process

    def _execute_child(self, *args, **kwargs):
        start()
        return execute_child(self, *args, **kwargs)

    def _spawnv_passfds(*args, **kwargs):
        start()
        return spawnv_passfds(*args, **kwargs)

    def _connect(*args, **kwargs):  # a worker forked by a forkserver that was running already
        start()
        return connect(*args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", _execute_child)
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", _spawnv_passfds)
    monkeypatch.setattr(multiprocessing.forkserver, "connect_to_new_process", _connect)
