"""Read a folder or a zip safely: its entries, as members, under one admission policy.

:func:`read_members` lists the entries of a folder or a zip (a zip may wrap everything
in one folder), and one admission policy makes each entry a member, whichever it came
from: notebooks and the metadata files a layout needs are read, the zips that students
uploaded are opened (one level deep, with the same policy), and every entry that cannot
be graded (a symbolic link, a named pipe, a file too large or too deep, an unsafe zip
path) is a member with the reason, so that it is listed.  The notebooks read wait in
the collection's spool (``autograder/intake/spool.py``), not in memory.

Nothing is extracted to disk by name: zip members are read in memory with size,
depth and path checks, so ``../`` paths, absolute paths, symlinks and zip bombs
cannot write anywhere; in a folder, no link is followed and only regular files are
opened (never a pipe, which would block).
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from autograder.course import UsageError
from autograder.intake.records import Member
from autograder.intake.spool import Spool

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


def read_members(
    path: Path | str,
    *,
    select: Callable[[tuple[str, ...]], bool] | None = None,
    spool: Spool | None = None,
) -> tuple[list[Member], tuple[str, ...]]:
    """The files of a folder or zip, and the wrapper folder(s) around them.

    Both are listed as entries, and one admission policy (:func:`_admit`) makes each
    entry a member: notebooks and metadata files are read (a notebook into ``spool``,
    when given, rather than memory); a zip among the files is
    opened and its members listed after its own path (one level deep); what cannot be
    graded (a symbolic link, a named pipe, a file too large or too deep) is a member
    with the reason, so that it is listed.  Only OS and Jupyter bookkeeping
    (``__MACOSX``, ``.ipynb_checkpoints``, hidden files) is passed over without a word.
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"submissions path {path} does not exist")
    budget = _Budget(spool=spool)
    if path.is_dir():
        entries = _folder_entries(path, select)
        wrapper: tuple[str, ...] = (path.name,)
        return [m for e in entries for m in _admit(e, budget, inner=False)], wrapper
    if zipfile.is_zipfile(path):
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise UsageError(f"cannot open zip {path}: {exc}") from exc
        with archive:
            return _zip_members(archive, (), budget, inner=False)
    raise UsageError(f"{path} is neither a folder nor a zip file")


def _wanted(name: str) -> bool:
    """True for the files whose content is read: notebooks and layout metadata."""
    return name.lower().endswith(".ipynb") or name in METADATA_NAMES


def _is_zip(name: str) -> bool:
    return name.lower().endswith(".zip")


def _bookkeeping(parts: tuple[str, ...]) -> bool:
    """True for the OS's and Jupyter's own files, which are no student's entry."""
    return any(part in _SKIP_NAMES or part.startswith(".") for part in parts)


@dataclass
class _Budget:
    """Bytes still allowed to be read from one download's zips, and where notebooks go."""

    left: int = MAX_ZIP_TOTAL_BYTES
    spool: Spool | None = None  #: keeps the notebooks read (None: they stay in memory)

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


_FILE, _FOLDER, _LINK, _UNSAFE = "file", "folder", "link", "unsafe"
#: What a special file is, by its ``stat`` type (none is ever opened).
_SPECIAL = MappingProxyType(
    {
        stat.S_IFIFO: "a named pipe",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a device",
        stat.S_IFBLK: "a device",
    }
)


@dataclass(frozen=True)
class _Entry:
    """One entry of a folder or a zip, as listed, before the admission policy."""

    parts: tuple[str, ...]  #: its path below the wrapper (after an uploaded zip's own)
    kind: str  #: ``file``, ``folder``, ``link``, ``unsafe``, or what a special file is
    size: int = 0  #: as listed (a zip's declared size is not trusted when read)
    read: Callable[[int], bytes] | None = None  #: a file's first ``n`` bytes, at most
    name: str = ""  #: a zip member's name as the zip writes it
    zipped: bool = False  #: read out of a zip: counts against the download's budget
    empty: bool = False  #: a folder with nothing below it


def _kind(mode: int) -> str:
    """The entry kind of a ``stat`` mode (a mode without a type is a file's)."""
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        return _LINK
    if kind == stat.S_IFDIR:
        return _FOLDER
    return _SPECIAL.get(kind, _FILE)


def _admit(entry: _Entry, budget: _Budget, *, inner: bool) -> Iterator[Member]:
    """The admission policy: the members one entry of a folder or zip becomes.

    ``inner``: the entry is in a zip that a student uploaded (not opened further).
    """
    parts = entry.parts
    if entry.kind == _UNSAFE:
        yield Member(parts or ("unsafe",), None, f"zip member {entry.name!r} has an unsafe path")
        return
    if entry.kind == _FOLDER:
        if len(parts) == 1 and entry.empty and not inner:
            yield Member(parts + ("",))  # an empty student folder is still a student
        return
    if len(parts) > MAX_DEPTH:
        yield Member(parts[:1] + ("deep",), None, "is nested too deeply")
        return
    if entry.kind == _LINK:
        yield Member(parts, None, "is a symbolic link (not followed)")
        return
    if entry.kind != _FILE or entry.read is None:
        yield Member(parts, None, f"is {entry.kind} (not read)")
        return
    name = parts[-1]
    if _is_zip(name) and not inner:
        yield from _inner_zip(entry, budget)
        return
    if not _wanted(name):
        yield Member(parts)
        return
    limit = MAX_NOTEBOOK_BYTES if name.lower().endswith(".ipynb") else MAX_METADATA_BYTES
    too_large = f"file is larger than {limit // 2**20} MiB"
    if entry.size > limit:
        yield Member(parts, None, too_large)
        return
    if entry.zipped and not budget.take(entry.size):
        yield Member(parts, None, "the zip is too large in total; this member was not read")
        return
    try:
        data = entry.read(limit + 1)  # the declared size is not trusted
    except Exception as exc:  # corrupt member, bad CRC, unsupported compression, EACCES
        yield Member(parts, None, f"cannot be read: {exc}")
        return
    if len(data) > limit:
        yield Member(parts, None, too_large)
    elif budget.spool is not None and name.lower().endswith(".ipynb") and data:
        yield Member(parts, budget.spool.put(data))
    else:
        yield Member(parts, data)


def _inner_zip(entry: _Entry, budget: _Budget) -> Iterator[Member]:
    """The members of a zip a student uploaded, after its own path; itself if unreadable."""
    parts = entry.parts
    if entry.size > MAX_INNER_ZIP_BYTES:
        yield Member(parts, None, f"uploaded zip is larger than {MAX_INNER_ZIP_BYTES // 2**20} MiB")
        return
    try:
        if entry.zipped and not budget.take(entry.size):
            raise OSError("the download is too large in total")
        assert entry.read is not None
        archive = zipfile.ZipFile(io.BytesIO(entry.read(MAX_INNER_ZIP_BYTES + 1)))
    except (zipfile.BadZipFile, OSError, ValueError):
        yield Member(parts)  # not a zip after all: an ordinary file
        return
    with archive:
        inner, _ = _zip_members(archive, parts, budget, inner=True)
    yield from inner or [Member(parts)]


def _folder_entries(root: Path, select) -> Iterator[_Entry]:
    """Every entry below ``root``, sorted by path, from ``lstat``: no link is followed and
    no special file opened.  ``select`` leaves out the paths it does not accept."""

    def walk(folder: Path, above: tuple[str, ...]) -> Iterator[_Entry]:
        with os.scandir(folder) as listing:
            children = sorted(listing, key=lambda child: child.name)
        for child in children:
            parts = above + (child.name,)
            if _bookkeeping(parts[-1:]) or (select is not None and not select(parts)):
                continue
            path = Path(child.path)
            info = child.stat(follow_symlinks=False)
            kind = _kind(info.st_mode)
            if kind == _FOLDER:
                below = list(walk(path, parts))
                yield _Entry(parts, _FOLDER, empty=not _has_entries(path))
                yield from below
            else:
                read = (lambda n, p=path: _read_file(p, n)) if kind == _FILE else None
                yield _Entry(parts, kind, info.st_size, read)

    return walk(root, ())


def _has_entries(folder: Path) -> bool:
    """True when ``folder`` holds anything at all."""
    with os.scandir(folder) as listing:
        return any(True for _ in listing)


def _read_file(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of the regular file at ``path`` (never a link, never blocking).

    The file is opened without following a link and without waiting on a pipe, and
    checked to be a regular file once open: what was swapped in since it was listed is
    not read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is no longer a regular file")
        return handle.read(n)


def _zip_members(
    archive: zipfile.ZipFile, prefix: tuple[str, ...], budget: _Budget, *, inner: bool
) -> tuple[list[Member], tuple[str, ...]]:
    """The members of ``archive`` (after ``prefix``), and the wrapper folder(s) it has."""
    entries, wrapper = _zip_entries(archive, prefix, inner=inner)
    return [m for e in entries for m in _admit(e, budget, inner=inner)], wrapper


def _zip_entries(
    archive: zipfile.ZipFile, prefix: tuple[str, ...], *, inner: bool
) -> tuple[list[_Entry], tuple[str, ...]]:
    """Every entry of ``archive``, the unsafe ones first, and its wrapper folder(s)."""
    unsafe: list[_Entry] = []
    safe = {}  # every member with a safe path, bookkeeping included
    for info in archive.infolist():
        name = info.filename.replace("\\", "/")
        pure = PurePosixPath(name)
        parts = tuple(p for p in pure.parts if p not in ("", "."))
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            # never used as a path; attributed to the student it names, if any
            clean = tuple(p for p in parts if p not in ("..", "/"))
            unsafe.append(_Entry(prefix + clean, _UNSAFE, name=name))
        elif parts:
            safe[info.filename] = parts
    kept = {name: parts for name, parts in safe.items() if not _bookkeeping(parts)}
    wrapper = () if inner else _common_wrapper(list(kept.values()))

    def below(parts: tuple[str, ...]) -> tuple[str, ...]:
        return parts[len(wrapper) :] if parts[: len(wrapper)] == wrapper else ()

    listed = {name: rest for name, parts in kept.items() if (rest := below(parts))}
    # the folders something is in (a folder with nothing at all in it is a student's)
    folders = {
        rest[:i] for parts in safe.values() for rest in [below(parts)] for i in range(1, len(rest))
    }
    entries = []
    for info in archive.infolist():
        parts = listed.get(info.filename)
        if parts is None:
            continue
        if info.is_dir():
            entries.append(_Entry(prefix + parts, _FOLDER, empty=parts not in folders))
            continue
        read = lambda n, i=info: _read(archive, i, n)  # noqa: E731
        kind = _kind(info.external_attr >> 16)
        kind = _FILE if kind == _FOLDER else kind  # a directory bit on a file entry
        entries.append(_Entry(prefix + parts, kind, info.file_size, read, zipped=True))
    return unsafe + entries, wrapper


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, n: int) -> bytes:
    """A member's first ``n`` bytes, at most."""
    with archive.open(info) as handle:
        return handle.read(n)


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
