"""One result's rows in nbgrader's gradebook: the student, the submission, its scores.

:func:`write_batch` writes a batch of results in an open ``Gradebook``, inside the
transaction that :mod:`autograder.record.store` commits (:func:`write_scores`, one
result).  The rows are the ones nbgrader's own
``autograde`` leaves: a new submission mirrors the assignment as
``Gradebook.add_submission`` builds it (a notebook row per assignment notebook, a grade
row per grade and task cell, a comment row per solution and task cell), with the
autograded scores in its grade rows.  It is written as one ``INSERT`` per table rather
than object by object, because a class records thousands of them; a submission the
gradebook already holds is updated through nbgrader's objects, as nbgrader's
``autograde`` updates it: a grader's manual scores and comments are never touched, and
when the notebook is new work (:attr:`~autograder.grading.results.SubmissionResult.new_work`)
every cell a grader scored waits for review again (``needs_manual_grade``).

What the gradebook already holds of a batch's students (their ``Student`` rows, which
of them have a submission) is read once for the batch (:class:`Held`), and the batch's
new students are inserted together, as ``Gradebook.update_or_create_student`` would
create them one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from nbgrader.api import (
    Comment,
    Grade,
    Gradebook,
    GradeCell,
    MissingEntry,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
    new_uuid,
)
from sqlalchemy import insert
from traitlets.config import Config

from autograder.grading.results import Status, SubmissionResult
from autograder.grading.students import assign_late_penalty, record_student, submission_time
from autograder.intake.records import Identity

#: Ids in one ``IN (...)`` list (well under SQLite's smallest limit on parameters).
_IN_CHUNK = 500


@dataclass(frozen=True)
class NotebookShape:
    """One notebook of an assignment, as ``add_submission`` mirrors it."""

    name: str
    id: str
    grade_cells: tuple[tuple[str, str], ...]  #: (cell id, grade_id) of each grade cell
    solution_cells: tuple[str, ...]  #: cell ids
    task_cells: tuple[str, ...]  #: cell ids


@dataclass(frozen=True)
class AssignmentShape:
    """The gradebook's ids for an assignment and its cells, read once per transaction."""

    id: str
    notebooks: tuple[NotebookShape, ...]
    duedate: datetime | None = None  #: the assignment's due date (naive UTC), if it has one

    @classmethod
    def read(cls, gb: Gradebook, assignment: str) -> AssignmentShape:
        found = gb.find_assignment(assignment)
        notebooks = tuple(
            NotebookShape(
                nb.name,
                nb.id,
                tuple((cell.id, cell.name) for cell in nb.grade_cells),
                tuple(cell.id for cell in nb.solution_cells),
                tuple(cell.id for cell in nb.task_cells),
            )
            for nb in found.notebooks
        )
        return cls(found.id, notebooks, found.duedate)


@dataclass(frozen=True)
class Held:
    """What the gradebook holds of one batch's students, read in one query a table."""

    students: dict[str, Student]  #: the students who have a row, by id
    submitted: frozenset[str]  #: the students with a submission of the assignment

    @classmethod
    def read(cls, gb: Gradebook, shape: AssignmentShape, results: Sequence[SubmissionResult]):
        """What the gradebook holds of ``results``' students, the missing ``Student`` rows
        inserted (with what each result knows of the student) in one ``INSERT``."""
        ids = sorted({r.student for r in results})
        students: dict[str, Student] = {}
        submitted: set[str] = set()
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            students.update((s.id, s) for s in gb.db.query(Student).filter(Student.id.in_(chunk)))
            submitted.update(
                sid
                for (sid,) in gb.db.query(SubmittedAssignment.student_id).filter(
                    SubmittedAssignment.assignment_id == shape.id,
                    SubmittedAssignment.student_id.in_(chunk),
                )
            )
        new = {}
        for result in results:
            if result.student not in students and result.student not in new:
                new[result.student] = {"id": result.student, **_identity_row(result.identity)}
        if new:
            gb.db.execute(insert(Student), list(new.values()))
            students.update(
                (s.id, s) for s in gb.db.query(Student).filter(Student.id.in_(sorted(new)))
            )
        return cls(students, frozenset(submitted))


def _identity_row(identity: Identity) -> dict[str, str | None]:
    """A new ``Student`` row's fields: what is known, and None (the column's default)."""
    known = identity.known()
    return {name: known.get(name) for name in ("first_name", "last_name", "email", "lms_user_id")}


def write_batch(gb: Gradebook, config: Config, notebook: str, results: list[SubmissionResult]):
    """Every result's rows (:func:`write_scores`), the assignment's shape and what the
    gradebook holds of the batch's students read once.

    nbgrader's one-by-one calls are kept where a batch read could differ from them: a
    gradebook with an authenticator (it enrols each student it adds), or a batch that
    names a student twice.
    """
    scored = [r for r in results if r.status is not Status.MISSING]
    shape = AssignmentShape.read(gb, scored[0].assignment) if scored else None
    once = len({r.student for r in scored}) == len(scored)
    at_once = shape is not None and once and gb.authenticator is None
    held = Held.read(gb, shape, scored) if at_once else None
    for result in results:
        write_scores(gb, config, notebook, result, shape, held)


def write_scores(
    gb: Gradebook,
    config: Config,
    notebook: str,
    result: SubmissionResult,
    shape: AssignmentShape | None = None,
    held: Held | None = None,
) -> None:
    """The student's row, the submission's scores and nbgrader's late penalty, in one go.

    ``shape`` is the assignment's :class:`AssignmentShape` (read here when not given);
    ``held``, what the gradebook holds of the batch's students (None: asked here, with
    nbgrader's own calls).  Sets the identity's ``late`` when it was not known.
    """
    student, assignment = result.student, result.assignment
    if result.status is Status.MISSING:
        record_student(gb, result)
        gb.db.commit()
        return
    when = submission_time(result)
    scores = {cell.grade_id: cell.score for cell in result.cells}
    if held is None:  # nbgrader's calls, one by one
        gb.update_or_create_student(student, **result.identity.known())
        try:
            submission = gb.find_submission(assignment, student)
            new = False
        except MissingEntry:
            new = True
    else:
        for name, value in result.identity.known().items():
            setattr(held.students[student], name, value)
        new = student not in held.submitted
        submission = None if new else gb.find_submission(assignment, student)
    if new:
        shape = shape or AssignmentShape.read(gb, assignment)
        add_scored_submission(gb, shape, student, notebook, scores, when)
        if shape.duedate is None or when is None:  # lateness unknown: the new rows hold it
            return
    else:
        assert submission is not None
        if when is not None:
            submission.timestamp = when
        result.review = _update_scores(gb, notebook, assignment, student, scores, result.new_work)
    gb.db.commit()
    late = assign_late_penalty(gb, config, notebook, result)
    if result.identity.late is None:
        result.identity = replace(result.identity, late=late)
    gb.db.commit()


def add_scored_submission(
    gb: Gradebook,
    shape: AssignmentShape,
    student: str,
    notebook: str,
    scores: dict[str, float],
    when: datetime | None,
) -> None:
    """Insert a new submission's rows, as ``Gradebook.add_submission`` makes them, with
    ``scores`` (grade_id -> score, for ``notebook``) in its grade rows: one INSERT a table.

    A scored grade row has its ``auto_score`` and no longer needs a manual grade; every
    other row keeps nbgrader's defaults.
    """
    submission = new_uuid()
    notebooks, grades, comments = [], [], []
    for nb in shape.notebooks:
        submitted = new_uuid()
        notebooks.append({"id": submitted, "assignment_id": submission, "notebook_id": nb.id})
        mine = scores if nb.name == notebook else {}
        for cell, grade_id in nb.grade_cells:
            score = mine.get(grade_id)
            grades.append(_grade_row(submitted, cell, score))
        for cell in nb.solution_cells:
            comments.append({"id": new_uuid(), "notebook_id": submitted, "cell_id": cell})
        for cell in nb.task_cells:
            comments.append({"id": new_uuid(), "notebook_id": submitted, "cell_id": cell})
            grades.append(_grade_row(submitted, cell, None))
    row = {"id": submission, "assignment_id": shape.id, "student_id": student, "timestamp": when}
    gb.db.execute(insert(SubmittedAssignment), [row])
    for model, rows in ((SubmittedNotebook, notebooks), (Grade, grades), (Comment, comments)):
        if rows:
            gb.db.execute(insert(model), rows)


def _grade_row(notebook_id: str, cell_id: str, score: float | None) -> dict:
    return {
        "id": new_uuid(),
        "notebook_id": notebook_id,
        "cell_id": cell_id,
        "auto_score": score,
        "needs_manual_grade": score is None,
    }


def _update_scores(
    gb: Gradebook,
    notebook: str,
    assignment: str,
    student: str,
    scores: dict[str, float],
    new_work: bool,
) -> list[str]:
    """Put ``scores`` in the grade rows of a submission the gradebook already holds; return
    the cells whose manual score now waits for review.

    nbgrader's rule (``SaveAutoGrades``): a manual score is kept; a cell with no
    autograded score needs a manual grade.  A cell a grader scored waits for review again
    when the notebook is ``new_work``; otherwise its ``needs_manual_grade`` is left as the
    grader left it.
    """
    try:
        nb_id = gb.find_submission_notebook(notebook, assignment, student).id
    except MissingEntry:
        return []
    # The grades with their cells' names in one query, not one more query per cell.
    named = (
        gb.db.query(Grade, GradeCell.name)
        .join(GradeCell, Grade.cell_id == GradeCell.id)
        .filter(Grade.notebook_id == nb_id)
    )
    review = []
    for grade, name in named:
        if name in scores:
            grade.auto_score = scores[name]
        if grade.manual_score is not None:
            if new_work:
                review.append(name)
            grade.needs_manual_grade = grade.needs_manual_grade or new_work
        else:
            grade.needs_manual_grade = grade.auto_score is None
    return sorted(review)
