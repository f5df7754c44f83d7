"""Lesson E7.3 in real kernels: no cascade through IPython, named mistakes, Run all is fast.

Every sample's expected score is checked by test_lessons.py; these tests prove the
grading rules that need a kernel, through the course's own grader (``autograder.grade``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from conftest import new_course, sandbox_available
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "e7_3_accept_step"
SAMPLES = REPO / "tests" / "files" / ASSIGNMENT
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
GRADED = ("mistake-residual-not-normalized", "mistake-resample-from-p")

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Autograde two mistake samples with the course's grader: {student: result}."""
    from autograder.grade import grade

    root = tmp_path_factory.mktemp("e7_3")
    course = new_course(root / "course", {ASSIGNMENT: REPO / "source" / ASSIGNMENT})
    submissions = root / "submissions"
    submissions.mkdir()
    for name in GRADED:
        shutil.copy(SAMPLES / "submissions" / f"{name}.ipynb", submissions / f"{name}.ipynb")
    result = grade(
        ASSIGNMENT,
        submissions=submissions,
        course=course,
        workers=2,
        sandbox=sandbox_available(),
        feedback=False,
    )
    return result.results


def _cells(result):
    return {c["grade_id"]: c for c in result["cells"]}


def test_a_broken_residual_costs_nothing_in_the_speculative_step_cells(graded):
    """The learner's residual_distribution does not normalize, so rng.choice would raise in
    their speculative_step: its tests substitute the reference until the cell ends."""
    cells = _cells(graded["mistake-residual-not-normalized"])
    assert {gid: c["score"] for gid, c in cells.items()} == EXPECTED[
        "mistake-residual-not-normalized"
    ]
    for gid, cell in cells.items():
        if gid.startswith("test_speculative_step"):
            assert cell["score"] == cell["max_score"] > 0, cell
    assert "without dividing by its sum" in cells["test_residual_distribution_values"]["message"]


def test_the_wrong_recovery_fails_the_distribution_check_with_a_message_naming_it(graded):
    cells = _cells(graded["mistake-resample-from-p"])
    assert {gid: c["score"] for gid, c in cells.items()} == EXPECTED["mistake-resample-from-p"]
    message = cells["test_speculative_step_follows_target"]["message"]
    assert "resampling from p instead of the residual" in message
    assert "probability below" in message  # the false-failure bound is stated


def test_run_all_on_the_solved_notebook_takes_under_3_seconds():
    """The learner's view (release plus reference solutions), kernel start excluded.

    Measured as the kernel's CPU time, which other processes on a busy machine do not
    inflate; on an idle machine the wall time is about the same.
    """
    nb = nbformat.read(SAMPLES / "submissions" / "reference.ipynb", as_version=4)
    start = nbformat.v4.new_code_cell("import time as _clock\n_cpu = _clock.process_time()")
    stop = nbformat.v4.new_code_cell("print(_clock.process_time() - _cpu)")
    nb.cells = [start, *nb.cells, stop]
    client = NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    )
    with client.setup_kernel():
        began = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        wall = time.perf_counter() - began
    errors = [
        c.get("id")
        for c in nb.cells
        if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)
    ]
    assert not errors
    cpu = float(stop.outputs[0]["text"])
    assert cpu < 3.0, f"Run all took {cpu:.2f} s of kernel CPU time ({wall:.2f} s wall)"
