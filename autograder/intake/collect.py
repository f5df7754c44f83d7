"""Collect a class's submissions from a folder or an LMS zip, safely.

Accepted layouts (a zip may wrap either in one top-level folder):

* ``<student>.ipynb`` files;
* ``<student>/<any name>.ipynb`` folders.

Nothing is extracted to disk by name: zip members are read in memory with size,
depth and path checks, so ``../`` paths, absolute paths, symlinks and zip bombs
cannot write anywhere.  A problem with one submission becomes that submission's
``problem`` (graded as ``invalid``); the batch goes on.
"""

from __future__ import annotations

import hashlib
import re
import stat
import unicodedata
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.course import UsageError

#: Largest notebook accepted, in bytes (an LMS download of a flooded notebook can be huge).
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
#: Largest total uncompressed size read from one zip.
MAX_ZIP_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
#: Deepest member path accepted in a zip.
MAX_DEPTH = 8
#: Longest normalized student id.
MAX_ID_LENGTH = 64

_SKIP_NAMES = frozenset({"__MACOSX", ".ipynb_checkpoints", ".DS_Store"})


@dataclass
class Submission:
    """One student's submission as collected, before grading."""

    student: str  #: normalized, filesystem-safe id
    origin: str  #: where it came from (file or member name), for messages
    data: bytes | None = None  #: the notebook's bytes, None when unusable
    problem: str | None = None  #: why it cannot be graded (status ``invalid``)
    flags: list[str] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data or b"").hexdigest()


def normalize_student_id(name: str) -> str:
    """Return a safe student id for a file or folder name.

    Accents are folded to ASCII, anything outside ``[A-Za-z0-9._-]`` becomes ``_``,
    runs of ``_`` collapse, and leading dots are removed.

    >>> normalize_student_id("Zoë Müller")
    'Zoe_Muller'
    >>> normalize_student_id("../../etc/passwd")
    'etc_passwd'
    >>> normalize_student_id("李雷")
    'student'
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", folded)
    safe = re.sub(r"_+", "_", safe).strip("._-")
    safe = safe[:MAX_ID_LENGTH].rstrip("._-")
    return safe or "student"


def collect(path: Path | str, *, notebook: str | None = None) -> list[Submission]:
    """Collect every submission under ``path`` (a folder or a ``.zip``).

    Parameters
    ----------
    path : folder or zip file
    notebook : the assignment's notebook name (without ``.ipynb``), used to pick the
        right file when a student folder holds several notebooks.

    Returns
    -------
    list of Submission, sorted by student id, ids unique.
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"submissions path {path} does not exist")
    if path.is_dir():
        entries = list(_folder_entries(path))
    elif zipfile.is_zipfile(path):
        entries = list(_zip_entries(path))
    else:
        raise UsageError(f"{path} is neither a folder nor a zip file")
    groups = _group_by_student(entries)
    if not groups:
        raise UsageError(
            f"no submissions found in {path} (expected <student>.ipynb files or folders)"
        )
    return _make_submissions(groups, notebook)


# An entry is (parts of its path relative to the root, bytes or None, problem or None).
Entry = tuple[tuple[str, ...], "bytes | None", "str | None"]


def _folder_entries(root: Path) -> Iterator[Entry]:
    root_real = root.resolve()
    for item in sorted(root.rglob("*")):
        rel = item.relative_to(root)
        if any(part in _SKIP_NAMES or part.startswith(".") for part in rel.parts):
            continue
        if len(rel.parts) > MAX_DEPTH:
            continue
        if item.is_symlink():
            yield rel.parts, None, "is a symbolic link (not followed)"
            continue
        if not item.is_file():
            if len(rel.parts) == 1:  # a student folder: make sure it is seen even if empty
                yield rel.parts + ("",), None, None
            continue
        if not str(item.resolve()).startswith(str(root_real)):
            continue
        if item.stat().st_size > MAX_NOTEBOOK_BYTES:
            yield rel.parts, None, f"file is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB"
            continue
        yield rel.parts, item.read_bytes() if item.suffix == ".ipynb" else b"", None


def _zip_entries(path: Path) -> Iterator[Entry]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError(f"cannot open zip {path}: {exc}") from exc
    with archive:
        members = archive.infolist()
        parts_of = {}
        for info in members:
            name = info.filename.replace("\\", "/")
            pure = PurePosixPath(name)
            parts = tuple(p for p in pure.parts if p not in ("", "."))
            if pure.is_absolute() or re.match(r"^[A-Za-z]:", name) or ".." in parts:
                # never used as a path; attribute it to the student it names, if any
                clean = tuple(p for p in parts if p not in ("..", "/"))
                yield clean or ("unsafe",), None, f"zip member {name!r} has an unsafe path"
                continue
            if not parts or any(p in _SKIP_NAMES or p.startswith(".") for p in parts):
                continue
            parts_of[info.filename] = parts
        prefix = _common_wrapper(list(parts_of.values()))
        total = 0
        for info in members:
            parts = parts_of.get(info.filename)
            if parts is None:
                continue
            parts = parts[len(prefix) :]
            if not parts:
                continue
            if info.is_dir():
                if len(parts) == 1:
                    yield parts + ("",), None, None
                continue
            if len(parts) > MAX_DEPTH:
                yield (
                    parts[:1] + ("deep",),
                    None,
                    f"zip member {info.filename!r} is nested too deeply",
                )
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                yield parts, None, f"zip member {info.filename!r} is a symbolic link (not followed)"
                continue
            if not parts[-1].endswith(".ipynb"):
                yield parts, b"", None
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                yield parts, None, f"file is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB"
                continue
            total += info.file_size
            if total > MAX_ZIP_TOTAL_BYTES:
                yield parts, None, "the zip is too large in total; this member was not read"
                continue
            try:
                with archive.open(info) as handle:
                    data = handle.read(MAX_NOTEBOOK_BYTES + 1)
            except Exception as exc:  # corrupt member, bad CRC, unsupported compression
                yield parts, None, f"zip member {info.filename!r} cannot be read: {exc}"
                continue
            if len(data) > MAX_NOTEBOOK_BYTES:
                yield parts, None, f"file is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB"
                continue
            yield parts, data, None


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
        prefix = prefix + (heads.pop(),)


def _group_by_student(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Map each original student name (file stem or folder name) to its entries."""
    groups: dict[str, list[Entry]] = {}
    for parts, data, problem in entries:
        if len(parts) == 1:
            name = parts[0]
            if not name.endswith(".ipynb") and problem is None:
                continue  # a stray top-level file (README.txt): not a submission
            key = name[: -len(".ipynb")] if name.endswith(".ipynb") else name
            groups.setdefault(key, []).append((("<file>",), data, problem))
        else:
            groups.setdefault(parts[0], []).append((parts[1:], data, problem))
    return groups


def _make_submissions(groups: dict[str, list[Entry]], notebook: str | None) -> list[Submission]:
    submissions: list[Submission] = []
    taken: dict[str, str] = {}
    for original in sorted(groups):
        student = normalize_student_id(original)
        flags = []
        if student in taken:
            n = 2
            while f"{student}-{n}" in taken:
                n += 1
            flags.append(f"id-collision: {original!r} and {taken[student]!r} normalize alike")
            student = f"{student}-{n}"
        taken[student] = original
        sub = _pick_notebook(student, original, groups[original], notebook)
        sub.flags = flags + sub.flags
        submissions.append(sub)
    return sorted(submissions, key=lambda s: s.student)


def _pick_notebook(
    student: str, original: str, entries: list[Entry], notebook: str | None
) -> Submission:
    problems = [p for _, _, p in entries if p]
    notebooks = [
        (parts, data)
        for parts, data, p in entries
        if p is None and data is not None and (parts == ("<file>",) or parts[-1].endswith(".ipynb"))
    ]
    origin = original
    if not notebooks:
        why = "; ".join(problems) if problems else "no .ipynb notebook found"
        return Submission(student, origin, None, why)
    if len(notebooks) > 1 and notebook:
        named = [n for n in notebooks if n[0][-1] == f"{notebook}.ipynb"]
        notebooks = named or notebooks
    if len(notebooks) > 1:
        names = ", ".join("/".join(p) for p, _ in notebooks)
        return Submission(
            student, origin, None, f"several notebooks, cannot tell which to grade: {names}"
        )
    parts, data = notebooks[0]
    if parts != ("<file>",):
        origin = "/".join((original,) + parts)
    flags = [f"ignored: {p}" for p in problems]
    if not data:
        return Submission(student, origin, None, "the notebook file is empty", flags)
    return Submission(student, origin, data, None, flags)
