"""Write grades as files that an LMS's own importer accepts.

* **Canvas** gradebook import (``app/models/gradebook_importer.rb``): the header starts
  ``Student,ID,SIS User ID,SIS Login ID,Section``; then one column per assignment,
  ``Title (assignment id)`` or a bare title (a new assignment); a ``Points Possible``
  row; students matched by Canvas user id (``ID``).
* **Moodle** assignment "Upload grading worksheet": ``Identifier`` (``Participant N``),
  ``Grade`` and ``Last modified (grade)``, which must be newer than Moodle's own record
  of the grade (``mod/assign/feedback/offline/importgradeslib.php``).
* **Blackboard** Grade Center upload: ``Username`` and one column per assignment,
  matched by the ``|column id`` that Blackboard's own download gives its headers.
* **csv**: everything the grader knows, one row per student.

Given the instructor's own download of that LMS (``roster``), every row and column of
it is kept, and only this assignment's column is filled in.  All functions here are
pure: rows in, table out.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Protocol

from autograder.grading.results import Status, SubmissionResult

#: The student columns a Canvas gradebook import starts with.
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: The columns of a Moodle grading worksheet this writer fills.
MOODLE_HEADER = (
    "Identifier",
    "Full name",
    "Email address",
    "Grade",
    "Maximum grade",
    "Last modified (grade)",
    "Feedback comments",
)
#: The columns of the plain CSV export.
CSV_HEADER = (
    "student",
    "first_name",
    "last_name",
    "email",
    "lms_user_id",
    "score",
    "max_score",
    "status",
    "timestamp",
    "late",
    "flags",
    "late_penalty",
    "review",
)
_CANVAS_TITLE = re.compile(r"\A(.*)\s\((\d+)\)\Z")


class Roster(Protocol):
    """The instructor's own download of an LMS, as a sheet to fill in (what
    :class:`autograder.intake.roster.Roster` reads): every row as read, and how."""

    kind: str  #: the LMS whose download it is
    header: list[str]
    rows: list[list[str]]
    delimiter: str
    encoding: str

    def column(self, *names: str) -> int | None:
        """Index of the first header cell equal (case-blind) to one of ``names``."""


def sortable_name(r: SubmissionResult) -> str:
    """``Last, First`` as Canvas sorts students, or what is known of the name."""
    if r.identity.last_name and r.identity.first_name:
        return f"{r.identity.last_name}, {r.identity.first_name}"
    return r.identity.last_name or r.identity.first_name or r.student


def full_name(r: SubmissionResult) -> str:
    """``First Last``, or the student id when the name is not known."""
    return " ".join(p for p in (r.identity.first_name, r.identity.last_name) if p) or r.student


@dataclass
class Sheet:
    """A table to write, and the students left out of it (with why)."""

    header: list[str]
    rows: list[list[str]]
    skipped: list[str] = field(default_factory=list)
    delimiter: str = ","
    encoding: str = "utf-8"

    def text(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter=self.delimiter, lineterminator="\n")
        writer.writerow(self.header)
        writer.writerows(self.rows)
        return buf.getvalue()


def number(x: float) -> str:
    """A score as an LMS reads it: no trailing zeros.

    >>> number(3.0), number(2.5), number(1 / 3)
    ('3', '2.5', '0.333333')
    """
    return f"{float(x):g}"


def canvas_sheet(rows: list[SubmissionResult], title: str, roster: Roster | None = None) -> Sheet:
    """A Canvas gradebook-import CSV for one assignment column.

    With ``roster`` (the instructor's Canvas gradebook export) its rows and columns are
    kept; the column whose title is ``title`` (or ``title (id)``) is filled in, or added
    at the end when there is none.  Rows are matched by Canvas user id.
    """
    by_id, skipped = _index(rows, "Canvas user id", numeric=True)
    points = number(max((r.max_score for r in rows), default=0))
    if roster is None:
        header = [*CANVAS_HEADER, title]
        table = [["Points Possible", "", "", "", "", points]]
        for uid, row in sorted(by_id.items(), key=lambda kv: sortable_name(kv[1])):
            table.append([sortable_name(row), uid, "", "", "", number(row.score)])
        return Sheet(header, table, skipped)
    if roster.kind != "canvas":
        raise ValueError("a Canvas export needs a Canvas gradebook export as its roster")
    header = list(roster.header)
    col = _column(header, canvas_column(header, title), title)
    table, absent = _fill(
        roster, header, by_id, lambda line: line[1], lambda r: {col: number(r.score)}
    )
    for line in table:
        if line and "points possible" in line[0].lower():
            line[col] = points
    skipped += [f"{by_id[u].student} (Canvas id {u} is not in the roster)" for u in absent]
    return Sheet(header, table, skipped, roster.delimiter, roster.encoding)


def canvas_column(header: list[str], title: str) -> int | None:
    """The index of the column for ``title``: ``title (id)``, a bare ``title``, or an id.

    >>> canvas_column(["Student", "ID", "Section", "E7.2 Tests (901)"], "E7.2 Tests")
    3
    >>> canvas_column(["Student", "ID", "Section", "E7.2 Tests (901)"], "901")
    3
    """
    for i, cell in enumerate(header):
        match = _CANVAS_TITLE.match(cell.strip())
        name, ident = (match.group(1), match.group(2)) if match else (cell.strip(), None)
        if name == title or cell.strip() == title or ident == title:
            return i
    return None


def moodle_sheet(
    rows: list[SubmissionResult], now: datetime, roster: Roster | None = None
) -> Sheet:
    """A Moodle grading worksheet, its ``Last modified (grade)`` set to ``now``.

    With ``roster`` (a worksheet downloaded from the same assignment) its rows and
    columns are kept and only the grade, its time and the feedback comment are filled.
    """
    by_id, skipped = _index(rows, "Moodle participant id", numeric=True)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S")
    if roster is None:
        table = [
            [
                f"Participant {pid}",
                full_name(row),
                row.identity.email or "",
                number(row.score),
                number(row.max_score),
                stamp,
                feedback_comment(row),
            ]
            for pid, row in sorted(by_id.items(), key=lambda kv: int(kv[0]))
        ]
        return Sheet(list(MOODLE_HEADER), table, skipped)
    if roster.kind != "moodle":
        raise ValueError("a Moodle export needs a Moodle grading worksheet as its roster")
    header = list(roster.header)
    ident, grade, when, comment = (
        _column(header, roster.column(name), name)
        for name in ("Identifier", "Grade", "Last modified (grade)", "Feedback comments")
    )
    table, absent = _fill(
        roster,
        header,
        by_id,
        lambda line: line[ident].strip().rsplit(" ", 1)[-1],
        lambda r: {grade: number(r.score), when: stamp, comment: feedback_comment(r)},
    )
    skipped += [f"{by_id[p].student} (Participant {p} is not in the worksheet)" for p in absent]
    return Sheet(header, table, skipped, roster.delimiter, roster.encoding)


def blackboard_sheet(
    rows: list[SubmissionResult], title: str, roster: Roster | None = None
) -> Sheet:
    """A Blackboard Grade Center upload: ``Username`` and the assignment's column.

    Without ``roster`` the column is ``title [Total Pts: N Score]`` (Blackboard makes a
    new column of it); with the instructor's Grade Center download, its column whose
    title starts with ``title`` keeps its ``|column id`` and is filled in.
    """
    by_user, skipped = _index(rows, "username", numeric=False)
    points = number(max((r.max_score for r in rows), default=0))
    if roster is None:
        header = ["Username", f"{title} [Total Pts: {points} Score]"]
        table = [[u, number(r.score)] for u, r in sorted(by_user.items())]
        return Sheet(header, table, skipped)
    if roster.kind != "blackboard":
        raise ValueError("a Blackboard export needs a Grade Center download as its roster")
    header = list(roster.header)
    user_col = roster.column("Username")
    titled = (i for i, cell in enumerate(header) if _blackboard_title(cell) == title)
    col = _column(header, next(titled, None), f"{title} [Total Pts: {points} Score]")
    table, absent = _fill(
        roster, header, by_user, lambda line: line[user_col], lambda r: {col: number(r.score)}
    )
    skipped += [f"{u} (not in the Grade Center download)" for u in absent]
    return Sheet(header, table, skipped, roster.delimiter, roster.encoding)


def _blackboard_title(cell: str) -> str:
    """A Grade Center column's title, without its points and ``|column id``."""
    return cell.strip().split(" [", 1)[0].split("|")[0].strip()


def review(row: SubmissionResult) -> str:
    """Where a grade stands with the grader: ``waiting: <cells>``, ``reviewed``, or empty."""
    if row.waiting:
        return "waiting: " + " ".join(c.grade_id for c in row.waiting)
    return "reviewed" if row.reviewed else ""


def csv_sheet(rows: list[SubmissionResult]) -> Sheet:
    """Every student the grader knows, with names, email, LMS id, timestamp, lateness, the
    late penalty and whether a grader reviewed the grade (or still has to)."""
    table = [
        [
            r.student,
            r.identity.first_name or "",
            r.identity.last_name or "",
            r.identity.email or "",
            r.identity.lms_user_id or "",
            number(r.score),
            number(r.max_score),
            r.status.value,
            r.identity.timestamp.isoformat() if r.identity.timestamp else "",
            "" if r.identity.late is None else ("yes" if r.identity.late else "no"),
            "; ".join(r.flags),
            number(r.late_penalty),
            review(r),
        ]
        for r in sorted(rows, key=lambda r: r.student)
    ]
    return Sheet(list(CSV_HEADER), table)


#: Each ``export --to`` format's sheet, as ``sheet(rows, title, now, roster)``: an LMS's
#: import file (the LMSs that declare one, :data:`autograder.intake.detect.EXPORT_FORMATS`),
#: and plain CSV.
SHEETS: Mapping[str, Callable[[list[SubmissionResult], str, datetime, Roster | None], Sheet]] = (
    MappingProxyType(
        {
            "canvas": lambda rows, title, now, roster: canvas_sheet(rows, title, roster),
            "moodle": lambda rows, title, now, roster: moodle_sheet(rows, now, roster),
            "blackboard": lambda rows, title, now, roster: blackboard_sheet(rows, title, roster),
            "csv": lambda rows, title, now, roster: csv_sheet(rows),
        }
    )
)


def _index(
    rows: list[SubmissionResult], what: str, *, numeric: bool
) -> tuple[dict[str, SubmissionResult], list[str]]:
    """Rows by LMS id; the students without a usable one are listed as skipped."""
    out, skipped = {}, []
    for row in rows:
        ident = (row.identity.lms_user_id or "").strip()
        if not ident or (numeric and not ident.isdigit()):
            skipped.append(f"{row.student} (no {what})")
        elif ident in out:
            skipped.append(f"{row.student} ({what} {ident} is also {out[ident].student}'s)")
        else:
            out[ident] = row
    return out, skipped


def _column(header: list[str], found: int | None, title: str) -> int:
    """``found``, or the index of a column ``title`` added at the end of ``header``."""
    if found is None:
        header.append(title)
        return len(header) - 1
    return found


def _fill(
    roster: Roster,
    header: list[str],
    by_id: dict[str, SubmissionResult],
    ident: Callable[[list[str]], str],
    values: Callable[[SubmissionResult], dict[int, str]],
) -> tuple[list[list[str]], list[str]]:
    """The roster's rows, padded to ``header``, each student's cells filled in.

    ``ident`` gives a row's LMS id, ``values`` the cells of the result with that id, by
    column.  Returns the rows, and the ids of ``by_id`` that no row has.
    """
    table, done = [list(r) for r in roster.rows], set()
    for line in table:
        line.extend([""] * (len(header) - len(line)))
        uid = ident(line).strip()
        row = by_id.get(uid)
        if row is None:
            continue
        for col, value in values(row).items():
            line[col] = value
        done.add(uid)
    return table, [uid for uid in by_id if uid not in done]


def feedback_comment(row: SubmissionResult) -> str:
    """The Moodle feedback comment: how the grade was reached, from the final grades.

    >>> from autograder.grading.results import CellResult, CellStatus
    >>> r = SubmissionResult("s", "a", Status.GRADED, score=3.0, max_score=5.0)
    >>> r.cells = [CellResult("t", 3.0, 3.0, CellStatus.PASSED, manual=True)]
    >>> feedback_comment(r)
    'Reviewed by the instructor: 3 / 5.'
    """
    if row.status is Status.MISSING:
        return "No submission."
    total = f"{number(row.score)} / {number(row.max_score)}"
    late = f" Late penalty: {number(row.late_penalty)}." if row.late_penalty > 0 else ""
    waiting = sum(c.max_score for c in row.waiting)
    if waiting:
        return f"Graded so far: {total}; {number(waiting)} point(s) wait for grading by hand.{late}"
    if row.reviewed:
        return f"Reviewed by the instructor: {total}.{late}"
    if row.status is Status.GRADED:
        return f"Autograded: {total}.{late}"
    return f"Not graded ({row.status.value}): {row.reason or 'see the feedback page'}"
