"""Recognise a download's layout (``--lms auto``) and parse it with that layout's parser.

:data:`LAYOUTS` is the one table of layouts, in the order they are tried: each names its
``--lms`` value, how well the member names follow its rules (0 to 1) and its parser.  The
best score of at least one half wins, the earlier layout on a tie.  When none does, or a
named layout matches nothing, the student ids are the plain file and folder names, with a
warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autograder.intake import blackboard, canvas, exchange, github, gradescope, moodle, plain
from autograder.intake.records import Context, Intake, Member


@dataclass(frozen=True)
class Layout:
    """One download layout: its ``--lms`` name, how to recognise it, how to parse it."""

    name: str
    #: ``matches(members, ctx)``: the share of the names that follow this layout's rules,
    #: 0 to 1; None for the plain layout, which is never recognised: it is the fallback.
    matches: Callable[[list[Member], Context], float] | None
    parse: Callable[[list[Member], Context], Intake]


#: Every layout, in recognition order, the plain fallback last.
LAYOUTS = (
    Layout("canvas", lambda members, ctx: canvas.matches(members), canvas.parse),
    Layout("moodle", lambda members, ctx: moodle.matches(members), moodle.parse),
    Layout("blackboard", lambda members, ctx: blackboard.matches(members), blackboard.parse),
    Layout("gradescope", lambda members, ctx: gradescope.matches(members), gradescope.parse),
    Layout("github", github.matches, github.parse),
    Layout(
        "nbgrader", lambda members, ctx: exchange.matches(members, ctx.assignment), exchange.parse
    ),
    Layout("plain", None, plain.parse),
)
#: What ``--lms`` accepts: ``auto`` (recognise the layout), then every layout's name.
CHOICES = ("auto", *(layout.name for layout in LAYOUTS))
#: The least score that makes a layout recognised.
THRESHOLD = 0.5


def scores(members: list[Member], ctx: Context) -> dict[str, float]:
    """How well the members follow each recognisable layout's naming, 0 to 1."""
    return {
        layout.name: layout.matches(members, ctx)
        for layout in LAYOUTS
        if layout.matches is not None
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
        For a layout name not in :data:`CHOICES`.
    """
    if lms not in CHOICES:
        raise ValueError(f"unknown layout {lms!r} (known: {', '.join(CHOICES)})")
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
    (layout,) = [layout for layout in LAYOUTS if layout.name == lms]
    intake = layout.parse(members, ctx)
    intake.warnings[:0] = warnings
    return intake
