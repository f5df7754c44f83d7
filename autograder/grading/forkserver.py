"""The local worker pool's forkserver: what it imports, and starting it.

Local workers (and a ``LocalCluster``'s) fork from one forkserver that has imported
nbgrader once (:data:`WARM_IMPORTS`), so a pool starts in milliseconds instead of paying
nbgrader's multi-second import in every worker of every run.  This module imports only
the standard library, so that the command can start the forkserver before its own imports
(:mod:`autograder.entry`): the two then run side by side instead of one after the other.

The forkserver listens on a Unix socket in multiprocessing's temporary folder, which is
made under ``TMPDIR``; a socket's path holds at most 107 bytes.  Under a ``TMPDIR`` too
long for it, that one folder is made in a short temporary directory instead.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Sequence
from multiprocessing import forkserver, util
from multiprocessing.context import ForkServerContext

#: What every worker imports before its first job (local: the forkserver; Dask: the preload).
WARM_IMPORTS = (
    "autograder.grading.job",
    "nbgrader.apps",
    "nbgrader.converters",
    "nbgrader.api",
    "nbclient",
    "jupyter_client",
)


#: The longest path a Unix socket may have (Linux's ``sun_path`` less its final zero byte).
SOCKET_PATH_MAX = 107

#: What multiprocessing adds to the temporary directory: ``/pymp-XXXXXXXX/listener-XXXXXXXX``.
SOCKET_SUFFIX = len("/pymp-12345678/listener-12345678")

#: Where the folder goes when ``TMPDIR`` is too long, the first that can be written.
SHORT_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def fit_socket_path() -> None:
    """Make multiprocessing's temporary folder where the forkserver's socket path fits.

    Nothing changes under a ``TMPDIR`` short enough.  Else the folder is made (once per
    process, as multiprocessing makes it) in the first of :data:`SHORT_TEMP_DIRS` that can
    be written, and removed at exit as usual; every other temporary file stays under
    ``TMPDIR``.
    """
    if len(tempfile.gettempdir()) + SOCKET_SUFFIX <= SOCKET_PATH_MAX:
        return
    short = next((d for d in SHORT_TEMP_DIRS if os.access(d, os.W_OK | os.X_OK)), None)
    if short is None:
        return  # the forkserver says why it cannot listen
    saved = tempfile.tempdir
    tempfile.tempdir = short
    try:
        util.get_temp_dir()  # made now, under ``short``; multiprocessing keeps it
    finally:
        tempfile.tempdir = saved


def context(extra_imports: Sequence[str] = ()) -> ForkServerContext:
    """The forkserver context; the preload list is set on the first call that starts it."""
    fit_socket_path()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*WARM_IMPORTS, *extra_imports])
    return ctx


def start(extra_imports: Sequence[str] = ()) -> None:
    """Start the forkserver now, so that its imports overlap other set-up.

    ``extra_imports`` are imported too (a ``LocalCluster``'s workers fork from it as well).
    Only the first call in a process decides what the forkserver imports.
    """
    context(extra_imports)
    forkserver.ensure_running()
