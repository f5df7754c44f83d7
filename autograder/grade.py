"""``specdec-course grade``: autograde a class's submissions, in parallel and in isolation.

:func:`grade` is a sequence of named steps, all in the parent process:

1. :func:`open_assignment`: the course, its configuration, the assignment's notebook;
2. ``_collect``: the submissions (:mod:`autograder.intake`: a folder, a zip, an LMS
   download, or the course's own ``submitted/`` in place), the instructor's errors first;
3. :func:`~autograder.grading.plan.plan`: one decision per student (keep the earlier
   result, record it as it is, grade it), and
   :func:`~autograder.record.recorder.store_all_submitted`: what is not in nbgrader's
   ``submitted/`` yet is added there (never deleting anything);
4. the engine (``_Engine``) runs one :class:`~autograder.grading.job.Job` per graded
   submission: the local worker pool (:mod:`autograder.grading.pool`) or a Dask cluster;
5. the record step (:class:`~autograder.record.recorder.Recorder`, the only writer
   of the course's gradebook, ``autograded/`` and ``reports/<assignment>/``): each
   result, as it arrives, gets its key and who the student is, and is staged
   (``autograded/``, ``results/<student>.json`` pending); the staged results go into the
   gradebook a batch per commit, and then each gets its feedback page;
6. ``_finish``: every result with its scores read back from the gradebook (a grader's
   manual scores win, :mod:`autograder.grading.gradebook_grades`), ``grades.csv``,
   ``cells.csv`` and the run's summary.

A run that is killed midway loses nothing: running it again grades only what is
missing.  When the course cannot be written (its gradebook stays locked, its disk is
full), the run stops with :class:`~autograder.grading.gradebook.RecordError`, keeping what
it recorded.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traitlets.config import Config

from autograder import sandbox as sandboxing
from autograder.course import UsageError, find_course, load_config, notebooks
from autograder.defaults import GRADEBOOK_WAIT, LMS, NOTEBOOK_TIMEOUT
from autograder.grading import forkserver
from autograder.grading.gradebook import stop_when_disk_full, warn
from autograder.grading.gradebook_grades import final_results
from autograder.grading.job import Job, RunSpec, default_workers, grade_job
from autograder.grading.plan import Action, plan
from autograder.grading.pool import ExecutorFactory, local_executor, run_jobs
from autograder.grading.processes import kill_orphans
from autograder.grading.results import GradeResult, SubmissionResult
from autograder.grading.template import build_template, sync_gradebook
from autograder.intake.collect import Collected, collect_class
from autograder.intake.roster import read_roster
from autograder.record.recorder import Recorder, store_all_submitted
from autograder.record.store import load_results, write_csvs


@dataclass(frozen=True)
class Harness:
    """What a test or a benchmark changes in a ``grade`` run; the command line never does."""

    feedback: bool = True  #: write each student's feedback page as their result is recorded
    #: ``workers -> concurrent.futures.Executor`` that runs ``job_fn`` (default: local
    #: worker processes; a cluster's executor plugs in instead)
    executor_factory: ExecutorFactory = local_executor
    job_fn: Callable[[Job], SubmissionResult] = grade_job  #: grades one job in a worker
    keep_scratch: bool = False  #: keep each job's scratch folder
    #: seconds after which a job's worker is killed (default: :attr:`RunSpec.deadline`)
    hard_timeout: float | None = None
    notify: Callable[[str], None] = warn  #: each warning for the instructor (on stderr)


def grade(
    assignment: str,
    *,
    submissions: Path | str | None = None,
    course: Path | str | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    sandbox: bool = True,
    fork: bool = True,
    force: bool = False,
    progress: Callable[[str, int, int, int], None] | None = None,
    lms: str = LMS,
    roster: Path | str | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    security: Path | str | None = None,
    gradebook_wait: float = GRADEBOOK_WAIT,
    harness: Harness = Harness(),
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
    progress : called as ``progress(student, n, total, workers)`` after each recorded result
    lms : the download's layout, ``auto`` to recognise it (see
        :data:`autograder.intake.detect.LAYOUTS`)
    roster : a class roster CSV exported from the LMS: names and ids, and the students
        who sent nothing (recorded as ``missing``)
    scheduler : grade on the Dask cluster of this scheduler (``tcp://`` or ``tls://``)
    cluster : ``"local"`` or ``"local:N"``: grade on a Dask ``LocalCluster`` of N one-thread
        worker processes started for this run (default N: the number of CPUs)
    security : folder with ``ca.pem``, ``cert.pem``, ``key.pem``: Dask's TLS for the above
    gradebook_wait : seconds to wait for a gradebook that another program keeps locked
    harness : what tests and benchmarks change in a run (:class:`Harness`)

    Raises
    ------
    UsageError
        For the instructor's errors only; a submission's problem never raises.
    RecordError
        When the course cannot be written (the gradebook stayed locked past
        ``gradebook_wait``, the disk is full).  What was recorded is kept; the same
        call again finishes the batch.
    """
    root, config, notebook = open_assignment(course, assignment)
    # The instructor's own errors (no such folder, nothing in it) come before any check of
    # the machine, so that they are reported as what they are.
    collected = _collect(root, assignment, notebook, submissions, lms, roster)
    # kill_orphans: what a grader killed outright (kill -9) may have left running
    out = _run_result(root, assignment, collected, submissions is None, workers, kill_orphans())
    if harness.executor_factory is local_executor and not (scheduler or cluster):
        forkserver.start()  # its imports run while this process sets up
    if timeout is None:
        timeout = float(config.Execute.get("timeout", 30) or 30)
    # The sandbox must run where the kernels run: here, or on a scheduler's workers (their
    # preload checks it there).
    limits = _sandbox_limits(check=not scheduler) if sandbox else None
    with ExitStack() as stack:
        run_root = Path(tempfile.mkdtemp(prefix="specdec-grade-"))
        stack.callback(shutil.rmtree, run_root, ignore_errors=True)
        engine = _Engine.start(stack, out, harness.executor_factory, scheduler, cluster, security)
        template, template_hash = build_template(root, assignment)
        sync_gradebook(root, assignment, template_hash)
        spec = RunSpec(
            assignment,
            notebook,
            template,
            run_root,
            cell_timeout=timeout,
            notebook_timeout=notebook_timeout,
            sandbox=sandbox,
            limits=limits,
            fork=fork,
            keep_scratch=harness.keep_scratch,
            workers=out.workers,
            hard_timeout=harness.hard_timeout,
        )
        recorder = Recorder.open(
            stack, out, config, notebook, template, harness.feedback, gradebook_wait, harness.notify
        )
        decided = plan(
            collected.submissions, recorder.earlier(collected), spec, template_hash, force=force
        )
        if not out.in_place:
            store_all_submitted(root, assignment, notebook, decided)
        for decision in decided.decisions:  # what needs no worker, before the workers start
            if decision.action is not Action.GRADE:
                recorder.record(decision)
        recorder.commit()
        graded = {d.student: d for d in decided.of(Action.GRADE)}
        finished = engine.run(decided.jobs, harness.job_fn, spec.deadline)
        recorded: list[str] = []
        with contextlib.closing(finished):  # a RecordError stops the workers at once
            for done, result in finished:
                committed = recorder.record(graded[done.student], result)
                _report(progress, committed, recorded, len(graded), engine)
            _report(progress, recorder.commit(), recorded, len(graded), engine)
    return _finish(out, config, gradebook_wait, harness.notify)


def open_assignment(course: Path | str | None, assignment: str) -> tuple[Path, Config, str]:
    """The course root, its configuration, and the name of the assignment's one notebook."""
    root = find_course(course)
    config = load_config(root)
    names = notebooks(root, assignment)
    if len(names) != 1:
        raise UsageError(f"assignment {assignment!r} has {len(names)} notebooks; one is supported")
    return root, config, names[0]


def _report(
    progress: Callable[[str, int, int, int], None] | None,
    committed: list[str],
    recorded: list[str],
    total: int,
    engine: _Engine,
) -> None:
    """Add ``committed`` to ``recorded``, calling ``progress`` for each (see :func:`grade`)."""
    for student in committed:
        recorded.append(student)
        if progress:
            progress(student, len(recorded), total, engine.workers_now())


def _collect(
    root: Path,
    assignment: str,
    notebook: str,
    submissions: Path | str | None,
    lms: str,
    roster: Path | str | None,
) -> Collected:
    """The class: from ``submissions``, or in place from the course's ``submitted/``."""
    class_roster = read_roster(roster) if roster is not None else None
    if submissions is not None:
        return collect_class(
            submissions,
            notebook=notebook,
            assignment=assignment,
            lms=lms,
            roster=class_roster,
            spool_folder=root,
        )
    folder = root / "submitted"
    if not folder.is_dir():
        raise UsageError(
            f"no --submissions given and {folder} does not exist (run `nbgrader collect "
            f"{assignment}` first, or pass --submissions PATH)"
        )
    return collect_class(
        folder,
        notebook=notebook,
        assignment=assignment,
        lms="nbgrader",
        roster=class_roster,
        select=lambda parts: len(parts) < 2 or parts[1] == assignment,
        spool_folder=root,
    )


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


def _run_result(
    root: Path,
    assignment: str,
    collected: Collected,
    in_place: bool,
    workers: int | None,
    swept: int,
) -> GradeResult:
    """The run's summary as it starts: what the intake made of the download."""
    subs = collected.submissions
    return GradeResult(
        assignment,
        root,
        layout=collected.layout,
        in_place=in_place,
        ignored=collected.ignored + [f"{s.student}: {i}" for s in subs for i in s.ignored],
        warnings=list(collected.warnings),
        workers=workers or default_workers(),
        swept=swept,
    )


@dataclass
class _Engine:
    """Where the jobs run: the local worker pool (or the executor given), or a Dask cluster."""

    executor_factory: ExecutorFactory
    workers: int  #: workers when the run started
    dask: Any = None  #: the Dask engine, when the run is on a cluster

    @classmethod
    def start(
        cls,
        stack: ExitStack,
        out: GradeResult,
        executor_factory: ExecutorFactory,
        scheduler: str | None,
        cluster: str | None,
        security: Path | str | None,
    ) -> _Engine:
        """The run's engine; a cluster is connected to at once (a wrong address fails first)."""
        if not (scheduler or cluster):
            return cls(executor_factory, out.workers)
        dask = stack.enter_context(_dask_engine(scheduler, cluster, security))
        out.engine, out.workers = dask.description, dask.workers()
        out.warnings.extend(dask.adapted)
        return cls(dask.executor, out.workers, dask)

    def workers_now(self) -> int:
        """The workers now: a cluster's may have changed since the run started."""
        return self.dask.workers() if self.dask is not None else self.workers

    def run(self, jobs: Iterable[Job], fn: Callable[[Job], SubmissionResult], hard_timeout: float):
        """Each finished job with its result, as :func:`~autograder.grading.pool.run_jobs`."""
        return run_jobs(
            jobs,
            workers=self.workers,
            hard_timeout=hard_timeout,
            executor_factory=self.executor_factory,
            fn=fn,
        )


def _finish(
    out: GradeResult, config: Config, wait: float, notify: Callable[[str], None]
) -> GradeResult:
    """``out`` with every result recorded so far, its scores the gradebook's, and
    ``grades.csv`` and ``cells.csv``."""
    recorded = load_results(out.results_dir)
    out.results = final_results(
        out.course, out.assignment, recorded, config=config, wait=wait, notify=notify
    )
    with stop_when_disk_full():
        write_csvs(out.reports, out.results)
    return out
