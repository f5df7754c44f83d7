"""Lesson E7.2: the hidden tests grade fairly, catch every mistake and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants below),
with no kernel: each cell is executed in one shared namespace, the way a kernel would run
it.  Which cells each sample loses is checked through the real grader by test_lessons.py
(``expected.json``).  This module declares what the lessons' contract checks
(test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``, ``GRADED_PHRASES``,
``MESSAGE_FORM``) and checks the lesson's own rules; the hidden tests' helpers are tested in
test_e7_2_checks.py, the kernel-level checks in test_e7_2_kernel.py.
"""

from __future__ import annotations

import ast
import re
import textwrap

import pytest
from support.lessons import Lesson

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


def function_of(grade_id: str) -> str:
    """The solution grade_id a test cell checks (test_<solution>_<behaviour>)."""
    rest = grade_id.removeprefix("test_")
    return next(s for s in SOLUTIONS if rest.startswith(s + "_"))


#: What each sample mistake's message says in each cell it loses.
SAMPLE_MESSAGES = {
    "mistake-by-hand-answers": {
        "test_part1_answers_answer_1": "That is the raw target probability p",
        "test_part1_answers_answer_2": "That is the ratio p/q without the cap at 1",
        "test_part1_answers_answer_3": "That is the sum of max",
        "test_check_understanding_choice": "accepting whenever the top choices agree",
    },
    "mistake-raw-target-probability": {
        "test_accept_prob_ratio_below_one": "That is the raw target probability p",
        "test_accept_prob_caps_at_one": "That is the raw target probability p",
    },
    "mistake-inverted-ratio": {
        "test_accept_prob_ratio_below_one": "That is the inverted ratio q/p",
        "test_accept_prob_caps_at_one": "or the inverted ratio q/p",
    },
    "mistake-no-cap": {"test_accept_prob_caps_at_one": "the ratio p/q without the cap at 1"},
    "mistake-no-input-checks": {
        "test_accept_prob_rejects_bad_q": "expected ValueError",
        "test_overall_acceptance_rejects_mismatched_lengths": "zip stops at the shorter one",
        "test_empirical_acceptance_rejects_fewer_than_one_trial": "expected ValueError",
    },
    "mistake-raw-target-probability-inline": {
        "test_propose_and_test_acceptance_rate": "That is the raw target probability p",
        "test_propose_and_test_always_accepts_when_p_equals_q": "with the raw target probability",
        "test_propose_and_test_seeded": "make exactly two draws",
    },
    "mistake-draw-from-p": {
        "test_propose_and_test_tokens_follow_q": "That is drawing from p",
        "test_propose_and_test_never_accepts_disjoint_supports": "drawn from p instead of q",
        "test_propose_and_test_seeded": "make exactly two draws",
    },
    "mistake-less-or-equal": {
        "test_propose_and_test_never_accepts_disjoint_supports": "whenever u is exactly 0",
    },
    "mistake-global-rng": {
        "test_propose_and_test_uses_only_rng": "changed numpy's global random state",
        "test_propose_and_test_seeded": "make exactly two draws",
        "test_empirical_acceptance_leaves_global_random_state": (
            "changed numpy's global random state"
        ),
        "test_empirical_acceptance_seeded": "one generator",
    },
    "mistake-count-not-fraction": {
        gid: "That is a count instead of a fraction"
        for gid in (
            "test_empirical_acceptance_returns_a_fraction",
            "test_empirical_acceptance_converges_to_overall_acceptance",
            "test_empirical_acceptance_extremes",
            "test_empirical_acceptance_seeded",
        )
    },
    "mistake-reseeded-generator": {
        "test_empirical_acceptance_converges_to_overall_acceptance": (
            "That is a generator recreated inside the loop"
        ),
        "test_empirical_acceptance_seeded": "one generator",
    },
    "mistake-formula-not-simulation": {
        "test_empirical_acceptance_simulates_propose_and_test": "at the formula's value",
        "test_empirical_acceptance_same_seed_same_result": "it ignores the seed",
        "test_empirical_acceptance_seeded": "one generator",
    },
    "mistake-coin-flip-with-formula": {
        "test_empirical_acceptance_simulates_propose_and_test": (
            "or a coin flip with that probability"
        ),
        "test_empirical_acceptance_seeded": "one generator",
    },
    "mistake-keeps-tokens-after-rejection": {
        "test_one_pass_answers_accepted_tokens": "the drafted tokens after the first rejection",
    },
    "mistake-forgets-target-token": {
        "test_one_pass_answers_tokens_emitted": "That is forgetting the target's token",
        "test_one_pass_answers_answer_e_n": "(forgetting the target's token)",
        "test_speculative_speed_expected_tokens": "(forgetting the target's token)",
    },
    "mistake-k-plus-one": {
        "test_one_pass_answers_answer_e_n": "That is k + 1",
        "test_speculative_speed_expected_tokens": "That is k + 1",
    },
    "mistake-no-draft-cost": {
        "test_one_pass_answers_answer_speed": "That is the speed without the draft cost",
        "test_speculative_speed_tokens_per_second": "That is the speed without the draft cost",
    },
    "mistake-closed-form-at-a-equal-to-one": {
        "test_speculative_speed_at_a_equal_to_one": "(1 - a**(k + 1)) / (1 - a) is 0 / 0",
    },
}

#: Mistakes (and one correct solution) without a sample notebook, each run on every cell.
EXTRA_MUTANTS = {
    "inverted-ratio-inline": (
        {
            "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            ratio = q[token] / p[token] if p[token] > 0 else 1.0
            return token, bool(rng.random() < min(1.0, ratio))
            """
        },
        None,
        {
            "test_propose_and_test_acceptance_rate": "That is the inverted ratio q/p",
            "test_propose_and_test_never_accepts_disjoint_supports": "expected a rejection",
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "reversed-comparison": (
        {
            "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return token, bool(rng.random() > accept_prob(p[token], q[token]))
            """
        },
        None,
        {
            "test_propose_and_test_acceptance_rate": "That is a reversed comparison",
            "test_propose_and_test_always_accepts_when_p_equals_q": "every token must be accepted",
            "test_propose_and_test_never_accepts_disjoint_supports": "expected a rejection",
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "top-choice-heuristic": (
        {
            "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return token, token == int(np.argmax(p))
            """
        },
        None,
        {
            "test_propose_and_test_acceptance_rate": "(rate 0), expected 0.6",
            "test_propose_and_test_always_accepts_when_p_equals_q": "every token must be accepted",
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "returns-only-the-flag": (
        {
            "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return bool(rng.random() < accept_prob(p[token], q[token]))
            """
        },
        None,
        # every cell of propose_and_test
        dict.fromkeys(
            (g for g in TEST_CELLS if g.startswith("test_propose_and_test_")),
            "expected 2 values (token, accepted)",
        ),
    ),
    "always-accept": (
        {
            "propose_and_test": """
            return int(rng.choice(len(q), p=q)), True
            """
        },
        None,
        {
            "test_propose_and_test_acceptance_rate": "(rate 1), expected 0.6",
            "test_propose_and_test_never_accepts_disjoint_supports": (
                "which has p[3] = 0, expected a rejection"
            ),
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "uniform-draw": (
        {
            "propose_and_test": """
            token = int(rng.choice(len(q)))
            return token, bool(rng.random() < accept_prob(p[token], q[token]))
            """
        },
        None,
        {
            "test_propose_and_test_tokens_follow_q": "That is drawing uniformly",
            "test_propose_and_test_always_accepts_when_p_equals_q": "raised ValueError",
            "test_propose_and_test_never_accepts_disjoint_supports": "raised ValueError",
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "reseeded-in-propose": (
        {
            "propose_and_test": """
            rng = np.random.default_rng(0)
            token = int(rng.choice(len(q), p=q))
            return token, bool(rng.random() < accept_prob(p[token], q[token]))
            """
        },
        None,
        {
            "test_propose_and_test_tokens_follow_q": "a generator that restarts on every call",
            "test_propose_and_test_acceptance_rate": "(rate 1), expected 0.6",
            "test_propose_and_test_uses_only_rng": "did not draw from rng",
            "test_propose_and_test_seeded": "make exactly two draws",
        },
    ),
    "fixed-seed": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            rng = np.random.default_rng(0)
            return sum(propose_and_test(p, q, rng)[1] for _ in range(trials)) / trials
            """
        },
        None,
        {
            "test_empirical_acceptance_same_seed_same_result": "it ignores the seed",
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    "unseeded": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            rng = np.random.default_rng()
            return sum(propose_and_test(p, q, rng)[1] for _ in range(trials)) / trials
            """
        },
        None,
        {
            "test_empirical_acceptance_same_seed_same_result": (
                "the same seed must give the same result"
            ),
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    "empirical-raw-inline": (
        {
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
        None,
        {
            "test_empirical_acceptance_converges_to_overall_acceptance": (
                "That is the raw target probability p"
            ),
            "test_empirical_acceptance_simulates_propose_and_test": (
                "It never called propose_and_test"
            ),
            "test_empirical_acceptance_extremes": "expected 1.0",
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    "empirical-mean-of-probabilities": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            return sum(min(a, b) for a, b in zip(p, q))
            """
        },
        None,
        {
            "test_empirical_acceptance_returns_a_fraction": "a whole number of accepted",
            "test_empirical_acceptance_simulates_propose_and_test": "at the formula's value",
            "test_empirical_acceptance_same_seed_same_result": "it ignores the seed",
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    "overall-sum-of-max": (
        {
            "overall_acceptance": """
            if len(p) != len(q):
                raise ValueError("lengths differ")
            return sum(max(a, b) for a, b in zip(p, q))
            """
        },
        None,
        {
            "test_overall_acceptance_sums_min_p_q": "That is the sum of max",
            "test_overall_acceptance_extremes": "That is the sum of max",
        },
    ),
    "overall-broadcasts": (
        {
            "overall_acceptance": """
            return float(np.minimum(np.asarray(p), np.asarray(q)).sum())
            """
        },
        None,
        {
            "test_overall_acceptance_rejects_mismatched_lengths": "numpy broadcasts length 1",
        },
    ),
    # Not simulations: each returns (an estimate of) the formula it should check.
    "empirical-formula-numpy": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            rng = np.random.default_rng(seed)
            return float(np.mean(rng.random(trials) < sum(min(a, b) for a, b in zip(p, q))))
            """
        },
        None,
        {
            "test_empirical_acceptance_simulates_propose_and_test": "at the formula's value",
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    "empirical-binomial-of-formula": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            rng = np.random.default_rng(seed)
            return rng.binomial(trials, overall_acceptance(p, q)) / trials
            """
        },
        None,
        {
            "test_empirical_acceptance_simulates_propose_and_test": "at the formula's value",
            "test_empirical_acceptance_seeded": "one generator",
        },
    ),
    # A simulation, but in an order the tests do not know: only the seeded cells care.
    "empirical-tests-before-tokens": (
        {
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
        None,
        {
            "test_empirical_acceptance_simulates_propose_and_test": (
                "It never called propose_and_test"
            ),
            "test_empirical_acceptance_seeded": "the batched order",
        },
    ),
    # Correct: calls propose_and_test through a list comprehension and numpy.
    "empirical-comprehension": (
        {
            "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials < 1")
            rng = np.random.default_rng(seed)
            return np.array([propose_and_test(p, q, rng)[1] for _ in range(trials)]).mean()
            """
        },
        None,
        {},
    ),
    "trace-raw-target-probability": (
        {
            "one_pass_answers": """
            accepted_tokens = ["the"]
            stop_position = 2
            tokens_emitted = 2
            answer_e_n = 2.176
            answer_speed = 108.8
            answer_speedup = 1.3056
            """
        },
        None,
        {
            "test_one_pass_answers_accepted_tokens": "the raw target probability",
        },
    ),
    "trace-inverted-ratio": (
        {
            "one_pass_answers": """
            accepted_tokens = []
            stop_position = 4
            tokens_emitted = 5
            answer_e_n = 1 + 0.6 + 0.6**2 + 0.6**3 + 0.6**4
            answer_speed = 2.176 / 0.016
            answer_speedup = 136.0
            """
        },
        None,
        {
            "test_one_pass_answers_accepted_tokens": "That is the inverted ratio",
            "test_one_pass_answers_stop_position": "verification stops at the first rejection",
            "test_one_pass_answers_tokens_emitted": "That is k + 1",
            "test_one_pass_answers_answer_e_n": "That is one term too many",
            "test_one_pass_answers_answer_speed": "That is one draft step instead of k",
            "test_one_pass_answers_answer_speedup": "That is the speed itself",
        },
    ),
    "speed-one-draft-step": (
        {
            "speculative_speed": """
            e_n = sum(a**i for i in range(k + 1))
            speed = e_n / (t_verify + t_draft)
            return e_n, speed, speed / t_target
            """
        },
        None,
        {
            "test_speculative_speed_tokens_per_second": "That is one draft step instead of k",
            "test_speculative_speed_speedup": "That is the speed divided by t_target",
        },
    ),
    "speed-returns-two": (
        {
            "speculative_speed": """
            e_n = sum(a**i for i in range(k + 1))
            return e_n, e_n / (t_verify + k * t_draft)
            """
        },
        None,
        {
            "test_speculative_speed_expected_tokens": "expected 3 values",
            "test_speculative_speed_at_a_equal_to_one": "expected 3 values",
            "test_speculative_speed_tokens_per_second": "expected 3 values",
            "test_speculative_speed_speedup": "expected 3 values",
        },
    ),
    "accept-prob-misses-nan": (
        {
            "accept_prob": """
            if q <= 0:
                raise ValueError("q must be > 0")
            return min(1.0, p / q)
            """
        },
        None,
        {
            "test_accept_prob_rejects_bad_q": "accept_prob(p=0.5, q=nan) returned 1.0",
        },
    ),
}

#: Every message of a mistake is the test's assertion, says what was expected and names the
#: call or the answer it checked.
MESSAGE_FORM = {
    "the test's AssertionError": r"\AAssertionError: ",
    "what was expected": r"expected|must|should",
    "the call or the answer it checked": (
        r"\w+\(|answer_\w+|choice|accepted_tokens|stop_position|tokens_emitted"
    ),
}


# ---------------------------------------------------------------------------
# The guard against the reference
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# The grading scheme as stated, the order of the cells, one set of numbers
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


def _points_lost(scenario: str) -> float:
    """What sample ``scenario`` loses (``expected.json``, which the real grader checks)."""
    return sum(POINTS[g] - points for g, points in LESSON.expected[scenario].items())


def test_the_grading_scheme_in_the_notebook_is_the_one_the_cells_implement():
    total = sum(POINTS.values())
    protocol = sum(POINTS[g] for g in PROTOCOL)
    assert all(POINTS[g] == 1 for g in PROTOCOL)
    assert protocol <= total / 5, "the protocol must not carry more than a fifth of the points"
    text = _markdown("title")
    assert f"({total} in all)" in text
    assert f"**{total - protocol} points go to the lesson's ideas**" in text
    assert f"**{protocol} points, one per test cell, go to the protocol**" in text
    # "Accepting on the raw target probability ... costs 5 of the 6 points of accept_prob".
    lost = _points_lost("mistake-raw-target-probability")
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
def test_core_mistakes_cost_more_than_a_protocol_point(scenario, points):
    assert _points_lost(scenario) == points


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
