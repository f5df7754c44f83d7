"""Gradescope "Export Submissions": ``submission_{id}/`` folders and their submitters.

``submission_metadata.yml`` maps each folder to ``:submitters:`` (``:name:``,
``:email:``, ``:sid:``) and ``:created_at:``; its keys are Ruby symbols, so they start
with ``:``.  The student id is the submitter's sid, else their email.  A group
submission lists several submitters: each of them is graded on the group's notebook.
Without the metadata file the folder names are the ids, with a warning.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

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

METADATA = "submission_metadata.yml"
_FOLDER = re.compile(r"^submission_\d+$")


def matches(members: list[Member]) -> float:
    """1 with the metadata file, else the share of top-level folders named ``submission_N``."""
    if any(m.parts == (METADATA,) for m in members):
        return 1.0
    tops = {m.parts[0] for m in members if len(m.parts) > 1}
    return sum(bool(_FOLDER.match(t)) for t in tops) / len(tops) if tops else 0.0


def read_metadata(data: bytes) -> dict[str, dict]:
    """``folder -> {"submitters": [{name, email, sid}], "created_at": datetime|None}``.

    >>> text = b'''submission_7:
    ...   :submitters:
    ...   - :name: Jane Doe
    ...     :email: jane@uni.edu
    ...     :sid: '0042'
    ...   :created_at: 2026-11-30 23:01:02.000000000 -08:00
    ... '''
    >>> meta = read_metadata(text)["submission_7"]
    >>> meta["submitters"][0]["sid"], meta["created_at"].isoformat()
    ('0042', '2026-11-30T23:01:02-08:00')
    """
    import yaml  # the CLI's parser reads this package (the layout names): keep it light

    raw = yaml.safe_load(data.decode("utf-8-sig")) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{METADATA} is not a mapping of submissions")
    out = {}
    for folder, info in raw.items():
        info = _unsymbol(info) if isinstance(info, dict) else {}
        submitters = [
            {k: (str(v) if v is not None else None) for k, v in _unsymbol(s).items()}
            for s in info.get("submitters") or []
            if isinstance(s, dict)
        ]
        out[str(folder)] = {
            "submitters": submitters,
            "created_at": _when(info.get("created_at")),
        }
    return out


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse a Gradescope export into one record per submitter."""
    warnings: list[str] = []
    ignored: list[str] = []
    meta_member = next((m for m in members if m.parts == (METADATA,)), None)
    meta: dict[str, dict] | None = None
    if meta_member is not None:
        try:
            meta = read_metadata(meta_member.data or b"")
        except Exception as exc:  # a damaged export: say so, go on with folder names
            warnings.append(f"cannot read {METADATA}: {exc}; folder names used as ids")
    else:
        warnings.append(f"no {METADATA} in the export; folder names used as ids")
    claims = []
    for member in members:
        if member is meta_member:
            continue
        if len(member.parts) < 2:
            ignored.append(f"{member.path} (not in a submission folder)")
            continue
        folder, file = member.parts[0], member.parts[-1]
        base = file if member.is_notebook else None
        info = (meta or {}).get(folder)
        if meta is not None and info is None:
            ignored.append(f"{member.path} ({folder} is not in {METADATA})")
            continue
        if not info or not info["submitters"]:
            claims.append(Claim(folder, member, base=base, display_name=folder))
            continue
        when = info["created_at"]
        for person in info["submitters"]:
            sid, email = person.get("sid"), person.get("email")
            first, last = split_name(person.get("name"))
            claims.append(
                Claim(
                    sid or email or folder,
                    member,
                    base=base,
                    newer=(when or datetime.min.replace(tzinfo=timezone.utc),),
                    identity=Identity(sid or email, first, last, email, timestamp=when),
                    display_name=person.get("name"),
                )
            )
        if len(info["submitters"]) > 1 and member.is_notebook:
            names = ", ".join(p.get("name") or p.get("email") or "?" for p in info["submitters"])
            warnings.append(f"{folder} is a group submission ({names}): each member is graded")
    return assemble(
        "gradescope",
        claims,
        ctx.notebook,
        ignored=ignored,
        warnings=dict.fromkeys(warnings),
        drop_empty=True,
    )


def _unsymbol(mapping: dict) -> dict:
    return {str(k).lstrip(":"): v for k, v in mapping.items()}


def _when(value) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not value:
        return None
    text = str(value).strip()
    # Ruby's "2026-11-30 23:01:02.000000000 -08:00": drop sub-microsecond digits
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    for fmt in ("%Y-%m-%d %H:%M:%S.%f %z", "%Y-%m-%d %H:%M:%S %z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def roster_row(cell: Cell, first: str | None, last: str | None) -> RosterRow | None:
    """A row of a Gradescope roster (``SID``, ``Email``, names)."""
    student = cell("sid") or cell("email address", "email", "e-mail")
    if not student:
        return None
    if not (first or last):
        first, last = split_name(cell("full name", "name"))
    return RosterRow(student, student, first, last)


LMS = Lms(
    "gradescope",
    lambda members, ctx: matches(members),
    parse,
    RosterColumns(lambda cells: "sid" in cells, roster_row),
)
