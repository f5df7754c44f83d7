"""What one LMS module declares: its download layout, its roster's columns, its export.

Each layout module (``canvas.py``, ``moodle.py``, ...) ends with one :class:`Lms`, and
the registries read those declarations: :data:`autograder.intake.detect.LAYOUTS` (the
layouts ``--lms`` offers and recognises), :mod:`autograder.intake.roster` (which roster
file is whose, and how its rows name students) and ``export --to`` (the LMSs whose
import file ``export`` writes).  Adding an LMS is one module and one line in
``detect.py``'s list of modules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autograder.intake.records import Context, Intake, Member

#: A roster row's cell under the first of these header names that the roster has (None:
#: none, or empty).
Cell = Callable[..., "str | None"]


@dataclass(frozen=True)
class RosterRow:
    """What one roster row says of its student (besides the email, read for every LMS)."""

    student: str  #: the id the same LMS's download gives the student
    lms_user_id: str | None
    first_name: str | None
    last_name: str | None
    aliases: tuple[str | None, ...] = ()  #: other values that identify the student
    repository: str | None = None  #: GitHub Classroom: the student's repository


@dataclass(frozen=True)
class RosterColumns:
    """How an LMS's own roster export is told from others, and read a row at a time."""

    #: ``recognise(cells)``: whether a header (its cells stripped and lowercased) is this
    #: LMS's
    recognise: Callable[[list[str]], bool]
    #: ``row(cell, first, last)``: the row's student (None: not a student row), given its
    #: cells and the first and last names read under the usual headers
    row: Callable[[Cell, str | None, str | None], RosterRow | None]


@dataclass(frozen=True)
class Lms:
    """One layout of downloads: its ``--lms`` name, how to recognise and parse it, its
    roster and whether ``export`` writes its import file."""

    name: str
    #: ``matches(members, ctx)``: the share of the names that follow this layout's rules,
    #: 0 to 1; None for the plain layout, which is never recognised: it is the fallback.
    matches: Callable[[list[Member], Context], float] | None
    parse: Callable[[list[Member], Context], Intake]
    roster: RosterColumns | None = None  #: its roster export (None: it has none)
    export: bool = False  #: ``export --to <name>`` writes the file its importer reads
