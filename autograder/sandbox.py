"""Run learner kernels in a bubblewrap sandbox with resource limits.

Every submission's Jupyter kernel runs as an unprivileged user in its own user, mount,
pid, network, IPC and UTS namespaces (bubblewrap, ``bwrap``), under rlimits set by
``prlimit``.  Inside, the kernel sees:

* read-only: ``/usr`` (and the ``/bin``, ``/lib*`` links), the Python installation and
  the virtualenv at their usual paths, and a copy of the reference package at
  :data:`INNER_REFERENCE` (readable only while a test cell runs, when grading as root);
* read-write, size-capped tmpfs: ``/tmp`` (its home), and its working directory, which
  has the notebook's path (so relative paths behave) and shows the files next to the
  notebook read-only, but not the notebooks themselves (they hold the hidden tests);
* nothing else: not the course (``source/``, ``release/``, ``gradebook.db``, other
  students' ``submitted/``), not the instructor's home, not other workers' jobs.

It has no network at all, not even the host's loopback.  The grader talks to the
kernel over ZeroMQ ``ipc`` sockets that the kernel creates inside its own tmpfs; the
grader reaches them through ``/proc/<pid>/root``, so nothing on the host is writable
from inside.

When the grader runs as root, the kernel runs as uid 65534 (``nobody``): the launch goes
through ``unshare --mount`` (a private mount namespace, invisible to the host, where the
paths an unprivileged user cannot reach are bind-mounted to reachable mount points) and
``setpriv`` (drop to the unprivileged uid) before ``bwrap``.  Otherwise it runs as the
grader's own uid, mapped into a user namespace.

The worker calls :func:`configure` on the job's nbgrader config and passes its
``Execute`` class through :func:`executor`; nbgrader then creates a
:class:`SandboxedKernelManager` for each notebook.  :func:`kill_leftovers` cleans up
after a job.  See ``SECURITY.md`` for what this does and does not prevent.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Float, Integer, List, Unicode
from traitlets.config import Config

#: Where the kernel's sockets and connection file live inside the sandbox.
INNER_RUN = "/run/specdec"
#: The directory inside the sandbox that holds the reference package (on PYTHONPATH).
INNER_REFERENCE = "/opt/specdec"
#: The kernel's home inside the sandbox (on the /tmp tmpfs).
INNER_HOME = "/tmp/home"
#: The unprivileged uid/gid the kernel runs as when the grader is root.
SANDBOX_UID = 65534
#: Environment variable telling the kernel-side integrity monitor its evidence fd.
EVIDENCE_FD_ENV = "SPECDEC_EVIDENCE_FD"
#: Per-job directory (under the job dir) for sandbox runtime files.
RUNTIME_DIR = ".sandbox"
#: Variables passed from the grader's environment into the sandbox (all others dropped).
PASSED_ENV = ("NBGRADER_EXECUTION", "SPECDEC_GRADE_JOB", "LANG", "LC_ALL", "TZ")
#: Cap on the integrity evidence the grader keeps from one kernel.
MAX_EVIDENCE_BYTES = 1024 * 1024

_STAGE_SCRIPT = (
    # Runs as root in a private mount namespace: bind each source onto its mount point
    # (so the unprivileged bwrap below can reach it), then become the next command.
    'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind -- "$1" "$2" || exit 125; '
    'shift 2; n=$((n - 1)); done; exec "$@"'
)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's kernel (and everything it starts)."""

    memory_bytes: int = 2 * 1024**3  #: address space per process (RLIMIT_AS)
    cpu_seconds: int = 300  #: CPU time per process (RLIMIT_CPU)
    max_processes: int = 64  #: processes and threads in the sandbox (RLIMIT_NPROC)
    file_size_bytes: int = 64 * 1024**2  #: largest file it may write (RLIMIT_FSIZE)
    scratch_bytes: int = 256 * 1024**2  #: size of each writable tmpfs (cwd, /tmp)
    # Wall-clock limits are enforced by the worker (per cell via nbclient's timeout,
    # per notebook by GuardedExecute's deadline).


# ---------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------


def configure(config: Config, *, job_dir: Path, limits: Limits) -> None:
    """Configure this job's autograding to start its kernel inside the sandbox.

    Sets ``Execute.kernel_manager_class``, the :class:`SandboxedKernelManager` traits
    (this job's directory and ``limits``) and an ``on_cell_execute`` hook that makes the
    reference package readable only while a test cell runs.  nbgrader's ``Execute``
    ignores a configured ``kernel_manager_class`` (it passes its own as a keyword), so
    also pass the executor class through :func:`executor`.
    """
    job_dir = Path(job_dir).resolve()
    config.Execute.kernel_manager_class = SandboxedKernelManager
    km = config.SandboxedKernelManager
    km.job_dir = str(job_dir)
    km.memory_bytes = int(limits.memory_bytes)
    km.cpu_seconds = int(limits.cpu_seconds)
    km.max_processes = int(limits.max_processes)
    km.file_size_bytes = int(limits.file_size_bytes)
    km.scratch_bytes = int(limits.scratch_bytes)
    config.Execute.on_cell_execute = functools.partial(_gate_reference, job_dir=str(job_dir))


@functools.cache
def executor(cls: type) -> type:
    """``cls`` (nbgrader's ``Execute`` or a subclass), starting its kernels in the sandbox.

    nbgrader's ``Execute`` passes ``kernel_manager_class=AsyncKernelManager`` as a keyword
    argument, which beats config; this subclass passes :class:`SandboxedKernelManager`.
    Other preprocessor classes are returned unchanged.  The subclass keeps the name of
    ``cls``, so the config sections written for ``cls`` still apply.
    """
    from nbgrader.preprocessors import Execute

    if not (isinstance(cls, type) and issubclass(cls, Execute)):
        return cls

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        cls.__init__(self, *args, **kwargs)

    return type(
        cls.__name__, (cls,), {"__init__": __init__, "__module__": __name__, "__doc__": cls.__doc__}
    )


@functools.cache
def sandbox_problem() -> str | None:
    """Return None when the sandbox works on this machine, else the reason it does not.

    Runs a tiny sandboxed Python once per process (about 50 ms) with the same mounts,
    user switch and limits that kernels get.
    """
    if sys.platform != "linux":
        return f"the sandbox needs Linux (this is {sys.platform})"
    tools = ["bwrap", "prlimit"] + (["unshare", "setpriv", "mount"] if os.geteuid() == 0 else [])
    missing = [t for t in tools if shutil.which(t) is None]
    if "bwrap" in missing:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if missing:
        return f"missing util-linux tools: {', '.join(missing)} (apt-get install util-linux)"
    with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-check-", dir=_scratch_root()) as tmp:
        cwd = Path(tmp) / "work"
        cwd.mkdir()
        launch = _Launch(
            run_dir=Path(tmp) / "run",
            cwd=cwd,
            limits=Limits(),
            command=[sys.executable, "-c", "import sys; print('sandbox-ok')"],
        )
        try:
            proc = subprocess.run(
                launch.argv,
                pass_fds=launch.pass_fds,
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
                env=launch.outer_env,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start: {exc}"
        finally:
            launch.close()
        if proc.returncode != 0 or "sandbox-ok" not in proc.stdout:
            detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
            return (
                f"bubblewrap cannot create the sandbox here ({detail.splitlines()[-1]}); "
                "unprivileged user namespaces may be disabled "
                "(sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)"
            )
    return None


def kill_leftovers(job_dir: Path) -> int:
    """SIGKILL whatever a sandbox of this job left running; return how many processes.

    Each sandbox runs in its own pid namespace, whose init process (bubblewrap's) the
    launch records under ``<job_dir>/.sandbox``.  A process cannot leave its pid
    namespace, and killing the init kills every process in it, however detached.
    The record holds the init's start time too, so a recycled pid or namespace id
    never leads to killing anything else.
    """
    _ACTIVE.pop(str(Path(job_dir).resolve()), None)
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
        if ns != own and ns.startswith("pid:[") and _identity(pid) == (start, ns):
            live.append((pid, ns))
    return live


def _identity(pid: int) -> tuple[str, str] | None:
    """(start time, pid namespace) of a running process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):  # exited, waiting to be reaped
            return None
        return fields[19], os.readlink(f"/proc/{pid}/ns/pid")  # field 22: starttime
    except (OSError, IndexError):
        return None


# ---------------------------------------------------------------------------------------
# The kernel manager
# ---------------------------------------------------------------------------------------


class SandboxedKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` whose kernel runs in the bubblewrap sandbox."""

    job_dir = Unicode("", help="The job's scratch directory (runtime files go in .sandbox/).").tag(
        config=True
    )
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
    start_timeout = Float(30.0, help="Seconds bwrap has to report the sandbox running.").tag(
        config=True
    )

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._launch: _Launch | None = None
        self._init_pid: int | None = None
        self._kernel_cwd: str | None = None
        self._evidence: list[dict] = []
        self._evidence_thread: threading.Thread | None = None

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
        run_dir = Path(self.connection_file).parent
        cwd = Path(kw.pop("cwd", None) or os.getcwd()).resolve()
        self._kernel_cwd = str(cwd)
        command = [
            f"{INNER_RUN}/kernel.json"
            if os.path.realpath(arg) == os.path.realpath(self.connection_file)
            else arg
            for arg in kernel_cmd
        ]
        launch = _Launch(
            run_dir=run_dir,
            cwd=cwd,
            limits=Limits(
                memory_bytes=self.memory_bytes,
                cpu_seconds=self.cpu_seconds,
                max_processes=self.max_processes,
                file_size_bytes=self.file_size_bytes,
                scratch_bytes=self.scratch_bytes,
            ),
            command=command,
            env={k: v for k, v in (kw.get("env") or os.environ).items() if k in PASSED_ENV},
            connection_file=Path(self.connection_file).read_bytes(),
            reference_packages=list(self.reference_packages),
            gate_reference=self.gate_reference,
            evidence=True,
        )
        self._launch = launch
        _ACTIVE[str(Path(self.job_dir or run_dir).resolve())] = self
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
        # The client reaches the kernel's sockets through the sandbox's root.
        self.ip = f"/proc/{self._init_pid}/root{INNER_RUN}/kernel"
        self._record_pid_namespace(self._init_pid)
        self.log.debug("sandbox init pid %s", self._init_pid)
        self._evidence_thread = threading.Thread(
            target=launch.drain_evidence, args=(self._evidence,), daemon=True
        )
        self._evidence_thread.start()

    # -- signals ----------------------------------------------------------------------------
    async def _async_interrupt_kernel(self) -> None:
        """SIGINT the kernel inside the sandbox; kill it if it ignores SIGINT.

        The base class would signal bwrap's process group, which kills the sandbox.
        """
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

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._evidence_thread is not None:
            self._evidence_thread.join(timeout=2)
        if self._launch is not None:
            self._launch.close()
            self._launch = None

    # AsyncKernelManager binds its public names to the base class's coroutines.
    interrupt_kernel = _async_interrupt_kernel
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
            kids = Path(f"/proc/{self._init_pid}/task/{self._init_pid}/children").read_text()
            return int(kids.split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _record_pid_namespace(self, pid: int) -> None:
        identity = _identity(pid)
        if identity is None or identity[1] == os.readlink("/proc/self/ns/pid"):
            self.log.warning("sandbox init %s is not in its own pid namespace", pid)
            return
        with open(self._runtime_root() / "sandboxes", "a") as f:
            f.write(f"{pid} {identity[0]} {identity[1]}\n")


#: The running sandboxed kernel of each job (a worker grades one notebook at a time).
_ACTIVE: dict[str, SandboxedKernelManager] = {}


def active_kernel(job_dir: Path | str) -> SandboxedKernelManager | None:
    """The sandboxed kernel manager last started for ``job_dir`` (None without sandbox)."""
    return _ACTIVE.get(str(Path(job_dir).resolve()))


def evidence_for(notebook_dir: Path | str) -> list[dict] | None:
    """Integrity evidence from the sandboxed kernel that ran in ``notebook_dir``.

    None when no sandboxed kernel ran there (grading without the sandbox).
    """
    path = os.path.realpath(notebook_dir)
    for km in reversed(list(_ACTIVE.values())):
        if km._kernel_cwd == path:
            return km.evidence()
    return None


def _gate_reference(*, cell, cell_index: int, job_dir: str) -> None:
    """nbclient ``on_cell_execute`` hook: the reference is readable only in test cells."""
    km = _ACTIVE.get(job_dir)
    if km is None:
        return
    meta = cell.get("metadata", {}).get("nbgrader", {})
    km.set_reference_readable(bool(meta.get("grade")) and not meta.get("solution"))


# ---------------------------------------------------------------------------------------
# Building one sandboxed launch
# ---------------------------------------------------------------------------------------


class _Launch:
    """The command line, inherited fds and staging of one sandboxed process."""

    def __init__(
        self,
        *,
        run_dir: Path,
        cwd: Path,
        limits: Limits,
        command: list[str],
        env: dict[str, str] | None = None,
        connection_file: bytes | None = None,
        reference_packages: Iterable[str] = (),
        gate_reference: bool = False,
        evidence: bool = False,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.as_root = os.geteuid() == 0
        self.uid = SANDBOX_UID if self.as_root else os.getuid()
        self.gid = SANDBOX_UID if self.as_root else os.getgid()
        self.files: list = []
        self._child_fds: list[int] = []
        self._stage: Path | None = None
        self._mounts: list[tuple[str, str]] = []  # (host source, mount point) when root
        self._gated: list[Path] = []
        self.evidence_read_fd: int | None = None

        self.info_read_fd, info_write = os.pipe()
        self._child_fds.append(info_write)
        args = [
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--uid",
            str(self.uid),
            "--gid",
            str(self.gid),
            "--clearenv",
        ]
        inner_env = self._inner_env(env or {}, bool(reference_packages))
        if evidence:
            self.evidence_read_fd, evidence_write = os.pipe()
            self._child_fds.append(evidence_write)
            inner_env[EVIDENCE_FD_ENV] = str(evidence_write)
        for key, value in sorted(inner_env.items()):
            args += ["--setenv", key, value]

        # The system: /usr read-only, /bin, /lib... as the host has them.
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        args += ["--dir", "/etc"]
        if os.path.exists("/etc/ld.so.cache"):
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        args += self._data("/etc/passwd", self._passwd(), 0o444)
        args += self._data("/etc/group", self._group(), 0o444)

        # The reference package(s), copied so that the copy's permissions can be gated.
        if reference_packages:
            ref_root = self.run_dir / "reference"
            ref_root.mkdir(exist_ok=True)
            for name in reference_packages:
                _copy_package(name, ref_root)
            os.chmod(ref_root, 0o755)
            # Gate the directory on sys.path itself: while it is unreadable, the import
            # system sees no package there (rather than an empty namespace package).
            self._gated.append(ref_root)
            args += self._ro(str(ref_root), INNER_REFERENCE)
            if gate_reference and self.as_root:
                self.set_reference_readable(False)

        # Devices, /proc, and small private tmpfs mounts for everything writable.
        size = str(int(limits.scratch_bytes))
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(16 * 1024**2), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        args += ["--size", size, "--tmpfs", "/tmp", "--dir", INNER_HOME]
        args += ["--dir", f"{INNER_HOME}/.config", "--dir", f"{INNER_HOME}/.config/matplotlib"]
        fontlist = _matplotlib_font_cache()
        if fontlist is not None:
            args += self._data(
                f"{INNER_HOME}/.config/matplotlib/{fontlist.name}",
                fontlist.read_bytes(),
                0o644,
                writable=True,
            )
        args += ["--size", str(4 * 1024**2), "--tmpfs", INNER_RUN]
        if connection_file is not None:
            args += self._data(f"{INNER_RUN}/kernel.json", connection_file, 0o400)

        # Python: the base installation and the virtualenv, read-only at their own paths.
        # Bound after the sandbox's own tmpfs mounts, so that one living under /tmp (or
        # /dev/shm, /run) is shown on top of them rather than hidden by them.
        for source, dest in python_mounts():
            args += self._ro(source, dest)

        # The working directory: a tmpfs at the notebook's path, with read-only copies of
        # the files next to the notebook (not the notebooks: they hold the hidden tests).
        cwd = Path(cwd).resolve()
        args += ["--size", size, "--tmpfs", str(cwd)]
        for entry in visible_entries(cwd):
            args += self._ro(str(entry), str(entry))
        args += ["--chdir", str(cwd), "--info-fd", str(info_write), "--remount-ro", "/"]

        # Limits for the kernel process and everything it starts.
        cpu = int(limits.cpu_seconds)
        args += [
            "--",
            "prlimit",
            f"--as={int(limits.memory_bytes)}",
            f"--cpu={cpu}:{cpu + 2}",
            f"--nproc={int(limits.max_processes)}",
            f"--fsize={int(limits.file_size_bytes)}",
            "--core=0",
            "--",
            *command,
        ]

        if self.as_root:
            stage = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c"]
            stage += [_STAGE_SCRIPT, "sh", str(len(self._mounts))]
            for source, point in self._mounts:
                stage += [source, point]
            drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
            drop += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
            self.argv = stage + drop + args
        else:
            self.argv = args
        self.outer_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

    # -- pieces of the command line -------------------------------------------------------
    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._child_fds)

    def _ro(self, source: str, dest: str) -> list[str]:
        """Bind ``source`` read-only at ``dest`` (through a staged mount point when root)."""
        if not self.as_root:
            return ["--ro-bind", source, dest]
        if self._stage is None:
            self._stage = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=_scratch_root()))
            os.chmod(self._stage, 0o755)
        point = self._stage / str(len(self._mounts))
        if os.path.isdir(source):
            point.mkdir()
        else:
            point.touch()
        self._mounts.append((source, str(point)))
        return ["--ro-bind", str(point), dest]

    def _data(self, dest: str, data: bytes, mode: int, writable: bool = False) -> list[str]:
        """Put ``data`` in a file at ``dest`` (bwrap copies it from a pipe)."""
        read_fd, write_fd = os.pipe()
        # bwrap reads the whole pipe before starting the command; keep it small (< 64 KiB
        # fits the pipe buffer) or write it from a thread.
        threading.Thread(target=_write_all, args=(write_fd, data), daemon=True).start()
        self._child_fds.append(read_fd)
        op = "--file" if writable else "--ro-bind-data"
        return ["--perms", f"{mode:o}", op, str(read_fd), dest]

    def _inner_env(self, passed: dict[str, str], reference: bool) -> dict[str, str]:
        env = dict(passed)
        env.update(
            PATH=f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
            HOME=INNER_HOME,
            TMPDIR="/tmp",
            USER="learner",
            LANG=passed.get("LANG", "C.UTF-8"),
            MPLCONFIGDIR=f"{INNER_HOME}/.config/matplotlib",
            IPYTHONDIR=f"{INNER_HOME}/.ipython",
            JUPYTER_CONFIG_DIR=f"{INNER_HOME}/.jupyter",
            JUPYTER_DATA_DIR=f"{INNER_HOME}/.local/share/jupyter",
            JUPYTER_RUNTIME_DIR=f"{INNER_HOME}/.local/share/jupyter/runtime",
            PYTHONDONTWRITEBYTECODE="1",
            # One thread per BLAS call: the limits count threads, and workers share cores.
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            # glibc reserves 64 MiB of address space per thread arena; RLIMIT_AS counts it.
            MALLOC_ARENA_MAX="2",
        )
        if reference:
            env["PYTHONPATH"] = INNER_REFERENCE
        return env

    def _passwd(self) -> bytes:
        lines = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
        name = "nobody" if self.uid == 65534 else "learner"
        lines.append(f"{name}:x:{self.uid}:{self.gid}:learner:{INNER_HOME}:/usr/sbin/nologin")
        if self.uid != 65534:
            lines.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
        return ("\n".join(lines) + "\n").encode()

    def _group(self) -> bytes:
        lines = ["root:x:0:"]
        lines.append(f"{'nogroup' if self.gid == 65534 else 'learner'}:x:{self.gid}:")
        return ("\n".join(lines) + "\n").encode()

    # -- while it runs --------------------------------------------------------------------
    def close_child_ends(self) -> None:
        """Close the grader's copies of the fds the sandbox inherited."""
        for fd in self._child_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._child_fds = []

    def read_child_pid(self, timeout: float) -> int | None:
        """Wait for bwrap's ``--info-fd`` report; return the sandbox init's host pid."""
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.info_read_fd], [], [], 0.1)
            if not ready:
                continue
            chunk = os.read(self.info_read_fd, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                continue
        return None

    def drain_evidence(self, sink: list[dict]) -> None:
        """Read the monitor's JSON lines until the sandbox closes the pipe (a thread)."""
        if self.evidence_read_fd is None:
            return
        kept = 0
        buffer = b""
        path = self.run_dir / "evidence.jsonl"
        with open(path, "ab") as out:
            while True:
                try:
                    chunk = os.read(self.evidence_read_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                if kept >= MAX_EVIDENCE_BYTES:
                    continue  # keep draining so the kernel never blocks, but drop it
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    kept += len(line) + 1
                    if kept > MAX_EVIDENCE_BYTES:
                        sink.append({"kind": "evidence-overflow"})
                        break
                    out.write(line + b"\n")
                    try:
                        record = json.loads(line)
                    except ValueError:
                        record = {"kind": "garbled", "text": line[:200].decode("utf-8", "replace")}
                    if isinstance(record, dict):
                        sink.append(record)
        try:
            os.close(self.evidence_read_fd)
        except OSError:
            pass
        self.evidence_read_fd = None

    def set_reference_readable(self, readable: bool) -> None:
        mode = 0o755 if readable else 0o700
        for path in self._gated:
            try:
                if stat.S_IMODE(path.stat().st_mode) != mode:
                    os.chmod(path, mode)
                    # A new mtime makes the kernel's import system re-list the directory.
                    os.utime(path, ns=(time.time_ns(), time.time_ns()))
            except OSError:
                pass

    def log_tail(self, limit: int = 2000) -> str:
        try:
            text = (self.run_dir / "kernel.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-limit:].strip() or "(empty log)"

    def close(self) -> None:
        self.close_child_ends()
        if self.info_read_fd is not None:
            try:
                os.close(self.info_read_fd)
            except OSError:
                pass
            self.info_read_fd = None
        for f in self.files:
            f.close()
        self.files = []
        if self._stage is not None:
            # Mount points only: the mounts themselves lived in the sandbox's namespace.
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


def _scratch_root() -> str:
    """``/tmp/specdec-sandbox``: mount points reachable by the sandbox's unprivileged user.

    Directories left by a grader process that died (named after its pid) are removed.
    Falls back to ``/tmp`` if the folder is not a plain directory of ours.
    """
    root = "/tmp/specdec-sandbox"
    try:
        os.mkdir(root, 0o755)
    except FileExistsError:
        pass
    except OSError:
        return "/tmp"
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return "/tmp"  # a symlink or someone else's folder: do not use (or clean) it
    os.chmod(root, 0o755)
    for entry in os.scandir(root):
        owner = entry.name.split("-")[0]
        if owner.isdigit() and not _pid_alive(int(owner)):
            shutil.rmtree(entry.path, ignore_errors=True)
    return root


def visible_entries(cwd: Path) -> list[Path]:
    """What a sandboxed kernel sees, read-only, next to its notebook in ``cwd``.

    Not the notebooks (they hold the hidden tests), dotfiles, symlinks or special files.
    """
    return [
        entry
        for entry in sorted(Path(cwd).iterdir())
        if entry.suffix != ".ipynb"
        and not entry.name.startswith(".")
        and not entry.is_symlink()
        and (entry.is_file() or entry.is_dir())
    ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


def python_mounts() -> list[tuple[str, str]]:
    """(host source, path in the sandbox) for the Python installation a kernel runs on.

    Each prefix (base installation, virtualenv) is bound at its real path and, when it is
    reached through a symlink, at the path Python reports too (a kernel started as
    ``<venv>/bin/python`` looks for its libraries there).  The directory of the real
    interpreter is added when it lies outside every prefix.  Paths under ``/usr``, which
    the sandbox shows whole, are left out.
    """
    wanted: dict[str, str] = {}
    prefixes = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix}
    for path in sorted(prefixes):
        real = os.path.realpath(path)
        for dest in dict.fromkeys([real, os.path.abspath(path)]):
            if not _under(dest, "/usr"):
                wanted[dest] = real
    interpreter = os.path.dirname(os.path.realpath(sys.executable))
    if not any(_under(interpreter, dest) for dest in [*wanted, "/usr"]):
        wanted[interpreter] = interpreter
    # Parents before children: a bind inside a bound tree must come after it.
    return [(wanted[dest], dest) for dest in sorted(wanted, key=lambda d: (d.count("/"), d))]


def _under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it (as written: no symlink is resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _copy_package(name: str, dest_root: Path) -> Path:
    """Copy the importable package ``name`` (its files, compiled caches included)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the package {name!r} to put in the sandbox")
    source = Path(list(spec.submodule_search_locations)[0])
    dest = dest_root / name
    if not dest.exists():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("*.so.tmp", ".*"))
    for path in [dest, *dest.rglob("*")]:
        mode = 0o755 if path.is_dir() else 0o644
        os.chmod(path, mode)
    return dest


@functools.cache
def _matplotlib_font_cache() -> Path | None:
    """The grader's matplotlib font cache, copied into each sandbox (saves ~1 s per kernel)."""
    try:
        from matplotlib import font_manager  # builds the cache on first use
    except Exception:  # matplotlib missing or broken: kernels rebuild their own cache
        return None
    import matplotlib

    path = (
        Path(matplotlib.get_cachedir()) / f"fontlist-v{font_manager.FontManager.__version__}.json"
    )
    return path if path.is_file() else None


def _ignores_sigint(pid: int) -> bool:
    """True when the process has set SIGINT to SIG_IGN (an interrupt cannot stop it)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except (OSError, ValueError):
        pass
    return False


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


__all__ = [
    "Limits",
    "SandboxedKernelManager",
    "active_kernel",
    "configure",
    "evidence_for",
    "executor",
    "kill_leftovers",
    "running",
    "sandbox_problem",
]
