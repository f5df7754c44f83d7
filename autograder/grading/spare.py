"""A kernel started ahead of time for a worker's next submission.

Starting a sandboxed kernel takes about a second, most of it Python importing ipykernel,
and nbclient waits for it before the first cell runs.  A worker grades one notebook at a
time, so while it finishes one submission it starts the kernel that its next submission
will use, and that second is no longer on the way of any submission.

The spare is started the way nbclient would start the next job's kernel: the same kernel
manager class and config (sandbox, limits, job directory), kernel name, extra arguments,
working directory and environment, job marker included.  It lives in the next job's own
scratch directory, which the worker creates in advance, with that job's nbgrader config
(the job then runs with that config).  :class:`GuardedExecute` adopts it
only when every one of those matches what it would start itself; otherwise the spare is
killed and a fresh kernel started.  So a spare changes timing, never behaviour, and no
learner code runs in it before a job adopts it.

Only sandboxed jobs use spares: inside the sandbox the kernel's working directory is a
private tmpfs that nbgrader's later rewrite of the host directory cannot affect.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Hashable
from dataclasses import dataclass
from multiprocessing import util as mp_util
from pathlib import Path

from nbclient import NotebookClient
from nbclient.util import run_sync
from traitlets.config import Config

from autograder.grading.processes import kill_marked_processes
from autograder.sandbox import (
    SandboxedKernelManager,
    WarmParents,
    kill_leftovers,
    visible_entries,
)


@dataclass
class Spare:
    """A started kernel and everything it was started with."""

    key: Hashable  #: what the next job must share with the job this spare was made after
    job_dir: Path  #: the next job's scratch directory, created in advance
    config: Config  #: the next job's nbgrader config, which the kernel was started with
    marker: str  #: the next job's process marker, in the kernel's environment
    km: SandboxedKernelManager  #: the started kernel manager
    kernel_name: str
    cwd: str
    extra_arguments: list[str]
    env: dict[str, str]
    files: list[str]  #: what the kernel's working directory showed at launch
    claimed: bool = False


class SpareKernels:
    """A worker's spare kernel (at most one) and warm parents, carried from job to job.

    The job's executor reaches it through its config (``GuardedExecute.spares``), the
    kernel managers reach ``warm`` through theirs (``SandboxedKernelManager.warm``).
    traitlets deep-copies config values; a copy of this holder is the holder itself.
    """

    def __init__(self) -> None:
        self.spare: Spare | None = None
        #: The processes that kernels are forked from (see ``autograder.sandbox.warm``).
        self.warm = WarmParents()
        self._finalizer: mp_util.Finalize | None = None

    def __deepcopy__(self, memo: dict) -> SpareKernels:
        return self

    def __copy__(self) -> SpareKernels:
        return self

    def start(
        self,
        *,
        key: Hashable,
        job_dir: Path,
        marker: str,
        executor_cls: type[NotebookClient],
        config: Config,
        kernel_name: str,
        cwd: Path,
        env: dict[str, str],
    ) -> None:
        """Start the kernel for the job that ``key`` describes, in ``job_dir``; keep it."""
        self.discard()
        client = executor_cls(config=config)  # configured exactly as the job's executor
        km = client.kernel_manager_class(kernel_name=kernel_name, config=config)
        extra = history_arguments(client, km)
        run_sync(km.start_kernel)(extra_arguments=extra, cwd=str(cwd), env=dict(env))
        self.spare = Spare(
            key, job_dir, config, marker, km, kernel_name, str(cwd), extra, dict(env), listing(cwd)
        )
        if self._finalizer is None:  # a worker that exits takes its spare with it
            self._finalizer = mp_util.Finalize(self, self.discard, exitpriority=10)

    def claim(self, key: Hashable) -> Spare | None:
        """The spare prepared for a job described by ``key`` (its directory and config).

        A spare made for other jobs (another run, other limits) is discarded: None.
        """
        spare = self.spare
        if spare is None:
            return None
        if spare.key != key or spare.claimed:
            self.discard()
            return None
        spare.claimed = True
        return spare

    def take(
        self, client: NotebookClient, kernel_name: str, cwd: str | None, env: dict[str, str]
    ) -> SandboxedKernelManager | None:
        """The spare's kernel manager, if it is the kernel ``client`` would start now.

        ``client`` is the job's executor (an nbclient ``NotebookClient``) before it starts
        its kernel.  Anything that differs, or a spare whose kernel died, gives None (and
        the spare is killed): the executor then starts its own kernel as usual.
        """
        spare = self.spare
        if spare is None or not spare.claimed:
            return None
        km = spare.km
        same = (
            isinstance(km, client.kernel_manager_class)
            and kernel_name == spare.kernel_name
            and cwd is not None
            and os.path.realpath(cwd) == os.path.realpath(spare.cwd)
            and history_arguments(client, km) == spare.extra_arguments
            and env == spare.env
            and listing(Path(cwd)) == spare.files
        )
        if not same or not run_sync(km.is_alive)():
            self.discard()
            return None
        self.spare = None
        return km

    def discard(self) -> None:
        """Kill the spare kernel, if any; remove its directory unless a job has claimed it."""
        spare, self.spare = self.spare, None
        if spare is None:
            return
        try:
            run_sync(spare.km.shutdown_kernel)(now=True)
        except Exception:
            pass
        try:
            run_sync(spare.km.cleanup_resources)()
        except Exception:
            pass
        kill_marked_processes(spare.marker)
        kill_leftovers(spare.job_dir)  # a forked kernel carries no marker of its own
        if not spare.claimed:
            shutil.rmtree(spare.job_dir, ignore_errors=True)

    def discard_claimed(self) -> None:
        """Discard a spare its job claimed but did not use (the job failed before running)."""
        if self.spare is not None and self.spare.claimed:
            self.discard()


def history_arguments(client: NotebookClient, km: SandboxedKernelManager) -> list[str]:
    """The kernel's extra arguments as nbclient computes them when it starts a kernel."""
    extra = list(client.extra_arguments)
    if (
        getattr(km, "ipykernel", False)
        and client.ipython_hist_file
        and not any(arg.startswith("--HistoryManager.hist_file") for arg in extra)
    ):
        extra.append(f"--HistoryManager.hist_file={client.ipython_hist_file}")
    return extra


def listing(cwd: Path) -> list[str]:
    """What a sandboxed kernel started in ``cwd`` would be shown there."""
    try:
        return [entry.name for entry in visible_entries(cwd)]
    except OSError:
        return ["<unreadable>"]
