"""``specdec-course grade``: autograde a class's submissions, in parallel and in isolation.

The parent process collects the submissions, fills nbgrader's ``submitted/`` layout,
hands one job per submission to the worker pool, and is the only writer of the
course's gradebook, ``autograded/``, ``feedback/`` and ``reports/<assignment>/``.
Each finished submission is recorded at once (``results/<student>.json``), so a run
that is killed midway loses nothing: running it again grades only what is missing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.collect import Submission, collect_class
from autograder.course import (
    UsageError,
    db_url,
    find_course,
    load_config,
    notebooks,
    scratch_dir,
)
from autograder.grading import students as student_info
from autograder.intake import submitted as submitted_dir
from autograder.pool import ExecutorFactory, local_executor, run_jobs, start_local_workers
from autograder.workers import Job, grade_job, result_to_json

STATUSES = ("graded", "failed", "timeout", "invalid", "missing")


@dataclass
class GradeResult:
    """What one ``grade`` run did."""

    assignment: str
    course: Path
    results: dict[str, dict] = field(default_factory=dict)  #: every student graded so far
    graded_now: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)  #: unchanged since an earlier run
    layout: str = "plain"  #: the submissions' layout (``canvas``, ``nbgrader``, ...)
    in_place: bool = False  #: graded from the course's own ``submitted/``
    ignored: list[str] = field(default_factory=list)  #: files not graded, with why
    warnings: list[str] = field(default_factory=list)

    @property
    def reports(self) -> Path:
        return self.course / "reports" / self.assignment


def grade(
    assignment: str,
    *,
    submissions: Path | str | None = None,
    course: Path | str | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    notebook_timeout: float = 300.0,
    sandbox: bool = True,
    force: bool = False,
    feedback: bool = True,
    executor_factory: ExecutorFactory = local_executor,
    job_fn: Callable[[Job], dict] = grade_job,
    progress: Callable[[str, int, int], None] | None = None,
    keep_scratch: bool = False,
    lms: str = "auto",
    roster: Path | str | None = None,
) -> GradeResult:
    """Autograde every submission under ``submissions`` for ``assignment``.

    Parameters
    ----------
    assignment : name of a folder in ``source/``
    submissions : folder of ``<student>.ipynb``, folder of ``<student>/<any>.ipynb``, or a zip,
        or an LMS download; None grades the course's own ``submitted/`` in place
    course : nbgrader course root (default: the current directory)
    workers : worker processes (default: the number of CPUs)
    timeout : seconds per cell (default: the course's ``Execute.timeout``)
    notebook_timeout : seconds per notebook
    sandbox : run kernels in the bubblewrap sandbox (refuses if it cannot run here)
    force : regrade submissions whose result is already recorded and unchanged
    lms : the download's layout (``auto``: recognised; see ``autograder.intake.detect``)
    roster : the class roster CSV exported from the LMS (names, ids, who sent nothing)

    Raises
    ------
    UsageError
        For the instructor's errors only; a submission's problem never raises.
    """
    root = find_course(course)
    config = load_config(root)
    names = notebooks(root, assignment)
    if len(names) != 1:
        raise UsageError(f"assignment {assignment!r} has {len(names)} notebooks; one is supported")
    notebook = names[0]
    if executor_factory is local_executor:
        start_local_workers()  # its imports run while this process sets up
    if timeout is None:
        timeout = float(config.Execute.get("timeout", 30) or 30)
    limits = None
    if sandbox:
        from autograder import sandbox as sandbox_mod

        problem = sandbox_mod.sandbox_problem()
        if problem:
            raise UsageError(
                f"the grading sandbox cannot run here: {problem}\n"
                "Install bubblewrap (apt-get install bubblewrap), or pass --no-sandbox to run "
                "learner code with your own rights (only for code you trust)."
            )
        limits = sandbox_mod.Limits()
    collected = _collect(root, assignment, notebook, submissions, lms, roster)
    subs = collected.submissions
    template, template_hash = build_template(root, assignment)
    sync_gradebook(root, assignment, template_hash)
    test_cells = template_test_cells(template, assignment, notebook)

    out = GradeResult(assignment, root, layout=collected.layout, in_place=submissions is None)
    out.warnings = list(collected.warnings)
    out.ignored = list(collected.ignored) + [
        f"{sub.student}: {item}" for sub in subs for item in sub.ignored
    ]
    results_dir = out.reports / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    run_root = Path(tempfile.mkdtemp(prefix="specdec-grade-"))
    jobs: list[Job] = []
    pages: set[str] = set()  # students whose feedback page this run wrote
    extra: dict[str, dict] = {}  # per student: identity, timestamp, files stored in submitted/
    try:
        for sub in subs:
            data = _readable_notebook(sub)
            key = _result_key(sub, template_hash, timeout, sandbox)
            previous = _load_result(results_dir / f"{sub.student}.json")
            if not force and previous and previous.get("key") == key:
                _refresh_identity(root, config, assignment, sub, previous, results_dir)
                out.reused.append(sub.student)
                continue
            stored, kept = {}, []
            if not out.in_place and not sub.missing:
                ours = (previous or {}).get("stored") or {}
                stored, kept = submitted_dir.store_submitted(root, assignment, notebook, sub, ours)
            extra[sub.student] = {"stored": stored, **student_info.identity(sub)}
            sub.flags.extend(kept)
            if data is None:
                _record(
                    root,
                    config,
                    assignment,
                    notebook,
                    test_cells,
                    {**_invalid(sub, assignment, test_cells), **extra[sub.student]},
                    key,
                    out,
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
        keys = {sub.student: _result_key(sub, template_hash, timeout, sandbox) for sub in subs}
        flags = {sub.student: sub.flags for sub in subs}
        total = len(jobs)
        hard = notebook_timeout + 2 * timeout + 120
        for n, (job, result) in enumerate(
            run_jobs(
                jobs,
                workers=workers or os.cpu_count() or 1,
                hard_timeout=hard,
                executor_factory=executor_factory,
                fn=job_fn,
            ),
            start=1,
        ):
            result["flags"] = flags.get(job.student, []) + result.get("flags", [])
            result.update(extra.get(job.student, {}))
            _record(root, config, assignment, notebook, test_cells, result, keys[job.student], out)
            if feedback:  # written while the workers grade the next submissions
                _write_feedback(assignment, root, job.student)
                pages.add(job.student)
            if progress:
                progress(job.student, n, total)
    finally:
        shutil.rmtree(run_root, ignore_errors=True)

    for path in sorted(results_dir.glob("*.json")):
        result = _load_result(path)
        if result:
            out.results[result["student"]] = result
    write_csvs(out)
    if feedback:  # the submissions recorded without a worker (invalid ones)
        for student in out.graded_now:
            if student not in pages and out.results[student]["status"] != "missing":
                _write_feedback(assignment, root, student)
    return out


def _collect(root, assignment, notebook, submissions, lms, roster):
    """The class: from ``submissions``, or in place from the course's ``submitted/``."""
    from autograder.intake.roster import read_roster

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


def _refresh_identity(course, config, assignment, sub, previous, results_dir) -> None:
    """An unchanged submission whose student is now better known (a roster): record that."""
    info = student_info.identity(sub)
    if sub.missing or all(previous.get(k) == v for k, v in info.items() if v is not None):
        return
    from nbgrader.api import Gradebook

    merged = {**previous, **{k: v for k, v in info.items() if v is not None}}
    with Gradebook(db_url(course, config), config.CourseDirectory.course_id) as gb:
        student_info.record_student(gb, assignment, sub.student, merged)
    _write_result(results_dir / f"{sub.student}.json", merged)


def _write_feedback(assignment: str, course: Path, student: str) -> None:
    from autograder.feedback import feedback as write_feedback

    try:
        write_feedback(assignment, course=course, student=student)
        # what `nbgrader release_feedback` needs beside the page
        submitted_dir.copy_exchange_files(course, assignment, student)
    except Exception as exc:  # a page that cannot be written costs no grade
        print(f"warning: no feedback page for {student}: {exc}", file=sys.stderr)


# --- templates and the gradebook ---------------------------------------------------------------


def build_template(course: Path, assignment: str) -> tuple[Path, str]:
    """A scratch course that workers copy: the config, the source notebooks and a gradebook.

    Cached under ``.scratch/templates`` by the hash of the config and source notebooks.
    """
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    sources = sorted((course / "source" / assignment).glob("*.ipynb"))
    digest = hashlib.sha256((course / "nbgrader_config.py").read_bytes())
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    template_hash = digest.hexdigest()[:16]
    template = scratch_dir(course) / "templates" / f"{assignment}-{template_hash}"
    if (template / "gradebook.db").exists():
        return template, template_hash
    staging = Path(tempfile.mkdtemp(prefix="template-", dir=scratch_dir(course)))
    shutil.copy2(course / "nbgrader_config.py", staging / "nbgrader_config.py")
    (staging / "source" / assignment).mkdir(parents=True)
    for path in sources:
        shutil.copy2(path, staging / "source" / assignment / path.name)
    config = load_config(staging)
    config.CourseDirectory.db_url = f"sqlite:///{staging / 'gradebook.db'}"
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    outcome = api.generate_assignment(assignment, force=True, create=True)
    if not outcome.get("success"):
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(
            f"nbgrader cannot generate {assignment!r}:\n{outcome.get('log', '')}"
            f"{outcome.get('error', '')}"
        )
    shutil.rmtree(staging / "release", ignore_errors=True)
    template.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(template)
    except OSError:  # another run built it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return template, template_hash


def sync_gradebook(course: Path, assignment: str, template_hash: str | None = None) -> None:
    """Make the course gradebook know the assignment's current cells (release/ untouched).

    Skipped when the gradebook already holds the assignment and was synced from the same
    source (``template_hash``), which saves an nbgrader run on every ``grade``.
    """
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = load_config(course)
    url = db_url(course, config)
    stamp = scratch_dir(course) / "gradebook-sync" / f"{assignment}.synced"
    if template_hash and stamp.exists() and stamp.read_text() == f"{url}\n{template_hash}":
        try:
            with Gradebook(url, config.CourseDirectory.course_id) as gb:
                gb.find_assignment(assignment)
            return
        except MissingEntry:
            pass
    config.CourseDirectory.release_directory = ".scratch/gradebook-sync"
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    outcome = api.generate_assignment(assignment, force=True, create=True)
    if not outcome.get("success"):
        raise UsageError(
            f"cannot record {assignment!r} in the gradebook:\n{outcome.get('log', '')}"
        )
    if template_hash:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(f"{url}\n{template_hash}")


def template_test_cells(template: Path, assignment: str, notebook: str) -> dict[str, float]:
    """``grade_id -> points`` for every autograded test cell, in notebook order."""
    nb = nbformat.read(template / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    cells = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cells[meta["grade_id"]] = float(meta.get("points", 0))
    return cells


# --- recording results ---------------------------------------------------------------------------


def _record(
    course, config, assignment, notebook, test_cells, result, key, out: GradeResult
) -> None:
    """Record one finished submission: results JSON, autograded notebook, gradebook."""
    import warnings

    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own session warnings
    student = result["student"]
    if not result.get("cells"):
        reason = result.get("reason") or "not graded"
        result["cells"] = [
            {
                "grade_id": gid,
                "score": 0.0,
                "max_score": pts,
                "status": "missing" if result.get("status") == "missing" else "failed",
                "message": f"not graded: {reason}",
                "flags": [],
            }
            for gid, pts in test_cells.items()
        ]
    result["flags"] = list(dict.fromkeys(result.get("flags", [])))  # each reason once
    result["score"] = float(sum(c["score"] for c in result["cells"]))
    result["max_score"] = float(sum(c["max_score"] for c in result["cells"]))
    result["key"] = key
    autograded = result.pop("autograded", None)
    if autograded is not None:
        folder = course / "autograded" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{notebook}.ipynb").write_text(autograded, encoding="utf-8")
    with Gradebook(db_url(course, config), config.CourseDirectory.course_id) as gb:
        student_info.record_student(gb, assignment, student, result)
        if result["status"] != "missing":  # a roster-only student has no submission
            gb.update_or_create_submission(assignment, student)
            try:
                grades = gb.find_submission_notebook(notebook, assignment, student).grades
            except MissingEntry:
                grades = []
            by_name = {grade.name: grade for grade in grades}  # one query, not one per cell
            for cell in result["cells"]:
                grade = by_name.get(cell["grade_id"])
                if grade is not None:
                    grade.auto_score = cell["score"]
                    grade.needs_manual_grade = False
            gb.db.commit()
            late = student_info.assign_late_penalty(gb, config, assignment, notebook, student)
            if result.get("late") is None:
                result["late"] = late
        gb.db.commit()
    _write_result(out.reports / "results" / f"{student}.json", result)
    out.graded_now.append(student)


def _write_result(path: Path, result: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(result_to_json(result), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run leaves either the old or the new result


def write_csvs(out: GradeResult) -> None:
    """Write grades.csv and cells.csv for every student graded so far."""
    out.reports.mkdir(parents=True, exist_ok=True)
    students = sorted(out.results)
    with open(out.reports / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "status"])
        for s in students:
            r = out.results[s]
            writer.writerow([s, _num(r["score"]), _num(r["max_score"]), r["status"]])
    with open(out.reports / "cells.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "grade_id", "score", "max_score", "status", "flags"])
        for s in students:
            r = out.results[s]
            for c in r["cells"]:
                flags = "; ".join(list(r.get("flags", [])) + list(c.get("flags", [])))
                writer.writerow(
                    [s, c["grade_id"], _num(c["score"]), _num(c["max_score"]), c["status"], flags]
                )


def _num(x: float) -> str:
    return f"{float(x):g}"


def _readable_notebook(sub: Submission) -> bytes | None:
    """The submission as nbformat-4 JSON bytes, or None (with ``sub.problem`` set)."""
    if sub.problem or sub.data is None:
        return None
    try:
        text = sub.data.decode("utf-8-sig")
        nb = nbformat.reads(text, as_version=4)
    except UnicodeDecodeError:
        sub.problem = "the file is not UTF-8 text (not a notebook)"
        return None
    except Exception as exc:
        sub.problem = f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
        return None
    if not isinstance(nb.get("cells"), list):
        sub.problem = "not a valid Jupyter notebook: it has no list of cells"
        return None
    try:
        return nbformat.writes(nb).encode("utf-8")
    except Exception as exc:
        sub.problem = f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
        return None


def _invalid(sub: Submission, assignment: str, test_cells: dict[str, float]) -> dict:
    return {
        "student": sub.student,
        "assignment": assignment,
        "status": "missing" if sub.missing else "invalid",
        "reason": sub.problem or "unreadable",
        "score": 0.0,
        "max_score": float(sum(test_cells.values())),
        "flags": list(sub.flags),
        "cells": [],
        "seconds": 0.0,
    }


def _result_key(sub: Submission, template_hash: str, timeout: float, sandbox: bool) -> str:
    return f"{sub.sha256}:{template_hash}:{timeout:g}:{int(sandbox)}"


def _load_result(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
