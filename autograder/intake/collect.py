"""Collect a class's submissions from a folder or an LMS download, safely.

Reading is this module's concern; who is who is the layout parsers'
(``autograder/intake/``).  :func:`read_members` lists the files of a folder or a
zip (a zip may wrap everything in one folder), reading notebooks, the metadata
files a layout needs, and the zips that students uploaded (one level deep).
:func:`collect_class` hands the members to the layout's parser, applies a roster,
and returns one :class:`Submission` per student.

One admission policy, :func:`admit`, decides for every entry of a folder, a zip or an
uploaded zip alike whether it is skipped, read, opened, listed by name, or refused with
the reason; a refused entry is listed as ignored with that reason (and is its
student's ``problem`` when nothing else can be graded).  Nothing is extracted to disk
by name: zip members are read in memory with size, depth and path checks, so ``../``
paths, absolute paths, symlinks and zip bombs cannot write anywhere, and a named pipe
is never opened.  A problem with one submission becomes that submission's ``problem``
(graded as ``invalid``); the batch goes on.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path, PurePosixPath

from autograder.course import UsageError
from autograder.intake.detect import parse_download
from autograder.intake.records import (
    MAX_ID_LENGTH,
    Context,
    Identity,
    Member,
    StudentRecord,
    normalize_student_id,
)
from autograder.intake.roster import Roster, apply_roster

__all__ = [
    "MAX_ID_LENGTH",
    "Admission",
    "Collected",
    "Entry",
    "Kind",
    "Submission",
    "Verdict",
    "admit",
    "collect",
    "collect_class",
    "normalize_student_id",
    "read_members",
    "skipped",
]

#: Largest notebook accepted, in bytes (an LMS download of a flooded notebook can be huge).
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
#: Largest total uncompressed size read from one zip.
MAX_ZIP_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
#: Largest zip a student uploaded that is opened to look for their notebook.
MAX_INNER_ZIP_BYTES = 256 * 1024 * 1024
#: Largest metadata file read (``submission_metadata.yml``, ``timestamp.txt``).
MAX_METADATA_BYTES = 16 * 1024 * 1024
#: Deepest member path accepted in a zip.
MAX_DEPTH = 8
#: Files a layout parser reads besides notebooks.
METADATA_NAMES = frozenset({"submission_metadata.yml", "timestamp.txt"})

_SKIP_NAMES = frozenset({"__MACOSX", ".ipynb_checkpoints", ".DS_Store"})
#: The Unix file types that are not regular files, folders or links: never opened.
_NOT_REGULAR = frozenset({stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK})
#: A single top-level folder of this form is a student's (Moodle, Gradescope), not a wrapper.
_STUDENT_FOLDER = re.compile(r"^(.*_\d+_assignsubmission_[a-z0-9]+_|submission_\d+)$")
#: The wrapper GitHub Classroom's clone and Gradescope's export put around the class.
_LAST_WRAPPER = re.compile(r"^(.+-submissions|assignment_\d+_export)$")


@dataclass
class Submission:
    """One student's submission as collected, before grading."""

    student: str  #: normalized, filesystem-safe id
    origin: str  #: where it came from (file or member name), for messages
    data: bytes | None = None  #: the notebook's bytes, None when unusable
    problem: str | None = None  #: why it cannot be graded (status ``invalid``)
    flags: list[str] = field(default_factory=list)
    identity: Identity = Identity()
    timestamp: datetime | None = None  #: submission time, when the layout gives it
    late: bool | None = None  #: the LMS's own late mark, when it gives one
    ignored: list[str] = field(default_factory=list)  #: this student's files not graded
    missing: bool = False  #: on the roster, nothing submitted

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data or b"").hexdigest()


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

    Returns
    -------
    Collected, its submissions sorted by student id, ids unique.
    """
    members, wrapper = read_members(path, select=select)
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
    problem, data = rec.problem, member.data if member is not None else None
    if member is not None and not data and problem is None:
        problem, data = "the notebook file is empty", None
    return Submission(
        rec.student,
        member.path if member is not None else (rec.display_name or rec.student),
        data,
        problem,
        list(rec.flags),
        rec.identity,
        timestamp=rec.timestamp,
        late=rec.late,
        ignored=list(rec.ignored),
        missing=rec.missing,
    )


def read_members(
    path: Path | str, *, select: Callable[[tuple[str, ...]], bool] | None = None
) -> tuple[list[Member], tuple[str, ...]]:
    """The files of a folder or zip, and the wrapper folder(s) around them.

    Each entry is admitted or refused by :func:`admit`; notebooks and metadata files
    are read, and a zip among the files is opened and its members listed after its own
    path (one level deep).
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"submissions path {path} does not exist")
    if path.is_dir():
        members = list(_folder_members(path, select))
        wrapper: tuple[str, ...] = (path.name,)
    elif zipfile.is_zipfile(path):
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise UsageError(f"cannot open zip {path}: {exc}") from exc
        with archive:
            members, wrapper = _zip_members(archive, (), _Budget(), inner=False)
    else:
        raise UsageError(f"{path} is neither a folder nor a zip file")
    return members, wrapper


class Kind(str, Enum):
    """What an entry of a folder or a zip is."""

    FILE = "file"
    FOLDER = "folder"
    LINK = "link"  #: a symbolic link
    OTHER = "other"  #: a named pipe, a socket, a device

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Entry:
    """One entry of a folder or a zip, as the admission policy sees it (nothing read).

    A zip lists its folders as entries of their own; a folder on disk lists one only
    when it holds nothing, since what it holds stands for it otherwise.
    """

    parts: tuple[str, ...]  #: its path in the download; in an uploaded zip, after the zip's
    kind: Kind
    size: int = 0  #: bytes, as the folder or the zip says
    label: str = ""  #: how a message names it (``zip member 'x'``); empty: by its path
    inner: bool = False  #: in a zip that a student uploaded
    unsafe: bool = False  #: its path leads out of the download (``..``, absolute, elsewhere)


class Verdict(str, Enum):
    """What :func:`admit` decides for an entry."""

    SKIP = "skip"  #: no part of any submission: the system's own files, another assignment's
    MARK = "mark"  #: a student's folder: the student is there, whatever it holds
    READ = "read"  #: a notebook or a layout's metadata file, read up to ``limit`` bytes
    OPEN = "open"  #: a zip that a student uploaded: its members are listed after its path
    LIST = "list"  #: any other file: listed by name, not read
    REFUSE = "refuse"  #: not read, and listed with the reason (its student's problem)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Admission:
    """The policy's decision for one entry: the member it makes, and how to read it."""

    verdict: Verdict
    parts: tuple[str, ...] = ()  #: the member's path (a refused one's may be shortened)
    reason: str | None = None  #: why it is refused
    limit: int = 0  #: the most bytes read (``READ``, ``OPEN``)

    def member(self) -> Member:
        """The member listed for a ``MARK``, ``LIST`` or ``REFUSE`` (nothing read)."""
        return Member(self.parts, None, self.reason)


def admit(entry: Entry, select: Callable[[tuple[str, ...]], bool] | None = None) -> Admission:
    """The one admission policy of every entry of a folder, a zip, or a zip uploaded in one.

    In order: a path that leads out of the download is refused; the system's and
    editors' own files (``__MACOSX``, ``.DS_Store``, dot files) and what ``select`` does
    not take are skipped; a folder at the top marks its student; deeper than
    :data:`MAX_DEPTH`, a symbolic link, or not a regular file (a named pipe is never
    opened) is refused; a zip uploaded beside the notebooks is opened (not one inside
    it); a notebook or metadata file is read, refused when larger than its limit; any
    other file is listed by name.

    >>> admit(Entry(("fifo", "work.ipynb"), Kind.OTHER)).reason
    'is not a regular file'
    >>> admit(Entry(("alice", "hw.ipynb"), Kind.FILE, size=10)).verdict
    <Verdict.READ: 'read'>
    """
    parts = entry.parts
    if entry.unsafe:
        clean = tuple(p for p in parts if p not in ("..", "/"))
        return _refuse(entry, clean or ("unsafe",), "has an unsafe path")
    if skipped(parts, select):
        return Admission(Verdict.SKIP)
    if entry.kind is Kind.FOLDER:
        top = len(parts) == 1 and not entry.inner
        return Admission(Verdict.MARK, parts + ("",)) if top else Admission(Verdict.SKIP)
    if len(parts) > MAX_DEPTH:
        return _refuse(entry, parts[:1] + ("deep",), "is nested too deeply")
    if entry.kind is Kind.LINK:
        return _refuse(entry, parts, "is a symbolic link (not followed)")
    if entry.kind is not Kind.FILE:
        return _refuse(entry, parts, "is not a regular file")
    name = parts[-1]
    if _is_zip(name) and not entry.inner:
        if entry.size > MAX_INNER_ZIP_BYTES:
            reason = f"uploaded zip is larger than {MAX_INNER_ZIP_BYTES // 2**20} MiB"
            return Admission(Verdict.REFUSE, parts, reason)
        return Admission(Verdict.OPEN, parts, limit=MAX_INNER_ZIP_BYTES)
    if not _wanted(name):
        return Admission(Verdict.LIST, parts)
    limit = MAX_NOTEBOOK_BYTES if name.lower().endswith(".ipynb") else MAX_METADATA_BYTES
    if entry.size > limit:
        return Admission(Verdict.REFUSE, parts, f"file is larger than {limit // 2**20} MiB")
    return Admission(Verdict.READ, parts, limit=limit)


def _refuse(entry: Entry, parts: tuple[str, ...], why: str) -> Admission:
    return Admission(Verdict.REFUSE, parts, f"{entry.label} {why}" if entry.label else why)


def skipped(
    parts: tuple[str, ...], select: Callable[[tuple[str, ...]], bool] | None = None
) -> bool:
    """The rules of :func:`admit` that go by the path alone: True for the system's and
    editors' own files, and for what ``select`` does not take (a walk need not look at
    such an entry at all)."""
    if not parts or any(part in _SKIP_NAMES or part.startswith(".") for part in parts):
        return True
    return select is not None and not select(parts)


def _wanted(name: str) -> bool:
    """True for the files whose content is read: notebooks and layout metadata."""
    return name.lower().endswith(".ipynb") or name in METADATA_NAMES


def _is_zip(name: str) -> bool:
    return name.lower().endswith(".zip")


@dataclass
class _Budget:
    """Bytes still allowed to be read from one download's zips."""

    left: int = MAX_ZIP_TOTAL_BYTES

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


def _folder_members(root: Path, select) -> Iterator[Member]:
    root_real = root.resolve()
    budget = _Budget()
    for item in sorted(root.rglob("*")):
        parts = item.relative_to(root).parts
        if skipped(parts, select):  # nothing of it is looked at
            continue
        entry = _folder_entry(item, parts, root_real)
        if entry is None:
            continue
        admission = admit(entry, select)
        if admission.verdict is Verdict.SKIP:
            continue
        if admission.verdict is Verdict.READ:
            yield Member(admission.parts, item.read_bytes())
        elif admission.verdict is Verdict.OPEN:
            yield from _inner_zip(admission.parts, item.read_bytes, budget)
        else:
            yield admission.member()


def _folder_entry(item: Path, parts: tuple[str, ...], root_real: Path) -> Entry | None:
    """The entry of ``item`` (from its ``lstat``: nothing is opened), None when it is gone."""
    try:
        info = item.lstat()
    except FileNotFoundError:  # removed since the folder was listed
        return None
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return Entry(parts, Kind.FOLDER) if _holds_nothing(item) else None
    if stat.S_ISLNK(mode):
        return Entry(parts, Kind.LINK)
    if not stat.S_ISREG(mode):
        return Entry(parts, Kind.OTHER)
    unsafe = not item.resolve().is_relative_to(root_real)
    return Entry(parts, Kind.FILE, info.st_size, unsafe=unsafe)


def _holds_nothing(folder: Path) -> bool:
    """True for an empty folder (one that cannot be listed is not gone into, nor listed)."""
    try:
        with os.scandir(folder) as found:
            return next(found, None) is None
    except OSError:
        return False


def _inner_zip(parts, read: Callable[[], bytes], budget: _Budget) -> Iterator[Member]:
    """The members of a zip a student uploaded, after its own path; itself if unreadable."""
    try:
        data = read()
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        yield Member(parts)  # not a zip after all: an ordinary file
        return
    with archive:
        inner, _ = _zip_members(archive, tuple(parts), budget, inner=True)
    yield from inner or [Member(parts)]


def _zip_kind(info: zipfile.ZipInfo) -> Kind:
    """What a zip member is, from its name and the Unix file type it records, if any."""
    if info.is_dir():
        return Kind.FOLDER
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return Kind.LINK
    return Kind.OTHER if kind in _NOT_REGULAR else Kind.FILE


def _zip_members(
    archive: zipfile.ZipFile, prefix: tuple[str, ...], budget: _Budget, *, inner: bool
) -> tuple[list[Member], tuple[str, ...]]:
    out: list[Member] = []
    members = archive.infolist()
    parts_of = {}
    for info in members:
        name = info.filename.replace("\\", "/")
        pure = PurePosixPath(name)
        parts = tuple(p for p in pure.parts if p not in ("", "."))
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            # never used as a path; attribute it to the student it names, if any
            label = f"zip member {name!r}"
            entry = Entry(prefix + parts, _zip_kind(info), label=label, unsafe=True)
            out.append(admit(entry).member())
            continue
        if not skipped(parts):
            parts_of[info.filename] = parts
    wrapper = () if inner else _common_wrapper(list(parts_of.values()))
    for info in members:
        parts = parts_of.get(info.filename)
        if parts is None:
            continue
        label = f"zip member {info.filename!r}"
        entry = Entry(prefix + parts[len(wrapper) :], _zip_kind(info), info.file_size, label, inner)
        admission = admit(entry)
        if admission.verdict is Verdict.SKIP:
            continue
        if admission.verdict is Verdict.READ:
            out.append(_read_member(archive, info, admission, budget))
        elif admission.verdict is Verdict.OPEN:
            read = functools.partial(_read, archive, info, budget, admission.limit)
            out.extend(_inner_zip(admission.parts, read, budget))
        else:
            out.append(admission.member())
    return out, wrapper


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, admission: Admission, budget: _Budget
) -> Member:
    """The member admitted to be read, or why it could not be, after all."""
    where, limit = admission.parts, admission.limit
    if not budget.take(info.file_size):
        return Member(where, None, "the zip is too large in total; this member was not read")
    try:
        data = _read(archive, info, None, limit)
    except Exception as exc:  # corrupt member, bad CRC, unsupported compression
        return Member(where, None, f"zip member {info.filename!r} cannot be read: {exc}")
    if len(data) > limit:
        return Member(where, None, f"file is larger than {limit // 2**20} MiB")
    return Member(where, data)


def _read(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget, limit: int | None = None
) -> bytes:
    """A member's bytes, at most ``limit + 1`` (the declared size is not trusted)."""
    if budget is not None and not budget.take(info.file_size):
        raise OSError("the download is too large in total")
    cap = (limit if limit is not None else MAX_INNER_ZIP_BYTES) + 1
    with archive.open(info) as handle:
        return handle.read(cap)


def _common_wrapper(all_parts: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The folder(s) that wrap everything in a zip (as an LMS often adds), if any."""
    prefix: tuple[str, ...] = ()
    while True:
        deeper = [p[len(prefix) :] for p in all_parts if len(p) > len(prefix)]
        if not deeper:
            return prefix
        heads = {p[0] for p in deeper}
        has_files_here = any(len(p) == 1 and p[0].endswith(".ipynb") for p in deeper)
        if len(heads) != 1 or has_files_here or all(len(p) == 1 for p in deeper):
            return prefix
        head = heads.pop()
        if _STUDENT_FOLDER.match(head):  # one student's folder of an LMS layout: not a wrapper
            return prefix
        prefix = prefix + (head,)
        if _LAST_WRAPPER.match(head):  # an LMS's own wrapper: what is inside is the class
            return prefix
