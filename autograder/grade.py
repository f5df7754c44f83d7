"""``specdec-course grade``: autograde a class's submissions, in parallel and in isolation.

The parent process collects the submissions (:mod:`autograder.intake`), fills nbgrader's
``submitted/`` layout, hands one :class:`~autograder.grading.job.Job` per submission to
the worker pool (:mod:`autograder.grading.pool`), and is the only writer of the course's
gradebook, ``autograded/``, ``feedback/`` and ``reports/<assignment>/``
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
from pathlib import Path

from autograder import sandbox as sandboxing
from autograder.course import UsageError, find_course, load_config, notebooks
from autograder.grading.job import Job, grade_job
from autograder.grading.pool import ExecutorFactory, local_executor, run_jobs, start_local_workers
from autograder.grading.processes import kill_orphans
from autograder.grading.record import (
    GRADEBOOK_WAIT,
    RecordError,
    load_result,
    load_results,
    record,
    record_pending,
    result_key,
    stop_when_disk_full,
    store_submitted,
    warn,
    write_csvs,
)
from autograder.grading.results import GradeResult, Status, SubmissionResult
from autograder.grading.template import build_template, sync_gradebook, template_test_cells
from autograder.intake.collect import collect
from autograder.intake.validate import readable_notebook
from autograder.render.feedback_page import write_pages


def grade(
    assignment: str,
    *,
    submissions: Path | str,
    course: Path | str | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    notebook_timeout: float = 300.0,
    sandbox: bool = True,
    force: bool = False,
    feedback: bool = True,
    executor_factory: ExecutorFactory = local_executor,
    job_fn: Callable[[Job], SubmissionResult] = grade_job,
    progress: Callable[[str, int, int], None] | None = None,
    keep_scratch: bool = False,
    gradebook_wait: float = GRADEBOOK_WAIT,
    notify: Callable[[str], None] = warn,
) -> GradeResult:
    """Autograde every submission under ``submissions`` for ``assignment``.

    Parameters
    ----------
    assignment : name of a folder in ``source/``
    submissions : folder of ``<student>.ipynb``, folder of ``<student>/<any>.ipynb``, or a zip
    course : nbgrader course root (default: the current directory)
    workers : worker processes (default: the number of CPUs)
    timeout : seconds per cell (default: the course's ``Execute.timeout``)
    notebook_timeout : seconds per notebook
    sandbox : run kernels in the bubblewrap sandbox (refuses if it cannot run here)
    force : regrade submissions whose result is already recorded and unchanged
    feedback : write each student's feedback page as their result is recorded
    executor_factory : ``workers -> concurrent.futures.Executor`` that runs ``job_fn``
        (default: local worker processes; a cluster's executor plugs in here)
    job_fn : grades one :class:`Job` in a worker (default :func:`grade_job`)
    progress : called as ``progress(student, n, total)`` after each recorded result
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
    subs = collect(submissions, notebook=notebook)
    swept = kill_orphans()  # what a grader killed outright (kill -9) may have left running
    if executor_factory is local_executor:
        start_local_workers()  # its imports run while this process sets up
    if timeout is None:
        timeout = float(config.Execute.get("timeout", 30) or 30)
    limits = _sandbox_limits() if sandbox else None
    template, template_hash = build_template(root, assignment)
    sync_gradebook(root, assignment, template_hash)
    test_cells = template_test_cells(template, assignment, notebook)

    out = GradeResult(assignment, root, swept=swept)
    results_dir = out.reports / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    keys = {sub.student: result_key(sub, template_hash, timeout, sandbox) for sub in subs}
    flags = {sub.student: sub.flags for sub in subs}

    def finish(result: SubmissionResult) -> None:
        result.key = keys[result.student]
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
        out.graded_now.append(result.student)

    run_root = Path(tempfile.mkdtemp(prefix="specdec-grade-"))
    jobs: list[Job] = []
    pages: set[str] = set()  # students whose feedback page this run wrote
    try:
        for sub in subs:
            data = readable_notebook(sub)
            previous = load_result(results_dir / f"{sub.student}.json")
            if not force and previous and previous.key == keys[sub.student]:
                if not previous.in_gradebook:  # graded, but the gradebook was locked or full
                    record_pending(
                        root, config, notebook, previous, results_dir, gradebook_wait, notify
                    )
                out.reused.append(sub.student)
                continue
            with stop_when_disk_full():
                store_submitted(root, assignment, notebook, sub)
            if data is None:
                reason = sub.problem or "unreadable"
                flagged = list(sub.flags)
                finish(
                    SubmissionResult(sub.student, assignment, Status.INVALID, reason, flags=flagged)
                )
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
                    limits=limits,
                    keep_scratch=keep_scratch,
                )
            )
        total = len(jobs)
        hard = notebook_timeout + 2 * timeout + 120
        finished = run_jobs(
            jobs,
            workers=workers or os.cpu_count() or 1,
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
                    progress(job.student, n, total)
    finally:
        shutil.rmtree(run_root, ignore_errors=True)

    out.results = load_results(results_dir)
    with stop_when_disk_full():
        write_csvs(out.reports, out.results)
    if feedback:  # the submissions recorded without a worker (invalid ones)
        for student in out.graded_now:
            if student not in pages:
                _write_feedback(assignment, root, student)
    return out


def _sandbox_limits() -> sandboxing.Limits:
    """The sandbox's default limits, once it is known to run here (else a UsageError)."""
    problem = sandboxing.sandbox_problem()
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
    except RecordError:
        raise
    except Exception as exc:  # a page that cannot be written costs no grade
        print(f"warning: no feedback page for {student}: {exc}", file=sys.stderr)
