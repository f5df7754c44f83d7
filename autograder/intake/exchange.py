"""nbgrader's own ``submitted/`` folder, as ``nbgrader collect`` leaves it.

``submitted/{student}/{assignment}/{notebook}.ipynb`` with ``timestamp.txt`` and
``submission_secret.txt`` beside it (``nbgrader/exchange/default/collect.py``).  The
student id is the hub username, kept exactly; ``timestamp.txt`` is the submission time.
Other assignments' folders are not looked at.
"""

from __future__ import annotations

import re
from datetime import timezone

from autograder.intake.lms import Lms
from autograder.intake.records import Claim, Context, Identity, Intake, Member, assemble

TIMESTAMP = "timestamp.txt"
SECRET = "submission_secret.txt"
_SAFE_ID = re.compile(r"[^/\\\x00-\x1f]{1,128}")


def matches(members: list[Member], assignment: str | None) -> float:
    """The share of top-level folders holding ``{assignment}/timestamp.txt``."""
    tops = {m.parts[0] for m in members if m.parts}
    stamped = {
        m.parts[0]
        for m in members
        if len(m.parts) == 3 and m.parts[2] == TIMESTAMP and m.parts[1] == assignment
    }
    return len(stamped) / len(tops) if tops else 0.0


def safe_username(name: str) -> bool:
    """True for a folder name usable as an nbgrader student id as it is.

    >>> safe_username("jane.doe@uni.edu"), safe_username(".."), safe_username("a/b")
    (True, False, False)
    """
    return bool(_SAFE_ID.fullmatch(name)) and name not in (".", "..") and not name.startswith(".")


def parse_timestamp(data: bytes | None):
    """nbgrader's ``timestamp.txt`` as an aware (UTC) datetime, or None."""
    if not data:
        return None
    from nbgrader.utils import parse_utc  # the CLI's parser reads this package: keep it light

    try:
        return parse_utc(data.decode("utf-8").strip()).replace(tzinfo=timezone.utc)
    except Exception:  # an unreadable stamp dates nothing; the notebook is still graded
        return None


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse a ``submitted/`` tree into one record per hub username, for ``ctx.assignment``."""
    ignored, warnings, claims = [], [], []
    stamps = {
        m.parts[0]: parse_timestamp(m.data)
        for m in members
        if len(m.parts) == 3 and m.parts[1] == ctx.assignment and m.parts[2] == TIMESTAMP
    }
    for m in members:
        if len(m.parts) < 3 or m.parts[1] != ctx.assignment:
            continue  # another assignment, or a stray file: not this run's business
        student = m.parts[0]
        if not safe_username(student):
            warnings.append(f"{student!r} is not usable as a student id; skipped")
            continue
        if m.parts[2] in (TIMESTAMP, SECRET) and len(m.parts) == 3:
            continue
        claims.append(
            Claim(
                student,
                m,
                base=m.name if m.is_notebook else None,
                identity=Identity(timestamp=stamps.get(student)),
            )
        )
    return assemble(
        "nbgrader", claims, ctx.notebook, ignored=ignored, warnings=warnings, keep_ids=True
    )


LMS = Lms("nbgrader", lambda members, ctx: matches(members, ctx.assignment), parse)
