"""Every lesson in source/: full marks for the source, zero for the release, release in sync,
no leaks, clean notebooks, and the expected score on every cell of every sample submission."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
from support.course import REPO, load_json, sandbox_available
from support.lessons import Lesson

from autograder.course import assignments
from autograder.grading.results import CellStatus, Status
from autograder.release import leak_problems

LESSONS = assignments(REPO)
SANDBOX = sandbox_available()


def notebook_name(assignment: str) -> str:
    [path] = sorted((REPO / "source" / assignment).glob("*.ipynb"))
    return path.stem


def cells_of(nb, *, solution=None, grade=None):
    out = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        if solution is not None and bool(meta.get("solution")) != solution:
            continue
        if grade is not None and bool(meta.get("grade")) != grade:
            continue
        out.append(cell)
    return out


def test_there_are_lessons():
    assert {"e7_2_acceptance_tests", "e7_3_accept_step"} <= set(LESSONS)


def _comparable(nb) -> dict:
    """A notebook without volatile parts (outputs, counts, ids, run metadata)."""
    cells = [
        {"type": c.cell_type, "source": c.source, "nbgrader": c.get("metadata", {}).get("nbgrader")}
        for c in nb.cells
    ]
    return {"kernelspec": nb.metadata.get("kernelspec"), "cells": cells}


@pytest.mark.kernel
@pytest.mark.parametrize("assignment", LESSONS)
def test_committed_release_is_what_the_source_generates(lesson_course, releases, assignment):
    name = notebook_name(assignment)
    committed = REPO / "release" / assignment / f"{name}.ipynb"
    assert committed.exists(), "run `specdec-course release --all` and commit release/"
    fresh = nbformat.read(lesson_course / "release" / assignment / f"{name}.ipynb", as_version=4)
    assert _comparable(nbformat.read(committed, as_version=4)) == _comparable(fresh), (
        f"release/{assignment} is stale: run `specdec-course release {assignment}` and commit it"
    )
    assert sorted(p.name for p in (REPO / "release" / assignment).iterdir()) == [f"{name}.ipynb"]


@pytest.mark.parametrize("assignment", LESSONS)
def test_committed_release_leaks_nothing(assignment):
    assert leak_problems(REPO / "source" / assignment, REPO / "release" / assignment) == []


@pytest.mark.parametrize("assignment", LESSONS)
@pytest.mark.parametrize("folder", ["source", "release"])
def test_notebooks_are_committed_clean(assignment, folder):
    for path in (REPO / folder / assignment).glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert set(nb.metadata) <= {"kernelspec", "language_info"}, f"{path}: extra metadata"
        assert nb.metadata["kernelspec"]["name"] == "python3"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path}: outputs"
        ids = [c.id for c in nb.cells]
        assert len(ids) == len(set(ids)), f"{path}: duplicate cell ids"


@pytest.mark.parametrize("assignment", LESSONS)
def test_grade_ids_are_unique_and_follow_the_naming_rules(assignment):
    nb = nbformat.read(REPO / "source" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in cells_of(nb)]
    assert len(ids) == len(set(ids)), "duplicate grade ids"
    solutions = [c.metadata["nbgrader"]["grade_id"] for c in cells_of(nb, solution=True)]
    tests = cells_of(nb, solution=False, grade=True)
    assert tests, "no autograded test cells"
    for cell in tests:
        meta = cell.metadata["nbgrader"]
        gid = meta["grade_id"]
        assert any(re.fullmatch(rf"test_{re.escape(s)}(_\w+)?", gid) for s in solutions), (
            f"{gid}: a test cell's grade_id is test_<solution grade_id>_<behaviour>"
        )
        assert meta["points"] > 0 and meta.get("locked"), gid
        tree = ast.parse(cell.source)
        first = tree.body[0]
        assert (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and str(first.value.value).startswith("Check")
        ), f"{gid}: open with a one-line 'Check ...' string"
        last = tree.body[-1]
        assert len(tree.body) > 1 and not isinstance(last, ast.Expr), (
            f"{gid}: ends with a bare expression (nbgrader would read it as partial credit)"
        )
    for cell in cells_of(nb, solution=True):
        assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source


@pytest.mark.kernel
@pytest.mark.parametrize("assignment", LESSONS)
def test_sample_submissions_get_the_expected_score_on_every_cell(graded_lessons, assignment):
    expected = load_json(REPO / "tests" / "files" / assignment / "expected.json")
    results = graded_lessons[assignment]
    samples = sorted(
        p.stem for p in (REPO / "tests/files" / assignment / "submissions").glob("*.ipynb")
    )
    assert sorted(expected) == samples, "expected.json must list every sample submission"
    assert {"reference", "blank"} <= set(samples)
    wrong = []
    for scenario, cells in expected.items():
        got = {c.grade_id: c for c in results[scenario].cells}
        assert sorted(got) == sorted(cells), f"{scenario}: expected.json must list every test cell"
        for gid, points in cells.items():
            if points == "by hand":  # a written answer: grade leaves it waiting for a person
                if got[gid].status is not CellStatus.BY_HAND or not got[gid].waiting:
                    wrong.append(f"{scenario}/{gid}: {got[gid].status}, not waiting by hand")
                continue
            if got[gid].score != points:
                wrong.append(
                    f"{scenario}/{gid}: got {got[gid].score:g}, expected {points:g}"
                    f" ({got[gid].message[:200]})"
                )
    assert not wrong, "\n".join(wrong)
    # The source's solutions get full marks, and the release as committed gets zero on every
    # graded cell: what `specdec-course release` proves with the source and the release.
    # Written answers (graded by hand) are neither: they wait for a person in both.
    reference, blank = results["reference"], results["blank"]
    assert reference.status is Status.GRADED and reference.max_score > 0
    autograded = [c for c in reference.cells if c.status is not CellStatus.BY_HAND]
    assert [c.grade_id for c in autograded if c.score < c.max_score] == []
    assert blank.max_score > 0 and [c.grade_id for c in blank.cells if c.score > 0] == []


@pytest.mark.parametrize("assignment", LESSONS)
def test_sample_submissions_match_the_current_release(assignment, capsys):
    release = REPO / "release" / assignment / f"{notebook_name(assignment)}.ipynb"
    code = Lesson(assignment).build_samples(["--check", "--release", str(release)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err


def _chapter_reference(assignment: str):
    """The lesson's chapter reference: its Markdown cell, and the code cell after it."""
    nb = nbformat.read(REPO / "source" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
    index = next(
        (i for i, c in enumerate(nb.cells) if c.source.startswith("## Chapter reference")), None
    )
    return None if index is None else (nb.cells[index], nb.cells[index + 1])


def test_every_lesson_carries_the_same_chapter_reference():
    """The chapter reference is one section, word for word in every lesson, and it says so
    without naming the lessons: the README's table lists them, so a new lesson changes no
    other lesson.

    Its code cell defines no name that a lesson grades (E7.3 grades its own
    ``expected_tokens``), so Run all cannot overwrite a learner's function with it.
    """
    sections = {a: _chapter_reference(a) for a in LESSONS}
    assert all(sections.values()), [a for a, s in sections.items() if not s]
    markdown, code = sections[LESSONS[0]]
    said = " ".join(markdown.source.split())
    assert "every lesson of the chapter carries it word for word" in said
    assert "The README that comes with the lessons lists them in order." in said
    assert not re.search(r"\bE\d+\.\d+\b", said), re.findall(r"\bE\d+\.\d+\b", said)
    for assignment, (md, cell) in sections.items():
        assert md.source == markdown.source, assignment
        assert cell.source == code.source, assignment
        nb = nbformat.read(REPO / "source" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
        graded = {c.metadata["nbgrader"]["grade_id"] for c in cells_of(nb, solution=True)}
        defined = set(re.findall(r"^def (\w+)", cell.source, re.M))
        assert not defined & graded, (assignment, defined & graded)


def test_the_readme_lists_every_lesson_in_order_with_its_title_and_notebook():
    """The chapter's outline is the README's table: one row per lesson of ``source/``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (E\d+\.\d+) \*([^*]+)\* \| `(\w+)` \| `([\w.]+)` \|$", readme, re.M)
    titles = []
    for assignment in LESSONS:
        nb = nbformat.read(REPO / "source" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
        number, title = nb.cells[0].source.splitlines()[0].removeprefix("# ").split(" ", 1)
        titles.append((number, title, assignment, f"{notebook_name(assignment)}.ipynb"))
    assert rows == titles


@pytest.mark.parametrize("assignment", LESSONS)
def test_sample_builder_says_how_to_generate_a_missing_release(tmp_path, assignment, capsys):
    missing = tmp_path / "missing.ipynb"
    assert Lesson(assignment).build_samples(["--check", "--release", str(missing)]) == 2
    printed = capsys.readouterr().err
    assert f"{missing} not found" in printed
    assert f"specdec-course release {assignment}" in printed
