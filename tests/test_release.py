"""`specdec-course release`: generates release/, and refuses a leaking or failing source."""

from __future__ import annotations

import nbformat
import pytest

from autograder import cli
from autograder.release import ReleaseError, leak_problems, release

pytestmark = pytest.mark.kernel


@pytest.fixture
def course(unreleased_mini_course):
    """The mini course with nothing released yet."""
    return unreleased_mini_course


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


def test_release_generates_stub_notebooks_and_proves_full_and_zero(course):
    [report] = release("mini", course=course)
    assert report.source_scores == {"mini": (4.0, 4.0)}
    assert report.release_scores == {"mini": (0.0, 4.0)}
    nb = nbformat.read(course / "release/mini/mini.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "raise NotImplementedError()" in text
    assert "SECRET-HIDDEN-MARKER" not in text and "result_of_squaring" not in text
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_release_refuses_a_source_that_fails_its_own_tests(course):
    release("mini", course=course)
    before = (course / "release/mini/mini.ipynb").read_bytes()
    edit_source(
        course,
        "cube",
        "def cube(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION",
    )
    with pytest.raises(ReleaseError, match="source does not pass test_cube"):
        release("mini", course=course)
    assert (course / "release/mini/mini.ipynb").read_bytes() == before


def test_release_refuses_a_test_the_blank_release_passes(course):
    cell = nbformat.v4.new_code_cell('"""Check nothing."""\nassert True')
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": "test_cube_trivially",
        "points": 1,
        "schema_version": 3,
    }
    add_cell(course, cell)
    with pytest.raises(ReleaseError, match="blank release scores 1 on test_cube_trivially"):
        release("mini", course=course)
    assert not (course / "release/mini").exists()


def test_a_written_answer_is_released_without_its_rubric_and_left_to_graders(
    course, tmp_path, capsys
):
    """A written answer (graded by hand) keeps its model answer and rubric in the source.
    The self-check neither gives the source full marks on it nor the blank release zero: it
    says how many points it leaves to the graders.  A rubric line shown elsewhere leaks."""
    rubric = "- 1 point: says that a negative times a negative is positive."
    answer = (
        f"### BEGIN SOLUTION\n**Model answer.** The signs cancel.\n\n{rubric}\n### END SOLUTION"
    )
    cell = nbformat.v4.new_markdown_cell(answer)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": True,
        "locked": False,
        "task": False,
        "grade_id": "why",
        "points": 2,
        "schema_version": 3,
    }
    add_cell(course, nbformat.v4.new_markdown_cell("Why is `square(-3)` positive? (2 points)"))
    add_cell(course, cell)
    assert cli.main(["release", "mini", "--course", str(course)]) == 0
    printed = capsys.readouterr().out
    assert "(source 4/4, blank release 0/4; 2 more graded by hand, not checked)" in printed
    released = nbformat.read(course / "release/mini/mini.ipynb", as_version=4)
    [why] = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "why"]
    assert why.source == "YOUR ANSWER HERE"
    assert leak_problems(course / "source/mini", course / "release/mini") == []
    released.cells.append(nbformat.v4.new_markdown_cell(f"Hint:\n{rubric}"))
    (tmp_path / "shown").mkdir()
    nbformat.write(released, tmp_path / "shown" / "mini.ipynb")
    assert leak_problems(course / "source/mini", tmp_path / "shown") == [
        f"mini.ipynb: solution code leaked: {rubric!r}"
    ]


@pytest.mark.parametrize(
    "leak",
    [
        "import specdec_reference  # outside any solution block",
        "result_of_squaring = 'a solution line pasted into a markdown cell'",
    ],
)
def test_release_refuses_leaks_and_exits_1(course, leak, capsys):
    add_cell(course, nbformat.v4.new_markdown_cell(f"```python\n{leak}\n```"))
    if "pasted" in leak:  # the exact solution line, outside its block
        add_cell(course, nbformat.v4.new_markdown_cell("    result_of_squaring = x * x"))
    code = cli.main(["release", "mini", "--course", str(course)])
    stderr = capsys.readouterr().err
    assert code == 1, stderr
    assert "refused" in stderr
    assert not (course / "release/mini").exists()


def test_leak_scan_finds_markers_reference_and_solution_lines(course, tmp_path):
    out = tmp_path / "fake_release"
    out.mkdir()
    nb = nbformat.read(course / "source/mini/mini.ipynb", as_version=4)
    nbformat.write(nb, out / "mini.ipynb")  # the source itself, as if released unprocessed
    (out / "helper.txt").write_text("from specdec_reference import accept_prob")
    problems = "\n".join(leak_problems(course / "source/mini", out))
    assert "BEGIN SOLUTION" in problems and "BEGIN HIDDEN TESTS" in problems
    assert "result_of_squaring = x * x" in problems
    assert "helper.txt" in problems


def test_release_records_the_assignment_so_grade_does_not_sync_it_again(course):
    from autograder.course import gradebook, load_config
    from autograder.grading.template import build_template, sync_gradebook

    release("mini", course=course, check=False)
    _, template_hash = build_template(course, "mini")
    sync_gradebook(course, "mini", template_hash)

    stamp = course / ".scratch/gradebook-sync/mini.synced"
    assert stamp.read_text() == f"sqlite:///<course>/gradebook.db\n{template_hash}"
    assert not (course / ".scratch/gradebook-sync/mini").exists()  # no second nbgrader run
    with gradebook(f"sqlite:///{course / 'gradebook.db'}", load_config(course)) as gb:
        assert [n.name for n in gb.find_assignment("mini").notebooks] == ["mini"]


def test_release_all_checks_every_assignment_and_stops_at_the_first_refused(course):
    import shutil

    for name in ("mini_b", "mini_c"):
        shutil.copytree(course / "source/mini", course / f"source/{name}")
    path = course / "source/mini_b/mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "square":
            cell.source = cell.source.replace("x * x", "x * 3")
    nbformat.write(nb, path)

    with pytest.raises(ReleaseError) as refused:
        release(course=course, all=True)

    assert "release of mini_b refused" in str(refused.value)
    assert "source does not pass" in str(refused.value)
    assert (course / "release/mini/mini.ipynb").exists()
    assert not (course / "release/mini_b").exists()
    assert not (course / "release/mini_c").exists()  # after the refused one (in order)


def test_release_all_releases_every_assignment(course, capsys):
    import shutil

    shutil.copytree(course / "source/mini", course / "source/mini_two")
    code = cli.main(["release", "--all", "--no-check", "--course", str(course)])
    assert code == 0, capsys.readouterr().err
    assert (course / "release/mini/mini.ipynb").exists()
    assert (course / "release/mini_two/mini.ipynb").exists()
