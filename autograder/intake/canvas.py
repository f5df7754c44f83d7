"""Canvas "Download Submissions" zips: who uploaded each file, and whether it was late.

Canvas writes one flat member per uploaded file (``lib/content_zipper.rb``)::

    {name}_[LATE_]{user id}_{attachment id}_{file}   (name: sortable name, lower-cased,
                                                      non-word characters removed)
    [LATE_]anon_{anonymous id}_{attachment id}_{file}       (anonymous grading)
    {prefix}_text.html, {prefix}_link.html                   (text entry, URL submission)

A file uploaded again under the same name gets ``-N`` before its extension.  The
student id is the Canvas user id (``anon_<id>`` under anonymous grading); the
attachment id orders a student's uploads (higher is newer).
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

_ANON = re.compile(r"^(?P<late>LATE_)?(?P<id>anon_[A-Za-z0-9]+)_(?P<att>\d+)_(?P<file>.+)$")
_NAMED = re.compile(r"^(?P<name>.*?)_(?P<late>LATE_)?(?P<id>\d+)_(?P<att>\d+)_(?P<file>.+)$")
_ENTRY = re.compile(
    r"^(?:(?P<name>.+?)_)??(?P<late>LATE_)?(?P<id>anon_[A-Za-z0-9]+|\d+)_(?P<kind>text|link)\.html$"
)
_REUPLOAD = re.compile(r"-\d+(?=\.ipynb$)", re.IGNORECASE)


def parse_name(name: str) -> dict | None:
    """The fields of a Canvas member name, or None when it is not one.

    >>> parse_name("smithjohn_LATE_48213_1177342_acceptance_tests-1.ipynb")["id"]
    '48213'
    >>> parse_name("anon_aB3dE_1177_hw.ipynb")["id"]
    'anon_aB3dE'
    >>> parse_name("doejane_5511_text.html")["kind"]
    'text'
    >>> parse_name("alice.ipynb") is None
    True
    """
    match = _ENTRY.match(name)
    if match:
        return match.groupdict()
    match = _ANON.match(name) or _NAMED.match(name)
    if match:
        return {"name": None, **match.groupdict(), "kind": "upload"}
    return None


def matches(members: list[Member]) -> float:
    """The share of top-level names that follow Canvas's naming (0 to 1)."""
    tops = {m.parts[0] for m in members if m.parts}
    return sum(parse_name(t) is not None for t in tops) / len(tops) if tops else 0.0


def base_name(file: str, wanted: str | None) -> str:
    """The name the student gave the file, without Canvas's ``-N`` re-upload suffix.

    >>> base_name("acceptance_tests-2.ipynb", "acceptance_tests.ipynb")
    'acceptance_tests.ipynb'
    >>> base_name("lab-2.ipynb", "lab-2.ipynb")
    'lab-2.ipynb'
    """
    return file if file == wanted else _REUPLOAD.sub("", file)


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse a Canvas download into one record per Canvas user (or anonymous id)."""
    claims, ignored, warnings = [], [], []
    for member in members:
        fields = parse_name(member.parts[0]) if member.parts else None
        if fields is None:
            if member.is_notebook and len(member.parts) == 1:
                stem = member.name[: -len(".ipynb")]
                claims.append(Claim(stem, member, base=member.name, display_name=stem))
                warnings.append(
                    f"{member.path} does not follow Canvas's naming; graded as student {stem!r}"
                )
            else:
                ignored.append(f"{member.path} (not a Canvas submission file)")
            continue
        anonymous = fields["id"].startswith("anon_")
        common = {
            "identity": Identity(None if anonymous else fields["id"], late=bool(fields["late"])),
            "display_name": fields["name"],
        }
        if fields["kind"] != "upload":
            what = "text entry" if fields["kind"] == "text" else "URL submission"
            claims.append(Claim(fields["id"], member, why_ignored=what, **common))
            continue
        # the uploaded file, or a file inside an uploaded zip
        inner = member.parts[1:]
        file = inner[-1] if inner else fields["file"]
        claims.append(
            Claim(
                fields["id"],
                member,
                base=base_name(file, ctx.wanted) if file.lower().endswith(".ipynb") else None,
                newer=(int(fields["att"]),),
                **common,
            )
        )
    return assemble(
        "canvas", claims, ctx.notebook, ignored=ignored, warnings=warnings, drop_empty=True
    )


def roster_row(cell: Cell, first: str | None, last: str | None) -> RosterRow | None:
    """A row of Canvas's gradebook export (``Student``, ``ID``, ``SIS User ID``, ...)."""
    student = cell("id")
    if not student or not student.isdigit():
        return None  # "Points Possible", "Muted" and other non-student rows
    if not (first or last):
        first, last = split_name(cell("student"))
    extra = (cell("sis user id"), cell("sis login id"), cell("integration id"))
    return RosterRow(student, student, first, last, extra)


def _is_roster(cells: list[str]) -> bool:
    return len(cells) > 1 and "student" in cells[0] and "id" in cells[1]


LMS = Lms(
    "canvas",
    lambda members, ctx: matches(members),
    parse,
    RosterColumns(_is_roster, roster_row),
    export=True,
)
