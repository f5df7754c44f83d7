"""Read a class roster (a CSV exported from the LMS) and apply it to a parsed download.

Recognised by its header, as each LMS's module declares it (``roster_row`` and its
:class:`~autograder.intake.lms.RosterColumns`), then a generic one:

* ``canvas``: Canvas's gradebook export (``Student``, ``ID``, ``SIS User ID``,
  ``SIS Login ID``, ``Section``, one column per assignment, a ``Points Possible`` row);
* ``moodle``: an assignment grading worksheet (``Identifier`` = ``Participant N``,
  ``Full name``, ``Email address``);
* ``blackboard``: a Grade Center export (``Username``, ``First Name``, ``Last Name``);
* ``github``: ``gh classroom assignment-grades`` (``github_username``,
  ``roster_identifier``, ``student_repository_name``);
* ``gradescope``: a Gradescope roster (``SID``, ``Email``, names);
* ``generic``: ``student_id`` (or ``id``/``username``), ``first_name``, ``last_name``,
  ``email``, ``lms_user_id``.

The rows are kept exactly as read (``Roster.header``, ``Roster.rows``) so that an
export can write the instructor's own file back with one column filled in.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from autograder.course import UsageError
from autograder.intake.detect import LAYOUTS
from autograder.intake.lms import Cell, RosterColumns, RosterRow
from autograder.intake.records import (
    Identity,
    Intake,
    StudentRecord,
    normalize_student_id,
)

#: Largest roster read, in bytes.
MAX_ROSTER_BYTES = 32 * 1024 * 1024


@dataclass
class RosterEntry:
    """One student row of a roster."""

    student: str  #: the id the layout of the same LMS gives this student
    row: int  #: index into ``Roster.rows``
    identity: Identity = Identity()
    aliases: frozenset[str] = frozenset()  #: every value that identifies the student
    repository: str | None = None  #: GitHub Classroom: the student's repository


@dataclass
class Roster:
    """A roster file, parsed; ``rows`` keeps every row (students or not) as read."""

    kind: str
    header: list[str]
    rows: list[list[str]]
    entries: list[RosterEntry] = field(default_factory=list)
    delimiter: str = ","
    path: Path | None = None
    encoding: str = "utf-8"  #: as read, so that a filled-in copy is written the same way

    def column(self, *names: str) -> int | None:
        """Index of the first header cell equal (case-blind) to one of ``names``."""
        wanted = [n.lower() for n in names]
        for n in wanted:
            for i, cell in enumerate(self.header):
                if cell.strip().lower() == n:
                    return i
        return None

    def repositories(self) -> dict[str, str]:
        """GitHub Classroom: repository name -> username."""
        return {e.repository: e.student for e in self.entries if e.repository}


def read_roster(path: Path | str) -> Roster:
    """Read the roster CSV at ``path`` (UTF-8, ``,`` or ``;`` or tab separated).

    Raises
    ------
    UsageError
        When the file cannot be read or has no column that identifies students.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()[: MAX_ROSTER_BYTES + 1]
    except OSError as exc:
        raise UsageError(f"cannot read roster {path}: {exc}") from exc
    if len(raw) > MAX_ROSTER_BYTES:
        raise UsageError(f"roster {path} is larger than {MAX_ROSTER_BYTES // 2**20} MiB")
    encoding = "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"  # Blackboard's "Download Grades" (tab separated .xls)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        encoding = "cp1252"  # Excel's default on Windows
        text = raw.decode(encoding, errors="replace")
    roster = parse_roster(text)
    roster.path, roster.encoding = path, encoding
    return roster


def parse_roster(text: str) -> Roster:
    """Parse roster CSV text; see the module docstring for the kinds recognised."""
    first_line = text.splitlines()[0] if text.strip() else ""
    delimiter = max(",;\t", key=first_line.count)
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        raise UsageError("the roster is empty")
    header, body = rows[0], rows[1:]
    roster = Roster(_kind(header), header, body, delimiter=delimiter)
    roster.entries = [e for i, row in enumerate(body) if (e := _entry(roster, i, row))]
    if not roster.entries and body:
        raise UsageError(
            "no student rows found in the roster (expected columns such as Canvas's "
            "Student,ID or Moodle's Identifier, or student_id,first_name,last_name,email)"
        )
    return roster


#: A roster of no LMS: ``student_id`` (or ``id``/``username``/``student``),
#: ``first_name``, ``last_name``, ``email``, ``lms_user_id``.
GENERIC = RosterColumns(
    lambda cells: bool({"student_id", "id", "username", "student", "email"} & set(cells)),
    lambda cell, first, last: (
        RosterRow(student, cell("lms_user_id") or student, first, last, (cell("username"),))
        if (student := cell("student_id", "id", "username", "student") or _email(cell))
        else None
    ),
)
#: Every kind of roster, by name, in the order a header is tried: each LMS's, then generic.
KINDS = MappingProxyType(
    {
        **{layout.name: layout.roster for layout in LAYOUTS if layout.roster is not None},
        "generic": GENERIC,
    }
)


def _kind(header: list[str]) -> str:
    cells = [c.strip().lower() for c in header]
    for name, columns in KINDS.items():
        if columns.recognise(cells):
            return name
    raise UsageError(f"the roster's header names no student column: {', '.join(header)}")


def _email(cell: Cell) -> str | None:
    return cell("email address", "email", "e-mail")


def _entry(roster: Roster, i: int, row: list[str]) -> RosterEntry | None:
    def cell(*names: str) -> str | None:
        col = roster.column(*names)
        value = row[col].strip() if col is not None and col < len(row) else ""
        return value or None

    first, last = (
        cell("first name", "first_name", "firstname"),
        cell("last name", "last_name", "surname", "lastname"),
    )
    found = KINDS[roster.kind].row(cell, first, last)
    if found is None:
        return None
    email = _email(cell)
    values = [found.student, found.lms_user_id, email, *found.aliases]
    aliases = {v.lower() for v in values if v}
    identity = Identity(found.lms_user_id, found.first_name, found.last_name, email)
    return RosterEntry(found.student, i, identity, frozenset(aliases), found.repository)


def apply_roster(intake: Intake, roster: Roster, *, keep_ids: bool = False) -> None:
    """Fill in names, email and LMS ids from ``roster``; add its students who sent nothing.

    A record matches a roster entry by its student id, LMS id or email.  A roster entry
    that two records match is applied to neither (both are flagged): a roster never
    merges two students.  Submitters missing from the roster get a warning.
    """
    index: dict[str, list[RosterEntry]] = {}
    for entry in roster.entries:
        for alias in entry.aliases:
            index.setdefault(alias, []).append(entry)
    matched: dict[int, list[StudentRecord]] = {}
    for rec in intake.records:
        keys = [k.lower() for k in (rec.student, rec.identity.lms_user_id, rec.identity.email) if k]
        found = {id(e): e for k in keys for e in index.get(k, [])}
        if len(found) > 1:
            rec.flags.append(
                "ambiguous: matches several roster rows ("
                + ", ".join(e.student for e in found.values())
                + "); roster not applied"
            )
            continue
        if not found:
            if not rec.missing:
                intake.warnings.append(f"{rec.student} submitted but is not on the roster")
            continue
        entry = next(iter(found.values()))
        matched.setdefault(entry.row, []).append(rec)
    for row, recs in matched.items():
        entry = next(e for e in roster.entries if e.row == row)
        if len(recs) > 1:
            for rec in recs:
                rec.flags.append(
                    f"ambiguous: roster row {entry.student} matches "
                    + ", ".join(r.student for r in recs)
                    + "; roster not applied"
                )
            continue
        rec = recs[0]
        rec.identity = entry.identity.merged(rec.identity)
    taken = {r.student for r in intake.records}
    for entry in roster.entries:
        if entry.row in matched:
            continue
        student = entry.student if keep_ids else normalize_student_id(entry.student)
        if student in taken:
            continue  # matched through another alias, or an ambiguous row already flagged
        taken.add(student)
        intake.records.append(
            StudentRecord(
                student,
                identity=entry.identity,
                problem="no submission",
                missing=True,
            )
        )
    intake.records.sort(key=lambda r: r.student)
