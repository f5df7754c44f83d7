"""The scratch-course template and the gradebook sync: built once, kept when the course moves."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from support.course import REPO

from autograder.grading.template import build_template, sync_gradebook, template_imports


def _synced(course: Path) -> tuple[Path, Path]:
    """The sync stamp, and the notebook nbgrader writes each time it syncs."""
    folder = course / ".scratch" / "gradebook-sync"
    return folder / "mini.synced", folder / "mini" / "mini.ipynb"


def test_a_copied_or_moved_course_keeps_its_template_and_gradebook_sync(
    pristine_mini_course, tmp_path
):
    moved = Path(shutil.copytree(pristine_mini_course, tmp_path / "moved course", symlinks=True))
    stamp, written = _synced(moved)

    template, template_hash = build_template(moved, "mini")
    sync_gradebook(moved, "mini", template_hash)

    assert template.parent == moved / ".scratch" / "templates"  # the copy's, not rebuilt
    assert not written.exists()  # nbgrader's generate_assignment did not run
    assert stamp.read_text() == f"sqlite:///<course>/gradebook.db\n{template_hash}"


def test_a_changed_source_is_synced_again(pristine_mini_course, tmp_path):
    course = Path(shutil.copytree(pristine_mini_course, tmp_path / "course", symlinks=True))
    stamp, written = _synced(course)
    before = stamp.read_text()
    source = course / "source" / "mini" / "mini.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("One more paragraph."))
    nbformat.write(nb, source)

    _, template_hash = build_template(course, "mini")
    sync_gradebook(course, "mini", template_hash)

    assert stamp.read_text() != before and stamp.read_text().endswith(template_hash)
    synced = nbformat.read(written, as_version=4)
    assert synced.cells[-1].source == "One more paragraph."


def test_a_new_gradebook_gets_nbgraders_schema_version_without_a_command(tmp_path, monkeypatch):
    """nbgrader stamps a gradebook it creates with what ``alembic heads`` prints; the course
    reads the same revision in this process, with no new Python started."""
    import sqlite3
    import subprocess
    import sys

    import nbgrader.api

    from autograder.course import gradebook, load_config, schema_version

    asked = subprocess.run(
        [sys.executable, "-c", "import nbgrader.api; print(nbgrader.api.get_alembic_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert schema_version() == asked.stdout.strip()

    def no_command(*args, **kwargs):
        raise AssertionError(f"a command ran: {args}")

    monkeypatch.setattr(nbgrader.api.sp, "check_output", no_command)
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    path = tmp_path / "gradebook.db"
    with gradebook(f"sqlite:///{path}", load_config(tmp_path)):
        pass
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (asked.stdout.strip(),)
        ]


def test_the_packages_a_source_notebook_imports_are_read_from_all_its_code(tmp_path):
    """What decides the warm parent's libraries: every import in every code cell, by its
    top-level package; IPython syntax is skipped, a cell that cannot parse adds nothing,
    and markdown is not code."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("import pandas"),
        nbformat.v4.new_code_cell("%matplotlib inline\nimport numpy.random as npr, os"),
        nbformat.v4.new_code_cell("!pip list\nfrom matplotlib import pyplot as plt"),
        nbformat.v4.new_code_cell("def f():\n    import scipy.stats\n    from . import local"),
        nbformat.v4.new_code_cell("import sympy\nprint(1 +"),
    ]
    folder = tmp_path / "source" / "a"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "nb.ipynb")
    assert template_imports(tmp_path, "a", "nb") == {"numpy", "os", "matplotlib", "scipy"}
    assert template_imports(REPO / "tests/files/mini_course", "mini", "mini") == set()
    for lesson in sorted((REPO / "source").iterdir()):
        [notebook] = lesson.glob("*.ipynb")
        found = template_imports(REPO, lesson.name, notebook.stem)
        assert {"numpy", "matplotlib"} <= found, lesson.name
