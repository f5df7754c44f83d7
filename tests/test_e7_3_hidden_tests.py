"""Lesson E7.3: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants below),
with no kernel: the cells run in one shared namespace, the way a kernel runs them.  Which
cells each sample loses is checked through the real grader by test_lessons.py
(``expected.json``).  This module declares what the lessons' contract checks
(test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``, ``GRADED_PHRASES``) and
checks the lesson's own rules; the kernel-level checks of this lesson are in
test_e7_3_kernel.py.
"""

from __future__ import annotations

import math
import re

import pytest
from support.lessons import Lesson, failing

#: Ungraded cells that a visible test relies on (the toy models of Part 5) or that every
#: learner runs first; plots and demonstrations are skipped.
LESSON = Lesson(
    "e7_3_accept_step", support_cells={"code-setup", "code-greedy-demo", "your_id", "your_numbers"}
)
SCENARIOS = LESSON.scenarios
EXPECTED = LESSON.expected
REFERENCE_BODIES = LESSON.reference_bodies
TEST_CELLS = LESSON.test_cells
SOLUTION_CELLS = LESSON.solution_cells
BEGIN = "### BEGIN SOLUTION"


def execute(bodies=None, *, only=None, replace=None):
    """The test cells' outcomes of running the notebook with ``bodies`` (see Lesson.run)."""
    return LESSON.run(bodies, only=only, replace=replace).outcomes


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


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

#: What each sample mistake's message says in each cell it loses.
SAMPLE_MESSAGES = {
    "mistake-brute-force-count": {
        "test_spec_accept_discards_after_rejection": "That is the brute-force count",
    },
    "mistake-raw-target-probability": {
        "test_spec_accept_accepts_by_ratio": "That is accepting on the raw target probability",
        "test_spec_accept_ratio_at_least_one": "That is accepting on the raw target probability",
    },
    "mistake-strict-less-than": {
        "test_spec_accept_inclusive_boundary": "a strict comparison: the boundary is inclusive",
    },
    "mistake-keeps-tokens-after-rejection": {
        gid: "keeping tokens after a rejection: stop at the first rejection"
        for gid in (
            "test_speculative_step_stops_at_first_rejection",
            "test_speculative_step_follows_target",
            "test_speculative_step_seeded",
        )
    },
    "mistake-resample-from-p": {
        "test_speculative_step_follows_target": "resampling from p instead of the residual",
        # The seeded cell cannot tell this mistake from another draw order.
        "test_speculative_step_seeded": "make exactly the draws the docstring lists",
    },
    "mistake-no-bonus-token": {
        "test_speculative_step_bonus_when_all_accepted": "the draft without the bonus token",
        "test_speculative_step_follows_target": "exactly 1 token (the bonus token)",
        "test_speculative_step_seeded": "the draft without the bonus token",
    },
    "mistake-bonus-by-argmax": {
        "test_speculative_step_follows_target": "the argmax of target_probs[0] instead of a sample",
        "test_speculative_step_seeded": "the argmax of the last row as the bonus token",
    },
    "mistake-residual-not-normalized": {
        "test_residual_distribution_values": "max(0, p - q) without dividing by its sum",
        "test_residual_distribution_raises_without_mass": "expected it to raise ValueError",
    },
    "mistake-closed-form-at-one": {
        "test_expected_tokens_alpha_one": (
            "closed form (1 - alpha**(k+1)) / (1 - alpha) is 0/0 at alpha = 1"
        ),
        "test_expected_tokens_near_one": "the closed form",
    },
}


# Mistakes that have no sample notebook: {name: (bodies, None: every cell, {lost cell: words})}.
EXTRA_MUTANTS = {
    # Part 1 worked by the rule of another quantity: the accepted prefix, the drafted tokens
    # kept, the drafted tokens alone.
    "part1-other-quantities": (
        {
            "part1_answers": """
            kept = 0
            for p, q, r in zip(MY_NUMBERS["p"], MY_NUMBERS["q"], MY_NUMBERS["r"]):
                if r > min(1, p / q):
                    break
                kept += 1
            brute_force_answer = kept
            tokens_if_first_rejected = 0
            max_tokens = MY_NUMBERS["k"]
            """
        },
        None,  # every cell
        {
            "test_part1_answers_brute_force": "the length of the accepted prefix",
            "test_part1_answers_first_rejected": "the number of drafted tokens kept",
            "test_part1_answers_max_tokens": "k, which forgets the bonus token",
        },
    ),
    # Vectorized, but np.argmax of an empty array raises: an empty draft is allowed.
    "spec-accept-argmax-of-empty": (
        {
            "spec_accept": """
            ok = np.asarray(r, dtype=float) <= np.minimum(
                1.0, np.asarray(p, dtype=float) / np.asarray(q, dtype=float)
            )
            first = int(np.argmax(~ok))
            return len(ok) if ok[first] else first
            """
        },
        None,  # every cell
        {"test_spec_accept_empty_draft": "spec_accept([], [], [])"},
    ),
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
        None,  # every cell
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
        None,  # every cell
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
        None,  # every cell
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
        None,  # every cell
        {
            "test_residual_distribution_values": "the residual of the draft, max(0, q - p)",
            # 0.1 + 0.2 > 0.3: the draft's residual has (rounding) mass where the target's has none
            "test_residual_distribution_raises_without_mass": "expected it to raise ValueError",
        },
    ),
    "expected-tokens-accepted-only": (
        {"expected_tokens": "return float(sum(alpha**i for i in range(1, k + 1)))"},
        None,  # every cell
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
        None,  # every cell
        {
            "test_speculative_step_stops_at_first_rejection": "keeping the rejected drafted token",
            "test_speculative_step_follows_target": "never rejecting",
            "test_speculative_step_seeded": "",  # any message
        },
    ),
    # The bonus token from the first row: the first emitted token is right, the bonus is not.
    "bonus-from-the-first-row": (
        {
            "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            out = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    out.append(x)
                    continue
                residual = residual_distribution(target_probs[i], draft_probs[i])
                return out + [int(rng.choice(vocab, p=residual))]
            return out + [int(rng.choice(vocab, p=target_probs[0]))]
            """
        },
        None,  # every cell
        {
            "test_speculative_step_bonus_when_all_accepted": "",  # any message
            "test_speculative_step_follows_target": "the bonus position",
            "test_speculative_step_seeded": "",  # any message
        },
    ),
    # The residual of position 0 after any rejection: right for the first token only, so
    # only the second emitted token (position 1) tells.
    "residual-of-the-first-position": (
        {
            "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            out = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    out.append(x)
                    continue
                residual = residual_distribution(target_probs[0], draft_probs[0])
                return out + [int(rng.choice(vocab, p=residual))]
            return out + [int(rng.choice(vocab, p=target_probs[len(out)]))]
            """
        },
        None,  # every cell
        {
            "test_speculative_step_stops_at_first_rejection": "",  # any message
            "test_speculative_step_follows_target": "tokens at position 1",
            "test_speculative_step_seeded": "",  # any message
        },
    ),
    # Correct for arrays only; the docstring says target_probs may be a list of lists.
    "greedy-assumes-arrays": (
        {
            "greedy_step": """
            out = []
            for i, x in enumerate(draft_tokens):
                best = int(target_probs[i].argmax())
                out.append(best)
                if int(x) != best:
                    return out
            return out + [int(target_probs[len(draft_tokens)].argmax())]
            """
        },
        None,  # every cell
        {
            "test_greedy_step_examples": "list of lists here, as the docstring allows",
            "test_greedy_step_first_max_on_ties": "",  # any message
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
        None,  # every cell
        {
            "test_spec_accept_accepts_by_ratio": "the inverted ratio q/p",
            "test_spec_accept_ratio_at_least_one": "the inverted ratio q/p",
            "test_spec_accept_inclusive_boundary": "the inverted ratio q/p",
            "test_spec_accept_rejects_first": "the inverted ratio q/p",
            "test_spec_accept_discards_after_rejection": "the inverted ratio q/p",
        },
    ),
}


# ---------------------------------------------------------------------------
# The statistical check: the whole output, protocol-independent, fails its mutants for any seed
# ---------------------------------------------------------------------------

FOLLOWS = "test_speculative_step_follows_target"
RESAMPLE_FROM_P = SCENARIOS["mistake-resample-from-p"]
#: Correct samplers in three draw orders: the docstring's, all uniforms first, spec_accept's.
CORRECT_STEPS = {
    "reference": {},
    "other-draw-order": {"speculative_step": OTHER_DRAW_ORDER},
    "vectorized": SCENARIOS["variant-numpy-vectorized"],
    "spec-accept-composition": SCENARIOS["other-draw-order-spec-accept-composition"],
}
#: Wrong samplers the whole-output check must fail, and where it catches each one.
WRONG_STEPS = {
    "resample-from-p": (RESAMPLE_FROM_P, "resampling from p instead of the residual"),
    "bonus-by-argmax": (SCENARIOS["mistake-bonus-by-argmax"], "instead of a sample"),
    "keeps-tokens": (
        SCENARIOS["mistake-keeps-tokens-after-rejection"],
        "keeping tokens after a rejection",
    ),
    "second-token": (EXTRA_MUTANTS["residual-of-the-first-position"][0], "position 1"),
}


@pytest.mark.parametrize("offset", [1000, 2000, 3000])
def test_the_whole_output_check_passes_correct_steps_and_fails_its_mutants_for_other_seeds(
    offset,
):
    """Same check, other seeds: correct samplers pass, each wrong one fails every time."""
    seeds = {
        "7310 + _c": f"{7310 + offset} + _c",
        "7410 + _c": f"{7410 + offset} + _c",
        "default_rng(5)": f"default_rng({5 + offset})",
    }
    for name, bodies in CORRECT_STEPS.items():
        outcome = execute(bodies, only={FOLLOWS}, replace=seeds)[FOLLOWS]
        assert outcome.passed, (name, outcome.message)
    for name, (bodies, words) in WRONG_STEPS.items():
        outcome = execute(bodies, only={FOLLOWS}, replace=seeds)[FOLLOWS]
        assert not outcome.passed, name
        assert words in outcome.message, (name, outcome.message)


def test_the_hidden_distribution_check_names_the_wrong_recovery():
    """The hidden part alone (the visible one removed) catches and names the mistake."""
    cell = TEST_CELLS[FOLLOWS].source
    hidden_only = cell[: cell.index("### END HIDDEN TESTS")] + "### END HIDDEN TESTS\n"
    for bodies, words in WRONG_STEPS.values():
        outcome = execute(bodies, only={FOLLOWS}, replace={cell: hidden_only})[FOLLOWS]
        assert not outcome.passed
        assert words in outcome.message
        if "keeping tokens" not in words:  # that one fails a structural check first
            assert "probability below" in outcome.message


#: The configurations of the hidden check: (target_probs, draft_probs, n).
CONFIGS = [
    ([[0.5, 0.3, 0.15, 0.05]], [], 600),
    (
        [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.45, 0.25]],
        [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]],
        600,
    ),
    ([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]], [[0.1, 0.2, 0.3, 0.4]], 1500),
    ([[0.7, 0.1, 0.2], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]], [[0.1, 0.6, 0.3], [0.3, 0.3, 0.4]], 1500),
    (
        [[0.45, 0.45, 0.1], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]],
        [[0.5, 0.05, 0.45], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]],
        1500,
    ),
]


def test_the_whole_output_check_states_a_false_failure_probability_below_one_in_a_million():
    from specdec_reference.testing import hoeffding_tolerance

    cell = TEST_CELLS[FOLLOWS].source
    # Hidden: five configurations at 1.8e-7 each (check_step_distribution shares it among its
    # frequency checks), visible: 2,000 draws over 4 tokens within 0.07.
    assert cell.count("failure_prob=1.8e-7") == 1 and "5 x 1.8e-7 = 9e-7" in cell
    assert "0.07 with probability below 3e-8" in cell and "< 0.07" in cell
    visible = 2 * 4 * math.exp(-2 * 2000 * 0.07**2)
    assert visible < 3e-8
    assert len(CONFIGS) * 1.8e-7 + visible < 1e-6
    for target, draft, n in CONFIGS:
        assert f"({target}, {draft}, {n})".replace(" ", "") in "".join(cell.split())
    sd = lambda n: 0.5 / math.sqrt(n)  # noqa: E731  (the largest standard deviation)
    # Each mutant lies far outside the tolerance where it is caught: the empty draft and the
    # always-accepted one catch the argmax bonus at every draft, the others the wrong recovery
    # at position 0 and tokens kept after a rejection in the accepted-prefix lengths.
    for target, draft, n in CONFIGS:
        k, vocab = len(draft), len(target[0])
        share = 1.8e-7 / (k + 2 if k else 1)
        tol = hoeffding_tolerance(n, share / vocab)
        bonus = target[k]
        argmax_gap = max(abs(float(t == bonus.index(max(bonus))) - b) for t, b in enumerate(bonus))
        assert argmax_gap - tol > 4 * sd(n), (target, argmax_gap, tol)
        if k and draft[0] != target[0]:
            p, q = target[0], draft[0]
            overlap = [min(a, b) for a, b in zip(p, q, strict=True)]
            wrong = [o + (1 - sum(overlap)) * a for o, a in zip(overlap, p, strict=True)]
            gap = max(abs(w - a) for w, a in zip(wrong, p, strict=True))
            assert gap - tol > 4 * sd(n), (p, q, gap, tol)
            rates = [
                sum(min(a, b) for a, b in zip(t_row, d_row, strict=True))
                for t_row, d_row in zip(target[:k], draft, strict=True)
            ]
            all_accepted = math.prod(rates)  # every output has k + 1 tokens when tokens are kept
            length_tol = hoeffding_tolerance(n, share / (k + 1))
            assert (1 - all_accepted) - length_tol > 4 * sd(n), (target, all_accepted)


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
    "residual_distribution": [
        "the target's probability beyond the draft's",
        "normalized to sum to 1",
        "ValueError",
        "sums to zero",
        "that sum to 1",
        "Only such pairs of distributions are graded",
    ],
    "speculative_step": [
        "rng.random()",
        "u < min(1, p / q)",
        "rng.choice(V, p=residual_distribution(target_probs[i], draft_probs[i]))",
        "rng.choice(V, p=target_probs[k])",
        "Make no other draws from rng",
        "exactly one token from the target",
        "the token at every position j follows target_probs[j]",
        "k = 0 included",
        "the bonus token too",
        "number of accepted tokens",
        "(1 point)",
    ],
    "expected_tokens": ["exactly k + 1 at alpha == 1", "relative", "1e-12", "1 - 1e-9"],
    "greedy_step": [
        "argmax",
        "first maximum on ties",
        "bonus token",
        "k = 0 is allowed",
        "list of lists or 2-D array",
    ],
}


def test_the_expected_tokens_tolerance_in_the_tests_is_the_docstrings():
    for gid in ("test_expected_tokens_near_one",):
        assert "1e-12 * " in TEST_CELLS[gid].source


# ---------------------------------------------------------------------------
# Points go mostly to the core ideas, and the notebook says how
# ---------------------------------------------------------------------------

POINTS = LESSON.points
#: The lesson's core ideas and the cells that grade them, as "Where the points go" states.
CORE_IDEAS = {
    "The accepted prefix stops at the first rejection": (
        10,
        {
            "test_part1_answers_brute_force",
            "test_spec_accept_discards_after_rejection",
            "test_speculative_step_stops_at_first_rejection",
        },
    ),
    "A drafted token is tested against the ratio": (
        4,
        {"test_spec_accept_accepts_by_ratio", "test_spec_accept_ratio_at_least_one"},
    ),
    "The output follows the target exactly": (
        7,
        {"test_residual_distribution_values", "test_speculative_step_follows_target"},
    ),
}


def _markdown(cell_id: str) -> str:
    return " ".join(next(c for c in LESSON.source_nb.cells if c.id == cell_id).source.split())


def test_most_points_go_to_the_core_ideas_as_the_notebook_states():
    total = sum(POINTS.values())
    text = _markdown("md-title")
    assert f"Most of the {total} points go to the lesson's three core ideas" in text
    core = 0
    for idea, (points, cells) in CORE_IDEAS.items():
        assert sum(POINTS[g] for g in cells) == points, idea
        assert f"*{idea}" in text and f"{points} points" in text, idea
        core += points
    assert core > total / 2
    assert f"The other {total - core} points" in text


def test_the_central_misconception_costs_far_more_than_an_edge_case():
    """Keeping tokens after a rejection (brute force in spec_accept, or in speculative_step)."""
    total = sum(POINTS.values())

    def lost(scenario):
        return sum(POINTS[g] - points for g, points in EXPECTED[scenario].items())

    assert lost("mistake-brute-force-count") >= 0.15 * total
    assert lost("mistake-keeps-tokens-after-rejection") >= 0.2 * total
    assert lost("mistake-strict-less-than") <= 1
    assert lost("mistake-bonus-by-argmax") >= 5


def test_points_in_headings_and_table_match_the_test_cells():
    parts = {
        "## Part 1": ("test_part1_",),
        "## Part 2": ("test_spec_accept_",),
        "## Part 3": ("test_residual_distribution_", "test_speculative_step_"),
        "## Part 4": ("test_expected_tokens_",),
        "## Part 5": ("test_greedy_step_",),
    }
    table = _markdown("md-title")
    for number, (heading, prefixes) in enumerate(parts.items(), start=1):
        points = sum(p for g, p in POINTS.items() if g.startswith(prefixes))
        cell = next(c for c in LESSON.source_nb.cells if c.source.startswith(heading))
        assert f"({points} points)" in cell.source.splitlines()[0], heading
        assert re.search(rf"\| {number} \| [^|]+ \| {points} \|", table), heading
    assert f"**{sum(POINTS.values())}**" in table


def test_the_composition_with_spec_accept_loses_only_the_seeded_point_and_is_told_why():
    lost = failing(execute(SCENARIOS["other-draw-order-spec-accept-composition"]))
    assert set(lost) == {"test_speculative_step_seeded"}, lost
    assert "drawing all k uniforms first" in lost["test_speculative_step_seeded"]
    task = _markdown("md-step")
    assert "`r = rng.random(k)`" in task and "loses only the seeded point" in task


# ---------------------------------------------------------------------------
# The facts the notebook states hold
# ---------------------------------------------------------------------------


def test_the_division_free_test_can_disagree_with_the_ratio_test_as_stated():
    import numpy as np

    import specdec_reference as ref

    p, q = 0.4453871940548014, 0.8455625359931122
    r = p / q
    assert r <= min(1.0, p / q) and not r * q <= p and r * q == 0.4453871940548015
    # "about 4% of the pairs disagree (3.8% of a million)": p < q uniform, r = fl(p / q).
    rng = np.random.default_rng(0)
    a, b = rng.random(1_000_000), rng.random(1_000_000)
    low, high = np.minimum(a, b), np.maximum(a, b)
    ratio = low / high
    share = np.mean((ratio * high <= low) != (ratio <= np.minimum(1.0, low / high)))
    assert 0.0375 <= share < 0.0385, share
    text = _markdown("md-zero-and-lt")
    assert "p = 0.4453871940548014" in text and "3.8% of a million" in text
    assert "it accepts exactly when the ratio test does" not in text
    # The inclusive rule keeps a token with p = 0 when the draw is exactly 0.
    assert ref.spec_accept([0.0], [0.5], [0.0]) == 1
    assert "`spec_accept([0.0], [0.5], [0.0])` returns 1" in _markdown("md-part2")


def test_float32_uniforms_are_multiples_of_two_to_the_minus_24():
    """What makes P(u = 0) = 2^-24 for float32 draws (numpy's, as torch.rand's)."""
    import numpy as np

    u = np.random.default_rng(1).random(100_000, dtype=np.float32)
    assert np.all(u.astype(np.float64) * 2**24 == np.round(u.astype(np.float64) * 2**24))
    assert "$2^{-24}$" in _markdown("md-part2") and "about once in 17 million" in _markdown(
        "md-part2"
    )
    assert 2**24 == 16_777_216


def test_the_greedy_toy_model_hits_mismatches_often_and_says_how_many():
    run = LESSON.run(only=set())
    ns = run.namespace
    plain = ns["greedy_decode"](ns["target_model"], 0, 40)
    fast, passes, mismatches = ns["speculative_greedy_decode"](
        ns["target_model"], ns["draft_model"], 0, 40
    )
    assert fast == plain
    assert passes < 20 and mismatches >= passes / 3, (passes, mismatches)
    assert len(set(plain)) >= 10  # not a short cycle
    demo = next(c for c in LESSON.source_nb.cells if c.id == "code-greedy-demo").source
    assert "{mismatches} of the {passes} passes hit a mismatch" in demo


def test_part_1_answers_are_not_printed_on_the_page():
    """Part 1's graded numbers (2, 1 and 5) follow from the rules; no text states them."""
    answers = [
        "says 2",
        "returns 2",
        "at least 1:",
        "at most $k + 1$",
        "5 for $k = 4$",
        "between 1 and $k + 1$",
        "between 1 and k + 1",
        "still emits one token",
    ]
    for cell in LESSON.source_nb.cells:
        text = cell.source.split("### BEGIN SOLUTION")[0].split("### BEGIN HIDDEN TESTS")[0]
        if "### END HIDDEN TESTS" in cell.source:
            text += cell.source.split("### END HIDDEN TESTS")[1]
        for answer in answers:
            assert answer.lower() not in text.lower(), (cell.id, answer)


def test_the_symbols_p_and_q_say_where_they_change_meaning():
    assert "one probability per drafted token" in _markdown("md-setting")
    assert "sums to 1.9" in _markdown("md-setting")
    assert "From here on `p` and `q` are distributions" in _markdown("md-part3")


def test_the_common_mistakes_section_has_the_seeds_four_mistakes():
    text = _markdown("md-mistakes")
    for words in (
        "Accepting on the raw target probability",
        "Resampling from the plain target distribution",
        "Keeping tokens that came after a rejected one",
        "Using `<` instead of `<=`",
    ):
        assert words in text, words


def _parameter_types(docstring: str) -> dict[str, str]:
    """``{name: type text}`` from a numpydoc Parameters section."""
    section = docstring.split("Parameters\n")[1].split("\n\n    Returns")[0]
    found = re.findall(r"^\s{4}(\w+) : (.+)$", section, re.M)
    return dict(found)


def test_the_hidden_tests_pass_only_the_types_each_docstring_allows():
    """Record every call the test cells make to a learner function, and compare with its
    docstring: a list argument needs "list" in the type, an array argument "array"."""
    import sys
    import types

    import numpy as np

    log = types.ModuleType("_e73_type_log")
    log.calls = []
    sys.modules[log.__name__] = log
    try:
        bodies = {
            gid: f"__import__({log.__name__!r}).calls.append(({gid!r}, dict(locals())))\n"
            + REFERENCE_BODIES[gid]
            for gid in GRADED_PHRASES
        }
        assert failing(execute(bodies)) == {}
    finally:
        del sys.modules[log.__name__]
    seen: dict[tuple[str, str], set[str]] = {}
    for gid, arguments in log.calls:
        for name, value in arguments.items():
            kind = (
                "list"
                if isinstance(value, (list, tuple))
                else "array"
                if isinstance(value, np.ndarray)
                else type(value).__name__
            )
            seen.setdefault((gid, name), set()).add(kind)
    for gid in GRADED_PHRASES:
        source = SOLUTION_CELLS[gid].source
        documented = _parameter_types(source[source.index('"""') : source.index(BEGIN)])
        for name, doc_type in documented.items():
            kinds = seen.get((gid, name), set())
            assert kinds, (gid, name)
            for kind in kinds & {"list", "array"}:
                assert kind in doc_type, f"{gid}({name}): the tests pass a {kind}: {doc_type!r}"
