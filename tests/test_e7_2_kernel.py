"""Lesson E7.2 in real kernels: warnings cost nothing, the reference is off limits, Run all is fast.

Every sample's expected score is checked by test_lessons.py; these tests prove the
grading rules that need a kernel, through the course's own grader (``autograder.grade``).
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from pathlib import Path

import nbformat
import pytest
from conftest import new_course, sandbox_available
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "e7_2_acceptance_tests"
SAMPLES = REPO / "tests" / "files" / ASSIGNMENT
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Autograde two samples with the course's grader: {student: result}."""
    from autograder.grade import grade

    root = tmp_path_factory.mktemp("e7_2")
    course = new_course(root / "course", {ASSIGNMENT: REPO / "source" / ASSIGNMENT})
    submissions = root / "submissions"
    submissions.mkdir()
    for name in ("variant-runtime-warning", "mistake-imports-reference"):
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


def test_the_runtime_warning_sample_really_warns():
    """Its accept_prob divides by zero in numpy before it checks q (what makes it a test)."""
    nb = nbformat.read(SAMPLES / "submissions" / "variant-runtime-warning.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "accept_prob")
    ns: dict = {}
    exec("import numpy as np\n" + cell.source, ns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            ns["accept_prob"](0.5, 0.0)


def test_a_correct_solution_that_emits_a_runtime_warning_keeps_its_points(graded):
    result = graded["variant-runtime-warning"]
    assert result["status"] == "graded", result
    lost = {c["grade_id"]: c["message"] for c in result["cells"] if c["score"] != c["max_score"]}
    assert not lost
    assert result["score"] == result["max_score"] == 27


def test_a_learner_who_imports_the_reference_forfeits_every_test_cell(graded):
    """Using the reference is caught (hidden tests and the grader's audit) and costs all points."""
    result = graded["mistake-imports-reference"]
    cells = {c["grade_id"]: c for c in result["cells"]}
    assert cells.keys() == EXPECTED["mistake-imports-reference"].keys()
    assert "uses-reference" in result["flags"]
    for cell in cells.values():
        assert cell["score"] == 0, cell
        assert "reference implementation" in cell["message"], cell


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
