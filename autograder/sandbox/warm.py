"""Kernels forked from a warm parent: the grader's side of :mod:`~autograder.sandbox.warm_parent`.

A fresh sandboxed kernel spends about a CPU-second starting Python and importing
ipykernel, numpy and matplotlib.  A :class:`WarmParent` pays that once per worker and
assignment (numpy and matplotlib only if the assignment's source imports them:
:func:`preload_for`).  It starts the warm parent in a sandbox (the kernel's mounts and
limits, and capabilities inside the sandbox's own user namespace, which the forked kernel
drops), and asks it for one kernel per submission over a Unix socket.  Each kernel gets
its own mount, pid, IPC, network and UTS namespaces and fresh tmpfs mounts (see
``warm_parent``), so it is as isolated from the submission before it as a fresh kernel is.

:class:`ForkedProcess` stands where jupyter_client expects the kernel's ``Popen``: its
pid is the kernel namespace's pid 1 (killing it kills everything in the namespace), and
it polls through a pidfd, so a recycled pid is never signalled.  :class:`WarmParents`
is a worker's parents, one per :class:`WarmKey`; a parent that cannot start is
remembered with its reason, and kernels then start fresh (:mod:`.kernel_manager`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from multiprocessing import util as mp_util
from pathlib import Path

from autograder.sandbox.cleanup import ns_pids
from autograder.sandbox.launch import Launch, inner_env
from autograder.sandbox.limits import (
    EVIDENCE_FD_ENV,
    INNER_HOME,
    INNER_RUN,
    JOB_MARKER_ENV,
    Limits,
)
from autograder.sandbox.mounts import matplotlib_font_cache, python_mounts, visible_entries
from autograder.sandbox.proctree import ProcessTree

#: The warm parent's program, run from its text (``python -c``): not imported here.
WARM_PARENT_SOURCE = Path(__file__).with_name("warm_parent.py")

#: Where the warm parent sees its share: one folder per request, with the files that go
#: beside that kernel's notebook.  Each kernel detaches it before any learner code runs.
INNER_SHARE = "/run/specdec-share"

#: Seconds the warm parent has to import the kernel's modules (first start: font cache).
READY_TIMEOUT = 90.0

#: Seconds one kernel's sandbox has to be made.
FORK_TIMEOUT = 30.0

#: The matplotlib backend ipykernel sets in a fresh kernel before anything imports matplotlib.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

#: Warm parents a worker keeps (one per assignment and run; the oldest is stopped).
MAX_PARENTS = 2

#: The libraries a warm parent imports when the assignment's source imports them: each
#: top-level package, and the modules of it to import.  Each is known to start no thread
#: and no ZeroMQ context at import, which the warm parent checks.
PRELOADABLE = (
    ("numpy", ("numpy",)),
    ("matplotlib", ("matplotlib", "matplotlib.pyplot")),
)

#: How the forked kernel's start is described in results and the summary.
FORKED = "forked"
FRESH = "fresh"


class WarmParentError(RuntimeError):
    """The warm parent could not start, or could not make this kernel."""


@dataclass(frozen=True)
class WarmKey:
    """What every kernel forked from one warm parent shares."""

    python: str  #: the interpreter (the kernelspec's must be this one)
    limits: Limits
    reference_packages: tuple[str, ...]
    gate_reference: bool
    anchor: str  #: the run's scratch folder, under which every working directory lies
    preload: tuple[str, ...] = ()  #: the libraries' modules to import (:func:`preload_for`)


class ForkedProcess:
    """A forked kernel's namespace, seen as jupyter_client sees a kernel's ``Popen``."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.returncode: int | None = None
        self._signalled: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._pidfd is not None:
            ready, _, _ = select.select([self._pidfd], [], [], 0)
            if ready:
                self._exited()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked kernel", timeout or 0)
            time.sleep(0.02)
        return self.returncode if self.returncode is not None else 0

    def send_signal(self, signum: int) -> None:
        """Signal the namespace's pid 1; after SIGKILL, wait (up to 2 s) until it is gone.

        jupyter_client polls a killed kernel every 0.1 s until it has exited; a namespace
        dies within a millisecond or two, so waiting here spares that 0.1 s per kernel.
        """
        if self.poll() is None and self._pidfd is not None:
            signal.pidfd_send_signal(self._pidfd, signum)
            self._signalled = signum
            if signum == signal.SIGKILL:
                select.select([self._pidfd], [], [], 2.0)
                self.poll()

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        # pid 1 of a namespace ignores signals it has no handler for: SIGTERM would not
        # stop the reaper.  The kernel has been asked to shut down already; end it.
        self.kill()

    def _exited(self) -> None:
        self.returncode = -self._signalled if self._signalled else 0
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class WarmParent:
    """One warm parent in its sandbox, and the kernels it is asked to fork."""

    def __init__(self, key: WarmKey, run_dir: Path, env: dict[str, str]) -> None:
        self.key = key
        self.run_dir = Path(run_dir)
        self.share = self.run_dir / "share"
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self.launch: Launch | None = None
        self.init_pid: int | None = None
        self._tree = ProcessTree()  # kept between kernels: each look reads only what is new
        self._start(env)

    # -- start and stop ---------------------------------------------------------------------
    def _start(self, env: dict[str, str]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        self.share.mkdir(exist_ok=True)
        os.chmod(self.share, 0o755)
        cwd = self.run_dir / "cwd"
        cwd.mkdir(exist_ok=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        fontlist = matplotlib_font_cache()
        inner_fontlist = f"{INNER_HOME}/.config/matplotlib/{fontlist.name}" if fontlist else ""
        limits = self.key.limits
        # The parent's own limits: the kernel's, but its hard limits must allow each
        # kernel's (a kernel cannot raise them) and room for its own few processes.
        own = replace(limits, cpu_seconds=10**6, max_processes=limits.max_processes + 64)
        anchor = self.key.anchor
        dirs = [] if anchor == "/tmp" or anchor.startswith("/tmp/") else [anchor]
        try:
            self.launch = Launch(
                run_dir=self.run_dir,
                cwd=cwd,
                limits=own,
                command=[
                    self.key.python,
                    "-c",
                    WARM_PARENT_SOURCE.read_text(),
                    str(theirs.fileno()),
                    inner_fontlist,
                    ",".join(self.key.preload),
                ],
                env=env,
                reference_packages=self.key.reference_packages,
                gate_reference=self.key.gate_reference,
                capabilities=True,
                shares=[(str(self.share), INNER_SHARE)],
                dirs=dirs,
            )
            log = open(self.run_dir / "parent.log", "ab")  # noqa: SIM115  (closed in close)
            self.launch.files.append(log)
            self._process = subprocess.Popen(
                self.launch.argv,
                env=self.launch.outer_env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(*self.launch.pass_fds, theirs.fileno()),
                start_new_session=True,
            )
            self.launch.close_child_ends()
            theirs.close()
            self.init_pid = self.launch.read_child_pid(READY_TIMEOUT)
            if self.init_pid is None:
                raise WarmParentError(f"its sandbox did not start: {self._log_tail()}")
            reply = self._receive(READY_TIMEOUT)
            if not reply.get("ready"):
                raise WarmParentError(str(reply.get("error") or reply))
        except BaseException:
            theirs.close()
            self.close()
            raise

    def close(self) -> None:
        """Stop the warm parent: its sandbox, and every kernel it forked, end with it."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            try:  # the parent exits when its socket closes, and its sandbox with it
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.terminate()  # the tether kills the sandbox
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
        if self.launch is not None:
            self.launch.close()
            self.launch = None
        shutil.rmtree(self.run_dir, ignore_errors=True)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- one kernel -------------------------------------------------------------------------
    def fork(
        self,
        *,
        kernel_id: str,
        cwd: Path,
        connection: bytes,
        env: dict[str, str],
        argv: list[str],
        log_fd: int,
        evidence_fd: int,
        limits: Limits,
    ) -> ForkedProcess:
        """Ask for one kernel: ``argv`` for ipykernel's launcher, run in ``cwd``."""
        if not self.alive or self._control is None:
            raise WarmParentError(f"the warm parent has exited: {self._log_tail()}")
        share = self.share / kernel_id
        visible = _expose(Path(cwd), share / "visible")
        request = {
            "cwd": str(cwd),
            "anchor": self.key.anchor,
            "share": f"{INNER_SHARE}/{kernel_id}",
            "share_root": INNER_SHARE,
            "visible": visible,
            "home": INNER_HOME,
            "keep": [dest for _, dest in python_mounts() if _under_fresh_mount(dest)],
            "run": INNER_RUN,
            "connection": connection.decode(),
            "env": env,
            "evidence_env": EVIDENCE_FD_ENV,
            "argv": argv,
            "scratch_bytes": int(limits.scratch_bytes),
            "limits": {
                "memory_bytes": int(limits.memory_bytes),
                "cpu_seconds": int(limits.cpu_seconds),
                "max_processes": int(limits.max_processes),
                "file_size_bytes": int(limits.file_size_bytes),
            },
        }
        with self._lock:
            self.set_reference_readable(False)
            socket.send_fds(self._control, [json.dumps(request).encode()], [log_fd, evidence_fd])
            reply = self._receive(FORK_TIMEOUT)
        if "error" in reply:
            shutil.rmtree(share, ignore_errors=True)
            raise WarmParentError(f"the kernel's sandbox could not be made: {reply['error']}")
        return self._process_of(int(reply["r"]))

    def forget(self, kernel_id: str) -> None:
        """Remove what one kernel's request left in the share (after the kernel ended)."""
        shutil.rmtree(self.share / kernel_id, ignore_errors=True)

    def set_reference_readable(self, readable: bool) -> None:
        if self.launch is not None:
            self.launch.set_reference_readable(readable)

    # -- helpers ----------------------------------------------------------------------------
    def _receive(self, timeout: float) -> dict:
        assert self._control is not None
        ready, _, _ = select.select([self._control], [], [], timeout)
        if not ready:
            raise WarmParentError(f"no answer in {timeout:g} s: {self._log_tail()}")
        data = self._control.recv(1 << 20)
        if not data:
            raise WarmParentError(f"the warm parent exited: {self._log_tail()}")
        return json.loads(data)

    def _process_of(self, inner_pid: int) -> ForkedProcess:
        """The kernel namespace's pid 1, found by its pids, as a pidfd-backed process."""
        for _ in range(50):
            host = self._host_pid(inner_pid)
            if host is not None:
                pidfd = os.pidfd_open(host)
                if self._host_pid(inner_pid) == host:  # still that process, not a new one
                    return ForkedProcess(host, pidfd)
                os.close(pidfd)
            time.sleep(0.01)
        raise WarmParentError("the forked kernel ended before it was found")

    def _host_pid(self, inner_pid: int) -> int | None:
        """Host pid of the process that is ``inner_pid`` here and pid 1 in its namespace."""
        if self.init_pid is None:
            return None
        for pid in self._tree.descendants(self.init_pid):
            pids = ns_pids(pid)
            if len(pids) >= 2 and pids[-1] == 1 and pids[-2] == inner_pid:
                return pid
        return None

    def _log_tail(self) -> str:
        try:
            text = (self.run_dir / "parent.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-1500:].strip() or "(empty log)"


class WarmParents:
    """A worker's warm parents, one per :class:`WarmKey`, shared by reference via config.

    traitlets deep-copies config values; a copy of this holder is the holder itself.
    A key whose parent could not start is remembered with the reason, so each kernel of
    that key starts fresh at once, and the summary can say why.
    """

    def __init__(self) -> None:
        self._parents: dict[WarmKey, WarmParent] = {}
        self._failed: dict[WarmKey, str] = {}
        self._finalizer: mp_util.Finalize | None = None
        self._count = 0

    def __deepcopy__(self, memo: dict) -> WarmParents:
        return self

    def __copy__(self) -> WarmParents:
        return self

    def parent(self, key: WarmKey, env: dict[str, str]) -> WarmParent:
        """The running warm parent for ``key``, started now if need be."""
        if key in self._failed:
            raise WarmParentError(self._failed[key])
        parent = self._parents.get(key)
        if parent is not None and parent.alive:
            return parent
        if parent is not None:
            self._drop(key)
        while len(self._parents) >= MAX_PARENTS:
            self._drop(next(iter(self._parents)))
        self._count += 1
        run_dir = Path(key.anchor) / f"warm-{os.getpid()}-{self._count}"
        try:
            parent = WarmParent(key, run_dir, env)
        except (OSError, WarmParentError) as exc:
            self._failed[key] = f"the warm parent could not start: {exc}"
            raise WarmParentError(self._failed[key]) from exc
        self._parents[key] = parent
        if self._finalizer is None:  # a worker that exits stops its parents
            self._finalizer = mp_util.Finalize(self, self.close, exitpriority=5)
        return parent

    def _drop(self, key: WarmKey) -> None:
        parent = self._parents.pop(key, None)
        if parent is not None:
            parent.close()

    def close(self) -> None:
        for key in list(self._parents):
            self._drop(key)


def preload_for(imported: Iterable[str]) -> tuple[str, ...]:
    """The modules a warm parent imports for an assignment whose source imports the
    top-level packages ``imported``: those of :data:`PRELOADABLE`, in its order.

    A library the source does not import is left to the kernels that import it, so an
    assignment without numpy does not pay for it in every parent.

    >>> preload_for({"os", "matplotlib", "numpy"})
    ('numpy', 'matplotlib', 'matplotlib.pyplot')
    >>> preload_for({"math"})
    ()
    """
    names = set(imported)
    return tuple(
        module for package, modules in PRELOADABLE if package in names for module in modules
    )


def parent_environment(passed: dict[str, str], reference: bool) -> dict[str, str]:
    """The warm parent's environment: a kernel's, with a marker of its own.

    matplotlib reads ``MPLBACKEND`` when it is imported, which happens in the parent: it is
    set to what ipykernel sets in a fresh kernel before it imports matplotlib.
    """
    env = {k: v for k, v in passed.items() if k != JOB_MARKER_ENV}
    env[JOB_MARKER_ENV] = f"{os.getpid()}-warm-parent"
    env["MPLBACKEND"] = INLINE_BACKEND
    return inner_env(env, reference)


def kernel_environment(passed: dict[str, str], reference: bool) -> dict[str, str]:
    """A forked kernel's environment: what a fresh one gets, with the parent's MPLBACKEND."""
    env = inner_env(passed, reference)
    env.setdefault("MPLBACKEND", INLINE_BACKEND)
    return env


def forkable(kernel_cmd: list[str], python: str) -> str | None:
    """Why this kernel command cannot be forked from ``python``'s warm parent, or None."""
    if len(kernel_cmd) < 3 or kernel_cmd[1:3] != ["-m", "ipykernel_launcher"]:
        return "the kernelspec does not run ipykernel_launcher"
    found = shutil.which(kernel_cmd[0])
    if found is None or os.path.realpath(found) != os.path.realpath(python):
        return "the kernelspec runs another Python"
    return None


def _under_fresh_mount(path: str) -> bool:
    """Whether a forked kernel's fresh tmpfs mounts (/tmp, /run, /dev/shm) would hide it."""
    return any(path == top or path.startswith(top + "/") for top in ("/tmp", "/run", "/dev/shm"))


def _expose(cwd: Path, dest: Path) -> list[str]:
    """Put the files beside the notebook in ``dest`` (hard links, else copies); their names."""
    dest.mkdir(parents=True)
    for path in (dest.parent, dest):
        os.chmod(path, 0o755)
    names = []
    for entry in visible_entries(cwd):
        target = dest / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(entry), str(target))
        names.append(entry.name)
    return names


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


__all__ = [
    "FORKED",
    "FRESH",
    "ForkedProcess",
    "WarmKey",
    "WarmParent",
    "WarmParentError",
    "WarmParents",
    "forkable",
    "kernel_environment",
    "parent_environment",
]
