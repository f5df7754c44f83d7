"""Lesson E7.2: the hidden tests grade fairly, catch every mistake and say which one.

These tests run the source notebook's test cells in this process, after learner code
built from solution bodies (the samples' and extra mutants below), with no kernel: each
cell is executed in one shared namespace, the way a kernel would run it.  The generic
checks (source full marks, release zero, samples' expected scores through the real
grader...) live in test_lessons.py, the lessons' contract in test_lesson_contracts.py
(which reads ``GRADED_PHRASES`` here); kernel-level checks are in test_e7_2_kernel.py.
"""

from __future__ import annotations

import ast
import re
import textwrap

import pytest
from support.lessons import Lesson, Outcome, failing

LESSON = Lesson("e7_2_acceptance_tests", support_cells={"imports", "your_id", "your_numbers"})
SOURCE_NB = LESSON.source_nb
TEST_CELLS = LESSON.test_cells
POINTS = LESSON.points
FUNCTIONS = ["accept_prob", "overall_acceptance", "propose_and_test", "empirical_acceptance"]
SOLUTIONS = [
    *FUNCTIONS,
    "part1_answers",
    "one_pass_answers",
    "speculative_speed",
    "check_understanding",
]


def execute(bodies: dict[str, str] | None = None) -> tuple[dict[str, Outcome], dict]:
    """The test cells' outcomes and the final namespace (see Lesson.run)."""
    run = LESSON.run(bodies)
    return run.outcomes, run.namespace


def run_in_process(bodies: dict[str, str] | None = None) -> dict[str, Outcome]:
    """The test cells' outcomes of :func:`execute`."""
    return LESSON.run(bodies).outcomes


def function_of(grade_id: str) -> str:
    """The solution grade_id a test cell checks (test_<solution>_<behaviour>)."""
    rest = grade_id.removeprefix("test_")
    return next(s for s in SOLUTIONS if rest.startswith(s + "_"))


# Mutants that are not sample submissions: (grade_id, body) pairs.
MUTANTS = {
    "inverted-ratio-inline": {
        "propose_and_test": """
        token = int(rng.choice(len(q), p=q))
        ratio = q[token] / p[token] if p[token] > 0 else 1.0
        return token, bool(rng.random() < min(1.0, ratio))
        """
    },
    "reversed-comparison": {
        "propose_and_test": """
        token = int(rng.choice(len(q), p=q))
        return token, bool(rng.random() > accept_prob(p[token], q[token]))
        """
    },
    "top-choice-heuristic": {
        "propose_and_test": """
        token = int(rng.choice(len(q), p=q))
        return token, token == int(np.argmax(p))
        """
    },
    "returns-only-the-flag": {
        "propose_and_test": """
        token = int(rng.choice(len(q), p=q))
        return bool(rng.random() < accept_prob(p[token], q[token]))
        """
    },
    "always-accept": {
        "propose_and_test": """
        return int(rng.choice(len(q), p=q)), True
        """
    },
    "uniform-draw": {
        "propose_and_test": """
        token = int(rng.choice(len(q)))
        return token, bool(rng.random() < accept_prob(p[token], q[token]))
        """
    },
    "reseeded-in-propose": {
        "propose_and_test": """
        rng = np.random.default_rng(0)
        token = int(rng.choice(len(q), p=q))
        return token, bool(rng.random() < accept_prob(p[token], q[token]))
        """
    },
    "fixed-seed": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng(0)
        return sum(propose_and_test(p, q, rng)[1] for _ in range(trials)) / trials
        """
    },
    "unseeded": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng()
        return sum(propose_and_test(p, q, rng)[1] for _ in range(trials)) / trials
        """
    },
    "empirical-raw-inline": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng(seed)
        hits = 0
        for _ in range(trials):
            token = rng.choice(len(q), p=q)
            hits += rng.random() < p[token]
        return hits / trials
        """
    },
    "empirical-mean-of-probabilities": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        return sum(min(a, b) for a, b in zip(p, q))
        """
    },
    "overall-sum-of-max": {
        "overall_acceptance": """
        if len(p) != len(q):
            raise ValueError("lengths differ")
        return sum(max(a, b) for a, b in zip(p, q))
        """
    },
    "overall-broadcasts": {
        "overall_acceptance": """
        return float(np.minimum(np.asarray(p), np.asarray(q)).sum())
        """
    },
    # Not simulations: each returns (an estimate of) the formula it should check.
    "empirical-formula-numpy": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng(seed)
        return float(np.mean(rng.random(trials) < sum(min(a, b) for a, b in zip(p, q))))
        """
    },
    "empirical-binomial-of-formula": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng(seed)
        return rng.binomial(trials, overall_acceptance(p, q)) / trials
        """
    },
    # A simulation, but in an order the tests do not know: only the seeded cells care.
    "empirical-tests-before-tokens": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
        rng = np.random.default_rng(seed)
        u = rng.random(trials)
        tokens = rng.choice(len(q), size=trials, p=q)
        return np.mean(u < np.minimum(1.0, p[tokens] / q[tokens]))
        """
    },
    # Correct: calls propose_and_test through a list comprehension and numpy.
    "empirical-comprehension": {
        "empirical_acceptance": """
        if trials < 1:
            raise ValueError("trials < 1")
        rng = np.random.default_rng(seed)
        return np.array([propose_and_test(p, q, rng)[1] for _ in range(trials)]).mean()
        """
    },
    "trace-raw-target-probability": {
        "one_pass_answers": """
        accepted_tokens = ["the"]
        stop_position = 2
        tokens_emitted = 2
        answer_e_n = 2.176
        answer_speed = 108.8
        answer_speedup = 1.3056
        """
    },
    "trace-inverted-ratio": {
        "one_pass_answers": """
        accepted_tokens = []
        stop_position = 4
        tokens_emitted = 5
        answer_e_n = 1 + 0.6 + 0.6**2 + 0.6**3 + 0.6**4
        answer_speed = 2.176 / 0.016
        answer_speedup = 136.0
        """
    },
    "speed-one-draft-step": {
        "speculative_speed": """
        e_n = sum(a**i for i in range(k + 1))
        speed = e_n / (t_verify + t_draft)
        return e_n, speed, speed / t_target
        """
    },
    "speed-returns-two": {
        "speculative_speed": """
        e_n = sum(a**i for i in range(k + 1))
        return e_n, e_n / (t_verify + k * t_draft)
        """
    },
    "accept-prob-misses-nan": {
        "accept_prob": """
        if q <= 0:
            raise ValueError("q must be > 0")
        return min(1.0, p / q)
        """
    },
}
SAMPLE_BODIES = {name: overrides for name, overrides in LESSON.scenarios.items() if name != "blank"}
CORRECT = [
    *(name for name in SAMPLE_BODIES if name == "reference" or name.startswith("variant-")),
    "empirical-comprehension",
]


@pytest.fixture(scope="module")
def outcomes_by_scenario():
    """Every sample scenario and mutant, run once for the whole module."""
    runs = {name: run_in_process(bodies) for name, bodies in SAMPLE_BODIES.items()}
    runs.update({name: run_in_process(bodies) for name, bodies in MUTANTS.items()})
    return runs


# ---------------------------------------------------------------------------
# Fair to every correct solution
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", CORRECT)
def test_every_correct_variant_passes_every_test_cell(outcomes_by_scenario, scenario):
    outcomes = outcomes_by_scenario[scenario]
    assert set(outcomes) == set(TEST_CELLS)
    assert not failing(outcomes), {g: outcomes[g].message for g in failing(outcomes)}


def test_sample_scores_in_process_match_expected_json(outcomes_by_scenario):
    """The in-process run agrees with expected.json (which the real grader checks).

    Only the grader forfeits a notebook that used the reference (its integrity check);
    in the kernel alone, Part 1 runs before the learner's import and keeps its points.
    """
    expected = build_samples_expected()
    for scenario, cells in expected.items():
        if scenario == "blank":
            continue
        got = {g: (POINTS[g] if o.passed else 0) for g, o in outcomes_by_scenario[scenario].items()}
        if scenario == "mistake-imports-reference":
            cells = {g: (POINTS[g] if g.startswith("test_part1") else 0) for g in cells}
        assert got == cells, scenario


def build_samples_expected() -> dict:
    return LESSON.expected


# ---------------------------------------------------------------------------
# Each check catches its mistake, and its message names the mistake
# ---------------------------------------------------------------------------

CAUGHT = [
    # (test cell, scenario or mutant, words the message must contain)
    ("test_part1_answers_answer_1", "mistake-by-hand-answers", "raw target probability"),
    ("test_part1_answers_answer_2", "mistake-by-hand-answers", "without the cap at 1"),
    ("test_part1_answers_answer_3", "mistake-by-hand-answers", "sum of max"),
    (
        "test_check_understanding_choice",
        "mistake-by-hand-answers",
        "whenever the top choices agree",
    ),
    (
        "test_accept_prob_ratio_below_one",
        "mistake-raw-target-probability",
        "raw target probability",
    ),
    ("test_accept_prob_ratio_below_one", "mistake-inverted-ratio", "inverted ratio"),
    ("test_accept_prob_caps_at_one", "mistake-no-cap", "without the cap at 1"),
    ("test_accept_prob_caps_at_one", "mistake-inverted-ratio", "inverted ratio"),
    ("test_accept_prob_rejects_bad_q", "mistake-no-input-checks", "expected ValueError"),
    ("test_accept_prob_rejects_bad_q", "accept-prob-misses-nan", "nan"),
    ("test_overall_acceptance_sums_min_p_q", "overall-sum-of-max", "sum of max"),
    ("test_overall_acceptance_extremes", "overall-sum-of-max", "sum of max"),
    ("test_overall_acceptance_rejects_mismatched_lengths", "mistake-no-input-checks", "zip stops"),
    ("test_overall_acceptance_rejects_mismatched_lengths", "overall-broadcasts", "broadcasts"),
    # statistical checks: each fails on a mutant
    ("test_propose_and_test_tokens_follow_q", "mistake-draw-from-p", "drawing from p"),
    ("test_propose_and_test_tokens_follow_q", "uniform-draw", "drawing uniformly"),
    ("test_propose_and_test_tokens_follow_q", "reseeded-in-propose", "restarts on every call"),
    (
        "test_propose_and_test_acceptance_rate",
        "mistake-raw-target-probability-inline",
        "raw target probability",
    ),
    ("test_propose_and_test_acceptance_rate", "inverted-ratio-inline", "inverted ratio"),
    ("test_propose_and_test_acceptance_rate", "reversed-comparison", "reversed comparison"),
    ("test_propose_and_test_acceptance_rate", "top-choice-heuristic", "expected"),
    ("test_propose_and_test_acceptance_rate", "always-accept", "expected"),
    (
        "test_empirical_acceptance_converges_to_overall_acceptance",
        "mistake-count-not-fraction",
        "count instead of a fraction",
    ),
    (
        "test_empirical_acceptance_converges_to_overall_acceptance",
        "mistake-reseeded-generator",
        "generator recreated inside the loop",
    ),
    (
        "test_empirical_acceptance_converges_to_overall_acceptance",
        "empirical-raw-inline",
        "raw target probability",
    ),
    ("test_empirical_acceptance_same_seed_same_result", "fixed-seed", "ignores the seed"),
    ("test_empirical_acceptance_same_seed_same_result", "unseeded", "same seed must give"),
    # zero-variance checks
    (
        "test_propose_and_test_always_accepts_when_p_equals_q",
        "mistake-raw-target-probability-inline",
        "raw target probability",
    ),
    ("test_propose_and_test_never_accepts_disjoint_supports", "always-accept", "which has p["),
    (
        "test_propose_and_test_never_accepts_disjoint_supports",
        "mistake-draw-from-p",
        "instead of q",
    ),
    (
        "test_empirical_acceptance_extremes",
        "mistake-count-not-fraction",
        "count instead of a fraction",
    ),
    (
        "test_propose_and_test_returns_token_and_flag",
        "returns-only-the-flag",
        "expected 2 values (token, accepted)",
    ),
    # randomness and protocol
    ("test_propose_and_test_uses_only_rng", "reseeded-in-propose", "did not draw from rng"),
    ("test_propose_and_test_uses_only_rng", "mistake-global-rng", "global random state"),
    (
        "test_empirical_acceptance_leaves_global_random_state",
        "mistake-global-rng",
        "global random state",
    ),
    (
        "test_empirical_acceptance_returns_a_fraction",
        "mistake-count-not-fraction",
        "count instead of a fraction",
    ),
    (
        "test_empirical_acceptance_returns_a_fraction",
        "empirical-mean-of-probabilities",
        "whole number of accepted",
    ),
    (
        "test_empirical_acceptance_rejects_fewer_than_one_trial",
        "mistake-no-input-checks",
        "expected ValueError",
    ),
    ("test_propose_and_test_seeded", "mistake-global-rng", "exactly two draws"),
    ("test_empirical_acceptance_seeded", "mistake-global-rng", "one generator"),
    ("test_empirical_acceptance_seeded", "empirical-tests-before-tokens", "batched order"),
    # the simulation must simulate: propose_and_test swapped for a known stand-in
    (
        "test_empirical_acceptance_simulates_propose_and_test",
        "mistake-formula-not-simulation",
        "formula's value",
    ),
    (
        "test_empirical_acceptance_simulates_propose_and_test",
        "mistake-coin-flip-with-formula",
        "coin flip",
    ),
    ("test_empirical_acceptance_simulates_propose_and_test", "empirical-formula-numpy", "formula"),
    (
        "test_empirical_acceptance_simulates_propose_and_test",
        "empirical-binomial-of-formula",
        "formula",
    ),
    (
        "test_empirical_acceptance_simulates_propose_and_test",
        "empirical-mean-of-probabilities",
        "formula",
    ),
    (
        "test_empirical_acceptance_simulates_propose_and_test",
        "empirical-tests-before-tokens",
        "never called propose_and_test",
    ),
    # <= keeps a token with p = 0 when u is exactly 0
    (
        "test_propose_and_test_never_accepts_disjoint_supports",
        "mistake-less-or-equal",
        "exactly 0",
    ),
    # Part 3: the trace and the speed
    (
        "test_one_pass_answers_accepted_tokens",
        "mistake-keeps-tokens-after-rejection",
        "after the first rejection",
    ),
    ("test_one_pass_answers_accepted_tokens", "trace-raw-target-probability", "raw target"),
    ("test_one_pass_answers_accepted_tokens", "trace-inverted-ratio", "inverted ratio"),
    ("test_one_pass_answers_stop_position", "trace-inverted-ratio", "first rejection"),
    ("test_one_pass_answers_tokens_emitted", "mistake-forgets-target-token", "target's token"),
    ("test_one_pass_answers_tokens_emitted", "trace-inverted-ratio", "k + 1"),
    ("test_one_pass_answers_answer_e_n", "mistake-forgets-target-token", "target's token"),
    ("test_one_pass_answers_answer_e_n", "mistake-k-plus-one", "k + 1"),
    ("test_one_pass_answers_answer_e_n", "trace-inverted-ratio", "one term too many"),
    ("test_one_pass_answers_answer_speed", "mistake-no-draft-cost", "without the draft cost"),
    ("test_one_pass_answers_answer_speed", "trace-inverted-ratio", "one draft step"),
    ("test_one_pass_answers_answer_speedup", "trace-inverted-ratio", "the speed itself"),
    ("test_speculative_speed_expected_tokens", "mistake-forgets-target-token", "target's token"),
    ("test_speculative_speed_expected_tokens", "mistake-k-plus-one", "k + 1"),
    ("test_speculative_speed_at_a_equal_to_one", "mistake-closed-form-at-a-equal-to-one", "0 / 0"),
    ("test_speculative_speed_tokens_per_second", "mistake-no-draft-cost", "without the draft cost"),
    ("test_speculative_speed_tokens_per_second", "speed-one-draft-step", "one draft step"),
    ("test_speculative_speed_speedup", "speed-one-draft-step", "divided by t_target"),
    ("test_speculative_speed_speedup", "speed-returns-two", "expected 3 values"),
]


@pytest.mark.parametrize(
    ("cell", "scenario", "words"), CAUGHT, ids=[f"{c}-{s}" for c, s, _ in CAUGHT]
)
def test_each_check_fails_on_its_mistake_and_names_it(outcomes_by_scenario, cell, scenario, words):
    outcome = outcomes_by_scenario[scenario][cell]
    assert not outcome.passed, f"{cell} passed on {scenario}"
    assert words.lower() in outcome.message.lower(), outcome.message


def test_every_test_cell_is_shown_to_fail_on_some_mistake():
    caught = {cell for cell, _, _ in CAUGHT}
    assert caught == set(TEST_CELLS)


@pytest.mark.parametrize("scenario", [*SAMPLE_BODIES, *MUTANTS])
def test_messages_say_what_was_called_and_what_was_expected(outcomes_by_scenario, scenario):
    for gid, outcome in outcomes_by_scenario[scenario].items():
        if outcome.passed or "reference implementation" in outcome.message:
            continue
        assert outcome.message.startswith("AssertionError: "), (gid, outcome.message)
        message = outcome.message
        # What was expected, and what came back (or was called).
        assert re.search(r"expected|must|should", message), (gid, message)
        assert re.search(
            r"\w+\(|answer_\w+|choice|accepted_tokens|stop_position|tokens_emitted", message
        ), (gid, message)


# ---------------------------------------------------------------------------
# No cascade, and the guard against the reference
# ---------------------------------------------------------------------------

ONE_FUNCTION_MISTAKES = {
    "mistake-formula-not-simulation": "empirical_acceptance",
    "mistake-coin-flip-with-formula": "empirical_acceptance",
    "mistake-less-or-equal": "propose_and_test",
    "mistake-closed-form-at-a-equal-to-one": "speculative_speed",
    "speed-one-draft-step": "speculative_speed",
    "mistake-keeps-tokens-after-rejection": "one_pass_answers",
    "mistake-raw-target-probability": "accept_prob",
    "mistake-inverted-ratio": "accept_prob",
    "mistake-no-cap": "accept_prob",
    "mistake-raw-target-probability-inline": "propose_and_test",
    "mistake-draw-from-p": "propose_and_test",
    "reversed-comparison": "propose_and_test",
    "mistake-count-not-fraction": "empirical_acceptance",
    "mistake-reseeded-generator": "empirical_acceptance",
}


@pytest.mark.parametrize(("scenario", "function"), ONE_FUNCTION_MISTAKES.items())
def test_a_mistake_in_one_function_costs_points_only_in_its_own_cells(
    outcomes_by_scenario, scenario, function
):
    """propose_and_test calls accept_prob and empirical_acceptance calls both, but their
    tests substitute the reference for the callees: no cascade."""
    failed = failing(outcomes_by_scenario[scenario])
    assert failed
    assert {function_of(gid) for gid in failed} == {function}


def test_the_callees_are_the_learners_again_after_each_cell():
    """use_reference_for_cell gives the learner's accept_prob and propose_and_test back."""
    outcomes, ns = execute(SAMPLE_BODIES["mistake-raw-target-probability"])
    assert not outcomes["test_accept_prob_ratio_below_one"].passed
    assert ns["accept_prob"](0.5, 0.8) == 0.5  # the learner's (wrong) one, not the reference's
    for name in ("accept_prob", "propose_and_test", "empirical_acceptance"):
        assert ns[name].__module__ == "__main__", name


def test_a_learner_who_imports_the_reference_fails_every_later_test(outcomes_by_scenario):
    outcomes = outcomes_by_scenario["mistake-imports-reference"]
    order = list(TEST_CELLS)
    first_after = order.index("test_accept_prob_ratio_below_one")
    for gid in order[first_after:]:
        assert not outcomes[gid].passed, gid
        assert "reference implementation" in outcomes[gid].message
    # Part 1 is answered by hand and graded before the import ran.
    assert all(outcomes[gid].passed for gid in order[:first_after])


@pytest.mark.parametrize(
    "body",
    [
        # an alias imported at the top of the cell
        """
    import specdec_reference as sr

    def accept_prob(p, q):
        return sr.accept_prob(p, q)
    """,
        # a name imported from a submodule
        """
    from specdec_reference.acceptance import accept_prob as _helper

    def accept_prob(p, q):
        return _helper(p, q)
    """,
        # hidden behind importlib
        """
    import importlib

    def accept_prob(p, q):
        return importlib.import_module("specdec_reference").accept_prob(p, q)
    """,
    ],
)
def test_the_guard_catches_other_ways_of_using_the_reference(body):
    cell = TEST_CELLS["test_accept_prob_ratio_below_one"].source
    ns = {"__name__": "__main__", "_ih": ["", textwrap.dedent(body)], "_specdec_preloaded": False}
    exec(textwrap.dedent(body), ns)
    with pytest.raises(AssertionError, match="reference implementation"):
        exec(cell, ns)
    # Without the cell history (a kernel that keeps none), the code inspection catches it.
    ns["_ih"] = []
    with pytest.raises(AssertionError, match="must be your own code"):
        exec(cell, ns)


def test_the_guard_catches_an_import_before_the_first_test():
    """The first hidden test records that the reference was already imported."""
    cell = TEST_CELLS["test_part1_answers_answer_1"].source
    ns = {"__name__": "__main__", "_ih": [], "_specdec_preloaded": True, "answer_1": 0.25}
    with pytest.raises(AssertionError, match="imported before the tests ran"):
        exec(cell, ns)


# ---------------------------------------------------------------------------
# The notebook states what it grades
# ---------------------------------------------------------------------------

GRADED_PHRASES = {
    # function: phrases its docstring must contain, one per graded behaviour
    "accept_prob": [
        "probability that the acceptance test keeps a drafted token",
        "below 1 only when p < q",
        "1 when p >= q",
        "ValueError",
        "zero, negative or NaN",
    ],
    "overall_acceptance": [
        "averaged over the draft's proposals",
        "1 when p equals q",
        "0 when no token",
        "different lengths",
    ],
    "propose_and_test": [
        "rng.choice(len(q), p=q)",
        "rng.random()",
        "token : int",
        "accepted : bool",
        "tokens follow q",
        "min(1, p[t] / q[t])",
        "always when p equals q",
        "never when p[t] is 0",
        "exactly 0.0",
        "not <=",
        "same generator state gives the same result",
        "advances rng",
        "exactly two",
        "np.random's global functions",
    ],
    "empirical_acceptance": [
        "np.random.default_rng(seed)",
        "trials < 1",
        "ValueError",
        "between 0 and 1",
        "multiple of",
        "approaches overall_acceptance",
        "1 when p equals q",
        "same seed gives the same result",
        "different seeds",
        "global random state",
        "stand-in",
        "rng.choice(len(q), size=trials, p=q)",
        "rng.random(trials)",
    ],
    "speculative_speed": [
        "accepted independently with probability a",
        "k + 1 when a = 1",
        "one verification and k draft steps",
        "1 / t_target",
        "your own expected_tokens",
        "your own tokens_per_time",
        "Python or numpy number",
    ],
}


def test_test_cells_still_end_with_a_statement_once_hidden_tests_are_removed():
    """The hidden block comes first, so the learner's cell ends with its visible asserts."""
    for gid, cell in TEST_CELLS.items():
        release_view = re.sub(
            r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n", "", cell.source, flags=re.S
        )
        assert "specdec_reference" not in release_view, gid
        body = ast.parse(release_view).body
        assert len(body) > 1 and not isinstance(body[-1], ast.Expr), gid


STATISTICAL = [
    "test_propose_and_test_tokens_follow_q",
    "test_propose_and_test_acceptance_rate",
    "test_empirical_acceptance_converges_to_overall_acceptance",
    "test_empirical_acceptance_same_seed_same_result",
]


@pytest.mark.parametrize("cell", STATISTICAL)
def test_statistical_checks_state_seed_sample_size_and_bound(cell):
    source = TEST_CELLS[cell].source
    comments = " ".join(
        line.strip("# ") for line in source.splitlines() if line.strip().startswith("#")
    )
    assert re.search(r"seeds? \d+", comments, re.I), comments
    assert re.search(r"\d+ (calls|trials)", comments), comments
    assert re.search(r"1e-(6|12)", comments), comments


DETERMINISTIC_NEW = [
    "test_empirical_acceptance_simulates_propose_and_test",
    "test_speculative_speed_expected_tokens",
    "test_speculative_speed_at_a_equal_to_one",
    "test_speculative_speed_tokens_per_second",
    "test_speculative_speed_speedup",
]


@pytest.mark.parametrize("cell", DETERMINISTIC_NEW)
def test_new_checks_say_they_are_deterministic(cell):
    """They use no sampling of their own, so no false-failure bound is needed; they say so."""
    assert "# Deterministic" in TEST_CELLS[cell].source


def test_statistical_checks_weigh_more_than_seeded_exactness():
    seeded = sum(p for g, p in POINTS.items() if g.endswith("_seeded"))
    statistical = sum(POINTS[g] for g in STATISTICAL)
    assert statistical >= 3 * seeded
    assert all(POINTS[g] == 1 for g in POINTS if g.endswith("_seeded"))


def test_points_in_headings_match_the_test_cells():
    headings = {c.source.splitlines()[0]: c for c in SOURCE_NB.cells if c.cell_type == "markdown"}
    part_points = {
        "## Part 1": sum(p for g, p in POINTS.items() if g.startswith("test_part1_answers")),
        "## Part 2": sum(p for g, p in POINTS.items() if function_of(g) in FUNCTIONS),
        "## Part 3": sum(
            p
            for g, p in POINTS.items()
            if function_of(g) in ("one_pass_answers", "speculative_speed")
        ),
        "## Check your understanding": POINTS["test_check_understanding_choice"],
    }
    for prefix, points in part_points.items():
        heading = next(h for h in headings if h.startswith(prefix))
        assert f"({points} point" in heading, heading
    for function in [*FUNCTIONS, "speculative_speed"]:
        heading = next(h for h in headings if h.startswith(f"### `{function}`"))
        points = sum(p for g, p in POINTS.items() if function_of(g) == function)
        assert f"({points} points)" in heading, heading


def test_hidden_suite_is_fast_in_process():
    """All test cells of the reference solution take well under the grader's budget."""
    outcomes = run_in_process()
    assert sum(o.seconds for o in outcomes.values()) < 10


# ---------------------------------------------------------------------------
# Issue 14: the grading scheme as stated, the order of the cells, one set of numbers
# ---------------------------------------------------------------------------

#: Cells that grade the protocol (input checks, randomness only from the generator, the
#: seeded draw order) rather than the lesson's ideas: one point each.
PROTOCOL = {
    "test_accept_prob_rejects_bad_q",
    "test_overall_acceptance_rejects_mismatched_lengths",
    "test_propose_and_test_uses_only_rng",
    "test_propose_and_test_seeded",
    "test_empirical_acceptance_same_seed_same_result",
    "test_empirical_acceptance_leaves_global_random_state",
    "test_empirical_acceptance_rejects_fewer_than_one_trial",
    "test_empirical_acceptance_seeded",
}


def _markdown(cell_id: str) -> str:
    return " ".join(next(c for c in SOURCE_NB.cells if c.get("id") == cell_id).source.split())


def test_the_grading_scheme_in_the_notebook_is_the_one_the_cells_implement(
    outcomes_by_scenario,
):
    total = sum(POINTS.values())
    protocol = sum(POINTS[g] for g in PROTOCOL)
    assert all(POINTS[g] == 1 for g in PROTOCOL)
    assert protocol <= total / 5, "the protocol must not carry more than a fifth of the points"
    text = _markdown("title")
    assert f"({total} in all)" in text
    assert f"**{total - protocol} points go to the lesson's ideas**" in text
    assert f"**{protocol} points, one per test cell, go to the protocol**" in text
    # "Accepting on the raw target probability ... costs 5 of the 6 points of accept_prob".
    lost = sum(POINTS[g] for g in failing(outcomes_by_scenario["mistake-raw-target-probability"]))
    own = sum(p for g, p in POINTS.items() if function_of(g) == "accept_prob")
    assert f"costs {lost} of the {own} points of `accept_prob`" in text


@pytest.mark.parametrize(
    ("scenario", "points"),
    [
        ("mistake-raw-target-probability", 5),
        ("mistake-raw-target-probability-inline", 5),
        ("mistake-no-cap", 2),
        ("mistake-formula-not-simulation", 5),
        ("mistake-coin-flip-with-formula", 4),
        ("mistake-keeps-tokens-after-rejection", 2),
    ],
)
def test_core_mistakes_cost_more_than_a_protocol_point(outcomes_by_scenario, scenario, points):
    assert sum(POINTS[g] for g in failing(outcomes_by_scenario[scenario])) == points


def test_the_prediction_is_asked_before_the_idea_answers_it():
    ids = [c.get("id") for c in SOURCE_NB.cells]
    assert ids.index("predict-first") < ids.index("the-idea")
    before = " ".join(SOURCE_NB.cells[i].source for i in range(ids.index("predict-first")))
    assert "not enough" not in before and "heuristic" not in before


def test_the_idea_says_what_tokens_with_q_zero_contribute():
    assert "q(x) = 0$ is never proposed, so it contributes 0" in _markdown("the-idea")


def test_the_chapter_context_derives_why_verification_is_cheap():
    """14 GB at 2 TB/s is 7 ms; 2 FLOP per weight at 300 TFLOP/s is about 0.05 ms."""
    text = _markdown("chapter-context")
    params, bytes_per, bandwidth, flops = 7e9, 2, 2e12, 3e14
    assert "7 billion parameters" in text and "16-bit" in text and "14 GB" in text
    assert f"= **{params * bytes_per / bandwidth * 1e3:.0f} ms**" in text
    assert f"$\\approx$ **{2 * params / flops * 1e3:.2f} ms**" in text
    assert f"5 \\times 0.05 \\approx {5 * 2 * params / flops * 1e3:.2f}$ ms" in text
    assert (
        "150 positions" in text
        and round(params * bytes_per / bandwidth / (2 * params / flops), -1) == 150
    )


def test_the_printed_numbers_are_the_ones_the_tests_grade_without_a_key():
    """One set of numbers: without a variant key every learner gets row 0 of the lesson's
    variant table, which is testing.e7_2's draft and Part 3 speed question."""
    from specdec_reference import variants
    from specdec_reference.testing import e7_2

    row = variants.graded_numbers("e7_2_acceptance_tests", "", "")
    assert row["variant"] == 0
    assert (row["trace_q"], row["trace_p"], row["trace_r"]) == tuple(
        list(x) for x in (e7_2.DRAFT_Q, e7_2.DRAFT_P, e7_2.DRAFT_R)
    )
    assert e7_2.speed.part3_numbers(row) == e7_2.PART3
    # The Part 3 text asks for the learner's own numbers and prints none of its own.
    text = _markdown("part3")
    assert "Your numbers above give" in text and "|" not in text


def test_the_chapter_numbers_follow_from_its_timings():
    import math

    from specdec_reference import expected_tokens, speed_estimate, speedup
    from specdec_reference.testing import e7_2

    c = e7_2.CHAPTER
    assert math.isclose(expected_tokens(c["a"], c["k"]), 3.3616)
    assert math.isclose(speed_estimate(c["a"], c["k"], c["t_verify"], c["t_draft"]), 210.1)
    assert math.isclose(speedup(c["a"], c["k"], c["t_verify"], c["t_draft"], c["t_target"]), 2.101)


def test_the_zero_draw_generator_is_a_real_generator_that_draws_exactly_zero():
    import numpy as np

    from specdec_reference import propose_and_test
    from specdec_reference.testing import e7_2

    rng = e7_2.generator_with_zero_draw(1)
    assert isinstance(rng, np.random.Generator)
    first, second = rng.random(), rng.random()
    assert first > 0 and second == 0.0
    # The reference's strict < rejects a token with p = 0 at u = 0; <= would keep it.
    assert propose_and_test([0.0, 1.0], [1.0, 0.0], e7_2.generator_with_zero_draw(1)) == (0, False)
