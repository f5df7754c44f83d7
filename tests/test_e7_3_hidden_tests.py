"""Lesson E7.3: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process, after learner code built from
solution bodies (the samples' and the extra mutants below), with no kernel: the cells run
in one shared namespace, the way a kernel runs them.  The generic checks (source full
marks, release zero, samples' expected scores through the real grader...) live in
test_lessons.py; the kernel-level checks of this lesson are in test_e7_3_kernel.py.
"""

from __future__ import annotations

import doctest
import math

import pytest
from lesson_support import Lesson, failing, learner_cell

#: Ungraded cells that a visible test relies on (the toy models of Part 5) or that every
#: learner runs first; plots and demonstrations are skipped.
LESSON = Lesson("e7_3_accept_step", support_cells={"code-setup", "code-greedy-demo"})
SCENARIOS = LESSON.scenarios
EXPECTED = LESSON.expected
REFERENCE_BODIES = LESSON.reference_bodies
TEST_CELLS = LESSON.test_cells
SOLUTION_CELLS = LESSON.solution_cells
BEGIN = "### BEGIN SOLUTION"


def execute(bodies=None, *, only=None, replace=None):
    """The test cells' outcomes of running the notebook with ``bodies`` (see Lesson.run)."""
    return LESSON.run(bodies, only=only, replace=replace).outcomes


@pytest.fixture(scope="module")
def reference_outcomes():
    return execute()


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


def test_the_reference_solutions_pass_every_test_cell(reference_outcomes):
    assert set(reference_outcomes) == set(TEST_CELLS)
    assert failing(reference_outcomes) == {}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.startswith("variant-")])
def test_correct_variants_pass_every_test_cell(scenario):
    """Python or numpy types, lists or arrays, loops or vectorized, r * q <= p."""
    assert failing(execute(SCENARIOS[scenario])) == {}


# Correct, but with the draws in another order than the docstring's: every uniform first,
# and the bonus token by inverse transform sampling.  Only the seeded cell (1 point) may
# tell it from the reference; the statistical and structural checks must not.
OTHER_DRAW_ORDER = """
target_probs = np.asarray(target_probs, dtype=float)
draft_probs = np.asarray(draft_probs, dtype=float)
k, vocab = len(draft_tokens), target_probs.shape[1]
uniforms = rng.random(k + 1)  # all the draws up front
out = []
for i in range(k):
    x = int(draft_tokens[i])
    if uniforms[i] * draft_probs[i, x] >= target_probs[i, x]:
        residual = residual_distribution(target_probs[i], draft_probs[i])
        return out + [int(rng.choice(vocab, p=residual))]
    out.append(x)
cdf = np.cumsum(target_probs[k])
return out + [int(min(np.searchsorted(cdf, uniforms[k] * cdf[-1], side="right"), vocab - 1))]
"""


def test_a_correct_step_with_another_draw_order_loses_only_the_seeded_point():
    lost = failing(execute({"speculative_step": OTHER_DRAW_ORDER}))
    assert set(lost) == {"test_speculative_step_seeded"}, lost
    assert "draws the docstring lists" in lost["test_speculative_step_seeded"]


def test_a_missing_residual_costs_nothing_in_speculative_step_tests():
    """No cascade: the step's tests substitute the reference for residual_distribution."""
    lost = failing(execute({"residual_distribution": "raise NotImplementedError()"}))
    assert set(lost) == {
        "test_residual_distribution_values",
        "test_residual_distribution_raises_without_mass",
    }, lost


# ---------------------------------------------------------------------------
# Each mistake loses the cells that target it, and the message names it
# ---------------------------------------------------------------------------

#: What the feedback must say for each sample mistake, in every cell it loses.
SAMPLE_MISTAKE_WORDS = {
    "mistake-brute-force-count": ["brute-force count"],
    "mistake-raw-target-probability": ["raw target probability"],
    "mistake-strict-less-than": ["strict comparison", "inclusive"],
    "mistake-keeps-tokens-after-rejection": ["stop at the first rejection"],
    "mistake-resample-from-p": [],  # the seeded cell cannot tell; follows_target must
    "mistake-no-bonus-token": ["bonus token"],
    "mistake-residual-not-normalized": [],
    "mistake-closed-form-at-one": ["closed form"],
    "mistake-imports-reference": ["reference implementation"],
}
NAMED_IN = {  # a cell where the message must name the mistake itself
    "mistake-resample-from-p": (
        "test_speculative_step_follows_target",
        "resampling from p instead of the residual",
    ),
    "mistake-residual-not-normalized": (
        "test_residual_distribution_values",
        "without dividing by its sum",
    ),
    "mistake-keeps-tokens-after-rejection": (
        "test_speculative_step_stops_at_first_rejection",
        "keeping tokens after a rejection",
    ),
    "mistake-no-bonus-token": (
        "test_speculative_step_bonus_when_all_accepted",
        "the draft without the bonus token",
    ),
    "mistake-closed-form-at-one": ("test_expected_tokens_alpha_one", "0/0 at alpha = 1"),
}


def test_every_sample_mistake_has_its_words():
    mistakes = {s for s in SCENARIOS if s.startswith("mistake-")}
    assert mistakes == set(SAMPLE_MISTAKE_WORDS)


@pytest.mark.parametrize("scenario", sorted(SAMPLE_MISTAKE_WORDS))
def test_each_sample_mistake_loses_exactly_its_cells_with_a_message_naming_it(scenario):
    lost = failing(execute(SCENARIOS[scenario]))
    expected_lost = {gid for gid, points in EXPECTED[scenario].items() if points == 0}
    if scenario == "mistake-imports-reference":
        # The course's grader zeroes the whole notebook (its integrity check); the
        # notebook's own guard fails every cell that runs after the learner's import.
        expected_lost = {gid for gid in expected_lost if not gid.startswith("test_part1")}
    assert set(lost) == expected_lost
    for gid, message in lost.items():
        for word in SAMPLE_MISTAKE_WORDS[scenario]:
            assert word in message, f"{gid}: {message}"
    if scenario in NAMED_IN:
        gid, words = NAMED_IN[scenario]
        assert words in lost[gid], lost[gid]


# Mistakes that have no sample notebook: {name: (bodies, {lost cell: words or None})}.
EXTRA_MUTANTS = {
    "greedy-no-bonus": (
        {
            "greedy_step": """
            out = []
            for i, x in enumerate(draft_tokens):
                best = int(np.argmax(target_probs[i]))
                if int(x) != best:
                    return out + [best]
                out.append(best)
            return out
            """
        },
        {
            "test_greedy_step_examples": "the draft without the bonus token",
            "test_greedy_step_first_max_on_ties": "first maximum",
            "test_greedy_step_reproduces_greedy_decoding": "between 1 and",
        },
    ),
    "greedy-keeps-the-mismatched-drafted-token": (
        {
            "greedy_step": """
            out = []
            for i, x in enumerate(draft_tokens):
                out.append(int(x))
                if int(x) != int(np.argmax(target_probs[i])):
                    return out
            return out + [int(np.argmax(target_probs[len(draft_tokens)]))]
            """
        },
        {
            "test_greedy_step_examples": "keeping the mismatched drafted token",
            "test_greedy_step_first_max_on_ties": "first maximum",
            "test_greedy_step_reproduces_greedy_decoding": "differs from plain greedy decoding",
        },
    ),
    "greedy-accepts-a-tied-token": (
        {
            "greedy_step": """
            out = []
            for i, x in enumerate(draft_tokens):
                row = np.asarray(target_probs[i])
                if row[int(x)] != row.max():
                    return out + [int(np.argmax(row))]
                out.append(int(x))
            return out + [int(np.argmax(target_probs[len(draft_tokens)]))]
            """
        },
        {"test_greedy_step_first_max_on_ties": "first maximum on ties"},
    ),
    "residual-of-the-draft": (
        {
            "residual_distribution": """
            excess = np.maximum(0.0, np.subtract(q, p))
            if excess.sum() <= 0:
                raise ValueError("no mass")
            return excess / excess.sum()
            """
        },
        {
            "test_residual_distribution_values": "the residual of the draft, max(0, q - p)",
            "test_residual_distribution_raises_without_mass": "expected it to raise ValueError",
        },
    ),
    "expected-tokens-accepted-only": (
        {"expected_tokens": "return float(sum(alpha**i for i in range(1, k + 1)))"},
        {
            "test_expected_tokens_worked_example": "accepted drafted tokens only",
            "test_expected_tokens_alpha_one": "without the bonus token",
            "test_expected_tokens_near_one": "relative error",
        },
    ),
    "step-never-rejects": (
        {
            "speculative_step": """
            vocab = np.shape(target_probs)[1]
            out = [int(x) for x in draft_tokens]
            return out + [int(rng.choice(vocab, p=target_probs[len(out)]))]
            """
        },
        {
            "test_speculative_step_stops_at_first_rejection": "keeping the rejected drafted token",
            "test_speculative_step_follows_target": "never rejecting",
            "test_speculative_step_seeded": None,
        },
    ),
    "spec-accept-inverted-ratio": (
        {
            "spec_accept": """
            accepted = 0
            for i in range(len(p)):
                if r[i] > min(1.0, q[i] / p[i]):
                    break
                accepted += 1
            return accepted
            """
        },
        {
            "test_spec_accept_accepts_by_ratio": "the inverted ratio q/p",
            "test_spec_accept_ratio_at_least_one": "the inverted ratio q/p",
            "test_spec_accept_inclusive_boundary": "the inverted ratio q/p",
            "test_spec_accept_rejects_first": "the inverted ratio q/p",
            "test_spec_accept_discards_after_rejection": "the inverted ratio q/p",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(EXTRA_MUTANTS))
def test_extra_mutants_lose_exactly_their_cells(name):
    bodies, expected = EXTRA_MUTANTS[name]
    lost = failing(execute(bodies))
    assert set(lost) == set(expected), lost
    for gid, words in expected.items():
        if words:
            assert words in lost[gid], f"{gid}: {lost[gid]}"


# ---------------------------------------------------------------------------
# The statistical check: protocol-independent, fails the wrong recovery for any seed
# ---------------------------------------------------------------------------

FOLLOWS = "test_speculative_step_follows_target"
RESAMPLE_FROM_P = SCENARIOS["mistake-resample-from-p"]


@pytest.mark.parametrize("offset", [1000, 2000, 3000, 4000])
def test_the_distribution_check_passes_correct_steps_and_fails_resampling_from_p_for_other_seeds(
    offset,
):
    """Same check, other seeds: correct samplers pass, the wrong recovery fails every time."""
    seeds = {
        "7310 + _c": f"{7310 + offset} + _c",
        "7410 + _c": f"{7410 + offset} + _c",
        "default_rng(5)": f"default_rng({5 + offset})",
    }
    for bodies in (
        {},
        {"speculative_step": OTHER_DRAW_ORDER},
        SCENARIOS["variant-numpy-vectorized"],
    ):
        outcome = execute(bodies, only={FOLLOWS}, replace=seeds)[FOLLOWS]
        assert outcome.passed, outcome.message
    outcome = execute(RESAMPLE_FROM_P, only={FOLLOWS}, replace=seeds)[FOLLOWS]
    assert not outcome.passed


def test_the_hidden_distribution_check_names_the_wrong_recovery():
    """The hidden part alone (the visible one removed) catches and names the mistake."""
    cell = TEST_CELLS[FOLLOWS].source
    hidden_only = cell[: cell.index("### END HIDDEN TESTS")] + "### END HIDDEN TESTS\n"
    outcome = execute(RESAMPLE_FROM_P, only={FOLLOWS}, replace={cell: hidden_only})[FOLLOWS]
    assert not outcome.passed
    assert "resampling from p instead of the residual" in outcome.message
    assert "probability below" in outcome.message


def test_the_distribution_checks_state_a_false_failure_probability_below_one_in_a_million():
    from specdec_reference.testing import hoeffding_tolerance

    cell = TEST_CELLS[FOLLOWS].source
    # Hidden: three configurations at 2e-7 each (check_frequencies' union bound inside),
    # visible: 2,000 draws over 4 tokens within 0.07; the cell's total stays below 1e-6.
    assert cell.count("failure_prob=2e-7") == 1 and "3 x 2e-7 = 6e-7" in cell
    assert "0.07 with probability below 3e-8" in cell and "< 0.07" in cell
    visible = 2 * 4 * math.exp(-2 * 2000 * 0.07**2)
    assert visible < 3e-8
    assert 3 * 2e-7 + visible < 1e-6
    # And the wrong recovery lies far outside the hidden tolerance on every configuration.
    configs = [
        ([0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4]),
        ([0.7, 0.1, 0.2], [0.1, 0.6, 0.3]),
        ([0.45, 0.45, 0.1], [0.5, 0.05, 0.45]),
    ]
    for p, q in configs:
        assert str(p) in cell and str(q) in cell
        overlap = [min(a, b) for a, b in zip(p, q, strict=True)]
        wrong = [o + (1 - sum(overlap)) * a for o, a in zip(overlap, p, strict=True)]
        gap = max(abs(w - a) for w, a in zip(wrong, p, strict=True))
        tol = hoeffding_tolerance(1500, 2e-7 / len(p))
        sd = 0.5 / math.sqrt(1500)  # the largest standard deviation of a frequency
        assert gap - tol > 4 * sd, (p, q, gap, tol)


# ---------------------------------------------------------------------------
# The docstrings state what is graded
# ---------------------------------------------------------------------------

GRADED_PHRASES = {
    "spec_accept": [
        "r[i] <= min(1, p[i] / q[i])",
        "inclusive",
        "stops at the first rejection",
        "even those that would pass",
        "q[i] == 0 is not graded",
        "0 for an empty draft",
        "list or 1-D array",
    ],
    "residual_distribution": ["max(0, p - q)", "divided by its sum", "ValueError", "sums to zero"],
    "speculative_step": [
        "rng.random()",
        "u < min(1, p / q)",
        "rng.choice(V, p=residual_distribution(target_probs[i], draft_probs[i]))",
        "rng.choice(V, p=target_probs[k])",
        "Make no other draws from rng",
        "between 1 and k + 1 tokens",
        "first emitted token follows",
        "(1 point)",
    ],
    "expected_tokens": ["exactly k + 1 at alpha == 1", "relative", "1e-12", "1 - 1e-9"],
    "greedy_step": ["argmax", "first maximum on ties", "bonus token", "k = 0 is allowed"],
}


@pytest.mark.parametrize("grade_id", sorted(GRADED_PHRASES))
def test_each_docstring_states_the_graded_behaviour(grade_id):
    source = SOLUTION_CELLS[grade_id].source
    docstring = source[source.index('"""') : source.index(BEGIN)]
    for phrase in GRADED_PHRASES[grade_id]:
        assert phrase in " ".join(docstring.split()), f"{grade_id}: missing {phrase!r}"


def test_the_expected_tokens_tolerance_in_the_tests_is_the_docstrings():
    for gid in ("test_expected_tokens_near_one",):
        assert "1e-12 * " in TEST_CELLS[gid].source


@pytest.mark.parametrize("grade_id", sorted(GRADED_PHRASES))
def test_docstring_examples_hold_for_the_reference_solution(grade_id):
    import numpy as np

    source = learner_cell(SOLUTION_CELLS[grade_id].source, REFERENCE_BODIES[grade_id])
    ns = {"np": np}
    exec(compile(source, grade_id, "exec"), ns)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(ns[grade_id], grade_id, globs={"np": np, **ns})
    assert sum(len(t.examples) for t in tests) >= 1
    for test in tests:
        runner.run(test, out=lambda _text: None)
    assert runner.failures == 0


def test_visible_asserts_never_depend_on_hidden_helpers():
    """A learner's release notebook runs: no visible line names a hidden-only helper."""
    for gid, cell in TEST_CELLS.items():
        visible = []
        inside = False
        for line in cell.source.splitlines():
            if "### BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "### END HIDDEN TESTS" in line:
                inside = False
            elif not inside:
                visible.append(line)
        text = "\n".join(visible)
        for name in ("_e73", "_checks", "_ref", "_np"):
            assert name not in text, f"{gid}: the visible part uses {name}"
