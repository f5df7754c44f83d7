"""``specdec-course export``: write an assignment's grades in a file the LMS imports.

Reads the grades from nbgrader's gradebook (a grader's manual score wins), with what
``grade`` recorded of each student (``reports/<assignment>/results/``: status, names and
LMS ids), and writes them as one sheet (:mod:`autograder.render.gradesheets`):
``--to canvas|moodle|blackboard|csv``.  With ``--roster`` (the instructor's own
download from that LMS) the sheet is that file with this assignment's column filled
in.  The output is written to a temporary file and renamed; the roster is never
written to.  A student whose grade still waits for grading by hand is written with the
score so far, and :attr:`ExportResult.waiting` names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from autograder.course import UsageError, find_course
from autograder.files import write_atomic
from autograder.grading.results import SubmissionResult
from autograder.intake.detect import EXPORT_FORMATS
from autograder.intake.roster import read_roster
from autograder.render import gradesheets
from autograder.render.page import load_results

#: The ``--to`` formats: each LMS that declares an import file, and plain CSV.
FORMATS = EXPORT_FORMATS


@dataclass
class ExportResult:
    """What one ``export`` wrote."""

    path: Path
    to: str
    students: int  #: student rows filled in
    skipped: list[str] = field(default_factory=list)  #: students left out, with why
    #: students whose grade waits for grading by hand, with the cells and what was written
    waiting: list[str] = field(default_factory=list)


def export(
    assignment: str,
    *,
    to: str,
    course: Path | str | None = None,
    roster: Path | str | None = None,
    out: Path | str | None = None,
    title: str | None = None,
    now: datetime | None = None,
) -> ExportResult:
    """Write ``assignment``'s grades for the LMS ``to``.

    Parameters
    ----------
    assignment : name of an assignment graded in this course
    to : ``canvas``, ``moodle``, ``blackboard`` or ``csv``
    course : nbgrader course root (default: the current directory)
    roster : the LMS's own gradebook or worksheet download, to fill in
    out : where to write (default ``reports/<assignment>/<to>-grades.csv``)
    title : the assignment's title in the LMS (default: the assignment name, or, with a
        Canvas roster, the one assignment column that matches it)
    now : the time written as Moodle's ``Last modified (grade)`` (default: now)

    Raises
    ------
    UsageError
        For an unknown format, no results yet, a roster of another LMS, or ``out``
        naming the roster.
    """
    if to not in FORMATS:
        raise UsageError(f"unknown export format {to!r} (known: {', '.join(FORMATS)})")
    root = find_course(course)
    rows = [r for _, r in sorted(load_results(root, assignment).items())]
    sheet_roster = read_roster(roster) if roster is not None else None
    target = Path(out) if out is not None else root / "reports" / assignment / f"{to}-grades.csv"
    if sheet_roster is not None and target.resolve() == Path(roster).resolve():
        raise UsageError("--out names the roster file; the roster is never overwritten")
    name = title or assignment
    if to == "canvas" and sheet_roster is not None and title is None:
        name = _canvas_title(sheet_roster.header, assignment)
    try:
        sheet = gradesheets.SHEETS[to](rows, name, now or datetime.now(), sheet_roster)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    write_atomic(target, sheet.text().encode(sheet.encoding))
    left_out = {line.split(" ", 1)[0] for line in sheet.skipped}
    waiting = [_waiting(r) for r in rows if r.waiting and r.student not in left_out]
    return ExportResult(target, to, len(rows) - len(sheet.skipped), sheet.skipped, waiting)


def _waiting(row: SubmissionResult) -> str:
    """``student: the cells that wait; what the file holds for them``."""
    cells = ", ".join(f"{c.grade_id} ({gradesheets.number(c.max_score)} pt)" for c in row.waiting)
    total = f"{gradesheets.number(row.score)} / {gradesheets.number(row.max_score)}"
    return f"{row.student}: {cells}; wrote {total}, the score so far"


def _canvas_title(header: list[str], assignment: str) -> str:
    """The Canvas roster's column for ``assignment``: one whose title folds to the same."""

    def fold(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    titles = [c for c in header[5:] if gradesheets.canvas_column([c], assignment) is not None]
    titles = titles or [c for c in header[5:] if fold(c.rsplit(" (", 1)[0]) == fold(assignment)]
    if len(titles) == 1:
        return titles[0]
    columns = ", ".join(repr(c) for c in header[5:]) or "none"
    raise UsageError(
        f"cannot tell which column of the Canvas roster is {assignment!r} "
        f"(columns: {columns}); pass --title with the assignment's Canvas title"
    )
