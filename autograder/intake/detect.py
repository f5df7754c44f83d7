"""Recognise a download's layout (``--lms auto``) and parse it with that layout's parser.

:data:`LAYOUTS` is the one table of layouts, in the order they are tried, read from each
layout module's declaration (:class:`~autograder.intake.lms.Lms`): its ``--lms`` value,
how well the member names follow its rules (0 to 1) and its parser.  The
best score of at least one half wins, the earlier layout on a tie.  When none does, or a
named layout matches nothing, the student ids are the plain file and folder names, with a
warning.
"""

from __future__ import annotations

from autograder.intake import blackboard, canvas, exchange, github, gradescope, moodle, plain
from autograder.intake.lms import Lms
from autograder.intake.records import Context, Intake, Member

#: Every layout, in recognition order, the plain fallback last: each module's declaration.
LAYOUTS: tuple[Lms, ...] = tuple(
    module.LMS for module in (canvas, moodle, blackboard, gradescope, github, exchange, plain)
)
#: What ``--lms`` accepts: ``auto`` (recognise the layout), then every layout's name.
CHOICES = ("auto", *(layout.name for layout in LAYOUTS))
#: ``export --to``: the LMSs whose import file ``export`` writes, then plain CSV.
EXPORT_FORMATS = (*(layout.name for layout in LAYOUTS if layout.export), "csv")
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
