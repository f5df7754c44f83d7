"""The first process of every sandbox launch: it ties the sandbox's life to its worker's.

bubblewrap's ``--die-with-parent`` arms ``PR_SET_PDEATHSIG`` in its own processes only
once each is set up, and never checks that the parent is still there.  A worker killed in
the first milliseconds of a launch (before the launcher arms, or while bwrap builds the
sandbox and before the sandbox's init arms) leaves a sandbox whose parent is now the
host's init, which never dies: the kernel runs on.  (Root's launch also changes uid on the
way, and a uid change clears the signal.)  This program closes those gaps.  The worker
starts it as::

    python -I -S tether.py <worker pid> <command...>

and it

1. becomes a *child subreaper*: a process below it whose parent dies is re-parented to it
   (not to init), so a sandbox init orphaned before it armed is still its child;
2. arms ``PR_SET_PDEATHSIG`` (``SIGUSR1``), then checks that its parent is still
   ``<worker pid>``: if not, the worker died before the signal was armed, and it exits
   without starting anything;
3. runs the command as its child and exits with its status.

When the worker dies (the signal arrives and the parent is no longer the worker: the
signal also comes when only the thread that started it ends), or when it is told to stop
(``SIGTERM``, ``SIGHUP``), it SIGKILLs its children until none is left.  One of them is
then the sandbox's pid-namespace init, and killing it kills everything in the sandbox.
Sandboxes started with the machine check's ``subprocess.run`` and with jupyter_client's
provisioner go through it alike (:class:`~autograder.sandbox.launch.Launch`).

It runs outside the sandbox, as the grader, with only the standard library (``-I -S``:
no site-packages), so that it starts in milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

#: Exit status when the worker was already gone before the tether armed.
ORPHANED = 125

#: The parent-death signal (not one that jupyter_client or a terminal sends).
PARENT_DIED = signal.SIGUSR1


def command(worker_pid: int) -> list[str]:
    """The argv prefix that runs a command under the tether, tied to ``worker_pid``."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(worker_pid)]


def main(argv: list[str]) -> int:
    worker, command_argv = int(argv[0]), argv[1:]
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True
        _kill_children()

    def parent_died(*_: object) -> None:
        if os.getppid() != worker:  # else only the worker thread that started us ended
            stop()

    # Handlers before the signal is armed (the default action of SIGUSR1 is to die
    # without cleaning up).  Python handlers, not SIG_IGN: a handled signal is reset to
    # its default in the command, an ignored one would stay ignored in the kernel.
    signal.signal(PARENT_DIED, parent_died)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    signal.signal(signal.SIGINT, lambda *_: None)  # interrupts go to the kernel itself
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return _fail("PR_SET_CHILD_SUBREAPER")
    if libc.prctl(_PR_SET_PDEATHSIG, int(PARENT_DIED), 0, 0, 0) != 0:
        return _fail("PR_SET_PDEATHSIG")
    if os.getppid() != worker:  # checked after arming: no moment is left uncovered
        return ORPHANED
    if stopping:
        return 1

    handled = (PARENT_DIED, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    child = os.posix_spawnp(command_argv[0], command_argv, os.environ, setsigdef=handled)
    if stopping:  # told to stop while the command was being started
        _kill_children()
    os.closerange(3, 1 << 16)  # the command's inherited fds are its own (pipes see EOF)
    code = 1
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # nothing left below us
            return code
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
        if pid == child or stopping:
            _kill_children()  # whatever was re-parented to us has no reason to live


def _kill_children() -> None:
    """SIGKILL every current child (the command and any orphan re-parented here)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as fh:
            children = [int(pid) for pid in fh.read().split()]
    except OSError:
        return
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _fail(what: str) -> int:
    print(f"tether: {what} failed: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
