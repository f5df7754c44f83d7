"""Record finished submissions in the course: results JSON, autograded notebook, gradebook, CSVs.

Only the parent process writes here.  Each result is written as it arrives, atomically
(a temporary file, then a rename), so a killed run loses nothing and the next one resumes.
"""

from __future__ import annotations

import csv
import os
import warnings
from datetime import datetime
from pathlib import Path

from nbgrader.api import MissingEntry
from sqlalchemy.exc import SAWarning
from traitlets.config import Config

from autograder.course import db_url, gradebook
from autograder.grading.results import CellResult, Status, SubmissionResult
from autograder.grading.students import assign_late_penalty, record_student
from autograder.intake.collect import Submission
from autograder.intake.submitted import nbgrader_timestamp, sha256


def record(
    course: Path,
    config: Config,
    notebook: str,
    test_cells: dict[str, float],
    result: SubmissionResult,
    results_dir: Path,
) -> None:
    """Record one finished submission: results JSON, autograded notebook, gradebook.

    A roster-only student (status ``missing``) gets a ``Student`` row and no submission.
    """
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own session warnings
    student, assignment = result.student, result.assignment
    if not result.cells:
        reason = result.reason or "not graded"
        result.cells = [CellResult.not_graded(gid, pts, reason) for gid, pts in test_cells.items()]
    result.total()
    if result.autograded is not None:
        folder = course / "autograded" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{notebook}.ipynb").write_text(result.autograded, encoding="utf-8")
        result.autograded = None
    with gradebook(db_url(course, config), config) as gb:
        record_student(gb, result)
        if result.status is not Status.MISSING:
            gb.update_or_create_submission(assignment, student)
            try:
                grades = gb.find_submission_notebook(notebook, assignment, student).grades
            except MissingEntry:
                grades = []
            by_name = {grade.name: grade for grade in grades}  # one query, not one per cell
            for cell in result.cells:
                grade = by_name.get(cell.grade_id)
                if grade is not None:
                    grade.auto_score = cell.score
                    grade.needs_manual_grade = False
            gb.db.commit()
            late = assign_late_penalty(gb, config, notebook, result)
            if result.late is None:
                result.late = late
        gb.db.commit()
    write_result(results_dir / f"{student}.json", result)


def write_result(path: Path, result: SubmissionResult) -> None:
    """Write ``result`` to ``path`` atomically."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(result.to_json(), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run leaves either the old or the new result


def load_result(path: Path) -> SubmissionResult | None:
    """The result recorded at ``path`` (this version's or an earlier one's), or None."""
    try:
        return SubmissionResult.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_results(results_dir: Path) -> dict[str, SubmissionResult]:
    """Every result recorded in ``results_dir``, by student."""
    found = (load_result(path) for path in sorted(results_dir.glob("*.json")))
    return {r.student: r for r in found if r is not None}


def write_csvs(reports: Path, results: dict[str, SubmissionResult]) -> None:
    """Write grades.csv and cells.csv for every student graded so far."""
    reports.mkdir(parents=True, exist_ok=True)
    students = sorted(results)
    with open(reports / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", "status"])
        for s in students:
            r = results[s]
            writer.writerow([s, _num(r.score), _num(r.max_score), r.status.value])
    with open(reports / "cells.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "grade_id", "score", "max_score", "status", "flags"])
        for s in students:
            r = results[s]
            for c in r.cells:
                flags = "; ".join([*r.flags, *c.flags])
                writer.writerow(
                    [s, c.grade_id, _num(c.score), _num(c.max_score), c.status.value, flags]
                )


def written_by_grader(previous: SubmissionResult, notebook: str) -> dict[str, str]:
    """``file name -> sha256`` of what an earlier run stored in ``submitted/`` for ``previous``.

    The key starts with the submission's hash, and the stored notebook is those bytes;
    ``timestamp.txt`` holds the recorded time in nbgrader's format.
    """
    ours = {f"{notebook}.ipynb": previous.key.split(":", 1)[0]} if previous.key else {}
    if previous.timestamp:
        stamp = nbgrader_timestamp(datetime.fromisoformat(previous.timestamp)).encode()
        ours["timestamp.txt"] = sha256(stamp)
    return ours


def result_key(sub: Submission, template_hash: str, timeout: float, sandbox: bool) -> str:
    """What a recorded result was graded from; a different key means grade it again."""
    return f"{sub.sha256}:{template_hash}:{timeout:g}:{int(sandbox)}"


def _num(x: float) -> str:
    return f"{float(x):g}"
