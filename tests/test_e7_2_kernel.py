"""Lesson E7.2 in real kernels: warnings cost nothing, the reference is off limits.

Every sample's expected score is checked by test_lessons.py; these tests prove the
grading rules that need a kernel, through the course's own grader (``autograder.grade``).
"""

from __future__ import annotations

import json
import warnings

import nbformat
import pytest
from support.course import REPO, autograded_expectations

ASSIGNMENT = "e7_2_acceptance_tests"
SAMPLES = REPO / "tests" / "files" / ASSIGNMENT
EXPECTED = autograded_expectations(ASSIGNMENT)

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def graded(graded_lessons):
    """The samples as the course's grader recorded them (graded once for the whole run):
    {student: result, as its JSON}."""
    return {s: json.loads(r.to_json()) for s, r in graded_lessons[ASSIGNMENT].items()}


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
    """Every test cell's points; the written answer waits for a grader, as the reference's."""
    result = graded["variant-runtime-warning"]
    assert result["status"] == "graded", result
    autograded = [c for c in result["cells"] if c["grade_id"] in EXPECTED["reference"]]
    lost = {c["grade_id"]: c["message"] for c in autograded if c["score"] != c["max_score"]}
    assert not lost
    assert result["score"] == sum(EXPECTED["reference"].values()) == 50
    by_hand = [c for c in result["cells"] if c not in autograded]
    assert [(c["grade_id"], c["status"], c["score"]) for c in by_hand] == [
        ("explain_exact_rule", "by-hand", 0)
    ]
    assert result["max_score"] == 50 + sum(c["max_score"] for c in by_hand) == 53


def test_a_learner_who_imports_the_reference_forfeits_every_test_cell(graded):
    """Using the reference is caught (hidden tests and the grader's audit) and costs all points."""
    result = graded["mistake-imports-reference"]
    cells = {c["grade_id"]: c for c in result["cells"] if c["status"] != "by-hand"}
    assert cells.keys() == EXPECTED["mistake-imports-reference"].keys()
    assert "uses-reference" in result["flags"]
    for cell in cells.values():
        assert cell["score"] == 0, cell
        assert "reference implementation" in cell["message"], cell
