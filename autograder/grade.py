"""``specdec-course grade``: autograde a class's submissions, in parallel and in isolation.

A run is a short sequence of steps: :func:`open_assignment`; :func:`collect_submissions`
(:mod:`autograder.intake`: a folder, a zip, an LMS download, or the course's own
``submitted/`` in place); :func:`~autograder.grading.plan.plan`, which decides for each
student whether the earlier result is kept, or the submission is recorded as it is, or
graded; :meth:`Recorder.settle`, which adds to nbgrader's ``submitted/`` layout what is
not there yet (never deleting anything); :meth:`Engine.run`, one
:class:`~autograder.grading.job.Job` per graded submission on the worker pool
(:mod:`autograder.grading.pool`) or a Dask cluster; :meth:`Recorder.record` for each
result; :meth:`Recorder.finish`, the CSVs and the summary.

The parent process is the only writer of the course's gradebook, ``autograded/``,
``feedback/`` and ``reports/<assignment>/`` (:mod:`autograder.grading.record`).  Each
finished submission is recorded at once (``results/<student>.json``), so a run that is
killed midway loses nothing: running it again grades only what is missing.  When the
course cannot be written (its gradebook stays locked, its disk is full), the run stops
with :class:`~autograder.grading.record.RecordError`, keeping what it recorded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traitlets.config import Config

from autograder import sandbox as sandboxing
from autograder.course import UsageError, find_course, load_config, notebooks
from autograder.grading import forkserver
from autograder.grading.job import Job, grade_job
from autograder.grading.plan import Action, Decision, Plan, plan
from autograder.grading.pool import ExecutorFactory, local_executor, run_jobs
from autograder.grading.processes import kill_orphans
from autograder.grading.record import (
    GRADEBOOK_WAIT,
    RecordError,
    load_result,
    load_results,
    record,
    stop_when_disk_full,
    warn,
    write_csvs,
    written_by_grader,
)
from autograder.grading.results import GradeResult, Status, SubmissionResult
from autograder.grading.students import identified
from autograder.grading.template import build_template, sync_gradebook, template_test_cells
from autograder.intake.collect import Collected, Submission, collect_class
from autograder.intake.roster import read_roster
from autograder.intake.submitted import copy_exchange_files, store_submitted
from autograder.render.feedback_page import write_pages


def grade(
    assignment: str,
    *,
    submissions: Path | str | None = None,
    course: Path | str | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    notebook_timeout: float = 300.0,
    sandbox: bool = True,
    fork: bool = True,
    force: bool = False,
    feedback: bool = True,
    executor_factory: ExecutorFactory = local_executor,
    job_fn: Callable[[Job], SubmissionResult] = grade_job,
    progress: Callable[[str, int, int, int], None] | None = None,
    keep_scratch: bool = False,
    lms: str = "auto",
    roster: Path | str | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    security: Path | str | None = None,
    hard_timeout: float | None = None,
    gradebook_wait: float = GRADEBOOK_WAIT,
    notify: Callable[[str], None] = warn,
) -> GradeResult:
    """Autograde every submission under ``submissions`` for ``assignment``.

    Parameters
    ----------
    assignment : name of a folder in ``source/``
    submissions : an LMS download (zip or folder), a folder of ``<student>.ipynb`` or
        ``<student>/<any>.ipynb``, or a zip of either; None grades the course's own
        ``submitted/`` in place (nothing there is written)
    course : nbgrader course root (default: the current directory)
    workers : worker processes (default: the number of CPUs)
    timeout : seconds per cell (default: the course's ``Execute.timeout``)
    notebook_timeout : seconds per notebook
    sandbox : run kernels in the bubblewrap sandbox (refuses if it cannot run here)
    fork : fork each sandboxed kernel from the worker's warm parent; False starts each one
        fresh (so does a worker whose warm parent cannot start, and the summary says why)
    force : regrade submissions whose result is already recorded and unchanged
    feedback : write each student's feedback page as their result is recorded
    executor_factory : ``workers -> concurrent.futures.Executor`` that runs ``job_fn``
        (default: local worker processes; a cluster's executor plugs in here)
    job_fn : grades one :class:`Job` in a worker (default :func:`grade_job`)
    progress : called as ``progress(student, n, total, workers)`` after each recorded result
    lms : the download's layout, ``auto`` to recognise it (see
        :data:`autograder.intake.detect.LAYOUTS`)
    roster : a class roster CSV exported from the LMS: names and ids, and the students
        who sent nothing (recorded as ``missing``)
    scheduler : grade on the Dask cluster of this scheduler (``tcp://`` or ``tls://``)
    cluster : ``"local"`` or ``"local:N"``: grade on a Dask ``LocalCluster`` of N one-thread
        worker processes started for this run (default N: the number of CPUs)
    security : folder with ``ca.pem``, ``cert.pem``, ``key.pem``: Dask's TLS for the above
    hard_timeout : seconds after which a job's worker is killed (default: the notebook's
        time limit, twice the cell limit, and two minutes)
    gradebook_wait : seconds to wait for a gradebook that another program keeps locked
    notify : called with each warning for the instructor (default: printed on stderr)

    Raises
    ------
    UsageError
        For the instructor's errors only; a submission's problem never raises.
    RecordError
        When the course cannot be written (the gradebook stayed locked past
        ``gradebook_wait``, the disk is full).  What was recorded is kept; the same
        call again finishes the batch.
    """
    work = open_assignment(assignment, course)
    # The instructor's own errors (no such folder, nothing in it) come before any check of
    # the machine, so that they are reported as what they are.
    collected = collect_submissions(work, submissions, lms, roster)
    swept = kill_orphans()  # what a grader killed outright (kill -9) may have left running
    on_dask = bool(scheduler or cluster)
    if executor_factory is local_executor and not on_dask:
        forkserver.start()  # its imports run while this process sets up
    timeout = work.cell_timeout if timeout is None else timeout
    # The sandbox must run where the kernels run: here, or on a scheduler's workers (their
    # preload checks it there).
    limits = _sandbox_limits(check=not scheduler) if sandbox else None
    out = summary(work, collected, in_place=submissions is None, workers=workers, swept=swept)
    hard = hard_timeout or notebook_timeout + 2 * timeout + 120
    subs = collected.submissions
    with ExitStack() as stack:
        run_root = Path(tempfile.mkdtemp(prefix="specdec-grade-"))
        stack.callback(shutil.rmtree, run_root, ignore_errors=True)
        # first, so that a wrong address or option fails at once
        engine = stack.enter_context(
            open_engine(executor_factory, job_fn, hard, out.workers, scheduler, cluster, security)
        )
        out.engine, out.workers = engine.description, engine.workers
        template, template_hash = build_template(work.root, assignment)
        sync_gradebook(work.root, assignment, template_hash)
        recorder = Recorder.open(work, out, template, gradebook_wait, notify, feedback)
        job = Job(
            assignment=assignment,
            student="",
            notebook=work.notebook,
            data=b"",
            template=template,
            scratch_root=run_root,
            cell_timeout=timeout,
            notebook_timeout=notebook_timeout,
            sandbox=sandbox,
            limits=limits,
            keep_scratch=keep_scratch,
            fork=fork,
        )
        decided = plan(subs, recorder.recorded(subs), job, template_hash, force=force)
        for decision in decided.decisions:
            recorder.settle(decision)
        recorder.record_all(engine.run(decided.jobs), decided, engine, progress)
    return recorder.finish(decided)


@dataclass(frozen=True)
class Assignment:
    """The assignment a run grades, in its course."""

    name: str
    root: Path  #: the course root
    config: Config  #: the course's nbgrader configuration
    notebook: str  #: the assignment's one notebook, without ``.ipynb``

    @property
    def cell_timeout(self) -> float:
        """Seconds per cell that the course sets (``Execute.timeout``; 30 when unset)."""
        return float(self.config.Execute.get("timeout", 30) or 30)


def open_assignment(name: str, course: Path | str | None) -> Assignment:
    """The assignment ``name`` of the course at ``course`` (UsageError: not one notebook)."""
    root = find_course(course)
    config = load_config(root)
    names = notebooks(root, name)
    if len(names) != 1:
        raise UsageError(f"assignment {name!r} has {len(names)} notebooks; one is supported")
    return Assignment(name, root, config, names[0])


def collect_submissions(
    work: Assignment,
    submissions: Path | str | None,
    lms: str,
    roster: Path | str | None,
) -> Collected:
    """The class: from ``submissions``, or in place from the course's ``submitted/``."""
    class_roster = read_roster(roster) if roster is not None else None
    if submissions is not None:
        return collect_class(
            submissions,
            notebook=work.notebook,
            assignment=work.name,
            lms=lms,
            roster=class_roster,
        )
    folder = work.root / "submitted"
    if not folder.is_dir():
        raise UsageError(
            f"no --submissions given and {folder} does not exist (run `nbgrader collect "
            f"{work.name}` first, or pass --submissions PATH)"
        )
    return collect_class(
        folder,
        notebook=work.notebook,
        assignment=work.name,
        lms="nbgrader",
        roster=class_roster,
        select=lambda parts: len(parts) < 2 or parts[1] == work.name,
    )


def summary(
    work: Assignment, collected: Collected, *, in_place: bool, workers: int | None, swept: int
) -> GradeResult:
    """What the run did, so far: what the intake made of the download."""
    subs = collected.submissions
    return GradeResult(
        work.name,
        work.root,
        layout=collected.layout,
        in_place=in_place,
        ignored=collected.ignored + [f"{s.student}: {i}" for s in subs for i in s.ignored],
        warnings=list(collected.warnings),
        workers=workers or os.cpu_count() or 1,
        swept=swept,
    )


@dataclass(frozen=True)
class Engine:
    """Where the jobs run: the local worker pool, or a Dask cluster (``cluster``)."""

    executor_factory: ExecutorFactory
    job_fn: Callable[[Job], SubmissionResult]
    hard_timeout: float  #: seconds after which a job's worker is killed
    workers: int  #: the workers when the run started
    description: str = "local pool"
    cluster: Any = None  #: the run's :class:`~autograder.grading.cluster_pool.DaskEngine`

    def run(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, SubmissionResult]]:
        """``(job, result)`` for every job as it finishes (close it to stop the workers)."""
        return run_jobs(
            jobs,
            workers=self.workers,
            hard_timeout=self.hard_timeout,
            executor_factory=self.executor_factory,
            fn=self.job_fn,
        )

    def now(self) -> int:
        """The workers now (a cluster's come and go)."""
        return self.cluster.workers() if self.cluster is not None else self.workers


@contextlib.contextmanager
def open_engine(
    executor_factory: ExecutorFactory,
    job_fn: Callable[[Job], SubmissionResult],
    hard_timeout: float,
    workers: int,
    scheduler: str | None,
    cluster: str | None,
    security: Path | str | None,
) -> Iterator[Engine]:
    """The local pool of ``workers``, or the Dask cluster asked for, connected until the end."""
    if not (scheduler or cluster):
        yield Engine(executor_factory, job_fn, hard_timeout, workers)
        return
    with _dask_engine(scheduler, cluster, security) as dask:
        yield Engine(dask.executor, job_fn, hard_timeout, dask.workers(), dask.description, dask)


@dataclass
class Recorder:
    """Records one run's results in the course: key, identity, gradebook, JSON, feedback."""

    work: Assignment
    out: GradeResult
    test_cells: dict[str, float]  #: grade id -> points, of the assignment's test cells
    gradebook_wait: float
    notify: Callable[[str], None]
    feedback: bool

    @classmethod
    def open(
        cls,
        work: Assignment,
        out: GradeResult,
        template: Path,
        gradebook_wait: float,
        notify: Callable[[str], None],
        feedback: bool,
    ) -> Recorder:
        """The recorder of a run graded from ``template``, its results folder made."""
        cells = template_test_cells(template, work.name, work.notebook)
        recorder = cls(work, out, cells, gradebook_wait, notify, feedback)
        recorder.results_dir.mkdir(parents=True, exist_ok=True)
        return recorder

    @property
    def results_dir(self) -> Path:
        return self.out.reports / "results"

    def recorded(self, subs: Sequence[Submission]) -> dict[str, SubmissionResult | None]:
        """Each student's result that an earlier run recorded (None: there is none)."""
        return {s.student: load_result(self.results_dir / f"{s.student}.json") for s in subs}

    def settle(self, decision: Decision) -> None:
        """Before the workers start: store what is new in ``submitted/``; keep or record
        what needs no worker."""
        sub = decision.sub
        if decision.action is Action.KEEP:
            if decision.rerecord:
                self.save(decision.result)
            self.out.reused.append(sub.student)
            return
        if not self.out.in_place and not sub.missing:
            earlier, work = decision.earlier, self.work
            ours = written_by_grader(earlier, work.notebook) if earlier else {}
            with stop_when_disk_full():
                sub.flags.extend(store_submitted(work.root, work.name, work.notebook, sub, ours))
        if decision.action is Action.RECORD:
            self.record(decision, decision.result)

    def record(self, decision: Decision, result: SubmissionResult) -> None:
        """Record a result of this run under its key, saying who its student is."""
        result = identified(result, decision.sub)
        result.key, result.flags = decision.key, decision.sub.flags + result.flags
        self.save(result)
        self.out.graded_now.append(result.student)

    def save(self, result: SubmissionResult) -> None:
        """Record ``result`` (waiting for a locked gradebook; RecordError if it cannot)."""
        work = self.work
        record(
            work.root,
            work.config,
            work.notebook,
            self.test_cells,
            result,
            self.results_dir,
            gradebook_wait=self.gradebook_wait,
            notify=self.notify,
        )

    def record_all(
        self,
        finished: Iterator[tuple[Job, SubmissionResult]],
        decided: Plan,
        engine: Engine,
        progress: Callable[[str, int, int, int], None] | None,
    ) -> None:
        """Record each worker's result as it comes, with its feedback page."""
        graded = {d.student: d for d in decided.of(Action.GRADE)}
        # closing(): a RecordError stops the workers at once, not after their jobs.
        with contextlib.closing(finished):
            for n, (job, result) in enumerate(finished, start=1):
                self.record(graded[job.student], result)
                if self.feedback:  # written while the workers grade the next submissions
                    _write_feedback(self.work.name, self.work.root, job.student)
                if progress:
                    progress(job.student, n, len(graded), engine.now())

    def finish(self, decided: Plan) -> GradeResult:
        """The CSVs of every student graded so far, and the pages of those recorded as
        they were (invalid ones); the run's summary."""
        out = self.out
        out.results = load_results(self.results_dir)
        with stop_when_disk_full():
            write_csvs(out.reports, out.results)
        if self.feedback:
            for decision in decided.of(Action.RECORD):
                if decision.result.status is not Status.MISSING:
                    _write_feedback(self.work.name, self.work.root, decision.student)
        return out


def _dask_engine(scheduler: str | None, cluster: str | None, security: Path | str | None):
    """Connect to the Dask cluster asked for (imported here: an optional, slow import)."""
    # distributed takes about a second to import; only --scheduler/--cluster runs need it.
    from autograder.grading.cluster_pool import DaskEngine

    return DaskEngine.connect(scheduler=scheduler, cluster=cluster, security=security)


def _sandbox_limits(check: bool = True) -> sandboxing.Limits:
    """The sandbox's default limits, once it is known to run here (else a UsageError)."""
    problem = sandboxing.sandbox_problem() if check else None
    if problem:
        raise UsageError(
            f"the grading sandbox cannot run here: {problem}\n"
            "Install bubblewrap (apt-get install bubblewrap), or pass --no-sandbox to run "
            "learner code with your own rights (only for code you trust)."
        )
    return sandboxing.Limits()


def _write_feedback(assignment: str, course: Path, student: str) -> None:
    """Write one student's feedback page; a full disk stops the run, other errors warn."""
    try:
        with stop_when_disk_full():
            write_pages(course, assignment, student=student)
            copy_exchange_files(
                course, assignment, student
            )  # what `nbgrader release_feedback` reads
    except RecordError:
        raise
    except Exception as exc:  # a page that cannot be written costs no grade
        print(f"warning: no feedback page for {student}: {exc}", file=sys.stderr)
