"""Collect a class's submissions from a folder or an LMS download, safely.

Reading is this module's concern; who is who is the layout parsers'
(``autograder/intake/``).  :func:`read_members` lists the files of a folder or a
zip (a zip may wrap everything in one folder), reading notebooks, the metadata
files a layout needs, and the zips that students uploaded (one level deep, with the
same checks).  :func:`collect_class` hands the members to the layout's parser,
applies a roster, and returns one :class:`Submission` per student.

Nothing is extracted to disk by name: zip members are read in memory with size,
depth and path checks, so ``../`` paths, absolute paths, symlinks and zip bombs
cannot write anywhere.  A problem with one submission becomes that submission's
``problem`` (graded as ``invalid``); the batch goes on.
"""

from __future__ import annotations

import hashlib
import io
import re
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from autograder.course import UsageError
from autograder.intake.detect import parse_download
from autograder.intake.records import (
    MAX_ID_LENGTH,
    Context,
    Member,
    StudentRecord,
    normalize_student_id,
)
from autograder.intake.roster import Roster, apply_roster

__all__ = [
    "MAX_ID_LENGTH",
    "Collected",
    "Submission",
    "collect",
    "collect_class",
    "normalize_student_id",
    "read_members",
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
    lms_user_id: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None
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
        lms_user_id=rec.lms_user_id,
        first_name=rec.first_name,
        last_name=rec.last_name,
        email=rec.email,
        timestamp=rec.timestamp,
        late=rec.late,
        ignored=list(rec.ignored),
        missing=rec.missing,
    )


def read_members(
    path: Path | str, *, select: Callable[[tuple[str, ...]], bool] | None = None
) -> tuple[list[Member], tuple[str, ...]]:
    """The files of a folder or zip, and the wrapper folder(s) around them.

    Notebooks and metadata files are read; a zip among the files is opened and its
    members listed after its own path (one level deep).
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
        rel = item.relative_to(root)
        if any(part in _SKIP_NAMES or part.startswith(".") for part in rel.parts):
            continue
        if len(rel.parts) > MAX_DEPTH or (select is not None and not select(rel.parts)):
            continue
        if item.is_symlink():
            yield Member(rel.parts, None, "is a symbolic link (not followed)")
            continue
        if not item.is_file():
            if len(rel.parts) == 1 and not any(item.iterdir()):
                yield Member(rel.parts + ("",))  # an empty student folder is still a student
            continue
        if not str(item.resolve()).startswith(str(root_real)):
            continue
        size = item.stat().st_size
        name = item.name
        if _is_zip(name):
            yield from _inner_zip(rel.parts, size, item.read_bytes, budget)
            continue
        if not _wanted(name):
            yield Member(rel.parts)
            continue
        limit = MAX_NOTEBOOK_BYTES if name.lower().endswith(".ipynb") else MAX_METADATA_BYTES
        if size > limit:
            yield Member(rel.parts, None, f"file is larger than {limit // 2**20} MiB")
            continue
        yield Member(rel.parts, item.read_bytes())


def _inner_zip(parts, size, read: Callable[[], bytes], budget: _Budget) -> Iterator[Member]:
    """The members of a zip a student uploaded, after its own path; itself if unreadable."""
    if size > MAX_INNER_ZIP_BYTES:
        yield Member(parts, None, f"uploaded zip is larger than {MAX_INNER_ZIP_BYTES // 2**20} MiB")
        return
    try:
        data = read()
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        yield Member(parts)  # not a zip after all: an ordinary file
        return
    with archive:
        inner, _ = _zip_members(archive, tuple(parts), budget, inner=True)
    yield from inner or [Member(parts)]


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
            clean = tuple(p for p in parts if p not in ("..", "/"))
            out.append(
                Member(
                    prefix + (clean or ("unsafe",)), None, f"zip member {name!r} has an unsafe path"
                )
            )
            continue
        if not parts or any(p in _SKIP_NAMES or p.startswith(".") for p in parts):
            continue
        parts_of[info.filename] = parts
    wrapper = () if inner else _common_wrapper(list(parts_of.values()))
    for info in members:
        parts = parts_of.get(info.filename)
        if parts is None:
            continue
        parts = parts[len(wrapper) :]
        if not parts:
            continue
        where = prefix + parts
        if info.is_dir():
            if len(parts) == 1 and not inner:
                out.append(Member(where + ("",)))
            continue
        if len(where) > MAX_DEPTH:
            out.append(
                Member(
                    where[:1] + ("deep",),
                    None,
                    f"zip member {info.filename!r} is nested too deeply",
                )
            )
            continue
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            out.append(
                Member(
                    where, None, f"zip member {info.filename!r} is a symbolic link (not followed)"
                )
            )
            continue
        if _is_zip(parts[-1]) and not inner:
            out.extend(
                _inner_zip(where, info.file_size, lambda i=info: _read(archive, i, budget), budget)
            )
            continue
        if not _wanted(parts[-1]):
            out.append(Member(where))
            continue
        limit = MAX_NOTEBOOK_BYTES if parts[-1].lower().endswith(".ipynb") else MAX_METADATA_BYTES
        if info.file_size > limit:
            out.append(Member(where, None, f"file is larger than {limit // 2**20} MiB"))
            continue
        if not budget.take(info.file_size):
            out.append(
                Member(where, None, "the zip is too large in total; this member was not read")
            )
            continue
        try:
            data = _read(archive, info, None, limit)
        except Exception as exc:  # corrupt member, bad CRC, unsupported compression
            out.append(Member(where, None, f"zip member {info.filename!r} cannot be read: {exc}"))
            continue
        if len(data) > limit:
            out.append(Member(where, None, f"file is larger than {limit // 2**20} MiB"))
            continue
        out.append(Member(where, data))
    return out, wrapper


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
