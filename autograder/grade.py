"""``specdec-course grade``: autograde a class's submissions, in parallel and in isolation.

The parent process collects the submissions (:mod:`autograder.intake`: a folder, a zip,
an LMS download, or the course's own ``submitted/`` in place), adds to nbgrader's
``submitted/`` layout what is not there yet (never deleting anything), hands one
:class:`~autograder.grading.job.Job` per submission to the worker pool
(:mod:`autograder.grading.pool`), and is the only writer of the course's gradebook,
``autograded/``, ``feedback/`` and ``reports/<assignment>/``
(:mod:`autograder.grading.record`).  Each finished submission is recorded at once
(``results/<student>.json``), so a run that is killed midway loses nothing: running it
again grades only what is missing.  When the course cannot be written (its gradebook
stays locked, its disk is full), the run stops with
:class:`~autograder.grading.record.RecordError`, keeping what it recorded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from autograder import sandbox as sandboxing
from autograder.course import UsageError, find_course, load_config, notebooks
from autograder.grading import forkserver
from autograder.grading.job import Job, grade_job
from autograder.grading.pool import ExecutorFactory, local_executor, run_jobs
from autograder.grading.processes import kill_orphans
from autograder.grading.record import (
    GRADEBOOK_WAIT,
    RecordError,
    load_result,
    load_results,
    record,
    result_key,
    stop_when_disk_full,
    warn,
    write_csvs,
    written_by_grader,
)
from autograder.grading.results import GradeResult, Status, SubmissionResult
from autograder.grading.students import identify
from autograder.grading.template import build_template, sync_gradebook, template_test_cells
from autograder.intake.collect import Collected, collect_class
from autograder.intake.roster import read_roster
from autograder.intake.submitted import copy_exchange_files, store_submitted
from autograder.intake.validate import readable_notebook
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
    root = find_course(course)
    config = load_config(root)
    names = notebooks(root, assignment)
    if len(names) != 1:
        raise UsageError(f"assignment {assignment!r} has {len(names)} notebooks; one is supported")
    notebook = names[0]
    # The instructor's own errors (no such folder, nothing in it) come before any check of
    # the machine, so that they are reported as what they are.
    collected = _collect(root, assignment, notebook, submissions, lms, roster)
    subs = collected.submissions
    swept = kill_orphans()  # what a grader killed outright (kill -9) may have left running
    on_dask = bool(scheduler or cluster)
    if executor_factory is local_executor and not on_dask:
        forkserver.start()  # its imports run while this process sets up
    if timeout is None:
        timeout = float(config.Execute.get("timeout", 30) or 30)
    # The sandbox must run where the kernels run: here, or on a scheduler's workers (their
    # preload checks it there).
    limits = _sandbox_limits(check=not scheduler) if sandbox else None
    out = GradeResult(
        assignment,
        root,
        layout=collected.layout,
        in_place=submissions is None,
        ignored=collected.ignored + [f"{s.student}: {i}" for s in subs for i in s.ignored],
        warnings=list(collected.warnings),
        workers=workers or os.cpu_count() or 1,
        swept=swept,
    )
    by_student = {sub.student: sub for sub in subs}
    engines = ExitStack()
    engine = None

    run_root = Path(tempfile.mkdtemp(prefix="specdec-grade-"))
    jobs: list[Job] = []
    pages: set[str] = set()  # students whose feedback page this run wrote
    try:
        if on_dask:  # first, so that a wrong address or option fails at once
            engine = engines.enter_context(_dask_engine(scheduler, cluster, security))
            executor_factory = engine.executor
            out.engine, out.workers = engine.description, engine.workers()
            out.warnings.extend(engine.adapted)
        template, template_hash = build_template(root, assignment)
        sync_gradebook(root, assignment, template_hash)
        test_cells = template_test_cells(template, assignment, notebook)
        results_dir = out.reports / "results"
        results_dir.mkdir(parents=True, exist_ok=True)
        keys = {sub.student: result_key(sub, template_hash, timeout, sandbox) for sub in subs}
        flags = {sub.student: sub.flags for sub in subs}

        def save(result: SubmissionResult) -> None:
            """Record ``result`` (waiting for a locked gradebook; RecordError if it cannot)."""
            record(
                root,
                config,
                notebook,
                test_cells,
                result,
                results_dir,
                gradebook_wait=gradebook_wait,
                notify=notify,
            )

        def finish(result: SubmissionResult) -> None:
            result.key = keys[result.student]
            identify(result, by_student[result.student])
            save(result)
            out.graded_now.append(result.student)

        for sub in subs:
            data = readable_notebook(sub)
            previous = load_result(results_dir / f"{sub.student}.json")
            if sub.missing and previous and previous.status is not Status.MISSING:
                # graded from an earlier download: kept (recorded again if its student is
                # better known now, or if the gradebook was locked or full back then)
                if identify(previous, sub) or not previous.in_gradebook:
                    save(previous)
                out.reused.append(sub.student)
                continue
            if not force and previous and previous.key == keys[sub.student]:
                if identify(previous, sub) or not previous.in_gradebook:
                    save(previous)
                out.reused.append(sub.student)
                continue
            if not out.in_place and not sub.missing:
                ours = written_by_grader(previous, notebook) if previous else {}
                with stop_when_disk_full():
                    sub.flags.extend(store_submitted(root, assignment, notebook, sub, ours))
            if data is None:
                reason = sub.problem or "unreadable"
                status = Status.MISSING if sub.missing else Status.INVALID
                flagged = list(sub.flags)
                finish(SubmissionResult(sub.student, assignment, status, reason, flags=flagged))
                continue
            jobs.append(
                Job(
                    assignment=assignment,
                    student=sub.student,
                    notebook=notebook,
                    data=data,
                    template=template,
                    scratch_root=run_root,
                    cell_timeout=timeout,
                    notebook_timeout=notebook_timeout,
                    sandbox=sandbox,
                    fork=fork,
                    limits=limits,
                    keep_scratch=keep_scratch,
                )
            )
        total = len(jobs)
        hard = hard_timeout or notebook_timeout + 2 * timeout + 120
        finished = run_jobs(
            jobs,
            workers=out.workers,
            hard_timeout=hard,
            executor_factory=executor_factory,
            fn=job_fn,
        )
        # closing(): a RecordError stops the workers at once, not after their jobs.
        with contextlib.closing(finished):
            for n, (job, result) in enumerate(finished, start=1):
                result.flags = flags.get(job.student, []) + result.flags
                finish(result)
                if feedback:  # written while the workers grade the next submissions
                    _write_feedback(assignment, root, job.student)
                    pages.add(job.student)
                if progress:
                    progress(job.student, n, total, engine.workers() if engine else out.workers)
    finally:
        engines.close()
        shutil.rmtree(run_root, ignore_errors=True)

    out.results = load_results(results_dir)
    with stop_when_disk_full():
        write_csvs(out.reports, out.results)
    if feedback:  # the submissions recorded without a worker (invalid ones)
        for student in out.graded_now:
            if student not in pages and out.results[student].status is not Status.MISSING:
                _write_feedback(assignment, root, student)
    return out


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
            submissions, notebook=notebook, assignment=assignment, lms=lms, roster=class_roster
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
