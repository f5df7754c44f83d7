"""``specdec-course handout``: a learner's kit for one lesson or all, as a folder and a zip.

The kit is what a learner needs on their own laptop, and nothing else:

* the release notebooks, ``<assignment>/<notebook>.ipynb`` as in ``release/``;
* ``requirements.txt`` (pip) and ``environment.yml`` (conda): the lessons' packages pinned
  to the versions this environment installed (:mod:`autograder.handout.pins`);
* ``README.md``: install, open JupyterLab, Validate, submit, feedback
  (``learner_files/README.md``, filled in);
* the learner's JupyterLab settings, read when JupyterLab starts in the kit's folder
  with ``--config=jupyter_lab_config.json``: the server extensions of
  :data:`autograder.lab.LEARNER_SERVER_EXTENSIONS` (Validate only), no calls home, and
  ``lab-settings/`` (``autograder/lab_config/``'s page config and setting overrides: no
  instructor panel, no news pop-up);
* ``nbgrader_config.json``: the course's ``Execute`` settings, so that Validate runs the
  notebook as the grader does (time limits, warnings on stdout), and the learner's lab's
  (``autograder/lab_config/nbgrader_config.json``: the demonstrations are not run).
  Nothing else of the course's configuration.

Before anything is written the kit is checked: each release must be what ``source/``
generates now (nbgrader's ``generate_assignment`` into scratch, with a scratch gradebook),
and every file of the kit passes ``release``'s leak scan
(:func:`autograder.release.scan_for_leaks`).  A failed check refuses the kit
(:class:`HandoutError`, every reason listed) and writes nothing.  The folder and the zip
are written beside their targets under temporary names, then renamed; an existing kit
is replaced only with ``force``, and a folder or zip that is not a kit never.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from string import Template

import nbformat

from autograder.course import (
    UsageError,
    assignments,
    find_course,
    load_config,
    scratch_dir,
)
from autograder.handout.pins import Pins, learner_pins
from autograder.lab import LEARNER_CONFIG, LEARNER_SERVER_EXTENSIONS
from autograder.release import generate, scan_for_leaks, solution_lines

#: The kit's own files, beside this module (the README is a template).
LEARNER_FILES = Path(__file__).with_name("learner_files")
#: The folder of JupyterLab settings in the kit (``LabApp.app_settings_dir``).
LAB_SETTINGS = "lab-settings"
#: The file the learner's ``jupyter lab --config=...`` reads.
LAB_CONFIG = "jupyter_lab_config.json"
#: The sections of the course's configuration that Validate uses.
VALIDATE_SECTIONS = ("Execute",)
#: The files every kit has at its top; a folder holding them all is an earlier kit.
KIT_FILES = ("README.md", "requirements.txt", "environment.yml", LAB_CONFIG)
#: The default folder of kits, in the course root (git ignores it).
DEFAULT_PARENT = "dist"


class HandoutError(Exception):
    """The kit was refused; the message lists every reason.  Nothing was written."""


@dataclass(frozen=True)
class KitLesson:
    """One lesson in a kit."""

    assignment: str
    title: str  #: the notebook's first heading
    notebooks: tuple[str, ...]  #: paths in the kit, ``<assignment>/<name>.ipynb``


@dataclass(frozen=True)
class Kit:
    """A kit that was written."""

    folder: Path
    zip: Path
    lessons: tuple[KitLesson, ...]
    files: tuple[str, ...]  #: every file, relative to the folder, sorted


def kit_name(course_id: str, assignment: str | None) -> str:
    """``<course id>-<assignment>`` for one lesson, ``<course id>`` for all."""
    return f"{course_id}-{assignment}" if assignment else course_id


def handout(
    assignment: str | None = None,
    *,
    course: Path | str | None = None,
    all: bool = False,  # noqa: A002  (mirrors the CLI's --all)
    out: Path | str | None = None,
    force: bool = False,
) -> Kit:
    """Write the learner's kit for ``assignment`` (or ``all``) as a folder and a zip.

    Parameters
    ----------
    assignment : str, optional
        One folder of ``source/``; or pass ``all``.
    course : Path, optional
        The course root (default: the current directory).
    all : bool
        Every assignment in ``source/``, in order.
    out : Path, optional
        The kit's folder (default: ``dist/<kit name>`` in the course, :func:`kit_name`).
        The zip is written beside it, ``<folder>.zip``, holding the folder.
    force : bool
        Replace a kit written there before (a folder with every one of :data:`KIT_FILES`,
        and a zip of that folder); anything else is never replaced.

    Returns
    -------
    Kit
        What was written.

    Raises
    ------
    UsageError
        An unknown assignment, an output path inside ``source/`` or ``release/``, or an
        output that exists (without ``force``, or that is not a kit).
    HandoutError
        A release that is missing or stale against ``source/``, or a leak.
    """
    root = find_course(course)
    config = load_config(root)
    known = assignments(root)
    if all:
        targets = known
    elif assignment:
        targets = [assignment]
    else:
        raise UsageError("name an assignment or pass --all")
    for target in targets:
        if target not in known:
            raise UsageError(f"unknown assignment {target!r} (known: {', '.join(known) or 'none'})")
    course_id = str(config.CourseDirectory.get("course_id") or root.name)
    name = kit_name(course_id, None if all else assignment)
    folder = Path(out) if out is not None else root / DEFAULT_PARENT / name
    folder = folder.expanduser().resolve()
    archive = folder.with_name(folder.name + ".zip")
    _check_output(root, folder, archive, force)

    staging = Path(tempfile.mkdtemp(prefix="handout-", dir=scratch_dir(root)))
    try:
        problems = [p for a in targets for p in _release_problems(root, a, staging)]
        kit = staging / "kit" / folder.name
        lessons: list[KitLesson] = []
        if not [a for a in targets if not _released(root, a)]:  # (`all` is the option)
            lessons = _assemble(root, targets, kit, config, learner_pins())
            problems += _leaks(root, targets, kit)
        if problems:
            raise HandoutError(
                f"handout refused; nothing was written to {folder}:\n"
                + "\n".join(f"  - {p}" for p in problems)
            )
        files = tuple(sorted(p.relative_to(kit).as_posix() for p in kit.rglob("*") if p.is_file()))
        _install(kit, folder, archive)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Kit(folder, archive, tuple(lessons), files)


# --------------------------------------------------------------------------- checks


def _check_output(root: Path, folder: Path, archive: Path, force: bool) -> None:
    """Refuse an output inside ``source/`` or ``release/``, one that holds the course, a
    folder named like a zip, and an output that exists and may not be replaced."""
    if folder.suffix.lower() == ".zip":
        raise UsageError(
            f"--out names the kit's folder, not the zip ({folder}): the zip is written "
            "beside the folder, as <folder>.zip"
        )
    for protected in ("source", "release"):
        inside = (root / protected).resolve()
        if folder == inside or folder.is_relative_to(inside):
            raise UsageError(
                f"the kit cannot be written inside the course's {protected}/ ({folder}): "
                "choose another --out"
            )
    if root.is_relative_to(folder):
        raise UsageError(f"the kit's folder {folder} holds the course: choose another --out")
    existing = [p for p in (folder, archive) if p.exists() or p.is_symlink()]
    if not existing:
        return
    listed = " and ".join(str(p) for p in existing)
    if not force:
        verb = "exist" if len(existing) > 1 else "exists"
        raise UsageError(
            f"{listed} already {verb}: pass --force to replace an earlier kit, "
            "or choose another --out"
        )
    for path in existing:
        if not _is_kit(path, folder.name):
            raise UsageError(
                f"{path} exists and is not a kit written by handout: it is not replaced, "
                "even with --force; choose another --out"
            )


def _is_kit(path: Path, name: str) -> bool:
    """Whether ``path`` is a kit folder, or a zip of a kit folder named ``name``."""
    if path.is_symlink():
        return False
    if path.is_dir():
        return all((path / f).is_file() for f in KIT_FILES)
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    return (
        bool(names)
        and all(n.startswith(f"{name}/") for n in names)
        and all(f"{name}/{f}" in names for f in KIT_FILES)
    )


def _release_problems(root: Path, assignment: str, staging: Path) -> list[str]:
    """Why ``release/<assignment>`` may not be handed out: missing, or not what
    ``source/<assignment>`` generates now."""
    released = root / "release" / assignment
    hint = f"run `specdec-course release {assignment}`"
    if not _released(root, assignment):
        return [f"release/{assignment} is missing: {hint} first"]
    config = load_config(root)
    # The course's gradebook is not touched: nbgrader records the assignment in scratch.
    config.CourseDirectory.db_url = f"sqlite:///{staging / 'gradebook.db'}"
    fresh_root = staging / "generated"
    fresh_root.mkdir(exist_ok=True)
    problem = generate(root, assignment, fresh_root, config)
    if problem:
        return [problem]
    fresh = fresh_root / assignment
    ours, theirs = _release_files(released), _release_files(fresh)
    if ours.keys() != theirs.keys() or any(
        not _same_file(ours[name], theirs[name]) for name in ours
    ):
        return [f"release/{assignment} is stale against source/{assignment}: {hint}"]
    return []


def _released(root: Path, assignment: str) -> bool:
    return any((root / "release" / assignment).glob("*.ipynb"))


def _release_files(folder: Path) -> dict[str, Path]:
    return {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file() and not _hidden(p.relative_to(folder))
    }


def _hidden(relative: Path) -> bool:
    """Jupyter's and the system's own files (``.ipynb_checkpoints/``, ``__pycache__``)."""
    return any(part.startswith(".") or part == "__pycache__" for part in relative.parts)


def _same_file(released: Path, generated: Path) -> bool:
    """Whether a released file is what nbgrader generates: a notebook's cells (kind,
    source, nbgrader metadata) and kernel, any other file byte for byte."""
    if released.suffix != ".ipynb":
        return released.read_bytes() == generated.read_bytes()
    try:
        return _comparable(released) == _comparable(generated)
    except Exception:  # an unreadable notebook is not the one nbgrader wrote
        return False


def _comparable(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    cells = [(c.cell_type, c.source, c.get("metadata", {}).get("nbgrader")) for c in nb.cells]
    return {"kernelspec": nb.metadata.get("kernelspec"), "cells": cells}


def _leaks(root: Path, targets: list[str], kit: Path) -> list[str]:
    """``release``'s leak scan over every file of the kit: each lesson's folder against its
    own solutions, the kit's other files against every lesson's."""
    problems = []
    everyone: set[str] = set()
    for assignment in targets:
        lines = solution_lines(root / "source" / assignment)
        everyone |= lines
        problems += scan_for_leaks(kit, sorted((kit / assignment).rglob("*")), lines)
    others = [p for p in sorted(kit.rglob("*")) if p.relative_to(kit).parts[0] not in targets]
    return problems + scan_for_leaks(kit, others, everyone)


# --------------------------------------------------------------------------- the kit


def _assemble(root: Path, targets: list[str], kit: Path, config, pins: Pins) -> list[KitLesson]:
    """Write every file of the kit into ``kit`` (a new folder in scratch)."""
    kit.mkdir(parents=True)
    lessons = []
    for assignment in targets:
        released = root / "release" / assignment
        for relative, path in sorted(_release_files(released).items()):
            target = kit / assignment / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        notebooks = sorted(f"{assignment}/{p.name}" for p in (kit / assignment).glob("*.ipynb"))
        lessons.append(
            KitLesson(assignment, _title(kit / notebooks[0], assignment), tuple(notebooks))
        )
    course_id = str(config.CourseDirectory.get("course_id") or root.name)
    (kit / "requirements.txt").write_text(requirements_txt(pins), encoding="utf-8")
    (kit / "environment.yml").write_text(environment_yml(pins, course_id), encoding="utf-8")
    _write_json(kit / LAB_CONFIG, lab_config())
    _write_json(kit / "nbgrader_config.json", validate_config(config))
    settings = kit / LAB_SETTINGS
    settings.mkdir()
    shutil.copyfile(
        LEARNER_CONFIG / "labconfig" / "page_config.json", settings / "page_config.json"
    )
    shutil.copyfile(
        LEARNER_CONFIG / "labconfig" / "default_setting_overrides.json",
        settings / "overrides.json",
    )
    (kit / "README.md").write_text(readme(lessons, pins, course_id), encoding="utf-8")
    return lessons


def _title(notebook: Path, fallback: str) -> str:
    """The notebook's first Markdown heading, without its ``#``."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def requirements_txt(pins: Pins) -> str:
    """``requirements.txt``: one pinned line per distribution, after a short header."""
    header = [
        "# The lessons' packages, at the versions the course is tested with,",
        f"# on Python {pins.python}.  Install with:  python -m pip install -r requirements.txt",
    ]
    return "\n".join(header + pins.lines) + "\n"


def environment_yml(pins: Pins, course_id: str) -> str:
    """``environment.yml``: conda's Python and pip, then the same pins through pip."""
    lines = [
        "# The lessons' packages, at the versions the course is tested with.",
        "# Create with:  conda env create -f environment.yml",
        f"name: {course_id}",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        f"  - python={pins.python}",
        "  - pip",
        "  - pip:",
        *(f"    - {json.dumps(line)}" for line in pins.lines),
    ]
    return "\n".join(lines) + "\n"


def lab_config() -> dict:
    """``jupyter_lab_config.json``: the learner's server, as ``specdec-course lab`` runs it."""
    return {
        "ServerApp": {
            "ip": "127.0.0.1",
            "jpserver_extensions": dict(LEARNER_SERVER_EXTENSIONS),
        },
        "LabApp": {
            "news_url": None,
            "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
            "app_settings_dir": LAB_SETTINGS,
        },
    }


def validate_config(config) -> dict:
    """``nbgrader_config.json``: the course's settings that Validate uses, and no others,
    with the learner's lab's own (:data:`autograder.lab.LEARNER_CONFIG`)."""
    lab = json.loads((LEARNER_CONFIG / "nbgrader_config.json").read_text(encoding="utf-8"))
    out = {}
    for section in VALIDATE_SECTIONS:
        values = {**dict(config.get(section, {})), **lab.get(section, {})}
        if values:
            out[section] = values
    try:
        json.dumps(out)
    except TypeError as exc:
        raise UsageError(
            f"the course's {', '.join(VALIDATE_SECTIONS)} settings cannot be handed out "
            f"as JSON: {exc}"
        ) from None
    return out


def readme(lessons: list[KitLesson], pins: Pins, course_id: str) -> str:
    """The learner's ``README.md``, from ``learner_files/README.md``."""
    rows = "\n".join(
        f"| {lesson.title} | `{'`, `'.join(lesson.notebooks)}` |" for lesson in lessons
    )
    example = lessons[0].notebooks[0]
    template = Template((LEARNER_FILES / "README.md").read_text(encoding="utf-8"))
    return template.substitute(
        course_id=course_id,
        lessons=rows,
        python=pins.python,
        env_name=course_id,
        example=example,
        example_file=example.rsplit("/", 1)[-1],
    )


# --------------------------------------------------------------------------- writing


def _install(kit: Path, folder: Path, archive: Path) -> None:
    """Write ``kit`` as ``folder`` and ``archive``: each under a temporary name beside its
    target, then renamed over it.  An earlier kit there is removed only once the new one
    is in place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    new_folder = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    fd, new_zip = tempfile.mkstemp(prefix=f".{archive.name}.", suffix=".tmp", dir=folder.parent)
    os.close(fd)
    old = None
    try:
        shutil.copytree(kit, new_folder, dirs_exist_ok=True)
        os.chmod(new_folder, 0o755)
        _zip(kit, Path(new_zip), folder.name)
        os.chmod(new_zip, 0o644)
        os.replace(new_zip, archive)
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
            os.replace(folder, old)
        os.replace(new_folder, folder)
    except BaseException:
        if old is not None and not folder.exists():
            os.replace(old, folder)
            old = None
        shutil.rmtree(new_folder, ignore_errors=True)
        Path(new_zip).unlink(missing_ok=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _zip(kit: Path, path: Path, name: str) -> None:
    """Zip ``kit``'s files under the folder ``name``, in a stable order."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(p for p in kit.rglob("*") if p.is_file()):
            zf.write(file, f"{name}/{file.relative_to(kit).as_posix()}")
