"""Demonstration cells: marked in the source, skipped by the grader by the source's marks
only, refused by ``release`` when a grade could depend on them, and the same cells skipped
by the learner's Validate."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from support.course import (
    CORRECT,
    FILES,
    MINI_SOURCE,
    REPO,
    WRONG_SQUARE,
    autograded_expectations,
    job_factory,
    new_course,
    ready_mini_course,
    sandbox_available,
)

from autograder.course import assignments
from autograder.demonstrations import DEMO_TAG, SKIPPED_NOTE, mark_problems, skipped_ids
from autograder.grading.job import grade_job
from autograder.lab import LEARNER_CONFIG
from autograder.release import ReleaseError, release

LESSONS = assignments(REPO)
READ_ONLY = {"grade": False, "locked": True, "schema_version": 3, "solution": False, "task": False}
DEMO_SOURCE = 'print("the demonstration ran")\nshown = [square(x) for x in range(4)]'


def demo_cell(source: str, grade_id: str = "demo_squares", **meta) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.metadata = {"nbgrader": {**READ_ONLY, "grade_id": grade_id, **meta}, "tags": [DEMO_TAG]}
    return cell


def code(source: str, **nbgrader) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    if nbgrader:
        cell.metadata = {"nbgrader": {"schema_version": 3, **nbgrader}}
    return cell


def mini_with(tmp_path: Path, *cells: tuple[int, nbformat.NotebookNode]) -> Path:
    """The mini source with ``cells`` inserted (at their index, in order): its folder."""
    folder = tmp_path / "source-mini"
    shutil.copytree(MINI_SOURCE, folder)
    path = folder / "mini.ipynb"
    nb = nbformat.read(path, as_version=4)
    for index, cell in cells:
        nb.cells.insert(index, cell)
    nbformat.write(nb, path)
    return folder


# -- the static check ---------------------------------------------------------------------


def test_a_marked_cell_whose_name_a_later_cell_uses_is_named_with_the_name():
    cells = [
        code("import numpy as np\nn = 3"),
        demo_cell("table = [n * i for i in range(n)]\nfor k in range(2):\n    pass", "demo_t"),
        code("print(table[0])"),  # a later unmarked cell
        code("def f():\n    return k + 1", grade=False, grade_id="f", solution=True),
        code("assert f() == 2", grade=True, grade_id="t", points=1, solution=False, locked=True),
    ]
    problems = mark_problems(cells)
    assert len(problems) == 2, problems
    assert "cell 1 (demo_t)" in problems[0] and "'table'" in problems[0] and "cell 2" in problems[0]
    # a solution's function reads k when the test calls it: only the marked cell binds it
    assert "'k'" in problems[1] and "cell 3 (f)" in problems[1]


def test_a_name_bound_again_before_its_use_does_not_depend_on_the_marked_cell():
    cells = [
        demo_cell("import matplotlib.pyplot as plt\nks = range(8)\nx = 1"),
        code("ks = [1, 2]\nprint(list(ks))"),  # bound again first
        code("for x in ks:\n    print(x)"),  # the loop binds x before its body reads it
        code("import matplotlib.pyplot as plt\nplt.figure()"),
        code("print(ks)"),  # the last binder is the unmarked cell above
    ]
    assert mark_problems(cells) == []


def test_a_mark_on_a_cell_that_is_not_read_only_is_refused():
    editable = demo_cell("print(1)", locked=False)
    untagged = demo_cell("print(2)", "demo_two")
    untagged.metadata["tags"] = []
    problems = mark_problems([editable, untagged])
    assert len(problems) == 1 and "cell 0" in problems[0] and "read-only" in problems[0]
    assert skipped_ids([editable, untagged]) == frozenset()


def graded_cell(grade_id: str, source: str) -> nbformat.NotebookNode:
    """A one-point autograder test cell."""
    return code(source, grade=True, grade_id=grade_id, points=1, solution=False, locked=True)


def refused_release(tmp_path: Path, *cells: tuple[int, nbformat.NotebookNode], **kw) -> str:
    """Release the mini source with ``cells`` inserted: the refusal's message."""
    course = new_course(tmp_path / "course", {"mini": mini_with(tmp_path, *cells)})
    with pytest.raises(ReleaseError) as refused:
        release("mini", course=course, **kw)
    assert not (course / "release" / "mini").exists()
    return str(refused.value)


def test_release_refuses_a_marked_cell_that_a_test_needs(tmp_path):
    message = refused_release(
        tmp_path,
        (2, demo_cell("LIMIT = 3", "demo_limit")),
        (3, graded_cell("test_limit", "assert square(LIMIT) == 9")),
        check=False,
    )
    assert "cell 2 (demo_limit)" in message and "'LIMIT'" in message and "test_limit" in message


@pytest.mark.kernel
def test_the_self_check_refuses_a_score_that_depends_on_a_demonstration(tmp_path):
    """A dependency no static check sees (a mutation): the two gradings disagree."""
    message = refused_release(
        tmp_path,
        (1, code("settings = {'n': 2}")),
        (3, demo_cell("settings['n'] = 3", "demo_settings")),
        (4, graded_cell("test_settings", "assert square(settings['n']) == 9")),
        sandbox=sandbox_available(),
    )
    assert (
        "mini.ipynb, source-solution: test_settings scores 0 with the demonstrations skipped "
        "and 1 with every cell run" in message
    ), message


# -- the grader decides from the source -----------------------------------------------------


@pytest.fixture(scope="module")
def demo_course(tmp_path_factory) -> Path:
    """The mini course with one demonstration after ``square``, released and ready."""
    tmp = tmp_path_factory.mktemp("demo-course")
    return ready_mini_course(tmp / "course", mini_with(tmp, (2, demo_cell(DEMO_SOURCE))))


def executed(result) -> dict[str, nbformat.NotebookNode]:
    nb = nbformat.reads(result.autograded, as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id") or c.source[:20]: c for c in nb.cells}


@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_learner_cannot_move_the_skip_by_marks_metadata_or_monkeypatching(demo_course, tmp_path):
    """The release's demonstration unmarked, unlocked and rewritten; every test cell and a
    learner cell tagged to be skipped (the mark, and nbclient's own ``skip-execution``);
    learner code that patches the module that decides, sets nbgrader's execution flag and
    rewrites the source notebooks it can reach.  The hidden test of a wrong ``square``
    still runs and fails, the learner's cells run, and the demonstration is skipped."""
    make = job_factory(demo_course, tmp_path / "scratch")
    job = make("hostile", **WRONG_SQUARE)
    nb = nbformat.reads(job.data.decode(), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "demo_squares":
            cell.metadata["tags"] = []
            meta["locked"] = False
            cell.source = "raise SystemExit('the edited demonstration ran')"
        elif meta.get("grade"):
            cell.metadata["tags"] = [DEMO_TAG, "skip-execution"]
    patch = code(
        "import glob, json, os\n"
        "os.environ['NBGRADER_EXECUTION'] = 'validate'\n"
        "try:\n"
        "    import autograder.demonstrations as d\n"
        "    d.skipped_ids = lambda cells: frozenset({'test_square_hidden'})\n"
        "    d.source_skipped_ids = lambda path: frozenset({'test_square_hidden'})\n"
        "    d.DEMO_TAG = 'nothing'\n"
        "except Exception:\n"
        "    pass\n"
        "for path in glob.glob('../../../**/*.ipynb', recursive=True):\n"
        "    try:\n"
        "        nb = json.load(open(path))\n"
        "        for cell in nb['cells']:\n"
        "            cell['metadata'].setdefault('tags', []).append('demo')\n"
        "        json.dump(nb, open(path, 'w'))\n"
        "    except Exception:\n"
        "        pass\n"
        "print('patched')"
    )
    patch.metadata["tags"] = [DEMO_TAG, "skip-execution"]
    nb.cells.insert(1, patch)
    job = replace(job, data=nbformat.writes(nb).encode())

    result = grade_job(job)
    scores = {c.grade_id: c.score for c in result.cells}
    assert scores == {"test_square_small": 1, "test_square_hidden": 0, "test_cube": 1}, result
    cells = executed(result)
    demo = cells["demo_squares"]
    assert demo.source == DEMO_SOURCE  # restored from the source by nbgrader
    assert [o.get("text") for o in demo.outputs] == [SKIPPED_NOTE] and not demo.execution_count
    for gid in scores:
        assert cells[gid].execution_count, f"{gid} was not run"
    assert "patched" in "".join(o.get("text", "") for o in cells[patch.source[:20]].outputs)


@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_same_submission_graded_running_every_cell_runs_the_demonstration(
    demo_course, tmp_path
):
    make = job_factory(demo_course, tmp_path / "scratch")
    job = make("learner", **CORRECT)
    skipping = grade_job(job)
    running = grade_job(replace(job, spec=replace(job.spec, run_demos=True)))
    assert [(c.grade_id, c.score) for c in skipping.cells] == [
        (c.grade_id, c.score) for c in running.cells
    ]
    assert skipping.score == running.score == 4
    assert executed(skipping)["demo_squares"].outputs[0]["text"] == SKIPPED_NOTE
    assert "the demonstration ran" in executed(running)["demo_squares"].outputs[0]["text"]


def test_validate_in_the_learners_lab_skips_the_cells_the_grader_skips():
    """The lab's (and the kit's) nbgrader settings skip the cells tagged with the mark that
    the grader reads from the source, and every lesson's release keeps those tags on
    exactly the cells its source marks."""
    lab = json.loads((LEARNER_CONFIG / "nbgrader_config.json").read_text())
    assert lab == {"Execute": {"skip_cells_with_tag": DEMO_TAG}}
    for source in sorted((REPO / "source").glob("*/*.ipynb")):
        released = REPO / "release" / source.parent.name / source.name
        marked = skipped_ids(nbformat.read(source, as_version=4).cells)
        assert marked, f"{source.name} marks no demonstration"
        tagged = {
            c.metadata["nbgrader"]["grade_id"]
            for c in nbformat.read(released, as_version=4).cells
            if DEMO_TAG in c.metadata.get("tags", [])
        }
        assert tagged == marked, source.name


# -- the lessons: a few samples graded both ways ---------------------------------------------


@pytest.mark.kernel
def test_lesson_samples_score_the_same_when_every_cell_runs(lesson_course, tmp_path):
    """Each lesson's reference and first mistake sample graded running every cell (the
    demonstrations too) score, cell by cell, what ``expected.json`` says, which is what
    ``graded_lessons`` scores skipping them (``test_lessons.py``).  ``release``'s
    self-check does the same for the source and the blank release."""
    from autograder.grading.job import RunSpec
    from autograder.grading.pool import run_jobs
    from autograder.grading.template import build_template

    jobs = []
    for assignment in LESSONS:
        template, _ = build_template(lesson_course, assignment)
        samples = sorted((FILES / assignment / "submissions").glob("*.ipynb"))
        mistake = next(p for p in samples if p.stem.startswith("mistake-"))
        for path in (FILES / assignment / "submissions" / "reference.ipynb", mistake):
            jobs.append(
                RunSpec(
                    assignment,
                    next((lesson_course / "source" / assignment).glob("*.ipynb")).stem,
                    template,
                    tmp_path,
                    sandbox=sandbox_available(),
                    run_demos=True,
                ).job(path.stem, path.read_bytes())
            )
    differences = []
    for job, running in run_jobs(jobs, workers=2, hard_timeout=900):
        expected = autograded_expectations(job.spec.assignment)[job.student]
        ran = {c.grade_id: c.score for c in running.cells}
        differences += [
            f"{job.spec.assignment} {job.student} {gid}: {points:g} expected (skipping), "
            f"{ran.get(gid)} running every cell"
            for gid, points in expected.items()
            if ran.get(gid) != points
        ]
    assert len(jobs) == 12 and differences == []
