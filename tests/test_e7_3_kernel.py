"""Lesson E7.3 in real kernels: no cascade through IPython, named mistakes.

Every sample's expected score is checked by test_lessons.py; these tests prove the
grading rules that need a kernel, through the course's own grader (``autograder.grade``).
"""

from __future__ import annotations

import json

import pytest
from support.course import REPO, autograded_expectations

ASSIGNMENT = "e7_3_accept_step"
SAMPLES = REPO / "tests" / "files" / ASSIGNMENT
EXPECTED = autograded_expectations(ASSIGNMENT)

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def graded(graded_lessons):
    """The samples as the course's grader recorded them (graded once for the whole run):
    {student: result, as its JSON}."""
    return {s: json.loads(r.to_json()) for s, r in graded_lessons[ASSIGNMENT].items()}


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


def test_the_argmax_bonus_fails_the_whole_output_check_with_a_message_naming_it(graded):
    """Sampling, not argmax, keeps the output exact: the empty draft already tells."""
    cells = _cells(graded["mistake-bonus-by-argmax"])
    assert {gid: c["score"] for gid, c in cells.items()} == EXPECTED["mistake-bonus-by-argmax"]
    message = cells["test_speculative_step_follows_target"]["message"]
    assert "the argmax of target_probs[0] instead of a sample" in message
    assert "probability below" in message
