"""Tell nbgrader to start a job's kernels in the sandbox: config and executor class."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from nbgrader.preprocessors import Execute
from traitlets.config import Config

from autograder.sandbox.kernel_manager import JobKernels, SandboxedKernelManager
from autograder.sandbox.limits import Limits
from autograder.sandbox.warm import WarmParents


def configure(
    config: Config,
    *,
    job_dir: Path,
    limits: Limits,
    warm: WarmParents | None = None,
    preload: Sequence[str] = (),
) -> JobKernels:
    """Configure this job's autograding to start its kernel inside the sandbox.

    Sets ``Execute.kernel_manager_class``, the :class:`SandboxedKernelManager` traits
    (this job's directory and ``limits``) and an ``on_cell_execute`` hook that makes the
    reference package readable only while a test cell runs.  With ``warm`` (the worker's
    warm parents), kernels are forked from a warm parent, which imports ``preload`` (see
    :func:`~autograder.sandbox.warm.preload_for`); without, each starts fresh.
    nbgrader's ``Execute``
    ignores a configured ``kernel_manager_class`` (it passes its own as a keyword), so
    also pass the executor class through :func:`executor`.

    Returns the job's :class:`JobKernels`, also set as ``SandboxedKernelManager.kernels``.
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
    km.warm = warm
    km.preload = list(preload)
    kernels = JobKernels()
    km.kernels = kernels
    config.Execute.on_cell_execute = kernels.gate_reference
    return kernels


@functools.cache
def executor(cls: type) -> type:
    """``cls`` (nbgrader's ``Execute`` or a subclass), starting its kernels in the sandbox.

    nbgrader's ``Execute`` passes ``kernel_manager_class=AsyncKernelManager`` as a keyword
    argument, which beats config; this subclass passes :class:`SandboxedKernelManager`.
    Other preprocessor classes are returned unchanged.  The subclass keeps the name of
    ``cls``, so the config sections written for ``cls`` still apply.
    """
    if not (isinstance(cls, type) and issubclass(cls, Execute)):
        return cls

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        cls.__init__(self, *args, **kwargs)

    return type(
        cls.__name__, (cls,), {"__init__": __init__, "__module__": __name__, "__doc__": cls.__doc__}
    )
