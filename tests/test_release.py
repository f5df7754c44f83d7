"""`specdec-course release`: generates release/, and refuses a leaking or failing source."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from autograder.release import ReleaseError, leak_problems, release

pytestmark = pytest.mark.kernel
CLI = [sys.executable, "-m", "autograder.cli"]


def edit_source(course, grade_id, new_source, *, cell_type=None):
    path = course / "source/mini/mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = new_source
    nbformat.write(nb, path)


def add_cell(course, cell):
    path = course / "source/mini/mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(cell)
    nbformat.write(nb, path)


def test_release_generates_stub_notebooks_and_proves_full_and_zero(mini_course):
    [report] = release("mini", course=mini_course)
    assert report.source_scores == {"mini": (4.0, 4.0)}
    assert report.release_scores == {"mini": (0.0, 4.0)}
    nb = nbformat.read(mini_course / "release/mini/mini.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "raise NotImplementedError()" in text
    assert "SECRET-HIDDEN-MARKER" not in text and "result_of_squaring" not in text
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_release_refuses_a_source_that_fails_its_own_tests(mini_course):
    release("mini", course=mini_course)
    before = (mini_course / "release/mini/mini.ipynb").read_bytes()
    edit_source(
        mini_course,
        "cube",
        "def cube(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION",
    )
    with pytest.raises(ReleaseError, match="source does not pass test_cube"):
        release("mini", course=mini_course)
    assert (mini_course / "release/mini/mini.ipynb").read_bytes() == before


def test_release_refuses_a_test_the_blank_release_passes(mini_course):
    cell = nbformat.v4.new_code_cell('"""Check nothing."""\nassert True')
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": "test_cube_trivially",
        "points": 1,
        "schema_version": 3,
    }
    add_cell(mini_course, cell)
    with pytest.raises(ReleaseError, match="blank release scores 1 on test_cube_trivially"):
        release("mini", course=mini_course)
    assert not (mini_course / "release/mini").exists()


@pytest.mark.parametrize(
    "leak",
    [
        "import specdec_reference  # outside any solution block",
        "result_of_squaring = 'a solution line pasted into a markdown cell'",
    ],
)
def test_release_refuses_leaks_and_exits_1(mini_course, leak):
    add_cell(mini_course, nbformat.v4.new_markdown_cell(f"```python\n{leak}\n```"))
    if "pasted" in leak:  # the exact solution line, outside its block
        add_cell(mini_course, nbformat.v4.new_markdown_cell("    result_of_squaring = x * x"))
    proc = subprocess.run(
        CLI + ["release", "mini", "--course", str(mini_course)], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    assert "refused" in proc.stderr
    assert not (mini_course / "release/mini").exists()


def test_leak_scan_finds_markers_reference_and_solution_lines(mini_course, tmp_path):
    out = tmp_path / "fake_release"
    out.mkdir()
    nb = nbformat.read(mini_course / "source/mini/mini.ipynb", as_version=4)
    nbformat.write(nb, out / "mini.ipynb")  # the source itself, as if released unprocessed
    (out / "helper.txt").write_text("from specdec_reference import accept_prob")
    problems = "\n".join(leak_problems(mini_course / "source/mini", out))
    assert "BEGIN SOLUTION" in problems and "BEGIN HIDDEN TESTS" in problems
    assert "result_of_squaring = x * x" in problems
    assert "helper.txt" in problems


def test_release_all_releases_every_assignment(mini_course):
    import shutil

    shutil.copytree(mini_course / "source/mini", mini_course / "source/mini_two")
    proc = subprocess.run(
        CLI + ["release", "--all", "--no-check", "--course", str(mini_course)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (mini_course / "release/mini/mini.ipynb").exists()
    assert (mini_course / "release/mini_two/mini.ipynb").exists()
