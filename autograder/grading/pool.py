"""Run grading jobs on long-lived worker processes, surviving crashed or hung workers.

Work reaches workers through the ``concurrent.futures.Executor`` interface, so a
cluster engine with that interface can be plugged in (``executor_factory``); the
default is a local ``ProcessPoolExecutor`` whose workers import nbgrader once.

A worker that dies (segfault, OOM kill) breaks a process pool for every job in
flight.  Jobs that were merely in flight are re-run; when the culprit cannot be told
apart, each suspect is re-run alone, and the one that breaks its worker again is
reported as failed.  A job that overruns its hard deadline gets its workers killed.

A cluster engine (:class:`ClusterExecutor`, e.g. Dask's in ``cluster_executor``) gives each
job a worker of its own, so it can say which job a dead worker cost, and stop one job
without touching the others; the same results come out either way.
"""

from __future__ import annotations

import gc
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from autograder.grading import forkserver
from autograder.grading.job import Job, grade_job
from autograder.grading.results import Status, SubmissionResult

ExecutorFactory = Callable[[int], Executor]
#: The reason a submission gets when it crashed its worker (every engine says the same).
CRASHED = "the grading worker crashed on this submission"


class ClusterExecutor(Executor):
    """An executor that runs each job on a worker of its own (one job per one-thread worker).

    ``run_jobs`` keeps :meth:`capacity` jobs in flight, reads a failure for which
    :meth:`lost_worker` is true as that job's crash (nothing else was on its worker), and
    stops jobs past their deadline with :meth:`abandon` (the other jobs go on).
    """

    def capacity(self) -> int:
        """How many jobs to keep in flight now (the cluster's worker threads); raises a
        ``UsageError`` when the run cannot go on (the cluster has lost every worker)."""
        raise NotImplementedError

    def lost_worker(self, exc: BaseException) -> bool:
        """Whether ``exc`` means that the job's workers died while running it."""
        raise NotImplementedError

    def abandon(self, futures: Iterable[Future]) -> None:
        """Stop these jobs and make their workers fit for the next ones."""
        raise NotImplementedError


def _warm_up() -> None:
    """Worker initializer (nbgrader is already imported: workers fork from the forkserver).

    The worker's own stdout/stderr (and so its kernels') go to /dev/null: everything
    a job needs to report comes back in its result, and nbgrader's log is captured.
    What it inherited (the imported modules, which live as long as the worker) is frozen
    out of the garbage collector, so that its full collections during jobs do not walk
    them.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    warnings.filterwarnings("ignore")
    gc.freeze()


def local_executor(workers: int) -> Executor:
    """The default executor: ``workers`` local processes with nbgrader already imported.

    Workers are forked from a forkserver that imported nbgrader once (a clean,
    single-threaded process), so a pool starts in milliseconds instead of paying
    nbgrader's multi-second import in every worker of every run.
    """
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=forkserver.context(), initializer=_warm_up
    )


def run_jobs(
    jobs: Iterable[Job],
    *,
    workers: int,
    hard_timeout: float,
    executor_factory: ExecutorFactory = local_executor,
    fn: Callable[[Job], SubmissionResult] = grade_job,
) -> Iterator[tuple[Job, SubmissionResult]]:
    """Yield ``(job, result)`` for every job, in completion order, each exactly once.

    ``jobs`` is taken from one at a time, as workers come free (one ahead), so a
    generator of jobs is never all in memory.
    """
    queue = _Pending(jobs)
    alone: deque[Job] = deque()  # suspects of a crash, to re-run one at a time
    while queue or alone:
        solo = not queue
        source = queue if queue else alone
        limit = 1 if solo else max(1, workers)
        executor = executor_factory(limit)
        cluster = executor if isinstance(executor, ClusterExecutor) else None
        in_flight: dict[Future, tuple[Job, float]] = {}
        broken = False
        try:
            while (source or in_flight) and not broken:
                if cluster is not None:
                    limit = cluster.capacity()
                _top_up(executor, fn, source, in_flight, limit)
                if not in_flight:  # a cluster without a worker at the moment: wait for one
                    time.sleep(0.5)
                    continue
                done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
                finished = []
                for future in done:
                    job, _started = in_flight.pop(future)
                    try:
                        finished.append((job, future.result()))
                    except BrokenProcessPool:
                        in_flight[future] = (job, _started)
                        broken = True
                    except Exception as exc:
                        if cluster is not None and cluster.lost_worker(exc):
                            finished.append((job, _crashed(job, CRASHED)))
                        else:  # the job function itself raised
                            reason = f"the grading worker raised {exc!r}"
                            finished.append((job, _crashed(job, reason)))
                # Give the free workers their next jobs before the caller records these
                # results, so that no worker waits while the parent writes.
                if not broken:
                    _top_up(executor, fn, source, in_flight, limit)
                try:
                    yield from finished
                except GeneratorExit:  # the caller stopped (it cannot record): stop the work
                    broken = True
                    raise
                overdue = [
                    f for f, (_, t0) in in_flight.items() if time.monotonic() - t0 > hard_timeout
                ]
                if overdue:
                    late = [(future, in_flight.pop(future)[0]) for future in overdue]
                    if cluster is not None:  # only their workers are restarted
                        cluster.abandon([future for future, _ in late])
                    else:
                        _kill_workers(executor)
                        broken = True
                    for _, job in late:
                        yield (
                            job,
                            _crashed(
                                job,
                                f"grading took longer than {hard_timeout:g} s; "
                                "the worker was killed",
                                status=Status.TIMEOUT,
                            ),
                        )
            if broken:
                suspects = [job for job, _ in in_flight.values()]
                if solo and len(suspects) == 1:
                    yield (suspects[0], _crashed(suspects[0], CRASHED))
                elif solo:
                    alone.extendleft(reversed(suspects))
                else:
                    alone.extend(suspects)
        finally:
            _kill_workers(executor) if broken else executor.shutdown(wait=True, cancel_futures=True)


class _Pending:
    """The jobs not sent yet, taken from their iterable only as they are sent (one ahead,
    so that whether any is left is known)."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._jobs = iter(jobs)
        self._next = next(self._jobs, None)

    def __bool__(self) -> bool:
        return self._next is not None

    def popleft(self) -> Job:
        job, self._next = self._next, next(self._jobs, None)
        assert job is not None, "popleft from no pending job"
        return job


def _top_up(
    executor: Executor, fn, source: deque[Job] | _Pending, in_flight: dict, limit: int
) -> None:
    """Submit jobs from ``source`` until ``limit`` are in flight (a job for every free worker)."""
    while source and len(in_flight) < limit:
        job = source.popleft()
        in_flight[executor.submit(fn, job)] = (job, time.monotonic())


def _kill_workers(executor: Executor) -> None:
    processes = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        try:
            process.kill()
        except Exception:
            pass
    try:
        executor.shutdown(wait=False, cancel_futures=True)
    except Exception:
        pass


def _crashed(job: Job, reason: str, status: Status = Status.FAILED) -> SubmissionResult:
    flag = "worker-crash" if status is Status.FAILED else "worker-killed"
    return SubmissionResult(job.student, job.spec.assignment, status, reason, flags=[flag])
