"""The warm parent: a Python inside the sandbox that has imported the kernel, and forks it.

This file is not imported by the grader.  :mod:`autograder.sandbox.warm` runs its text as
``python -c <this file> <control fd> <font list> <libraries>`` inside a bubblewrap sandbox
(the same mounts as a kernel's, plus ``--cap-add ALL``: capabilities in the sandbox's own
user namespace only), once per worker and assignment.  It

1. imports ipykernel and IPython (``KERNEL_MODULES``), exactly as a fresh kernel would find
   them, and the libraries the grader names (those of numpy and matplotlib that the
   assignment's source imports), but nothing of the course's reference package; it never
   creates a ZeroMQ context, starts a thread or runs learner code, and it checks so;
2. freezes the garbage collector (``gc.freeze``), so that forked children do not write
   to, and so copy, the pages they share with it;
3. waits on its control socket.  Each request (JSON, with the kernel's log and evidence
   fds attached) makes one kernel, in three processes:

   * **F** (forked here): unshares new mount, pid, IPC, network and UTS namespaces and
     forks R, then only waits for it;
   * **R**, pid 1 of the new pid namespace, the reaper: mounts a fresh ``/proc``, fresh
     tmpfs ``/tmp``, ``/run`` and ``/dev/shm``, a tmpfs at the notebook's path with
     read-only copies of the files beside the notebook, writes the connection file,
     detaches the share it read them from, drops every capability (bounding, ambient,
     permitted, effective, inheritable; ``no_new_privs``) and forks K.  It then reaps
     orphans until K exits; its own exit kills whatever is left in the namespace;
   * **K**, the kernel: the request's environment and rlimits, no file descriptors but
     the log and evidence pipe, Python's ``random`` generator (and numpy's global one, if
     imported) reseeded, then ipykernel's launcher with the request's arguments.

   The reply names F's and R's pids (in this sandbox's pid namespace) or the error.

It exits when the control socket closes; its sandbox, and so every kernel it forked,
dies with it.  Only the standard library is used before ``KERNEL_MODULES``.
"""

import ctypes
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import threading

#: What a fresh kernel imports before it runs a cell.  The libraries a notebook imports
#: come on the command line.  Not matplotlib's inline backend nor ipywidgets: at import
#: they hook into the running IPython shell, which the warm parent has not got.
KERNEL_MODULES = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "IPython.core.interactiveshell",
    "ipykernel.debugger",  # debugpy and pydevd: a fresh kernel imports them as it starts
)

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LIBC = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of making the kernel's sandbox failed (reported, never half-done)."""


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype=None, flags=0, data=None):
    _check(
        _LIBC.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _tmpfs(target, size, mode="0755"):
    _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={int(size)},mode={mode}")


def _bind_ro(source, target):
    _mount(source, target, None, _MS_BIND | _MS_REC)
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _prctl(option, arg=0):
    return _LIBC.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)


def drop_capabilities():
    """Drop every capability for good and set no_new_privs; verify from /proc."""
    for cap in range(64):
        if _prctl(_PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() != 22:  # EINVAL: none
            raise SetupError(f"drop capability {cap}: {os.strerror(ctypes.get_errno())}")
    _check(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL), "clear ambient capabilities")
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = ctypes.create_string_buffer(24)  # two zeroed {effective, permitted, inheritable}
    _check(_LIBC.capset(ctypes.c_char_p(header), data), "capset")
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
    with open("/proc/self/status") as fh:
        caps = [line.split() for line in fh if line.startswith("Cap")]
    if any(int(value, 16) for _, value in caps):
        raise SetupError(f"capabilities left after dropping them: {caps}")


def _loopback_up():
    """Bring ``lo`` up in the new network namespace (bubblewrap does the same)."""
    import fcntl  # standard library

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), siocgifflags, request))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def _tasks_here():
    """Threads of every process this pid namespace shows (they count for RLIMIT_NPROC)."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                pass
    return count


def _make_dirs(path):
    """``mkdir -p`` for paths that live on the fresh tmpfs mounts."""
    os.makedirs(path, mode=0o755, exist_ok=True)


def _working_directory(request):
    """A tmpfs at the notebook's path, with read-only copies of the files beside it."""
    cwd, anchor = request["cwd"], request["anchor"]
    if not (cwd == "/tmp" or cwd.startswith("/tmp/")):
        if not (anchor and cwd.startswith(anchor.rstrip("/") + "/") and os.path.isdir(anchor)):
            raise SetupError(f"no place for the working directory {cwd}")
        _tmpfs(anchor, 1024 * 1024)
    _make_dirs(cwd)
    _tmpfs(cwd, request["scratch_bytes"])
    share = os.path.join(request["share"], "visible")
    for name in request["visible"]:
        source, target = os.path.join(share, name), os.path.join(cwd, name)
        if os.path.isdir(source) and not os.path.islink(source):
            os.mkdir(target)
        else:
            open(target, "wb").close()
        _bind_ro(source, target)
    os.chdir(cwd)


def make_sandbox(request, fontlist):
    """In R (pid 1 of the new pid namespace): the kernel's fresh mounts and identity."""
    _check(_LIBC.sethostname(b"sandbox", 7), "sethostname")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    # The Python installation may live under /tmp or /run (a virtualenv there): held by an
    # fd now, and bound again on top of the fresh mounts that would hide it.
    kept = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in request["keep"]]
    _loopback_up()
    present = _tasks_here()  # before the new /proc hides the warm parent's processes
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | 8)  # 8: MS_NOEXEC
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(path):
            _bind_ro(path, path)
    _tmpfs("/tmp", request["scratch_bytes"])
    home = request["home"]
    for sub in ("", ".config", ".config/matplotlib"):
        _make_dirs(os.path.join(home, sub))
    if fontlist is not None:
        name, data = fontlist
        with open(os.path.join(home, ".config", "matplotlib", name), "wb") as fh:
            fh.write(data)
    _tmpfs("/dev/shm", 16 * 1024**2, "1777")
    _working_directory(request)
    # The share (other requests' files) goes before any learner code runs: detached where
    # the kernel allows it, and in any case covered by the fresh /run, which a process
    # without capabilities cannot unmount (bubblewrap's mounts are locked: EINVAL).
    if _LIBC.umount2(request["share_root"].encode(), _MNT_DETACH) != 0:
        if ctypes.get_errno() != 22:
            raise SetupError(f"detach the share: {os.strerror(ctypes.get_errno())}")
    _tmpfs("/run", 4 * 1024**2)
    if os.path.exists(request["share_root"]):
        raise SetupError("the share is still visible")
    for path, fd in kept:
        held = f"/proc/self/fd/{fd}"
        if os.path.isdir(held):
            _make_dirs(path)
        elif not os.path.exists(path):
            _make_dirs(os.path.dirname(path))
            open(path, "wb").close()
        _bind_ro(held, path)
        os.close(fd)
    run = request["run"]
    _make_dirs(run)
    conn = os.path.join(run, "kernel.json")
    fd = os.open(conn, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    os.write(fd, request["connection"].encode())
    os.close(fd)
    return present


def start_kernel(request, log_fd, evidence_fd, present):
    """In K: the request's environment, limits and fds; fresh random state; ipykernel."""
    import random  # already imported by the preloaded modules
    import resource

    limits = request["limits"]
    cpu = int(limits["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # RLIMIT_NPROC counts this user's threads in the whole user namespace, which the warm
    # parent's processes share: the kernel gets max_processes of its own on top of them.
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = int(limits["max_processes"]) + present
    if hard != resource.RLIM_INFINITY:
        nproc = min(nproc, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    keep = {0, 1, 2}
    if evidence_fd is not None:
        keep.add(evidence_fd)
    os.closerange(3, evidence_fd if evidence_fd is not None else 3)
    if evidence_fd is not None:
        os.closerange(evidence_fd + 1, 65536)
        os.set_inheritable(evidence_fd, True)
    for fd in (devnull, log_fd):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    env = dict(request["env"])
    if evidence_fd is not None:
        env[request["evidence_env"]] = str(evidence_fd)
    os.environ.clear()
    os.environ.update(env)
    # As ``python -m ipykernel_launcher`` would have it: PYTHONPATH first, no script dir.
    extra_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [p for p in extra_path if p not in sys.path]
    import ipykernel_launcher

    sys.argv = [ipykernel_launcher.__file__, *request["argv"]]
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # the forked child has its parent's numpy state: fresh entropy
        numpy.random.seed()
    random.seed()
    gc.unfreeze()
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


def _run_kernel(request, log_fd, evidence_fd, present):
    """K's whole life: the kernel, then what a normal interpreter exit does; never returns."""
    import atexit
    import traceback

    code = 1
    try:
        start_kernel(request, log_fd, evidence_fd, present)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:  # noqa: BLE001  (to the kernel's log, as Python would)
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        finally:
            os._exit(code)


def _reap(pid_wanted):
    """Reap children until ``pid_wanted`` exits; its wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == pid_wanted:
            return status


def fork_kernel(request, fds, control, fontlist):
    """Make one kernel (F, R and K above); return (F's pid, R's pid) or raise SetupError."""
    log_fd, evidence_fd = fds[0], (fds[1] if len(fds) > 1 else None)
    report_r, report_w = os.pipe()
    f_pid = os.fork()
    if f_pid == 0:  # F
        code = 1
        try:
            control.close()
            os.close(report_r)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNET | _CLONE_NEWUTS
            _check(_LIBC.unshare(flags), "unshare")
            r_pid = os.fork()
            if r_pid == 0:  # R
                try:
                    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
                    os.setsid()
                    present = make_sandbox(request, fontlist)
                    drop_capabilities()
                    k_pid = os.fork()
                    if k_pid == 0:  # K
                        os.close(report_w)
                        _run_kernel(request, log_fd, evidence_fd, present)
                    os.write(report_w, b"ok\n")
                    os.close(report_w)
                    for fd in fds:
                        os.close(fd)
                    status = _reap(k_pid)
                    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
                except BaseException as exc:  # noqa: BLE001  (reported to the grader)
                    try:
                        os.write(report_w, f"error {exc}\n".encode())
                    finally:
                        os._exit(1)
            os.write(report_w, f"{r_pid}\n".encode())
            os.close(report_w)
            for fd in fds:
                os.close(fd)
            code = os.waitstatus_to_exitcode(_reap(r_pid)) & 0xFF
        except BaseException as exc:  # noqa: BLE001
            try:
                os.write(report_w, f"error {exc}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(report_w)
    for fd in fds:
        os.close(fd)
    # F writes R's pid and R writes "ok" (or either an error) to the same pipe, in no set
    # order: R may report before F has written its line.
    lines = _read_lines(report_r, 2, timeout=30.0)
    os.close(report_r)
    errors = [line[6:] for line in lines if line.startswith("error")]
    if errors:
        raise SetupError(errors[0])
    pids = [line for line in lines if line.isdigit()]
    if not pids or "ok" not in lines:
        raise SetupError(f"the kernel's sandbox did not start: {lines}")
    return f_pid, int(pids[0])


def _read_lines(fd, count, timeout):
    data = b""
    while data.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return [line for line in data.decode(errors="replace").split("\n") if line][:count]


def preload(fontlist_path, libraries):
    """Import the kernel's modules and ``libraries``; check that no thread and no ZeroMQ
    context started."""
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # the launcher removes the script's directory too
    import importlib

    for name in (*KERNEL_MODULES, *libraries):
        importlib.import_module(name)
    import zmq

    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise SetupError(f"importing the kernel started threads: {threading.enumerate()}")
    if getattr(zmq.Context, "_instance", None) is not None:
        raise SetupError("importing the kernel created a ZeroMQ context")
    fontlist = None
    if fontlist_path and os.path.exists(fontlist_path):
        with open(fontlist_path, "rb") as fh:
            fontlist = (os.path.basename(fontlist_path), fh.read())
    gc.collect()
    gc.freeze()
    return fontlist


def main(argv):
    control = socket.socket(fileno=int(argv[0]))
    try:
        libraries = [name for name in (argv[2] if len(argv) > 2 else "").split(",") if name]
        fontlist = preload(argv[1] if len(argv) > 1 else "", libraries)
    except BaseException as exc:  # noqa: BLE001
        control.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        return 1
    control.send(json.dumps({"ready": True, "modules": len(sys.modules)}).encode())
    while True:
        ready, _, _ = select.select([control], [], [], 1.0)
        while True:  # reap the F processes of kernels that have ended
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return 0
        try:
            request = json.loads(message)
            f_pid, r_pid = fork_kernel(request, fds, control, fontlist)
            reply = {"f": f_pid, "r": r_pid}
        except BaseException as exc:  # noqa: BLE001  (one kernel fails, not the parent)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        control.send(json.dumps(reply).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
