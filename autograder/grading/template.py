"""The assignment's scratch-course template that every job copies, and the gradebook sync.

A template holds the course config, the source notebooks and a gradebook that knows the
assignment; it is built once per version of the source (cached by hash).
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import nbformat
from nbgrader.api import MissingEntry

from autograder.cells import is_test_cell, nbgrader_meta
from autograder.course import UsageError, db_url, gradebook, load_config, nbgrader_api, scratch_dir
from autograder.files import write_atomic


def build_template(course: Path, assignment: str) -> tuple[Path, str]:
    """A scratch course that workers copy: the config, the source notebooks and a gradebook.

    Cached under ``.scratch/templates`` by the hash of the config and source notebooks.
    """
    sources = sorted((course / "source" / assignment).glob("*.ipynb"))
    template_hash = source_hash(course, assignment)
    template = scratch_dir(course) / "templates" / f"{assignment}-{template_hash}"
    if (template / "gradebook.db").exists():
        return template, template_hash
    staging = Path(tempfile.mkdtemp(prefix="template-", dir=scratch_dir(course)))
    shutil.copy2(course / "nbgrader_config.py", staging / "nbgrader_config.py")
    (staging / "source" / assignment).mkdir(parents=True)
    for path in sources:
        shutil.copy2(path, staging / "source" / assignment / path.name)
    config = load_config(staging)
    config.CourseDirectory.db_url = f"sqlite:///{staging / 'gradebook.db'}"
    outcome = nbgrader_api(config).generate_assignment(assignment, force=True, create=True)
    if not outcome.get("success"):
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(
            f"nbgrader cannot generate {assignment!r}:\n{outcome.get('log', '')}"
            f"{outcome.get('error', '')}"
        )
    shutil.rmtree(staging / "release", ignore_errors=True)
    template.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(template)
    except OSError:  # another run built it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return template, template_hash


def source_hash(course: Path, assignment: str) -> str:
    """The hash of the course config and the assignment's source notebooks."""
    digest = hashlib.sha256((course / "nbgrader_config.py").read_bytes())
    for path in sorted((course / "source" / assignment).glob("*.ipynb")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def sync_gradebook(course: Path, assignment: str, template_hash: str | None = None) -> None:
    """Make the course gradebook know the assignment's current cells (release/ untouched).

    Skipped when the gradebook already holds the assignment and was synced from the same
    source (``template_hash``), which saves an nbgrader run on every ``grade``; a course that
    was copied or moved, with its gradebook inside it, is still the same.
    """
    config = load_config(course)
    url = db_url(course, config)
    stamp = _stamp(course, assignment)
    if (
        template_hash
        and stamp.exists()
        and stamp.read_text() == _stamp_text(course, url, template_hash)
    ):
        try:
            with gradebook(url, config) as gb:
                gb.find_assignment(assignment)
            return
        except MissingEntry:
            pass
    config.CourseDirectory.release_directory = ".scratch/gradebook-sync"
    outcome = nbgrader_api(config).generate_assignment(assignment, force=True, create=True)
    if not outcome.get("success"):
        raise UsageError(
            f"cannot record {assignment!r} in the gradebook:\n{outcome.get('log', '')}"
        )
    if template_hash:
        mark_synced(course, assignment, template_hash, config)


def mark_synced(course: Path, assignment: str, template_hash: str, config) -> None:
    """Record that the gradebook of ``config`` knows ``assignment`` as of ``template_hash``
    (after an nbgrader ``generate_assignment`` with that config wrote it)."""
    stamp = _stamp(course, assignment)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(stamp, _stamp_text(course, db_url(course, config), template_hash))


def _stamp(course: Path, assignment: str) -> Path:
    return scratch_dir(course) / "gradebook-sync" / f"{assignment}.synced"


def _stamp_text(course: Path, url: str, template_hash: str) -> str:
    return f"{_stamped_url(course, url)}\n{template_hash}"


def _stamped_url(course: Path, url: str) -> str:
    """The gradebook URL as the sync stamp records it: a SQLite file inside the course by its
    path in the course, so that the course copied or moved elsewhere still matches."""
    prefix = "sqlite:///"
    if url.startswith(prefix):
        path = Path(url[len(prefix) :])
        if path.is_relative_to(course):
            return f"{prefix}<course>/{path.relative_to(course).as_posix()}"
    return url


def template_test_cells(template: Path, assignment: str, notebook: str) -> dict[str, float]:
    """``grade_id -> points`` for every autograded test cell, in notebook order."""
    nb = nbformat.read(template / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    return {
        nbgrader_meta(cell)["grade_id"]: float(nbgrader_meta(cell).get("points", 0))
        for cell in nb.cells
        if is_test_cell(cell)
    }


def template_by_hand_cells(template: Path, assignment: str, notebook: str) -> dict[str, float]:
    """``grade_id -> points`` for every graded cell that is not autograded (a written
    answer, a task): a grader scores it in the formgrader, the grader never does."""
    nb = nbformat.read(template / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    return {
        nbgrader_meta(cell)["grade_id"]: float(nbgrader_meta(cell).get("points", 0))
        for cell in nb.cells
        if nbgrader_meta(cell).get("grade") and not is_test_cell(cell)
    }


def template_imports(template: Path, assignment: str, notebook: str) -> frozenset[str]:
    """The top-level packages that the source notebook's code imports (``numpy`` for
    ``import numpy.random as npr``), wherever in a cell the import is.

    Lines of IPython syntax (``%magic``, ``!command``) are left out; a cell that still
    does not parse adds nothing.
    """
    path = template / "source" / assignment / f"{notebook}.ipynb"
    found: set[str] = set()
    for cell in json.loads(path.read_bytes())["cells"]:
        if cell.get("cell_type") != "code":
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        python = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()
        )
        try:
            tree = ast.parse(python)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return frozenset(found)
