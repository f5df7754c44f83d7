"""Moodle "Download all submissions": one student per participant id.

Moodle (``mod/assign/locallib.php``, ``download_submissions``) prefixes every file with
``{Full Name}_{participant id}_assignsubmission_{plugin}_``.  The default layout makes
that prefix a folder per student and plugin (``.../acceptance_tests.ipynb``); the older
flat layout glues the file name to it.  Names may hold spaces, underscores and any
letters; under blind marking the name is ``Participant``.  The participant id is the
``N`` of the grading worksheet's ``Participant N``.  Online-text entries
(``assignsubmission_onlinetext``) and other plugins' files are ignored, never students.
"""

from __future__ import annotations

import re

from autograder.intake.lms import Cell, Lms, RosterColumns, RosterRow
from autograder.intake.records import (
    Claim,
    Context,
    Identity,
    Intake,
    Member,
    assemble,
    split_name,
)

_PREFIX = re.compile(
    r"^(?P<name>.*)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_(?P<rest>.*)$"
)


def parse_name(top: str) -> dict | None:
    """The fields of a Moodle folder or flat file name, or None.

    >>> parse_name("Jane Doe_5531_assignsubmission_file_")["pid"]
    '5531'
    >>> parse_name("Ana_María López_77_assignsubmission_file_hw.ipynb")["rest"]
    'hw.ipynb'
    """
    match = _PREFIX.match(top)
    return match.groupdict() if match else None


def matches(members: list[Member]) -> float:
    """The share of top-level names that carry Moodle's prefix (0 to 1)."""
    tops = {m.parts[0] for m in members if m.parts}
    return sum(parse_name(t) is not None for t in tops) / len(tops) if tops else 0.0


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse a Moodle download into one record per participant."""
    claims, ignored, warnings = [], [], []
    for member in members:
        fields = parse_name(member.parts[0]) if member.parts else None
        if fields is None:
            ignored.append(f"{member.path} (not a Moodle submission file)")
            continue
        name = fields["name"].strip()
        blind = name in ("", "Participant")
        first, last = (None, None) if blind else split_name(name)
        inner = member.parts[1:] if len(member.parts) > 1 else (fields["rest"],)
        notebook = fields["plugin"] == "file" and inner[-1].lower().endswith(".ipynb")
        why = "online text" if fields["plugin"] == "onlinetext" else "not a notebook"
        if fields["plugin"] not in ("file", "onlinetext"):
            why = f"{fields['plugin']} submission, not a file"
        claims.append(
            Claim(
                fields["pid"],
                member,
                base=inner[-1] if notebook else None,
                identity=Identity(fields["pid"], first, last),
                display_name=None if blind else name,
                why_ignored=why,
            )
        )
    return assemble(
        "moodle", claims, ctx.notebook, ignored=ignored, warnings=warnings, drop_empty=True
    )


def roster_row(cell: Cell, first: str | None, last: str | None) -> RosterRow | None:
    """A row of a Moodle grading worksheet (``Identifier`` = ``Participant N``)."""
    ident = cell("identifier") or ""
    student = ident.rsplit(" ", 1)[-1] if ident else None
    if not student or not student.isdigit():
        return None
    if not (first or last):
        first, last = split_name(cell("full name"))
    return RosterRow(student, student, first, last, (ident, cell("id number")))


LMS = Lms(
    "moodle",
    lambda members, ctx: matches(members),
    parse,
    RosterColumns(lambda cells: "identifier" in cells, roster_row),
    export=True,
)
