"""A gradebook filled without a kernel, and a grader's review written as the formgrader does.

:func:`record_results` registers an assignment's graded and solution cells from its source
notebook (as ``nbgrader generate_assignment`` does) and records results written by hand
with the grader's own commit step.  :func:`review` sets a manual score and a comment
through nbgrader's ``Gradebook``, the calls the formgrader's API handlers make.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.course import db_url, gradebook, load_config
from autograder.grading.results import SubmissionResult
from autograder.record.store import commit


def register_assignment(course: Path, assignment: str, notebook: str) -> None:
    """The assignment, its notebook and its graded and solution cells in the gradebook,
    from ``source/<assignment>/<notebook>.ipynb``."""
    config = load_config(course)
    nb = nbformat.read(course / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    with gradebook(db_url(course, config), config) as gb:
        gb.update_or_create_assignment(assignment)
        gb.update_or_create_notebook(notebook, assignment)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            name = meta.get("grade_id")
            if name and meta.get("grade"):
                gb.update_or_create_grade_cell(
                    name,
                    notebook,
                    assignment,
                    max_score=float(meta.get("points", 0)),
                    cell_type=cell.cell_type,
                )
            if name and meta.get("solution"):
                gb.update_or_create_solution_cell(name, notebook, assignment)


def record_results(
    course: Path, assignment: str, notebook: str, results: dict[str, SubmissionResult]
) -> None:
    """Register the assignment, then record ``results`` as ``grade``'s record step does."""
    register_assignment(course, assignment, notebook)
    folder = course / "reports" / assignment / "results"
    folder.mkdir(parents=True, exist_ok=True)
    commit(course, load_config(course), notebook, list(results.values()), folder)


def review(
    course: Path,
    assignment: str,
    notebook: str,
    student: str,
    *,
    scores: dict[str, float] | None = None,
    comments: dict[str, str] | None = None,
) -> None:
    """Give ``student``'s cells manual scores and comments, as the formgrader saves them
    (a manual score clears ``needs_manual_grade``)."""
    config = load_config(course)
    with gradebook(db_url(course, config), config) as gb:
        nb = gb.find_submission_notebook(notebook, assignment, student)
        for name, score in (scores or {}).items():
            grade = gb.find_grade(name, notebook, assignment, student)
            grade.manual_score = score
            grade.needs_manual_grade = False
        for name, text in (comments or {}).items():
            found = gb.find_comment(name, notebook, assignment, student)
            found.manual_comment = text
        assert nb is not None
        gb.db.commit()


def grade_rows(course: Path, assignment: str, notebook: str, student: str) -> dict[str, tuple]:
    """``student``'s grade rows: ``name -> (auto, manual, needs_manual_grade)``."""
    config = load_config(course)
    with gradebook(db_url(course, config), config) as gb:
        nb = gb.find_submission_notebook(notebook, assignment, student)
        return {g.name: (g.auto_score, g.manual_score, g.needs_manual_grade) for g in nb.grades}


def comments_of(course: Path, assignment: str, notebook: str, student: str) -> dict[str, str]:
    """``student``'s manual comments, by cell."""
    config = load_config(course)
    with gradebook(db_url(course, config), config) as gb:
        nb = gb.find_submission_notebook(notebook, assignment, student)
        return {c.name: c.manual_comment for c in nb.comments if c.manual_comment}
