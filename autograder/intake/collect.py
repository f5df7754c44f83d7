"""Collect a class's submissions from a folder or an LMS download: one per student.

:func:`collect_class` reads the download safely (:mod:`autograder.intake.reading`),
hands its members to the layout's parser (:mod:`autograder.intake.detect`), applies a
roster, and returns one :class:`Submission` per student, the model the rest of the
grader works with.  A problem with one submission becomes that submission's
``problem`` (graded as ``invalid``); the batch goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import UsageError
from autograder.intake.detect import parse_download
from autograder.intake.reading import read_members
from autograder.intake.records import (
    MAX_ID_LENGTH,
    Context,
    StudentFacts,
    StudentRecord,
    normalize_student_id,
)
from autograder.intake.roster import Roster, apply_roster
from autograder.intake.spool import Content, HoldsContent, Spool, content_size

__all__ = [
    "MAX_ID_LENGTH",
    "Collected",
    "Submission",
    "collect",
    "collect_class",
    "normalize_student_id",
]


@dataclass
class Submission(StudentFacts, HoldsContent):
    """One student's submission as collected, before grading (its bytes: ``data``).

    The student's fields (id, identity, problem, flags, files ignored, missing) are the
    :class:`~autograder.intake.records.StudentFacts` that the download's record gave.
    """

    origin: str  #: where it came from (file or member name), for messages
    #: the notebook (its bytes, or where the spool keeps them), None when unusable
    content: Content | None = None


@dataclass
class Collected:
    """A class's submissions, and what the intake made of the download."""

    layout: str
    submissions: list[Submission]
    ignored: list[str] = field(default_factory=list)  #: files that belong to no student
    warnings: list[str] = field(default_factory=list)


def collect(path: Path | str, *, notebook: str | None = None, **options) -> list[Submission]:
    """Collect every submission under ``path``: :func:`collect_class`'s submissions."""
    return collect_class(path, notebook=notebook, **options).submissions


def collect_class(
    path: Path | str,
    *,
    notebook: str | None = None,
    assignment: str | None = None,
    lms: str = "auto",
    roster: Roster | None = None,
    select: Callable[[tuple[str, ...]], bool] | None = None,
    spool_folder: Path | None = None,
) -> Collected:
    """Collect every submission under ``path`` (a folder or a ``.zip``).

    Parameters
    ----------
    path : folder or zip file
    notebook : the assignment's notebook name (without ``.ipynb``), used to pick the
        right file when a student uploaded several
    assignment : the assignment's name (the ``submitted/`` layout is per assignment)
    lms : the layout (``auto`` recognises it; see ``autograder.intake.detect.LAYOUTS``)
    roster : the class roster; fills in names and ids and adds students who sent nothing
    select : read only the members whose path it accepts (a folder's own parts)
    spool_folder : where the notebooks read wait to be graded, in an unlinked file
        (default: the temporary folder)

    Returns
    -------
    Collected, its submissions sorted by student id, ids unique.
    """
    members, wrapper = read_members(path, select=select, spool=Spool(spool_folder))
    if not members:
        raise UsageError(
            f"no submissions found in {path} (expected <student>.ipynb files or folders, "
            "or an LMS download)"
        )
    ctx = Context(
        notebook=notebook,
        assignment=assignment,
        wrapper=wrapper,
        repos=roster.repositories() if roster is not None else {},
    )
    try:
        intake = parse_download(members, ctx, lms)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if roster is not None:
        apply_roster(intake, roster, keep_ids=intake.layout == "nbgrader")
    subs = [_submission(rec) for rec in intake.records]
    if not any(not s.missing for s in subs):
        raise UsageError(
            f"no submissions found in {path} (layout {intake.layout}; expected "
            "<student>.ipynb files or folders, or an LMS download)"
        )
    return Collected(intake.layout, subs, intake.ignored, intake.warnings)


def _submission(rec: StudentRecord) -> Submission:
    member = rec.member
    if member is None:
        return Submission(**rec.facts(), origin=rec.display_name or rec.student)
    sub = Submission(**rec.facts(), origin=member.path, content=member.content)
    if not content_size(sub.content) and sub.problem is None:
        sub.problem, sub.content = "the notebook file is empty", None
    return sub
