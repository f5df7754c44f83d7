"""Blackboard "Download Assignment": the newest attempt of each username.

Blackboard writes flat files ``{assignment}_{username}_attempt_{YYYY-MM-DD-HH-MM-SS}_{file}``
and one receipt ``{assignment}_{username}_attempt_{...}.txt`` per attempt.  The word
``attempt`` is localised (Dutch ``poging``), so any one word is accepted there.  The
assignment part is what every member shares; the username is the rest.  The attempt's
time (the server's local time, as written) is the submission time.
"""

from __future__ import annotations

import os
import re
from datetime import datetime

from autograder.intake.lms import Cell, Lms, RosterColumns, RosterRow
from autograder.intake.records import Claim, Context, Identity, Intake, Member, assemble

_ATTEMPT = re.compile(
    r"^(?P<pre>.+)_(?P<word>[^\W\d_]+)_(?P<ts>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})"
    r"(?:_(?P<file>.+)|(?P<receipt>\.txt))$"
)


def parse_name(top: str) -> dict | None:
    """The fields of a Blackboard member name, or None.

    >>> parse_name("HW 1_jdoe_attempt_2026-11-30-23-59-01_acceptance_tests.ipynb")["pre"]
    'HW 1_jdoe'
    >>> bool(parse_name("HW 1_jdoe_poging_2026-11-30-23-59-01.txt")["receipt"])
    True
    """
    match = _ATTEMPT.match(top)
    return match.groupdict() if match else None


def matches(members: list[Member]) -> float:
    """The share of top-level names that follow Blackboard's naming (0 to 1)."""
    tops = {m.parts[0] for m in members if m.parts}
    return sum(parse_name(t) is not None for t in tops) / len(tops) if tops else 0.0


def split_assignment(prefixes: set[str]) -> dict[str, str]:
    """Map each ``{assignment}_{username}`` prefix to its username.

    The assignment is the longest ``_``-ending prefix that all share; with one student
    only, the username is taken to be the part after the last ``_``.

    >>> split_assignment({"HW_1_jdoe", "HW_1_ann_lee"})["HW_1_ann_lee"]
    'ann_lee'
    >>> split_assignment({"HW 1_jdoe"})
    {'HW 1_jdoe': 'jdoe'}
    """
    common = os.path.commonprefix(sorted(prefixes)) if len(prefixes) > 1 else ""
    common = common[: common.rfind("_") + 1] if "_" in common else ""
    out = {}
    for pre in prefixes:
        rest = pre[len(common) :]
        out[pre] = rest if rest and len(prefixes) > 1 else pre.rsplit("_", 1)[-1]
    return out


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse a Blackboard download into one record per username (its newest attempt)."""
    fields_of = {}
    ignored = []
    for member in members:
        fields = parse_name(member.parts[0]) if member.parts else None
        if fields is None:
            ignored.append(f"{member.path} (not a Blackboard submission file)")
        else:
            fields_of[member] = fields
    users = split_assignment({f["pre"] for f in fields_of.values()})
    claims = []
    for member, fields in fields_of.items():
        when = datetime.strptime(fields["ts"], "%Y-%m-%d-%H-%M-%S")
        inner = member.parts[1:]
        file = inner[-1] if inner else (fields["file"] or "")
        is_nb = not fields["receipt"] and file.lower().endswith(".ipynb")
        claims.append(
            Claim(
                users[fields["pre"]],
                member,
                base=file if is_nb else None,
                newer=(when,),
                identity=Identity(users[fields["pre"]], timestamp=when),
                why_ignored="attempt receipt" if fields["receipt"] else "not a notebook",
            )
        )
    # the newest attempt counts: an older attempt's files are not candidates
    newest: dict[str, tuple] = {}
    for c in claims:
        newest[c.student] = max(newest.get(c.student, c.newer), c.newer)
    claims = [
        c
        if c.newer == newest[c.student] or c.base is None
        else Claim(c.student, c.member, newer=c.newer, why_ignored="older attempt")
        for c in claims
    ]
    return assemble("blackboard", claims, ctx.notebook, ignored=ignored, drop_empty=True)


def roster_row(cell: Cell, first: str | None, last: str | None) -> RosterRow | None:
    """A row of a Grade Center export (``Username``, ``First Name``, ``Last Name``)."""
    student = cell("username")
    return RosterRow(student, student, first, last, (cell("student id"),)) if student else None


def _is_roster(cells: list[str]) -> bool:
    return "username" in cells and ("last name" in cells or "first name" in cells)


LMS = Lms(
    "blackboard",
    lambda members, ctx: matches(members),
    parse,
    RosterColumns(_is_roster, roster_row),
    export=True,
)
