"""One sandboxed process: the ``bwrap`` command line, its inherited fds and mount staging.

:class:`Launch` builds the command that starts a command (a kernel, or the machine check)
in bubblewrap under ``prlimit``, with the mounts described in :mod:`autograder.sandbox`,
and reads back what the sandbox reports (its init pid, the monitor's evidence).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from autograder.sandbox import tether
from autograder.sandbox.limits import (
    EVIDENCE_FD_ENV,
    INNER_HOME,
    INNER_REFERENCE,
    INNER_RUN,
    MAX_EVIDENCE_BYTES,
    SANDBOX_UID,
    Limits,
)
from autograder.sandbox.mounts import (
    copy_package,
    matplotlib_font_cache,
    python_mounts,
    scratch_root,
    visible_entries,
)

_STAGE_SCRIPT = (
    # Runs as root in a private mount namespace: bind each source onto its mount point
    # (so the unprivileged bwrap below can reach it), then become the next command.
    'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind -- "$1" "$2" || exit 125; '
    'shift 2; n=$((n - 1)); done; exec "$@"'
)


class Launch:
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
        capabilities: bool = False,
        shares: Iterable[tuple[str, str]] = (),
        dirs: Iterable[str] = (),
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.as_root = os.geteuid() == 0
        self.uid = SANDBOX_UID if self.as_root else os.getuid()
        self.gid = SANDBOX_UID if self.as_root else os.getgid()
        self.files: list[BinaryIO] = []
        self._child_fds: list[int] = []
        self._stage: Path | None = None
        self._mounts: list[tuple[str, str]] = []  # (host source, mount point) when root
        self._gated: list[Path] = []
        self.evidence_read_fd: int | None = None
        self.info_read_fd, info_write = os.pipe()
        self._child_fds.append(info_write)

        # bwrap applies these in order: a later mount shows on top of an earlier one.
        args = self._namespaces(env or {}, bool(reference_packages), evidence)
        args += self._system()
        args += self._reference(list(reference_packages), gate_reference)
        args += self._scratch(limits, connection_file)
        # Python: the base installation and the virtualenv, read-only at their own paths.
        # Bound after the sandbox's own tmpfs mounts, so that one living under /tmp (or
        # /dev/shm, /run) is shown on top of them rather than hidden by them.
        for source, dest in python_mounts():
            args += self._ro(source, dest)
        for source, dest in shares:  # the warm parent's window on its requests' files
            args += self._ro(source, dest)
        for path in dirs:
            args += ["--dir", path]
        args += self._working_directory(Path(cwd).resolve(), limits)
        if capabilities:  # the warm parent's, in the sandbox's user namespace only
            args += ["--cap-add", "ALL"]
        args += ["--info-fd", str(info_write), "--remount-ro", "/"]
        args += ["--", *_prlimit(limits), "--", *command]
        self.argv = self._staged(args) if self.as_root else args
        # First of all, the tether: the sandbox dies with this process, at any moment.
        self.argv = tether.command(os.getpid()) + self.argv
        self.outer_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

    # -- the steps of the command line ----------------------------------------------------
    def _namespaces(self, env: dict[str, str], reference: bool, evidence: bool) -> list[str]:
        """New namespaces for everything, this uid, and only the environment it is given."""
        args = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns"]
        args += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        args += ["--uid", str(self.uid), "--gid", str(self.gid), "--clearenv"]
        variables = inner_env(env, reference)
        if evidence:
            self.evidence_read_fd, evidence_write = os.pipe()
            self._child_fds.append(evidence_write)
            variables[EVIDENCE_FD_ENV] = str(evidence_write)
        for key, value in sorted(variables.items()):
            args += ["--setenv", key, value]
        return args

    def _system(self) -> list[str]:
        """The system: /usr read-only, /bin, /lib... as the host has them, a minimal /etc."""
        args = ["--ro-bind", "/usr", "/usr"]
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
        return args

    def _reference(self, packages: list[str], gate: bool) -> list[str]:
        """The reference package(s), copied so that the copy's permissions can be gated."""
        if not packages:
            return []
        ref_root = self.run_dir / "reference"
        ref_root.mkdir(exist_ok=True)
        for name in packages:
            copy_package(name, ref_root)
        os.chmod(ref_root, 0o755)
        # Gate the directory on sys.path itself: while it is unreadable, the import
        # system sees no package there (rather than an empty namespace package).
        self._gated.append(ref_root)
        args = self._ro(str(ref_root), INNER_REFERENCE)
        if gate and self.as_root:
            self.set_reference_readable(False)
        return args

    def _scratch(self, limits: Limits, connection_file: bytes | None) -> list[str]:
        """Devices, /proc, and small private tmpfs mounts for everything writable."""
        size = str(int(limits.scratch_bytes))
        args = ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(16 * 1024**2), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        args += ["--size", size, "--tmpfs", "/tmp", "--dir", INNER_HOME]
        args += ["--dir", f"{INNER_HOME}/.config", "--dir", f"{INNER_HOME}/.config/matplotlib"]
        fontlist = matplotlib_font_cache()
        if fontlist is not None:
            dest = f"{INNER_HOME}/.config/matplotlib/{fontlist.name}"
            args += self._data(dest, fontlist.read_bytes(), 0o644, writable=True)
        args += ["--size", str(4 * 1024**2), "--tmpfs", INNER_RUN]
        if connection_file is not None:
            args += self._data(f"{INNER_RUN}/kernel.json", connection_file, 0o400)
        return args

    def _working_directory(self, cwd: Path, limits: Limits) -> list[str]:
        """A tmpfs at the notebook's path, with read-only copies of the files next to the
        notebook (not the notebooks: they hold the hidden tests)."""
        args = ["--size", str(int(limits.scratch_bytes)), "--tmpfs", str(cwd)]
        for entry in visible_entries(cwd):
            args += self._ro(str(entry), str(entry))
        return args + ["--chdir", str(cwd)]

    def _staged(self, args: list[str]) -> list[str]:
        """As root: bind the staged mounts in a private namespace, drop to the uid, then bwrap."""
        stage = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c"]
        stage += [_STAGE_SCRIPT, "sh", str(len(self._mounts))]
        for source, point in self._mounts:
            stage += [source, point]
        drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
        drop += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return stage + drop + args

    # -- pieces of the command line -------------------------------------------------------
    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._child_fds)

    def _ro(self, source: str, dest: str) -> list[str]:
        """Bind ``source`` read-only at ``dest`` (through a staged mount point when root)."""
        if not self.as_root:
            return ["--ro-bind", source, dest]
        if self._stage is None:
            self._stage = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=scratch_root()))
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
        fd, self.evidence_read_fd = self.evidence_read_fd, None
        drain_evidence(fd, self.run_dir / "evidence.jsonl", sink)

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


def inner_env(passed: dict[str, str], reference: bool) -> dict[str, str]:
    """A sandboxed kernel's environment: ``passed`` and the sandbox's fixed variables."""
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


def drain_evidence(fd: int, path: Path, sink: list[dict]) -> None:
    """Read the integrity monitor's JSON lines from ``fd`` until it closes; keep them.

    Each line is appended to ``path`` and, parsed, to ``sink`` (a thread runs this).  Past
    :data:`MAX_EVIDENCE_BYTES` the rest is read and dropped, so the kernel never blocks.
    """
    kept = 0
    buffer = b""
    with open(path, "ab") as out:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            if kept >= MAX_EVIDENCE_BYTES:
                continue
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
        os.close(fd)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


def _prlimit(limits: Limits) -> list[str]:
    """``prlimit`` with the limits for the kernel process and everything it starts."""
    cpu = int(limits.cpu_seconds)
    return [
        "prlimit",
        f"--as={int(limits.memory_bytes)}",
        f"--cpu={cpu}:{cpu + 2}",
        f"--nproc={int(limits.max_processes)}",
        f"--fsize={int(limits.file_size_bytes)}",
        "--core=0",
    ]
