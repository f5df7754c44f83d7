"""Grade one submission in isolation: its own scratch course, its own gradebook.

``grade_job`` runs in a worker process.  It reads the submission as a notebook (an
unreadable one is ``invalid`` at once), copies the assignment's template (the
course config, the source notebooks and a gradebook that knows the assignment) into
a fresh scratch directory, puts the submission in nbgrader's ``submitted/`` layout,
runs nbgrader's own ``Autograde`` converter through ``NbGraderAPI`` with the guarded
executor (and the sandbox), then reads the executed notebook back and returns a
:class:`~autograder.grading.results.SubmissionResult`.  Only the parent process writes
the course's gradebook, feedback and reports.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat
from nbgrader.converters import Autograde
from traitlets.config import Config

from autograder import integrity, sandbox
from autograder.course import gradebook, load_config, nbgrader_api
from autograder.demonstrations import source_skipped_ids
from autograder.grading.processes import (
    DEFAULT_MEMORY_BYTES,
    JOB_MARKER,
    MemoryWatch,
    job_marker,
    kill_marked_processes,
)
from autograder.grading.results import NOT_RUN_PREFIX, CellResult, Status, Stop, SubmissionResult
from autograder.grading.scoring import failed_to_grade, score_cells, status_of
from autograder.grading.scratch_db import scratch_url
from autograder.grading.spare import SpareKernels
from autograder.grading.template import template_imports, template_test_cells
from autograder.intake.validate import readable_notebook
from autograder.preprocessors import CheckCellMetadata, CollectProbes, GuardedExecute, InsertProbes

#: The student id inside a job's scratch course.  The real id stays with the parent, and
#: the kernel's working directory is known before the job arrives (see ``spare``).
SCRATCH_STUDENT = "student"


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to grade one submission (picklable)."""

    assignment: str
    student: str
    notebook: str  #: notebook name without .ipynb
    data: bytes  #: the submitted file's bytes, as the student sent them
    template: Path  #: scratch course template: config, source/, gradebook.db
    scratch_root: Path  #: where the job's scratch directory is created
    cell_timeout: float = 30.0
    notebook_timeout: float = 300.0
    sandbox: bool = True
    limits: sandbox.Limits | None = None  #: None: the defaults
    keep_scratch: bool = False
    #: Fork sandboxed kernels from the worker's warm parent (False: start each one fresh).
    fork: bool = True
    #: Run the source's demonstration cells too (else skipped: ``autograder.demonstrations``).
    run_demos: bool = False


#: This worker process's spare kernel and warm parents.  A process pool calls a function
#: per job, so what outlives one job (the kernel started for the next, the warm parent
#: kernels are forked from) lives with the process: this one holder, passed as an
#: argument from here on (to ``GuardedExecute`` and the kernel managers through config).
WORKER_SPARES = SpareKernels()


def grade_job(job: Job, spares: SpareKernels = WORKER_SPARES) -> SubmissionResult:
    """Grade ``job`` and return its result (never raises).

    ``spares`` holds the kernel started ahead for this job, if any, and receives the one
    started for the next (sandboxed jobs only).
    """
    data, problem = readable_notebook(job.data)
    if data is None:  # nothing to run: the spares stay for the next job
        return SubmissionResult(job.student, job.assignment, Status.INVALID, problem or "")
    job = replace(job, data=data)
    start = time.monotonic()
    claimed = spares.claim(_spare_key(job))
    job_dir = (
        claimed.job_dir if claimed else Path(tempfile.mkdtemp(prefix="job-", dir=job.scratch_root))
    )
    marker = job_marker(job_dir)
    result = SubmissionResult(job.student, job.assignment)
    memory_limit = job.limits.memory_bytes if job.sandbox and job.limits else None
    watch = MemoryWatch(
        marker, memory_limit or DEFAULT_MEMORY_BYTES, job_dir=job_dir if job.sandbox else None
    )
    watch.start()
    try:
        _run(job, job_dir, claimed.config if claimed else None, marker, result, spares)
    except Exception:  # a bug or an nbgrader failure: this submission only
        result.status = Status.FAILED
        result.reason = "the grader failed on this submission: " + traceback.format_exc(limit=3)
    finally:
        spares.discard_claimed()  # prepared for this job but not used (it failed early)
        watch.stop()
        if watch.fired:
            _memory_stopped(result, watch.reason)
        killed = kill_marked_processes(marker)
        if job.sandbox:
            killed += sandbox.kill_leftovers(job_dir)  # also what cleared its environment
        if killed:
            result.flags.append(f"left {killed} process(es) running after grading (killed)")
        if not job.keep_scratch:
            shutil.rmtree(job_dir, ignore_errors=True)
    result.seconds = round(time.monotonic() - start, 3)
    return result


def _memory_stopped(result: SubmissionResult, reason: str) -> None:
    """The memory watch killed the kernel: say so on the submission and the cells it cost."""
    result.status = Status.FAILED
    result.reason = reason
    result.flags.append("memory-limit")
    for cell in result.cells:
        if cell.stop in (Stop.NOT_RUN, Stop.NOTEBOOK_TIMEOUT):
            cell.message = NOT_RUN_PREFIX + reason
        elif cell.stop is Stop.KERNEL_DIED:
            cell.message = f"KernelDied: {reason}"


def _run(
    job: Job,
    job_dir: Path,
    config: Config | None,
    marker: str,
    result: SubmissionResult,
    spares: SpareKernels,
) -> None:
    """Grade in ``job_dir``, with ``config`` when a spare kernel was prepared with it."""
    course = job_dir / "course"
    if not (course / "gradebook.db").exists():  # else prepared along with a spare kernel
        shutil.copytree(job.template, course, dirs_exist_ok=True)
    submitted = course / "submitted" / SCRATCH_STUDENT / job.assignment
    submitted.mkdir(parents=True)
    (submitted / f"{job.notebook}.ipynb").write_bytes(job.data)
    if config is None:
        config, _ = _configure(job, job_dir, spares)

    os.environ[JOB_MARKER] = marker
    try:
        outcome = nbgrader_api(config).autograde(
            job.assignment, SCRATCH_STUDENT, force=True, create=True
        )
    finally:
        os.environ.pop(JOB_MARKER, None)
    if job.sandbox:
        result.kernel = _kernel_start(config)
        _start_spare(job, spares)  # boots while this job is scored and the next one is set up

    autograded_path = _autograded_dir(job_dir, job.assignment) / f"{job.notebook}.ipynb"
    test_cells = template_test_cells(job.template, job.assignment, job.notebook)
    if not outcome.get("success") or not autograded_path.exists():
        log = (outcome.get("log") or "") + (outcome.get("error") or "")
        result.status, result.reason = failed_to_grade(log)
        result.cells = [
            CellResult.not_graded(gid, pts, result.reason) for gid, pts in test_cells.items()
        ]
        result.total()
        return

    executed = nbformat.read(autograded_path, as_version=4)
    cells = score_cells(executed, test_cells, job.cell_timeout)
    nbgrader_scores = _nbgrader_scores(config, job)
    for cell in cells:
        theirs = nbgrader_scores.get(cell.grade_id)
        if theirs is not None and theirs > cell.score:
            cell.flags.append(f"nbgrader would give {theirs:g} (output read as partial credit)")
    result.cells = cells
    result.status, result.reason = status_of(cells)
    result.flags += integrity.static_flags(nbformat.reads(job.data.decode("utf-8"), 4))
    result.flags += integrity.runtime_flags(executed)
    by_cell = integrity.cell_flags(executed)
    for cell in result.cells:
        cell.flags += [f for f in by_cell.get(cell.grade_id, []) if f not in cell.flags]
    result.total()
    result.autograded = nbformat.writes(executed)


def _configure(job: Job, job_dir: Path, spares: SpareKernels) -> tuple[Config, list[type]]:
    """The nbgrader config and autograde preprocessors for ``job`` in ``job_dir``."""
    course = job_dir / "course"
    config = load_config(course)
    config.CourseDirectory.db_url = scratch_url(course / "gradebook.db")
    config.Execute.timeout = int(job.cell_timeout) or 1
    config.GuardedExecute.timeout = int(job.cell_timeout) or 1
    config.GuardedExecute.notebook_timeout = float(job.notebook_timeout)
    # Every test cell has run by then: kill the kernel rather than wait for it to exit
    # (and for any atexit hook a submission registered).
    config.GuardedExecute.shutdown_kernel = "immediate"
    # nbclient waits only 4 s (iopub_timeout) for a cell's output after its reply and then
    # calls it a timeout: on a loaded machine that fails passing cells.  Allow the cell limit.
    config.GuardedExecute.iopub_timeout = max(4, int(job.cell_timeout))
    config.GuardedExecute.spares = spares  # a kernel started ahead, which it may adopt
    # decided from the template's source notebook, never from the submission
    config.GuardedExecute.skip_cells = (
        []
        if job.run_demos
        else sorted(
            source_skipped_ids(job.template / "source" / job.assignment / f"{job.notebook}.ipynb")
        )
    )
    # Only an error fails a test cell here: stderr output (a warning) does not, and a
    # number a test cell happens to display is not read as partial credit.
    ours = {"Execute": GuardedExecute, "CheckCellMetadata": CheckCellMetadata}
    preprocessors = [ours.get(p.__name__, p) for p in _default_preprocessors("autograde")]
    config.Autograde.sanitize_preprocessors = [
        ours.get(p.__name__, p) for p in _default_preprocessors("sanitize")
    ]
    preprocessors = _insert_integrity(preprocessors, [InsertProbes, CollectProbes])
    if job.sandbox:
        sandbox.configure(
            config,
            job_dir=job_dir,
            limits=job.limits or sandbox.Limits(),
            warm=spares.warm if job.fork else None,
            preload=sandbox.preload_for(
                template_imports(job.template, job.assignment, job.notebook)
            ),
        )
        preprocessors = [sandbox.executor(p) for p in preprocessors]
    config.Autograde.autograde_preprocessors = preprocessors
    return config, preprocessors


def _kernel_start(config: Config) -> str:
    """How the job's kernel started: ``forked``, or ``fresh`` (and why not forked)."""
    section = config.SandboxedKernelManager
    kernels = section.kernels if "kernels" in section else None
    km = kernels.active() if kernels is not None else None
    if km is None:
        return ""
    return km.kernel_start


def _autograded_dir(job_dir: Path, assignment: str) -> Path:
    """Where nbgrader writes, and executes, the job's notebook in its scratch course."""
    return job_dir / "course" / "autograded" / SCRATCH_STUDENT / assignment


def _spare_key(job: Job) -> Job:
    """What two jobs share when one's spare kernel can serve the other: all but the learner."""
    return replace(job, student="", data=b"", keep_scratch=False)


def _start_spare(job: Job, spares: SpareKernels) -> None:
    """Start the kernel for this worker's next job of the same run (see ``spare``)."""
    job_dir = None
    try:
        kernel_name = _kernel_name(job.template / "source" / job.assignment, job.notebook)
        if not kernel_name:
            return
        job_dir = Path(tempfile.mkdtemp(prefix="job-", dir=job.scratch_root))
        shutil.copytree(job.template, job_dir / "course")
        cwd = _autograded_dir(job_dir, job.assignment)  # where nbgrader will run the notebook
        cwd.mkdir(parents=True)
        config, preprocessors = _configure(job, job_dir, spares)
        executor_cls = next(p for p in preprocessors if issubclass(p, GuardedExecute))
        marker = job_marker(job_dir)
        spares.start(
            key=_spare_key(job),
            job_dir=job_dir,
            marker=marker,
            executor_cls=executor_cls,
            config=config,
            kernel_name=kernel_name,
            cwd=cwd,
            # as nbgrader's autograde pass sets it, with the next job's marker
            env=dict(os.environ, **{JOB_MARKER: marker, "NBGRADER_EXECUTION": "autograde"}),
        )
    except Exception:  # no spare: the next job starts its own kernel
        spares.discard()
        if job_dir is not None:
            shutil.rmtree(job_dir, ignore_errors=True)


@functools.cache
def _kernel_name(source_dir: Path, notebook: str) -> str | None:
    """The kernel nbgrader runs the assignment with: its source notebook's kernelspec."""
    nb = nbformat.read(source_dir / f"{notebook}.ipynb", as_version=4)
    return nb.metadata.get("kernelspec", {}).get("name")


def _default_preprocessors(step: str) -> list[type]:
    """nbgrader's default preprocessors of one step of ``Autograde``: sanitize, autograde."""
    return list(Autograde.class_traits()[f"{step}_preprocessors"].default())


def _insert_integrity(preprocessors: list[type], extra: list[type]) -> list[type]:
    """Put integrity preprocessors around execution: ``before`` ones first, others after."""
    before = [p for p in extra if getattr(p, "before_execute", False)]
    after = [p for p in extra if not getattr(p, "before_execute", False)]
    i = preprocessors.index(GuardedExecute)
    return preprocessors[:i] + before + [GuardedExecute] + after + preprocessors[i + 1 :]


def _nbgrader_scores(config: Config, job: Job) -> dict[str, float]:
    """The scores nbgrader itself recorded in the job's scratch gradebook."""
    try:
        with gradebook(config.CourseDirectory.db_url, config) as gb:
            sub = gb.find_submission_notebook(job.notebook, job.assignment, SCRATCH_STUDENT)
            return {g.name: float(g.auto_score) for g in sub.grades if g.auto_score is not None}
    except Exception:
        return {}
