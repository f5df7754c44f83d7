"""The local worker pool's forkserver: what it imports, and starting it.

Local workers (and a ``LocalCluster``'s) fork from one forkserver that has imported
nbgrader once (:data:`WARM_IMPORTS`), so a pool starts in milliseconds instead of paying
nbgrader's multi-second import in every worker of every run.  This module imports only
the standard library, so that the command can start the forkserver before its own imports
(:mod:`autograder.entry`): the two then run side by side instead of one after the other.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from multiprocessing import forkserver
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


def context(extra_imports: Sequence[str] = ()) -> ForkServerContext:
    """The forkserver context; the preload list is set on the first call that starts it."""
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
