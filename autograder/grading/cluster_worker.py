"""The worker side of grading on Dask: a preload that vets a worker, a plugin that equips it.

Instructors start each worker themselves::

    dask worker tcp://SCHEDULER:8786 --nthreads 1 --preload autograder.cluster

``autograder.cluster`` is this module's :func:`dask_setup` under the name the command
gives.  ``dask_setup`` (the preload) runs as the worker starts.  It refuses to start the worker,
with the reason in the worker's log and a non-zero exit, when the worker cannot grade:
more than one thread (a dying worker would take innocent jobs with it), or a grading
sandbox that does not run on that machine.  Otherwise it imports what grading needs,
as the local pool's workers do, so the first job does not pay for it.

Whether the worker grades *the same way* as the instructor's machine can only be told
once an instructor connects: ``grade`` registers a :class:`CourseSetup` plugin carrying
its own :func:`fingerprint` (Python, nbgrader, numpy, ipykernel, and a digest of the
grader's and the reference package's code) and the assignment's template (config,
source notebook, gradebook template; no shared filesystem is assumed).  Every worker,
those already running and those that join later, checks the fingerprint and refuses
to grade (it closes, nanny included) when it differs; otherwise it unpacks the template
into its own local directory, once per template hash.  :func:`run_job` is the task
that grades one submission on the worker, in scratch directories local to it, once the
client has read every result that worker finished before (so that a job that crashes
its worker cannot take a finished job's result with it), and
:func:`stop_blamed_job` ends a worker that has started a job the run already blamed.

Dask's preload manager logs and ignores an ordinary exception from ``dask_setup``,
so a refusal is :class:`WorkerRefused`, a ``BaseException``, which stops the worker.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import logging
import os
import platform
import shutil
import tarfile
import tempfile
import time
import warnings
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from distributed import Reschedule, get_worker
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import sync

from autograder.grading.forkserver import WARM_IMPORTS
from autograder.sandbox import sandbox_problem

logger = logging.getLogger("autograder.cluster")

#: Installed packages whose versions must match the instructor's (besides Python).
MATCHED_PACKAGES = ("nbgrader", "numpy", "ipykernel")
#: Packages whose source must be byte-identical: the grader and what hidden tests import.
MATCHED_CODE = ("autograder", "specdec_reference")
PLUGIN_PREFIX = "specdec-course-"


#: The Dask event topic on which a worker says that it has started a job (its key, its
#: worker's address).
STARTED_TOPIC = "specdec-job-started"


class WorkerRefused(BaseException):
    """This worker cannot grade; raised from the preload to stop it from starting.

    A ``BaseException`` because Dask only logs an ``Exception`` raised by a preload
    and starts the worker anyway.
    """


def fingerprint() -> dict[str, str]:
    """What must be the same on a worker as on the instructor's machine for equal results."""
    found = {"python": f"{platform.python_implementation()} {platform.python_version()}"}
    for name in MATCHED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    for name in MATCHED_CODE:
        found[f"{name} code"] = _code_digest(name)
    return found


def _code_digest(package: str) -> str:
    """A digest of every ``.py`` file of ``package`` (relative path and content)."""
    module = importlib.import_module(package)
    root = Path(module.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def differences(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    """Each way ``found`` (this worker) differs from ``expected`` (the instructor's)."""
    return [
        f"{key} {found.get(key, 'missing')} here, {value} on the instructor's machine"
        for key, value in expected.items()
        if found.get(key) != value
    ]


def fitness_problem(nthreads: int) -> str | None:
    """Why a worker with ``nthreads`` threads cannot grade on this machine, or None."""
    if nthreads != 1:
        return (
            f"the worker has {nthreads} threads; start it with --nthreads 1 (one job per "
            "worker, so that a submission that kills its worker takes no other job with it)"
        )
    problem = sandbox_problem()
    if problem:
        return f"the grading sandbox cannot run here: {problem}"
    return None


def warm_up() -> None:
    """Import what grading needs now (the modules the local pool's workers preload).

    Python warnings are silenced, as in the local pool's workers: nbgrader's own
    session warnings would fill the worker's log on every job.
    """
    warnings.filterwarnings("ignore")
    for name in WARM_IMPORTS:
        importlib.import_module(name)


def dask_setup(worker) -> None:
    """Dask preload hook: refuse a worker that cannot grade; warm the imports of one that can."""
    problem = fitness_problem(worker.state.nthreads)
    if problem:
        logger.error("specdec-course: this worker refuses to start: %s", problem)
        raise WorkerRefused(f"specdec-course: this worker refuses to start: {problem}")
    warm_up()
    logger.info("specdec-course: worker ready to grade (%s)", fingerprint())


# --- what one instructor's run gives every worker ------------------------------------------


def pack_template(template: Path) -> bytes:
    """The template directory (config, source/, gradebook.db) as tar bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(template.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(template)), recursive=False)
    return buffer.getvalue()


def plugin_name(template: Path) -> str:
    """The plugin name for a template (its folder is named ``<assignment>-<hash>``)."""
    return PLUGIN_PREFIX + template.name


class CourseSetup(WorkerPlugin):
    """Check that a worker grades as the instructor does, and give it one assignment template.

    Parameters
    ----------
    expected : the instructor's :func:`fingerprint`
    name : the plugin's name, also the template's folder on the worker
    template : the template as :func:`pack_template` made it
    """

    def __init__(self, expected: dict[str, str], name: str, template: bytes):
        self.expected = expected
        self.name = name
        self.template = template
        self.problem: str | None = None

    def setup(self, worker) -> None:
        diffs = differences(self.expected, fingerprint())
        if diffs:
            self.problem = "this worker does not grade as the instructor does: " + "; ".join(diffs)
            logger.error("specdec-course: closing this worker: %s", self.problem)
            worker.loop.add_callback(worker.close, nanny=True, reason="specdec-course-mismatch")
            # Worded as grade's own start-up check words it, naming the worker: it may join
            # after that check and be refused here, when the template is shipped.
            raise RuntimeError(f"worker {worker.address} will not grade: {self.problem}")
        self.unpacked(worker)

    def unpacked(self, worker) -> Path:
        """The template's folder on this worker, unpacked from the plugin when missing."""
        target = Path(worker.local_directory) / "specdec-templates" / self.name
        if (target / "gradebook.db").exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="unpack-", dir=target.parent))
        with tarfile.open(fileobj=io.BytesIO(self.template), mode="r") as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12
                tar.extractall(staging, filter="data")
            else:
                tar.extractall(staging)
        try:
            os.rename(staging, target)
        except OSError:  # unpacked meanwhile by another job of this worker
            shutil.rmtree(staging, ignore_errors=True)
        return target


#: The exit status of a worker process ended because it ran a blamed job again.
STOPPED_BLAMED = 70


def stop_blamed_job(keys: list[str], dask_worker) -> bool:
    """End this worker's process at once if it is running one of ``keys``, blamed jobs.

    Run by the instructor's client (``Client.run``) on a worker that started a job the
    run has already blamed: a scheduler that retries on its own handed it over before
    the client's cancel arrived, and a task that runs cannot be cancelled.  The worker
    has one thread, so the job is all it runs; its nanny starts a fresh process.
    Returns False, and does nothing, when none of them runs here.
    """
    running = dask_worker.active_keys.intersection(keys)
    if not running:
        return False
    names = ", ".join(sorted(running))
    logger.error("specdec-course: ending this worker: it runs %s, a blamed job", names)
    logging.shutdown()
    os._exit(STOPPED_BLAMED)


#: The prefix of every grading job's Dask key.
JOB_PREFIX = "grade_job-"
#: How often a job waiting for the results before it to be read looks again, in seconds.
READ_POLL_SECONDS = 0.05
#: The Dask event topic on which a worker says that a job waits for the results it holds
#: to be read before it starts (its key, its worker's address, the unread results' keys).
WAITING_TOPIC = "specdec-job-waiting"


async def _unread_results(worker, key: str) -> list[str]:
    """The grading results, other than ``key``'s, that ``worker`` holds (in its loop)."""
    return [held for held in worker.data if str(held).startswith(JOB_PREFIX) and held != key]


def run_job(fn, job, name: str) -> dict:
    """The Dask task: grade ``job`` with ``fn`` using this worker's copy of its template.

    A worker that refused the run's :class:`CourseSetup` hands the job back to the
    scheduler (``Reschedule``), which gives it to another worker.  The job waits until
    the worker holds no other grading result that the client has not read yet.
    """
    worker = get_worker()
    plugin = worker.plugins.get(name)
    if not isinstance(plugin, CourseSetup) or plugin.problem:
        raise Reschedule()
    key = worker.get_current_task()
    # A job's result waits in its worker's memory until the instructor's client reads it,
    # and a job that takes its worker down takes those results with it.  So a job starts
    # only once every other grading result on this worker has been read (and released):
    # a crash costs its own job and nothing that has finished.
    unread = sync(worker.loop, _unread_results, worker, key)
    if unread:
        worker.log_event(WAITING_TOPIC, {"key": key, "worker": worker.address, "unread": unread})
    while unread:
        time.sleep(READ_POLL_SECONDS)
        unread = sync(worker.loop, _unread_results, worker, key)
    # Tell the instructor's client that this worker runs the job now: if the worker dies,
    # the job was running on it, not merely waiting in its queue.  Said to the scheduler
    # and answered before the job starts: ``worker.log_event`` only queues the message, and
    # a job that takes its worker down at once would take the message with it.
    started = {"key": key, "worker": worker.address}
    sync(worker.loop, worker.scheduler.log_event, topic=STARTED_TOPIC, msg=started)
    scratch = Path(worker.local_directory) / "specdec-jobs"
    scratch.mkdir(exist_ok=True)
    spec = replace(job.spec, template=plugin.unpacked(worker), scratch_root=scratch)
    return fn(replace(job, spec=spec))
