"""The ``specdec-course`` command's entry point: start the worker pool's forkserver first.

The local workers of ``grade`` (and of ``release`` and ``demo``, which grade too) fork from
a forkserver that imports nbgrader (:mod:`autograder.grading.forkserver`), and the verb's
own imports take about as long.  Started here, before :mod:`autograder.cli` parses the
arguments and the verb imports its modules, the forkserver imports on the other core while
this process imports; otherwise it would start only after them.

Every worker process also runs the command's ``__main__`` script again (multiprocessing does
so to set a worker up), which imports this module: it imports only the standard library and
the forkserver module, so that a worker does not import the whole command.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

from autograder.grading import forkserver

#: The verbs that grade on the local worker pool.
_GRADING_VERBS = ("grade", "release", "demo")
#: Options with which they do not (Dask workers, or a LocalCluster whose forkserver imports
#: more; see ``cluster_pool``), or do nothing.
_NOT_LOCAL = ("--scheduler", "--cluster", "--help", "-h")


def uses_local_pool(argv: Sequence[str]) -> bool:
    """Whether these arguments grade on the local worker pool.

    Read before the arguments are parsed, and exact: the parser takes no abbreviated
    option (``allow_abbrev=False``), so ``--cluster`` and ``--scheduler`` are spelled out
    or given as ``--cluster=...``.  A wrong answer could only cost the early start, never
    change a grading.
    """
    return (
        bool(argv)
        and argv[0] in _GRADING_VERBS
        and not any(arg.split("=", 1)[0] in _NOT_LOCAL for arg in argv[1:])
    )


def main() -> int:
    """Run the command; when it grades locally, the forkserver starts before the imports."""
    argv = sys.argv[1:]
    if uses_local_pool(argv):
        forkserver.start()
    from autograder.cli import main as cli_main  # the command, and its verb's imports, after

    try:
        return cli_main(argv)
    finally:
        # Everything the command made is freed when the process exits; unfrozen, it would
        # first be walked by the collector's last pass at shutdown, which delays the exit
        # after a grading.
        gc.freeze()
