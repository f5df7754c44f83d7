"""Connecting to a Dask cluster for a ``grade`` run: its client, checked, and the templates.

:class:`DaskEngine` is the instructor's side of one ``grade`` run on Dask: a
``distributed.Client`` connected to an existing scheduler (``--scheduler ADDRESS``,
``tcp://`` or ``tls://``) or to a ``LocalCluster`` of one-thread worker processes
started for the run (``--cluster local[:N]``).  It checks the scheduler's settings and
that each worker grades as the instructor does, ships each template to the workers
once, and hands ``run_jobs`` its executor
(:class:`~autograder.grading.cluster_executor.DaskExecutor`, the jobs as Dask tasks).

The worker side (the preload, the check that a worker grades as the instructor does,
the template each worker receives once per template hash) is ``cluster_worker``.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from types import MappingProxyType

import dask
from distributed import Client, LocalCluster
from distributed.security import Security

from autograder.course import UsageError
from autograder.grading import cluster_worker, forkserver
from autograder.grading.cluster_executor import DEATHS_TO_BLAME, DaskExecutor

#: The scheduler settings that suit grading, which ``--cluster local`` starts with: a job
#: is retried once on another worker, and a one-thread worker is never sent a second job
#: while it runs one.  Another scheduler's values are adapted to (:data:`DEATHS_TO_BLAME`,
#: and ``run_jobs`` keeps no more jobs in flight than there are worker threads).
SCHEDULER_CONFIG = MappingProxyType(
    {
        "distributed.scheduler.allowed-failures": 1,
        "distributed.scheduler.worker-saturation": 1.0,
    }
)
WORKER_WAIT_SECONDS = 60.0
TLS_FILES = ("ca.pem", "cert.pem", "key.pem")


def local_workers(spec: str) -> int:
    """The number of workers that ``--cluster local[:N]`` asks for (default: CPUs)."""
    name, _, count = spec.partition(":")
    if name != "local":
        raise UsageError(f"--cluster {spec!r}: only 'local' or 'local:N' is supported")
    if not count:
        return os.cpu_count() or 1
    if not count.isdigit() or int(count) < 1:
        raise UsageError(f"--cluster {spec!r}: N must be a positive whole number")
    return int(count)


def tls_security(folder: Path | str, *, local: bool = False) -> Security:
    """Dask TLS settings from a folder holding ``ca.pem``, ``cert.pem`` and ``key.pem``.

    For a ``LocalCluster`` (``local``), the scheduler and the workers use the same
    certificate as the client.
    """
    folder = Path(folder)
    missing = [name for name in TLS_FILES if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"--security {folder}: missing {', '.join(missing)} (see README)")
    ca, cert, key = (str(folder / name) for name in TLS_FILES)
    roles = ["client"] + (["scheduler", "worker"] if local else [])
    pairs = (("cert", cert), ("key", key))
    options = {f"tls_{role}_{part}": path for role in roles for part, path in pairs}
    return Security(require_encryption=True, tls_ca_file=ca, **options)


class DaskEngine:
    """A Dask client for one ``grade`` run (and the ``LocalCluster`` it started, if any).

    Use :meth:`connect` as a context manager; :meth:`executor` is the ``executor_factory``
    that ``grade`` hands to ``run_jobs``.
    """

    def __init__(self, client, description: str, stack: ExitStack):
        self.client = client
        self.description = description  #: e.g. ``LocalCluster (2 workers)`` or the address
        #: what this run adapted to in the scheduler's settings, for the run's summary
        self.adapted: list[str] = []
        self._stack = stack
        self._plugins: dict[Path, str] = {}  # template folder -> registered plugin name
        #: how long a run waits for a worker, at the start and whenever the cluster has none
        self.worker_wait = WORKER_WAIT_SECONDS

    @classmethod
    def connect(
        cls,
        *,
        scheduler: str | None = None,
        cluster: str | None = None,
        security: Path | str | None = None,
    ) -> DaskEngine:
        """Connect to ``scheduler``, or start the ``LocalCluster`` that ``cluster`` names."""
        if (scheduler is None) == (cluster is None):
            raise UsageError("give either --scheduler ADDRESS or --cluster local[:N]")
        stack = ExitStack()
        try:
            if cluster is not None:
                n = local_workers(cluster)
                sec = tls_security(security, local=True) if security else None
                # The workers fork from the local pool's forkserver, which has imported
                # nbgrader and this module once, instead of each importing them anew.
                forkserver.start(["autograder.grading.cluster_worker"])
                forked = {"distributed.worker.multiprocessing-method": "forkserver"}
                with dask.config.set({**SCHEDULER_CONFIG, **forked}):
                    local = stack.enter_context(
                        LocalCluster(
                            n_workers=n,
                            threads_per_worker=1,
                            processes=True,
                            protocol="tls://" if sec else None,
                            security=sec,
                            host="127.0.0.1",
                            dashboard_address=None,
                            # no dashboard; its HTTP server (health checks) on a free port
                            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                            worker_dashboard_address=None,
                            preload=["autograder.cluster"],
                            silence_logs=logging.ERROR,
                        )
                    )
                client = stack.enter_context(Client(local, security=sec))
                description = f"LocalCluster at {local.scheduler_address}"
            else:
                if scheduler.startswith("tls://") and not security:
                    raise UsageError(f"--scheduler {scheduler}: a tls:// address needs --security")
                sec = tls_security(security) if security else None
                try:
                    client = stack.enter_context(Client(scheduler, security=sec, timeout=30))
                except (OSError, TimeoutError) as exc:
                    raise UsageError(
                        f"cannot reach the Dask scheduler at {scheduler}: {exc}"
                    ) from exc
                description = scheduler
            engine = cls(client, description, stack)
            engine._check_scheduler()
            engine._check_workers()
        except BaseException:
            stack.close()
            raise
        return engine

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Take this run's templates off the cluster and disconnect (stopping a LocalCluster)."""
        for name in self._plugins.values():
            try:
                self.client.unregister_worker_plugin(name)
            except Exception:
                pass
        self._plugins.clear()
        self._stack.close()

    def workers(self) -> int:
        """Worker threads the scheduler has now (one job in flight for each)."""
        return sum(self.client.nthreads().values())

    def executor(self, _limit: int = 0) -> DaskExecutor:
        """The ``executor_factory`` for ``run_jobs`` (the cluster's size sets the limit)."""
        return DaskExecutor(self)

    def ship(self, template: Path) -> str:
        """Give every worker ``template`` (once per template hash); return the plugin's name."""
        name = self._plugins.get(template)
        if name is None:
            name = cluster_worker.plugin_name(template)
            bundle = cluster_worker.pack_template(template)
            plugin = cluster_worker.CourseSetup(cluster_worker.fingerprint(), name, bundle)
            try:
                self.client.register_plugin(plugin, name=name)
            except Exception as exc:  # a worker that grades differently refused and closes
                print(f"warning: {exc}", file=sys.stderr)
            self._plugins[template] = name
        return name

    # --- checks made once, when the run starts ------------------------------------------------

    def _check_scheduler(self) -> None:
        """Read the scheduler's settings, and note how this run adapts to other values."""
        found = self.client.run_on_scheduler(_scheduler_settings)
        failures = found["distributed.scheduler.allowed-failures"]
        saturation = found["distributed.scheduler.worker-saturation"]
        if failures != SCHEDULER_CONFIG["distributed.scheduler.allowed-failures"]:
            self.adapted.append(
                f"the Dask scheduler has allowed-failures={failures}: grade counts the "
                f"workers each job takes down itself, and blames a submission when it has "
                f"taken down {DEATHS_TO_BLAME}"
            )
        if saturation != SCHEDULER_CONFIG["distributed.scheduler.worker-saturation"]:
            self.adapted.append(
                f"the Dask scheduler has worker-saturation={saturation}: grade keeps no "
                "more jobs in flight than the cluster has worker threads"
            )

    def _check_workers(self) -> None:
        try:
            self.client.wait_for_workers(1, timeout=self.worker_wait)
        except TimeoutError as exc:
            raise UsageError(
                f"no Dask worker joined {self.description} within {self.worker_wait:g} s; "
                "start workers with: dask worker ADDRESS --nthreads 1 --preload autograder.cluster"
            ) from exc
        expected = cluster_worker.fingerprint()
        try:
            found = self.client.run(cluster_worker.fingerprint, on_error="return")
        except Exception as exc:
            raise UsageError(f"cannot ask the Dask workers what they run: {exc}") from exc
        problems = {}
        for address, theirs in found.items():
            if isinstance(theirs, BaseException):
                problems[address] = f"cannot run the grader there: {theirs!r}"
            elif cluster_worker.differences(expected, theirs):
                problems[address] = "; ".join(cluster_worker.differences(expected, theirs))
        for address, problem in problems.items():
            print(f"warning: worker {address} will not grade: {problem}", file=sys.stderr)
        if len(problems) == len(found):
            raise UsageError(
                f"no worker of {self.description} can grade as this machine does "
                f"({next(iter(problems.values()))})"
            )


def _scheduler_settings(dask_scheduler) -> dict:
    """What the running scheduler uses for the settings in :data:`SCHEDULER_CONFIG`."""
    return {
        "distributed.scheduler.allowed-failures": dask_scheduler.allowed_failures,
        "distributed.scheduler.worker-saturation": dask_scheduler.WORKER_SATURATION,
    }
