"""The Dask worker preload: ``dask worker ADDRESS --nthreads 1 --preload autograder.cluster``.

Dask looks for ``dask_setup`` in the module a ``--preload`` names; it is
:func:`autograder.grading.cluster_worker.dask_setup`, which refuses a worker that
cannot grade and warms the imports of one that can.
"""

from autograder.grading.cluster_worker import dask_setup

__all__ = ["dask_setup"]
