"""Grading jobs as Dask tasks, behind the same ``Executor`` interface as the local pool.

Dask schedules; :class:`DaskExecutor` only keeps as many jobs in flight as the cluster
has worker threads, so that each one-thread worker holds one job and a worker that
dies takes only its own job with it.  Failures map onto the local pool's results.
Whatever the scheduler's own ``allowed-failures``, a job is blamed when it has taken
down :data:`DEATHS_TO_BLAME` workers: the executor counts the deaths itself, from the
scheduler's ``remove-worker`` events, runs a job again when the scheduler gave up on it
sooner, and cancels it when the scheduler would retry it again; the job is then
``failed`` with the same reason as a crash in the local pool.  A scheduler that retries
on its own may already have handed a blamed job to another worker when the cancel
reaches it, and a running task cannot be cancelled: that worker's process is ended as
soon as it says it has started the job
(:func:`~autograder.grading.cluster_worker.stop_blamed_job`; its nanny starts another).
A job past its hard deadline is cancelled and its worker restarted through its nanny
(:meth:`DaskExecutor.abandon`).

The cluster it runs on is connected to by :mod:`autograder.grading.cluster_pool`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any, Protocol

from distributed.scheduler import KilledWorker

from autograder.course import UsageError
from autograder.grading import cluster_worker
from autograder.grading.cluster_worker import run_job
from autograder.grading.pool import ClusterExecutor

#: Workers a job may take down before its submission is blamed: the first death may be
#: the machine's (a worker killed from outside); the second is the submission's.
DEATHS_TO_BLAME = 2


class Cluster(Protocol):
    """What the executor needs of the cluster it runs on (a ``DaskEngine``)."""

    client: Any  #: the connected ``distributed.Client``
    description: str  #: the cluster, for messages
    worker_wait: float  #: seconds the run may go on without a worker before it stops

    def ship(self, template: Path) -> str:
        """Have every worker hold ``template``; the name of the plugin that holds it."""

    def workers(self) -> int:
        """The cluster's worker threads now."""


class NoWorkers(UsageError):
    """The cluster has had no worker for longer than the engine's ``worker_wait``."""


class LostWorkers(Exception):
    """A job took down this many workers: its submission is blamed, and not run again."""

    def __init__(self, deaths: int):
        super().__init__(f"the job took down {deaths} Dask workers")
        self.deaths = deaths


class DaskExecutor(ClusterExecutor):
    """``concurrent.futures`` futures for grading jobs run as Dask tasks.

    Besides ``submit`` and ``shutdown``, it tells ``run_jobs`` how many jobs to keep in
    flight (:meth:`capacity`), which failures mean that workers died running that job
    (:meth:`lost_worker`), and how to stop jobs past their deadline without touching the
    others (:meth:`abandon`).
    """

    def __init__(self, engine: Cluster):
        self._engine = engine
        self._client = engine.client
        self._tasks: dict[Future, object] = {}  # our future -> its Dask future, until done
        self._calls: dict[Future, tuple] = {}  # our future -> (fn, job), to run it again
        self._owners: dict[str, Future] = {}  # a Dask task's key -> our future
        self._deaths: dict[Future, int] = {}  # our future -> workers its job took down
        self._launches: dict[Future, int] = {}  # our future -> Dask tasks it has had
        self._running: dict[Future, str] = {}  # our future -> the worker that started it
        self._blamed: set[str] = set()  # Dask keys of blamed jobs no worker has started again
        self._stops: list[threading.Thread] = []  # stopping workers that started one anyway
        self._lock = threading.Lock()  # Dask runs done-callbacks in a thread of its own
        self._alone_since: float | None = None  # when the cluster last lost its last worker
        self._client.subscribe_topic("all", self._on_event)
        self._client.subscribe_topic(cluster_worker.STARTED_TOPIC, self._on_started)

    def submit(self, fn, job) -> Future:
        out: Future = Future()
        out.set_running_or_notify_cancel()
        with self._lock:
            self._calls[out] = (fn, job)
            self._deaths[out] = self._launches[out] = 0
        self._launch(out)
        return out

    def _launch(self, out: Future) -> None:
        """Run ``out``'s job as a new Dask task."""
        with self._lock:
            call = self._calls.get(out)
        if call is None:
            return  # blamed or abandoned meanwhile
        fn, job = call
        name = self._engine.ship(job.spec.template)
        key = cluster_worker.JOB_PREFIX + uuid.uuid4().hex
        task = self._client.submit(run_job, fn, job, name, pure=False, key=key)
        with self._lock:
            self._tasks[out] = task
            self._owners[task.key] = out
            self._launches[out] += 1
        task.add_done_callback(lambda task: self._read(out, task))

    def _read(self, out: Future, task) -> None:
        """Settle ``out`` from its finished Dask task, in a thread of its own.

        Dask runs every done-callback in one thread, and reading a result that was lost
        with its worker waits for it to be computed again: in that one thread, the wait
        would hold up reading every other job's result, and so the workers that wait
        for their results to be read before they start their next job.
        """
        threading.Thread(target=self._settle, args=(out, task), name="specdec-read").start()

    def _forget(self, out: Future):
        """Drop ``out``'s bookkeeping (under the lock); return its Dask task, or None."""
        task = self._tasks.pop(out, None)
        if task is not None:
            self._owners.pop(task.key, None)
            for held in (self._calls, self._deaths, self._launches, self._running):
                held.pop(out, None)
        return task

    def _on_started(self, event) -> None:
        """Note which worker has started a job (the worker's event, in the client's loop).

        A worker that has started a blamed job again is stopped, from a thread of its own:
        this loop must go on reading the scheduler's messages meanwhile.
        """
        _, msg = event
        if not isinstance(msg, dict):
            return
        key, worker = msg.get("key"), msg.get("worker")
        with self._lock:
            out = self._owners.get(key)
            if out is not None:
                self._running[out] = worker
            elif key in self._blamed:
                self._blamed.discard(key)
                stop = threading.Thread(
                    target=self._stop_blamed, args=([key], [worker]), name="specdec-stop"
                )
                self._stops.append(stop)
                stop.start()

    def _stop_blamed(self, keys: list[str], workers: list[str] | None) -> None:
        """End the process of each of ``workers`` (None: all) that runs one of ``keys``."""
        try:
            self._client.run(
                cluster_worker.stop_blamed_job, keys, workers=workers, on_error="ignore"
            )
        except Exception:  # a worker's process ended while it was asked: as intended
            pass

    async def _on_event(self, event) -> None:
        """Count a worker's death against the job it was running; blame at the limit.

        Runs in the client's event loop, on each event of the scheduler's ``all`` topic,
        which the scheduler sends before it gives the dead worker's tasks to others.  A
        job only queued on that worker (a scheduler's ``worker-saturation`` above 1.0
        queues a second one) had not started there, and is not blamed for its death.
        """
        _, msg = event
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        if msg.get("expected"):  # retired or closed on purpose: not the job's doing
            return
        blamed = []
        with self._lock:
            for key in msg.get("processing-tasks") or ():
                out = self._owners.get(key)
                if out is None or self._running.get(out) != msg.get("worker"):
                    continue
                del self._running[out]
                self._deaths[out] += 1
                if self._deaths[out] >= DEATHS_TO_BLAME:
                    self._blamed.add(key)
                    blamed.append((out, self._forget(out)))
        for out, task in blamed:
            await self._client.cancel([task], force=True, asynchronous=True)
            out.set_exception(LostWorkers(DEATHS_TO_BLAME))

    def _settle(self, out: Future, task) -> None:
        """Pass a finished Dask task's outcome on, and drop the task (its result is freed).

        A task the scheduler gave up on (``KilledWorker``) before its job had taken down
        :data:`DEATHS_TO_BLAME` workers runs again (at most that many times more).  Runs
        in a thread of its own, where fetching the outcome may wait on the client's event
        loop: so never under the lock, which that loop's event handlers take.
        """
        with self._lock:
            if self._tasks.get(out) is not task:
                return  # abandoned or blamed: run_jobs has already been told
            # The job has finished where it started: a later death of that worker is not
            # its doing (a result lost with it is computed again, and says when it starts).
            self._running.pop(out, None)
        try:
            # ``result`` waits when the result was lost with its worker after the job
            # finished (the future is ``lost`` again, and the scheduler computes it anew):
            # an outcome is read only once there is one.
            outcome = (task.result(), None)
        except CancelledError:
            outcome = (None, RuntimeError("the Dask task was cancelled"))
        except BaseException as exc:  # the job's error, or the outcome could not be fetched
            outcome = (None, exc)
        if outcome[0] is None and outcome[1] is None:
            outcome = (None, RuntimeError("the Dask task finished with no result"))
        again = False
        with self._lock:
            if self._tasks.get(out) is not task:
                return  # blamed while the outcome was fetched
            if isinstance(outcome[1], KilledWorker):
                # The scheduler counts the workers that died with the job queued on them
                # too; only those that died running it count here.
                again = (
                    self._deaths[out] < DEATHS_TO_BLAME and self._launches[out] <= DEATHS_TO_BLAME
                )
            if again:
                del self._tasks[out]
                self._owners.pop(task.key, None)
            else:
                self._forget(out)
        if again:
            self._launch(out)
        elif outcome[1] is None:
            out.set_result(outcome[0])
        else:
            out.set_exception(outcome[1])

    def capacity(self) -> int:
        """Jobs to keep in flight: one per worker thread the scheduler has now.

        Raises :class:`NoWorkers` once the cluster has had no worker for the engine's
        ``worker_wait``: its workers were stopped, or every restart was turned away, and
        waiting on would only run the jobs in flight into their deadlines.
        """
        threads = self._engine.workers()
        if threads:
            self._alone_since = None
        elif self._alone_since is None:
            self._alone_since = time.monotonic()
        elif time.monotonic() - self._alone_since > self._engine.worker_wait:
            raise NoWorkers(
                f"{self._engine.description} has had no worker for "
                f"{self._engine.worker_wait:g} s; start workers (dask worker ADDRESS "
                "--nthreads 1 --preload autograder.cluster), then run grade again: it grades "
                "only what is not recorded yet"
            )
        return threads

    def lost_worker(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the job's workers died running it."""
        return isinstance(exc, (KilledWorker, LostWorkers))

    def abandon(self, futures: Iterable[Future]) -> None:
        """Cancel these jobs, then restart (through their nannies) the workers running them."""
        with self._lock:
            tasks = [task for task in map(self._forget, futures) if task is not None]
        if not tasks:
            return
        keys = {task.key for task in tasks}
        running = self._client.processing()
        workers = [address for address, held in running.items() if keys & set(held)]
        self._client.cancel(tasks, force=True)
        if workers:
            self._client.restart_workers(workers, raise_for_error=False)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop listening to the cluster; leave no job of this run running on it.

        A blamed job that a worker started again after the last event read is stopped
        there too: every worker is asked, once, for the blamed jobs not seen again.
        """
        self._client.unsubscribe_topic("all")
        self._client.unsubscribe_topic(cluster_worker.STARTED_TOPIC)
        with self._lock:
            tasks, self._tasks = list(self._tasks.values()), {}
            for held in (self._owners, self._calls, self._deaths, self._launches, self._running):
                held.clear()
            unseen, self._blamed = sorted(self._blamed), set()
            stops, self._stops = self._stops, []
        if unseen:
            self._stop_blamed(unseen, None)
        for stop in stops:
            stop.join()
        if cancel_futures and tasks:
            self._client.cancel(tasks, force=True)
