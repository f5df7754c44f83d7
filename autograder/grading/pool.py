"""Run grading jobs on long-lived worker processes, surviving crashed or hung workers.

Work reaches workers through the ``concurrent.futures.Executor`` interface, so a
cluster engine with that interface can be plugged in (``executor_factory``); the
default is a local ``ProcessPoolExecutor`` whose workers import nbgrader once.

A worker that dies (segfault, OOM kill) breaks a process pool for every job in
flight.  Jobs that were merely in flight are re-run; when the culprit cannot be told
apart, each suspect is re-run alone, and the one that breaks its worker again is
reported as failed.  A job that overruns its hard deadline gets its workers killed.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext

from autograder.grading.job import Job, grade_job
from autograder.grading.results import Status, SubmissionResult

ExecutorFactory = Callable[[int], Executor]


def _warm_up() -> None:
    """Worker initializer (nbgrader is already imported: workers fork from the forkserver).

    The worker's own stdout/stderr (and so its kernels') go to /dev/null: everything
    a job needs to report comes back in its result, and nbgrader's log is captured.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    warnings.filterwarnings("ignore")


_PRELOAD = (
    "autograder.grading.job",
    "nbgrader.apps",
    "nbgrader.converters",
    "nbgrader.api",
    "nbclient",
    "jupyter_client",
)


def local_executor(workers: int) -> Executor:
    """The default executor: ``workers`` local processes with nbgrader already imported.

    Workers are forked from a forkserver that imported nbgrader once (a clean,
    single-threaded process), so a pool starts in milliseconds instead of paying
    nbgrader's multi-second import in every worker of every run.
    """
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=_forkserver_context(), initializer=_warm_up
    )


def start_local_workers() -> None:
    """Start the local pool's forkserver now, so that its imports overlap other set-up."""
    _forkserver_context()
    forkserver.ensure_running()


def _forkserver_context() -> ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    return context


def run_jobs(
    jobs: Iterable[Job],
    *,
    workers: int,
    hard_timeout: float,
    executor_factory: ExecutorFactory = local_executor,
    fn: Callable[[Job], SubmissionResult] = grade_job,
) -> Iterator[tuple[Job, SubmissionResult]]:
    """Yield ``(job, result)`` for every job, in completion order, each exactly once."""
    queue: deque[Job] = deque(jobs)
    alone: deque[Job] = deque()  # suspects of a crash, to re-run one at a time
    while queue or alone:
        solo = not queue
        source = queue if queue else alone
        limit = 1 if solo else max(1, workers)
        executor = executor_factory(limit)
        in_flight: dict[Future, tuple[Job, float]] = {}
        broken = False
        try:
            while (source or in_flight) and not broken:
                _top_up(executor, fn, source, in_flight, limit)
                done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
                finished = []
                for future in done:
                    job, _started = in_flight.pop(future)
                    try:
                        finished.append((job, future.result()))
                    except BrokenProcessPool:
                        in_flight[future] = (job, _started)
                        broken = True
                    except Exception as exc:  # the job function itself raised
                        finished.append((job, _crashed(job, f"the grading worker raised {exc!r}")))
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
                    for future in overdue:
                        job, _ = in_flight.pop(future)
                        yield (
                            job,
                            _crashed(
                                job,
                                f"grading took longer than {hard_timeout:g} s; "
                                "the worker was killed",
                                status=Status.TIMEOUT,
                            ),
                        )
                    _kill_workers(executor)
                    broken = True
            if broken:
                suspects = [job for job, _ in in_flight.values()]
                if solo and len(suspects) == 1:
                    yield (
                        suspects[0],
                        _crashed(suspects[0], "the grading worker crashed on this submission"),
                    )
                elif solo:
                    alone.extendleft(reversed(suspects))
                else:
                    alone.extend(suspects)
        finally:
            _kill_workers(executor) if broken else executor.shutdown(wait=True, cancel_futures=True)


def _top_up(executor: Executor, fn, source: deque, in_flight: dict, limit: int) -> None:
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
    return SubmissionResult(job.student, job.assignment, status, reason, flags=[flag])
