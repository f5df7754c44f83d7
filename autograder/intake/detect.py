"""Recognise a download's layout (``--lms auto``) and parse it with that layout's parser.

Each layout module scores how well the member names follow its rules (0 to 1); the
best score of at least one half wins.  When none does, or a named layout matches
nothing, the student ids are the plain file and folder names, with a warning.
"""

from __future__ import annotations

from types import MappingProxyType

from autograder.intake import blackboard, canvas, exchange, github, gradescope, moodle, plain
from autograder.intake.records import Context, Intake, Member

#: The layouts ``--lms`` accepts, ``auto`` first.
LAYOUTS = ("auto", "canvas", "moodle", "blackboard", "gradescope", "github", "nbgrader", "plain")
_PARSERS = MappingProxyType(
    {
        "canvas": canvas.parse,
        "moodle": moodle.parse,
        "blackboard": blackboard.parse,
        "gradescope": gradescope.parse,
        "github": github.parse,
        "nbgrader": exchange.parse,
    }
)
#: The least score that makes a layout recognised.
THRESHOLD = 0.5


def scores(members: list[Member], ctx: Context) -> dict[str, float]:
    """How well the members follow each layout's naming, 0 to 1."""
    return {
        "canvas": canvas.matches(members),
        "moodle": moodle.matches(members),
        "blackboard": blackboard.matches(members),
        "gradescope": gradescope.matches(members),
        "github": github.matches(members, ctx),
        "nbgrader": exchange.matches(members, ctx.assignment),
    }


def looks_plain(members: list[Member]) -> bool:
    """True when every top-level entry is a notebook or a folder holding one."""
    tops: dict[str, bool] = {}
    for m in members:
        if not m.parts:
            continue
        top = m.parts[0]
        tops[top] = tops.get(top, False) or m.is_notebook or (len(m.parts) == 1 and bool(m.problem))
    return bool(tops) and all(tops.values())


def parse_download(members: list[Member], ctx: Context, lms: str = "auto") -> Intake:
    """Parse ``members`` with the layout ``lms`` (recognised when ``auto``).

    Raises
    ------
    ValueError
        For a layout name not in :data:`LAYOUTS`.
    """
    if lms not in LAYOUTS:
        raise ValueError(f"unknown layout {lms!r} (known: {', '.join(LAYOUTS)})")
    warnings = []
    if lms == "auto":
        ranked = sorted(scores(members, ctx).items(), key=lambda kv: kv[1], reverse=True)
        name, score = ranked[0]
        if score >= THRESHOLD:
            lms = name
        else:
            lms = "plain"
            if not looks_plain(members):
                warnings.append(
                    "the layout of the submissions was not recognised (not Canvas, Moodle, "
                    "Blackboard, Gradescope, GitHub Classroom or nbgrader); student ids are "
                    "the file and folder names"
                )
    elif lms != "plain" and scores(members, ctx)[lms] == 0:
        warnings.append(
            f"no file follows the {lms} layout's naming; student ids are the file and folder names"
        )
        lms = "plain"
    intake = _PARSERS[lms](members, ctx) if lms in _PARSERS else plain.parse(members, ctx)
    intake.warnings[:0] = warnings
    return intake
