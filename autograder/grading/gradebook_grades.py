"""The grades as nbgrader's gradebook holds them: the one source of every score that leaves.

``grade`` records each test cell's autograded score in the gradebook; a grader then
reviews in nbgrader's formgrader, which writes there too: a manual score (it wins over
the autograded one, nbgrader's ``Grade.score``), a score for a written answer that only
a person grades, a comment.  :func:`final_results` reads all of it back over the
results that ``grade`` recorded, so that ``export``, ``grades.csv``, ``cells.csv``, the
report and the feedback pages say what nbgrader's own ``export`` and feedback say:

* each cell's score is nbgrader's ``Grade.score`` (manual, else autograded, plus any
  extra credit), its maximum the gradebook's, and it says whether a grader scored it
  (``manual``) and whether it waits for one (``waiting``, nbgrader's
  ``needs_manual_grade``);
* a graded cell the grader does not run (a written answer) is added, status ``by-hand``;
* the submission's score is nbgrader's: the cells' sum less the late penalty, never
  below zero (``nbgrader export``'s ``score``); the penalty itself is ``late_penalty``;
* the comments on its cells, by the cell's grade_id.

The gradebook is only read.  One that another program (the formgrader) keeps locked is
waited for, as ``grade`` waits to write it (:func:`~autograder.grading.gradebook.while_locked`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from nbgrader.api import (
    Assignment,
    BaseCell,
    Comment,
    Grade,
    Notebook,
    SubmittedAssignment,
    SubmittedNotebook,
)
from traitlets.config import Config

from autograder.course import UsageError, db_url, load_config
from autograder.defaults import GRADEBOOK_WAIT
from autograder.grading.gradebook import OpenGradebook, warn, while_locked
from autograder.grading.results import CellResult, CellStatus, Status, SubmissionResult


@dataclass(frozen=True)
class GradeRow:
    """One cell's grade row, as nbgrader computes it."""

    notebook: str
    grade_id: str
    score: float  #: ``Grade.score``: the manual score if any, else the autograded one
    max_score: float
    manual: bool
    waiting: bool


@dataclass
class Held:
    """What the gradebook holds of one assignment's submissions, by student."""

    grades: dict[str, list[GradeRow]]
    comments: dict[str, dict[str, str]]
    penalties: dict[str, float]


def final_results(
    course: Path,
    assignment: str,
    results: dict[str, SubmissionResult],
    *,
    config: Config | None = None,
    wait: float = GRADEBOOK_WAIT,
    notify: Callable[[str], None] = warn,
) -> dict[str, SubmissionResult]:
    """``results`` (by student) with every score read from the course's gradebook.

    A student on the roster who sent nothing (``missing``) has no submission there and
    keeps a score of zero.  Raises :class:`UsageError` when the course has no gradebook,
    or when a result is not in the gradebook (a ``grade`` run stopped before recording
    it, or the student was removed from the gradebook): ``grade`` again records it.
    """
    config = config or load_config(course)
    url = db_url(course, config)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        raise UsageError(f"the course has no gradebook at {url} (run `specdec-course grade` first)")
    with OpenGradebook(url, config) as books:
        held = while_locked(lambda: read_held(books, assignment), books, wait, notify)
    absent = sorted(
        s for s, r in results.items() if r.status is not Status.MISSING and s not in held.grades
    )
    if absent:
        raise UsageError(
            f"not in the gradebook {url}: {', '.join(absent)} (the grades of assignment "
            f"{assignment!r} are read from it; run `specdec-course grade {assignment}` again "
            "to record them, without regrading)"
        )
    return {s: r if r.status is Status.MISSING else final(r, held, s) for s, r in results.items()}


def read_held(books: OpenGradebook, assignment: str) -> Held:
    """Every grade row, comment and late penalty of ``assignment``'s submissions: one
    query each."""
    gb = books.get()
    db = gb.db
    try:
        by_assignment = SubmittedAssignment.assignment_id == Assignment.id
        grades: dict[str, list[GradeRow]] = defaultdict(list)
        rows = (
            db.query(
                SubmittedAssignment.student_id,
                Notebook.name,
                BaseCell.name,
                Grade.score,
                Grade.max_score,
                Grade.manual_score,
                Grade.needs_manual_grade,
            )
            .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
            .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Assignment, by_assignment)
            .join(BaseCell, Grade.cell_id == BaseCell.id)
            .join(Notebook, BaseCell.notebook_id == Notebook.id)
            .filter(Assignment.name == assignment)
        )
        for student, nb, cell, score, max_score, manual, needs in rows:
            row = GradeRow(
                nb, cell, float(score or 0), float(max_score or 0), manual is not None, bool(needs)
            )
            grades[student].append(row)
        comments: dict[str, dict[str, str]] = defaultdict(dict)
        said = (
            db.query(SubmittedAssignment.student_id, BaseCell.name, Comment.comment)
            .join(SubmittedNotebook, Comment.notebook_id == SubmittedNotebook.id)
            .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Assignment, by_assignment)
            .join(BaseCell, Comment.cell_id == BaseCell.id)
            .filter(Assignment.name == assignment, Comment.comment.is_not(None))
        )
        for student, cell, text in said:
            if str(text).strip():
                comments[student][cell] = str(text)
        penalties: dict[str, float] = defaultdict(float)
        late = (
            db.query(SubmittedAssignment.student_id, SubmittedNotebook.late_submission_penalty)
            .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Assignment, by_assignment)
            .filter(Assignment.name == assignment)
        )
        for student, penalty in late:
            penalties[student] += float(penalty or 0)
            grades.setdefault(student, [])
        return Held(dict(grades), dict(comments), dict(penalties))
    finally:
        db.rollback()  # a read leaves no transaction open on the gradebook


def final(result: SubmissionResult, held: Held, student: str) -> SubmissionResult:
    """``result`` with the gradebook's scores, marks, comments and late penalty.

    The test cells keep the grader's order, status and message; the gradebook's other
    graded cells (graded by hand) follow, in their name's order.
    """
    rows = {row.grade_id: row for row in held.grades.get(student, [])}
    cells = []
    for cell in result.cells:
        row = rows.pop(cell.grade_id, None)
        if row is None:  # not a graded cell of the assignment (any more): nbgrader counts none
            continue
        cells.append(
            replace(
                cell,
                score=row.score,
                max_score=row.max_score,
                manual=row.manual,
                waiting=row.waiting,
            )
        )
    for name in sorted(rows):
        row = rows[name]
        by_hand = CellResult(name, row.score, row.max_score, CellStatus.BY_HAND)
        cells.append(replace(by_hand, manual=row.manual, waiting=row.waiting))
    raw = sum(c.score for c in cells)
    penalty = held.penalties.get(student, 0.0)
    return replace(
        result,
        cells=cells,
        score=float(max(0.0, raw - penalty)),
        max_score=float(sum(c.max_score for c in cells)),
        late_penalty=penalty,
        comments=dict(held.comments.get(student, {})),
    )
