"""The kernel manager that starts each kernel in the sandbox and talks to it there.

:class:`SandboxedKernelManager` forks the kernel from the worker's warm parent
(:mod:`~autograder.sandbox.warm`) when it has one, else launches a fresh one through
:class:`Launch` (``--no-fork``, or a parent that could not start: the reason is kept in
``kernel_start``).  Either way it reaches the kernel's ZeroMQ ``ipc`` sockets through
``/proc/<pid>/root``, interrupts the kernel itself (not the sandbox's pid 1), records the
sandbox's pid namespace for the memory watch and the leftover kill, and keeps the
integrity monitor's evidence that arrives on its pipe.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import BinaryIO

import psutil
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, DottedObjectName, Float, Instance, Integer, List, Type, Unicode

from autograder.sandbox.cleanup import pid_namespace, process_identity
from autograder.sandbox.kernel_client import SandboxedKernelClient
from autograder.sandbox.launch import Launch, drain_evidence
from autograder.sandbox.limits import INNER_RUN, PASSED_ENV, RUNTIME_DIR, Limits
from autograder.sandbox.warm import (
    FORKED,
    FRESH,
    WarmKey,
    WarmParent,
    WarmParentError,
    WarmParents,
    forkable,
    kernel_environment,
    parent_environment,
)


class JobKernels:
    """The sandboxed kernels started for one job, shared by reference through its config.

    :func:`~autograder.sandbox.executor.configure` puts one in the job's nbgrader config
    (``SandboxedKernelManager.kernels``); every kernel manager of the job adds itself, and
    the reference gate (``on_cell_execute``) and ``CollectProbes`` reach the kernel that
    ran a notebook through it.  traitlets deep-copies config values into each object it
    configures; a copy of this handle is the handle itself, so they all share one.
    """

    def __init__(self) -> None:
        self._managers: list[SandboxedKernelManager] = []

    def __deepcopy__(self, memo: dict) -> JobKernels:
        return self

    def __copy__(self) -> JobKernels:
        return self

    def add(self, km: SandboxedKernelManager) -> None:
        self._managers.append(km)

    def active(self) -> SandboxedKernelManager | None:
        """The kernel manager started last (a worker grades one notebook at a time)."""
        return self._managers[-1] if self._managers else None

    def evidence_for(self, notebook_dir: Path | str) -> list[dict] | None:
        """Integrity evidence from the kernel that ran in ``notebook_dir``, or None."""
        path = os.path.realpath(notebook_dir)
        for km in reversed(self._managers):
            if km.kernel_cwd == path:
                return km.evidence()
        return None

    def gate_reference(self, *, cell: dict, cell_index: int) -> None:
        """nbclient ``on_cell_execute`` hook: the reference is readable only in test cells."""
        km = self.active()
        if km is not None:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            km.set_reference_readable(bool(meta.get("grade")) and not meta.get("solution"))


class SandboxedKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` whose kernel runs in the bubblewrap sandbox."""

    # Its clients are ready when the kernel is, without jupyter_client's final 0.2 s wait.
    # Both traits name it: ``client_factory`` is what ``client()`` calls, ``client_class``
    # what config and readers see (jupyter_client derives one from the other only on change).
    client_factory = Type(SandboxedKernelClient, klass=AsyncKernelClient)
    client_class = DottedObjectName(
        f"{SandboxedKernelClient.__module__}.{SandboxedKernelClient.__qualname__}"
    )

    job_dir = Unicode("", help="The job's scratch directory (runtime files go in .sandbox/).").tag(
        config=True
    )
    kernels = Instance(
        JobKernels, allow_none=True, help="The job's kernels, which this one joins."
    ).tag(config=True)
    memory_bytes = Integer(Limits.memory_bytes).tag(config=True)
    cpu_seconds = Integer(Limits.cpu_seconds).tag(config=True)
    max_processes = Integer(Limits.max_processes).tag(config=True)
    file_size_bytes = Integer(Limits.file_size_bytes).tag(config=True)
    scratch_bytes = Integer(Limits.scratch_bytes).tag(config=True)
    reference_packages = List(
        Unicode(), ["specdec_reference"], help="Packages copied read-only into the sandbox."
    ).tag(config=True)
    gate_reference = Bool(
        True, help="Keep the reference unreadable except while a test cell runs (root only)."
    ).tag(config=True)
    preload = List(
        Unicode(),
        [],
        help="Modules the warm parent imports besides ipykernel's (warm.preload_for).",
    ).tag(config=True)
    start_timeout = Float(30.0, help="Seconds bwrap has to report the sandbox running.").tag(
        config=True
    )
    warm = Instance(
        WarmParents,
        allow_none=True,
        help="The worker's warm parents to fork kernels from (None: start each one fresh).",
    ).tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._launch: Launch | None = None
        self._init_pid: int | None = None
        self.kernel_cwd: str | None = None  #: where the kernel runs (real path)
        self._evidence: list[dict] = []
        self._evidence_thread: threading.Thread | None = None
        self._parent: WarmParent | None = None  #: the warm parent this kernel came from
        self._forked_log: BinaryIO | None = None
        self._killing = False  #: inside ``shutdown_kernel(now=True)``
        #: How the kernel started: ``forked``, or ``fresh`` and why (``fresh: <reason>``).
        self.kernel_start = ""

    # -- start ------------------------------------------------------------------------------
    async def _async_pre_start_kernel(self, **kw):
        self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
        run_dir = self._runtime_root() / self.kernel_id
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o700)
        self.transport = "ipc"
        self.ip = f"{INNER_RUN}/kernel"  # the kernel's view; the client's is set at launch
        self.connection_file = str(run_dir / "kernel.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        cwd = Path(kw.pop("cwd", None) or os.getcwd()).resolve()
        self.kernel_cwd = str(cwd)
        passed = {k: v for k, v in (kw.get("env") or os.environ).items() if k in PASSED_ENV}
        if self.kernels is not None:
            self.kernels.add(self)
        if self.warm is None:
            self.kernel_start = FRESH
        else:
            try:
                await self._fork_kernel(kernel_cmd, cwd, passed)
                self.kernel_start = FORKED
                return
            except WarmParentError as exc:
                self.kernel_start = f"{FRESH}: {exc}"
                self.log.warning("starting a fresh kernel: %s", exc)
        await self._launch_fresh(kernel_cmd, cwd, passed, kw)

    def _inner_command(self, kernel_cmd: list[str]) -> list[str]:
        """The kernel command as the sandbox sees it (its own connection file path)."""
        return [
            f"{INNER_RUN}/kernel.json"
            if os.path.realpath(arg) == os.path.realpath(self.connection_file)
            else arg
            for arg in kernel_cmd
        ]

    def _limits(self) -> Limits:
        return Limits(
            memory_bytes=self.memory_bytes,
            cpu_seconds=self.cpu_seconds,
            max_processes=self.max_processes,
            file_size_bytes=self.file_size_bytes,
            scratch_bytes=self.scratch_bytes,
        )

    async def _fork_kernel(self, kernel_cmd: list[str], cwd: Path, passed: dict) -> None:
        """Fork the kernel from the worker's warm parent (raises WarmParentError)."""
        assert self.warm is not None and self.provisioner is not None
        python = sys.executable
        why_not = forkable(kernel_cmd, python)
        if why_not:
            raise WarmParentError(why_not)
        reference = bool(self.reference_packages)
        key = WarmKey(
            python=python,
            limits=self._limits(),
            reference_packages=tuple(self.reference_packages),
            gate_reference=self.gate_reference,
            preload=tuple(self.preload),
            anchor=str(Path(self.job_dir).resolve().parent if self.job_dir else cwd.parent),
        )
        loop = asyncio.get_running_loop()
        parent = await loop.run_in_executor(
            None, self.warm.parent, key, parent_environment(passed, reference)
        )
        run_dir = Path(self.connection_file).parent
        log = open(run_dir / "kernel.log", "ab")  # noqa: SIM115  (closed in cleanup)
        evidence_read, evidence_write = os.pipe()
        try:
            process = await loop.run_in_executor(
                None,
                lambda: parent.fork(
                    kernel_id=str(self.kernel_id),
                    cwd=cwd,
                    connection=Path(self.connection_file).read_bytes(),
                    env=kernel_environment(passed, reference),
                    argv=self._inner_command(kernel_cmd)[3:],
                    log_fd=log.fileno(),
                    evidence_fd=evidence_write,
                    limits=key.limits,
                ),
            )
        except BaseException:
            log.close()
            os.close(evidence_read)
            raise
        finally:
            os.close(evidence_write)
        self._parent = parent
        self._forked_log = log
        self.provisioner.process = process  # type: ignore[attr-defined]
        self.provisioner.pid = process.pid  # type: ignore[attr-defined]
        self.provisioner.pgid = None  # type: ignore[attr-defined]
        self._reconcile_connection_info(self.provisioner.connection_info)
        self._sandbox_started(process.pid)
        self._evidence_thread = threading.Thread(
            target=drain_evidence,
            args=(evidence_read, run_dir / "evidence.jsonl", self._evidence),
            daemon=True,
        )
        self._evidence_thread.start()

    async def _launch_fresh(self, kernel_cmd: list[str], cwd: Path, passed: dict, kw: dict) -> None:
        """Launch a fresh sandbox with a new Python in it (today's start)."""
        run_dir = Path(self.connection_file).parent
        command = self._inner_command(kernel_cmd)
        launch = Launch(
            run_dir=run_dir,
            cwd=cwd,
            limits=self._limits(),
            command=command,
            env=passed,
            connection_file=Path(self.connection_file).read_bytes(),
            reference_packages=list(self.reference_packages),
            gate_reference=self.gate_reference,
            evidence=True,
        )
        self._launch = launch
        log = open(run_dir / "kernel.log", "ab")  # noqa: SIM115  (closed in cleanup)
        launch.files.append(log)
        kw.update(env=launch.outer_env, cwd="/", stdout=log, stderr=log, pass_fds=launch.pass_fds)
        assert self.provisioner is not None
        try:
            info = await self.provisioner.launch_kernel(launch.argv, **kw)
        finally:
            launch.close_child_ends()
        self._reconcile_connection_info(info)
        self._init_pid = await asyncio.get_running_loop().run_in_executor(
            None, launch.read_child_pid, self.start_timeout
        )
        if self._init_pid is None:
            raise RuntimeError(f"the sandbox did not start: {launch.log_tail()}")
        self._sandbox_started(self._init_pid)
        self._evidence_thread = threading.Thread(
            target=launch.drain_evidence, args=(self._evidence,), daemon=True
        )
        self._evidence_thread.start()

    def _sandbox_started(self, init_pid: int) -> None:
        """The sandbox's pid 1 runs: reach the kernel through it, and record its namespace."""
        self._init_pid = init_pid
        # The client reaches the kernel's sockets through the sandbox's root.
        self.ip = f"/proc/{init_pid}/root{INNER_RUN}/kernel"
        self._record_pid_namespace(init_pid)
        self.log.debug("sandbox init pid %s", init_pid)

    # -- signals ----------------------------------------------------------------------------
    async def _async_interrupt_kernel(self) -> None:
        """SIGINT the kernel inside the sandbox; kill it if it ignores SIGINT.

        The base class would signal bwrap's process group, which kills the sandbox.
        Not while ``shutdown_kernel(now=True)`` runs: jupyter_client interrupts a kernel
        before it kills it, and the kernel would spend its last moment on a
        ``KeyboardInterrupt``.
        """
        if self._killing:
            return
        pid = self._kernel_pid()
        if pid is None:
            return
        if _ignores_sigint(pid):
            self.log.warning("the kernel ignores SIGINT: killing it")
            await self._async_kill_kernel()
            return
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Shut the kernel down; with ``now``, kill it without the interrupt before."""
        self._killing = now
        try:
            await super()._async_shutdown_kernel(now=now, restart=restart)
        finally:
            self._killing = False

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._evidence_thread is not None:
            self._evidence_thread.join(timeout=2)
        if self._launch is not None:
            self._launch.close()
            self._launch = None
        if self._forked_log is not None:
            self._forked_log.close()
            self._forked_log = None
        if self._parent is not None and self.kernel_id:
            self._parent.forget(str(self.kernel_id))

    # AsyncKernelManager binds its public names to the base class's coroutines.
    interrupt_kernel = _async_interrupt_kernel
    shutdown_kernel = _async_shutdown_kernel
    cleanup_resources = _async_cleanup_resources

    # -- information for the integrity checks -----------------------------------------------
    def evidence(self) -> list[dict]:
        """The integrity monitor's records received from the kernel so far."""
        if self._evidence_thread is not None and self._evidence_thread.is_alive():
            if not self.has_kernel:
                self._evidence_thread.join(timeout=2)
        return list(self._evidence)

    def set_reference_readable(self, readable: bool) -> None:
        if self._launch is not None:
            self._launch.set_reference_readable(readable)
        elif self._parent is not None:
            self._parent.set_reference_readable(readable)

    # -- helpers ------------------------------------------------------------------------------
    def _runtime_root(self) -> Path:
        root = Path(self.job_dir) if self.job_dir else Path(tempfile.gettempdir())
        path = root / RUNTIME_DIR
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _kernel_pid(self) -> int | None:
        """Host pid of the kernel: the child of the sandbox's init process."""
        if self._init_pid is None:
            return None
        try:
            children = psutil.Process(self._init_pid).children()
        except psutil.Error:
            return None
        return children[0].pid if children else None

    def _record_pid_namespace(self, pid: int) -> None:
        identity = process_identity(pid)
        if identity is None or identity[1] == pid_namespace():
            self.log.warning("sandbox init %s is not in its own pid namespace", pid)
            return
        with open(self._runtime_root() / "sandboxes", "a") as f:
            f.write(f"{pid} {identity[0]} {identity[1]}\n")


def _ignores_sigint(pid: int) -> bool:
    """True when the process has set SIGINT to SIG_IGN (an interrupt cannot stop it).

    Read from ``/proc/<pid>/status`` by hand: psutil does not report signal dispositions.
    """
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except (OSError, ValueError):
        pass
    return False
