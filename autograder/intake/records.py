"""What a download says about each student: the records every layout parser returns.

A layout parser (``canvas.py``, ``moodle.py``, ...) is a pure function from the
download's :class:`Member` list to an :class:`Intake`: one :class:`StudentRecord`
per student (who they are in one :class:`Identity`), with the notebook to grade
chosen by :func:`choose_notebook`, and every member that is not graded listed as
ignored.  Reading the files safely is the collector's job; nothing here touches the
disk but a member's :attr:`Member.data`, which a notebook's spool gives back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import copy
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from datetime import datetime

from autograder.intake.spool import Content, HoldsContent

#: Longest normalized student id.
MAX_ID_LENGTH = 64


@dataclass(frozen=True)
class Identity:
    """Who a student is and when they submitted, as a download, a roster or an earlier
    result says: each field None (or empty) when not known.

    Every class that says who a student is holds one (``StudentRecord``, ``RosterEntry``,
    the collector's ``Submission``, the grader's ``SubmissionResult``; a ``Claim`` for
    who uploaded one file).  The time stays a ``datetime`` all the way: only a file
    (the results JSON, an export) writes it as text.

    The student's id is not here: it is the key beside the identity (``student``),
    always known and unique in the class, which the intake assigns (folded, a collision
    renamed) and which names the student's files; what an identity holds is what the
    sources say, merged.
    """

    lms_user_id: str | None = None  #: the id the LMS knows the student by
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None
    timestamp: datetime | None = None  #: submission time, when the layout gives it
    late: bool | None = None  #: the LMS's own late mark (else nbgrader's due date says)

    def merged(self, other: Identity) -> Identity:
        """This identity, each field it does not know taken from ``other``.

        >>> who = Identity("5531", last_name="Doe").merged(Identity("9", "Jane", "Roe", late=False))
        >>> who.lms_user_id, who.first_name, who.last_name, who.late
        ('5531', 'Jane', 'Doe', False)
        """

        def pick(name: str) -> object:
            mine, theirs = getattr(self, name), getattr(other, name)
            return (
                mine if mine not in (None, "") else (theirs if theirs not in (None, "") else None)
            )

        return Identity(**{f.name: pick(f.name) for f in fields(Identity)})

    def dated(self, other: Identity) -> Identity:
        """This person, with ``other``'s submission time and late mark (known or not).

        >>> Identity("5531", late=True).dated(Identity("9", late=False)).late
        False
        """
        return replace(self, timestamp=other.timestamp, late=other.late)

    def known(self) -> dict[str, str]:
        """The person's fields that are known, by name (what a gradebook ``Student`` row
        gets): the LMS id, the names and the email."""
        return {name: getattr(self, name) for name in PERSON if getattr(self, name)}


#: The fields of :class:`Identity` that say who the person is (not when they submitted).
PERSON = ("lms_user_id", "first_name", "last_name", "email")


@dataclass(frozen=True)
class Member(HoldsContent):
    """One file of a download, as the collector read it (its bytes: ``data``).

    ``parts`` is its path below the download's wrapper folder; a file read from a zip
    that a student uploaded continues the path of that zip
    (``("jane_1_2_work.zip", "work", "hw.ipynb")``).
    """

    parts: tuple[str, ...]
    #: what was read, for notebooks (bytes, or where the collector's spool keeps them) and
    #: metadata files (bytes); None if not read
    content: Content | None = None
    problem: str | None = None  #: why it could not be read (unsafe path, too large, ...)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def path(self) -> str:
        return "/".join(self.parts)

    @property
    def is_notebook(self) -> bool:
        return self.name.lower().endswith(".ipynb")


@dataclass
class StudentFacts:
    """What the intake says of one student, whatever holds it: the fields that a
    :class:`StudentRecord` and the collector's ``Submission`` share.

    Only ``student`` is positional; a class built on this one puts its own fields next.
    """

    student: str  #: the id used in the course (nbgrader's student id); filesystem-safe
    _: KW_ONLY
    identity: Identity = Identity()  #: who they are, when they submitted, whether late
    problem: str | None = None  #: why nothing can be graded (status ``invalid``)
    flags: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  #: this student's files not graded
    missing: bool = False  #: on the roster, nothing submitted

    def facts(self) -> dict[str, object]:
        """These fields by name, each list copied: what makes another holder of them."""
        return {f.name: copy(getattr(self, f.name)) for f in fields(StudentFacts)}


@dataclass
class StudentRecord(StudentFacts):
    """One student of the class, as the download (and the roster) describe them."""

    display_name: str | None = None  #: the name as the download writes it
    member: Member | None = None  #: the notebook to grade


@dataclass(frozen=True)
class Context:
    """What a layout parser may know besides the members."""

    notebook: str | None = None  #: the assignment's notebook name, without ``.ipynb``
    assignment: str | None = None
    wrapper: tuple[str, ...] = ()  #: folders that wrapped the whole download
    repos: dict[str, str] = field(default_factory=dict)  #: repository -> username (GitHub roster)

    @property
    def wanted(self) -> str | None:
        return f"{self.notebook}.ipynb" if self.notebook else None


@dataclass
class Intake:
    """A whole download, parsed."""

    layout: str  #: the layout used (``canvas``, ``moodle``, ..., ``plain``)
    records: list[StudentRecord] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  #: members that belong to no student
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Claim:
    """One member of a download, attributed by a layout parser to one student.

    A member that several students share (a group submission) gives one claim each.
    """

    student: str  #: the student's id as the download gives it (normalized by ``assemble``)
    member: Member
    base: str | None = None  #: the notebook's name as the student meant it; None: not a notebook
    newer: tuple = ()  #: sorts higher for a newer upload (attachment id, attempt time)
    identity: Identity = Identity()  #: who uploaded it, when, whether late
    display_name: str | None = None
    why_ignored: str = "not a notebook"  #: said of the member when it is not graded


def normalize_student_id(name: str) -> str:
    """Return a safe student id for a file or folder name.

    Every script is transliterated to ASCII by ``anyascii`` (accents dropped, Chinese,
    Arabic, Cyrillic... spelt in Latin letters), anything outside ``[A-Za-z0-9._-]``
    becomes ``_``, runs of ``_`` collapse, and leading dots are removed; a name with
    nothing left is ``student``.

    >>> normalize_student_id("Zoë Müller")
    'Zoe_Muller'
    >>> normalize_student_id("../../etc/passwd")
    'etc_passwd'
    >>> normalize_student_id("李雷"), normalize_student_id("Иван Петров")
    ('LiLei', 'Ivan_Petrov')
    >>> normalize_student_id("\u200b")
    'student'
    """
    from anyascii import anyascii  # here: the command line's help imports no more than it needs

    folded = anyascii(name)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", folded)
    safe = re.sub(r"_+", "_", safe).strip("._-")
    safe = safe[:MAX_ID_LENGTH].rstrip("._-")
    return safe or "student"


def split_name(full: str | None) -> tuple[str | None, str | None]:
    """Split ``"First Middle Last"`` or ``"Last, First"`` into ``(first, last)``.

    >>> split_name("Jane van Dyke")
    ('Jane van', 'Dyke')
    >>> split_name("Doe, Jane")
    ('Jane', 'Doe')
    >>> split_name("Cher")
    (None, 'Cher')
    """
    if not full or not full.strip():
        return None, None
    full = " ".join(full.split())
    if "," in full:
        last, first = (s.strip() for s in full.split(",", 1))
        return first or None, last or None
    if " " not in full:
        return None, full
    first, last = full.rsplit(" ", 1)
    return first, last


def assemble(
    layout: str,
    claims: Iterable[Claim],
    notebook: str | None,
    *,
    ignored: Iterable[str] = (),
    warnings: Iterable[str] = (),
    keep_ids: bool = False,
    drop_empty: bool = False,
) -> Intake:
    """Group claims by student into records, each with its notebook chosen.

    Ids are folded by :func:`normalize_student_id` (unless ``keep_ids``); two ids that
    fold alike stay two students, the second as ``<id>-2`` with a flag.  Names, email
    and LMS id come from the first claim that gives them.  Claims for one id that
    disagree on the student's name are flagged: the id decides, the instructor looks.
    With ``drop_empty``, a student who sent no notebook at all (only a text entry, a
    receipt, a PDF) is not a submission: their files are listed as ignored, and a
    roster lists them as ``missing``.
    """
    by_student: dict[str, list[Claim]] = {}
    for claim in claims:
        by_student.setdefault(claim.student, []).append(claim)
    records = []
    ignored = list(ignored)
    taken: dict[str, str] = {}
    for original in sorted(by_student):
        group = by_student[original]
        student = original if keep_ids else normalize_student_id(original)
        rec = StudentRecord(student)
        if student in taken:
            n = 2
            while f"{student}-{n}" in taken:
                n += 1
            rec.flags.append(f"id-collision: {original!r} and {taken[student]!r} normalize alike")
            rec.student = student = f"{student}-{n}"
        taken[student] = original
        for c in group:
            rec.identity = rec.identity.merged(c.identity)
        rec.display_name = next((c.display_name for c in group if c.display_name), None)
        names = sorted({c.display_name for c in group if c.display_name})
        if len(names) > 1:
            rec.flags.append(
                f"ambiguous: uploads under id {original} carry different names ({', '.join(names)})"
            )
        # an unreadable member is a candidate too, so that its problem is what is reported
        notebooks = [c for c in group if c.base is not None or c.member.problem]
        seen = set()
        for c in group:
            if (
                c.base is None
                and not c.member.problem
                and c.member.name
                and c.member.path not in seen
            ):
                seen.add(c.member.path)
                rec.ignored.append(f"{c.member.path} ({c.why_ignored})")
        if drop_empty and not notebooks:
            ignored += [f"{item}; {original} sent no notebook" for item in rec.ignored]
            del taken[student]
            continue
        chosen = choose_notebook(rec, notebooks, notebook)
        # the graded upload dates it; nothing graded: the newest upload; no notebook: none
        dated = chosen or max(notebooks, key=lambda c: c.newer, default=None)
        rec.identity = rec.identity.dated(dated.identity if dated else Identity())
        records.append(rec)
    records.sort(key=lambda r: r.student)
    return Intake(layout, records, ignored, list(warnings))


def choose_notebook(
    record: StudentRecord, candidates: Iterable[Claim], notebook: str | None
) -> Claim | None:
    """Set ``record.member`` to the notebook to grade (and return its claim), or say why not.

    The rules, in order:

    * a notebook named like the assignment's (``notebook + ".ipynb"``, compared on
      ``Claim.base``) wins; among several, the newest;
    * otherwise, when every notebook has the same base name (one file uploaded several
      times), the newest one, flagged as graded under another name;
    * otherwise, several notebooks under different names: nothing is graded
      (``record.problem`` says so).

    Every candidate not chosen is added to ``record.ignored``.  Candidates that tie on
    newness with different contents: the first by path is graded, and a flag says so.
    """
    found = list(candidates)
    unreadable = [c for c in found if c.member.problem]
    usable = [c for c in found if not c.member.problem]
    record.ignored.extend(f"{c.member.path} ({c.member.problem})" for c in unreadable)
    if not usable:
        if unreadable:
            record.problem = "; ".join(dict.fromkeys(c.member.problem or "" for c in unreadable))
        else:
            record.problem = record.problem or "no .ipynb notebook found"
        return None
    wanted = f"{notebook}.ipynb" if notebook else None
    named = [c for c in usable if wanted and c.base == wanted]
    pool = named or usable
    if not named and len({c.base for c in pool}) > 1:
        names = ", ".join(sorted(c.member.path for c in pool))
        record.problem = f"several notebooks, cannot tell which to grade: {names}"
        return None
    newest = max(c.newer for c in pool)
    top = sorted((c for c in pool if c.newer == newest), key=lambda c: c.member.path)
    chosen = top[0]
    ties = [c for c in top[1:] if c.member.sha256 != chosen.member.sha256]
    if ties:
        record.flags.append(
            f"ambiguous: graded {chosen.member.path}; as new and different: "
            + ", ".join(c.member.path for c in ties)
        )
    if not named and wanted:
        record.flags.append(f"other-name: graded {chosen.member.path} (not named {wanted})")
    record.member = chosen.member
    record.ignored.extend(
        f"{c.member.path} ({'older upload' if c.newer < newest else 'not graded'})"
        for c in usable
        if c is not chosen and c.member is not chosen.member
    )
    return chosen
