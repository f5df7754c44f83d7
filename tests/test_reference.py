"""Table-driven tests of specdec_reference: examples, edge cases, errors, protocols.

Properties (hypothesis) are in test_reference_properties.py, sampling checks in
test_reference_statistics.py.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

import specdec_reference as ref
from specdec_reference import (
    accept_prob,
    empirical_acceptance,
    expected_tokens,
    greedy_step,
    optimal_k,
    overall_acceptance,
    propose_and_test,
    residual_distribution,
    spec_accept,
    speculative_step,
    speed_estimate,
    speedup,
    walltime_improvement,
)
from specdec_reference import sampling as sampling_module

LESSON_P = [0.5, 0.3, 0.2]
LESSON_Q = [0.25, 0.5, 0.25]


class RecordingRng:
    """Wrap a Generator and log every ``choice`` and ``random`` call."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.calls = []

    def choice(self, a, p=None):
        self.calls.append(("choice", a, np.array(p, dtype=float)))
        return self.rng.choice(a, p=p)

    def random(self):
        self.calls.append(("random",))
        return self.rng.random()


class ScriptedRng:
    """Return scripted values: ``random()`` pops from ``uniforms``, ``choice`` from ``tokens``."""

    def __init__(self, uniforms=(), tokens=()):
        self.uniforms, self.tokens = list(uniforms), list(tokens)
        self.calls = []

    def random(self):
        self.calls.append(("random",))
        return self.uniforms.pop(0)

    def choice(self, a, p=None):
        self.calls.append(("choice", a, np.array(p, dtype=float)))
        return self.tokens.pop(0)


def test_public_api_is_exported_with_all():
    assert sorted(ref.__all__) == sorted(
        [
            "accept_prob",
            "overall_acceptance",
            "spec_accept",
            "residual_distribution",
            "propose_and_test",
            "empirical_acceptance",
            "speculative_step",
            "greedy_step",
            "expected_tokens",
            "speed_estimate",
            "speedup",
            "walltime_improvement",
            "optimal_k",
            "speculation_pays",
            "with_temperature",
            "draft",
            "generate",
            "speculative_decode",
            "measured_alpha",
            "tokens_per_pass",
            "prefix_distribution",
            "weight_bytes",
            "flops_per_token",
            "kv_cache_bytes",
            "step_time",
            "ridge_batch",
            "verify_cost_ratio",
            "max_batch",
            "arithmetic_intensity",
            "greedy_verify",
            "prompt_lookup_draft",
            "deterministic_verify",
            "lookup_decode",
            "batch_step_time",
            "speculative_speedup",
            "should_speculate",
            "break_even_batch",
            "cached_step_time",
            "cached_break_even_batch",
            "max_batch_in_memory",
            "adaptive_k",
            "tree_cache_keep",
            "tree_depths",
            "tree_attention_mask",
            "multi_draft_accept",
            "verify_tree",
            "greedy_verify_tree",
            "tree_expected_tokens",
            "best_tree",
            "chain_or_tree",
        ]
    )
    for name in ref.__all__:
        assert callable(getattr(ref, name))
    assert "checks" not in ref.__all__


# --- accept_prob -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        (0.5, 0.8, 0.625),  # the lesson's over-confident draft
        (0.5, 0.25, 1.0),  # target likes it more: capped at 1
        (0.3, 0.3, 1.0),  # equal: always accepted
        (0.0, 0.4, 0.0),  # the target never emits it
        (0.9, 0.3, 1.0),
        (np.float32(0.5), np.float64(0.8), 0.625),
        (1, 2, 0.5),
    ],
)
def test_accept_prob_is_the_capped_ratio(p, q, expected):
    result = accept_prob(p, q)
    assert type(result) is float
    assert result == pytest.approx(expected, rel=1e-7, abs=0)


@pytest.mark.parametrize("q", [0.0, -0.0, -0.1, float("nan")])
def test_accept_prob_rejects_a_draft_probability_that_is_not_positive(q):
    with pytest.raises(ValueError, match="q must be > 0"):
        accept_prob(0.5, q)


# --- overall_acceptance ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        (LESSON_P, LESSON_Q, 0.75),  # the lesson's table
        (LESSON_P, LESSON_P, 1.0),  # identical models always agree
        ([1.0, 0.0], [0.0, 1.0], 0.0),  # disjoint supports never do
        ([0.7, 0.2, 0.1], [0.1, 0.2, 0.7], 0.4),
        (np.array([0.5, 0.5]), [1.0, 0.0], 0.5),
        ([1.0], [1.0], 1.0),
    ],
)
def test_overall_acceptance_sums_the_pointwise_minimum(p, q, expected):
    result = overall_acceptance(p, q)
    assert type(result) is float
    assert result == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("p", "q"), [([0.5, 0.5], [1.0]), ([1.0], [0.5, 0.5]), ([[0.5, 0.5]], [[0.5, 0.5]])]
)
def test_overall_acceptance_rejects_mismatched_shapes(p, q):
    with pytest.raises(ValueError):
        overall_acceptance(p, q)


# --- spec_accept (every edge case of the accept-step problem) ---------------------------


@pytest.mark.parametrize(
    ("p", "q", "r", "expected"),
    [
        # token 1 is rejected, so token 2 (ratio 2.0) is discarded although it would pass
        ([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2], 1),
        ([0.5, 0.5], [0.5, 0.5], [0.3, 0.9], 2),
        # a ratio of 1 or more always accepts
        ([0.9, 0.9], [0.3, 0.3], [0.99, 0.99], 2),
        # the boundary is inclusive: r == threshold accepts
        ([0.5], [1.0], [0.5], 1),
        ([0.5, 0.2], [1.0, 0.8], [0.5, 0.25], 2),
        # rejecting the first token keeps nothing
        ([0.1], [0.9], [0.5], 0),
        # an empty draft
        ([], [], [], 0),
        # positions after the first rejection are never read: q = 0 or NaN there is fine
        ([0.1, 0.5], [0.9, 0.0], [0.5, 0.1], 0),
        ([0.9, 0.1, 0.5], [0.5, 0.9, float("nan")], [0.2, 0.5, 0.1], 1),
        # just above the threshold rejects
        ([0.5], [1.0], [np.nextafter(0.5, 1.0)], 0),
        (np.array([0.4, 0.6]), np.array([0.5, 0.5]), np.array([0.79, 0.0]), 2),
    ],
)
def test_spec_accept_returns_the_accepted_prefix_length(p, q, r, expected):
    result = spec_accept(p, q, r)
    assert type(result) is int
    assert result == expected


@pytest.mark.parametrize(
    ("p", "q", "r"),
    [
        ([0.5], [0.0], [0.1]),  # q = 0 reached at the first position
        ([0.5, 0.5], [0.5, 0.0], [0.1, 0.1]),  # reached after an acceptance
        ([0.5], [-0.2], [0.1]),
        ([0.5], [float("nan")], [0.1]),
    ],
)
def test_spec_accept_rejects_a_reached_draft_probability_that_is_not_positive(p, q, r):
    with pytest.raises(ValueError, match="q must be > 0"):
        spec_accept(p, q, r)


@pytest.mark.parametrize(
    ("p", "q", "r"),
    [([0.5], [0.5, 0.5], [0.1]), ([0.5, 0.5], [0.5, 0.5], [0.1]), ([], [0.5], [])],
)
def test_spec_accept_rejects_mismatched_lengths(p, q, r):
    with pytest.raises(ValueError, match="same length"):
        spec_accept(p, q, r)


# --- residual_distribution ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        (LESSON_P, LESSON_Q, [1.0, 0.0, 0.0]),
        ([0.6, 0.4, 0.0], [0.2, 0.2, 0.6], [2 / 3, 1 / 3, 0.0]),
        ([0.7, 0.2, 0.1], [0.1, 0.2, 0.7], [1.0, 0.0, 0.0]),
        ([0.0, 1.0], [1.0, 0.0], [0.0, 1.0]),
        ([0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]),  # disjoint: residual is p
    ],
)
def test_residual_distribution_normalizes_the_positive_excess(p, q, expected):
    result = residual_distribution(p, q)
    assert isinstance(result, np.ndarray) and result.dtype == np.float64
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-15)
    assert math.fsum(result.tolist()) == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    ("p", "q"),
    [
        (LESSON_P, LESSON_P),  # equal distributions: nothing to resample
        ([0.3, 0.7], [0.1 + 0.2, 0.7]),  # equal on paper, zero sum through rounding alone
        ([0.2, 0.3], [0.5, 0.5]),  # q dominates everywhere (unnormalized input)
        ([float("nan"), 0.5], [0.5, 0.5]),
    ],
)
def test_residual_distribution_rejects_an_empty_residual(p, q):
    with pytest.raises(ValueError, match="residual"):
        residual_distribution(p, q)


def test_residual_distribution_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="same length"):
        residual_distribution([0.5, 0.5], [1.0])


# --- propose_and_test --------------------------------------------------------------------


def test_propose_and_test_makes_one_choice_then_one_random_draw():
    rng = RecordingRng(seed=3)
    token, accepted = propose_and_test(LESSON_P, LESSON_Q, rng)
    assert [c[0] for c in rng.calls] == ["choice", "random"]
    assert rng.calls[0][1] == 3
    np.testing.assert_array_equal(rng.calls[0][2], LESSON_Q)
    assert type(token) is int and type(accepted) is bool


@pytest.mark.parametrize("seed", range(20))
def test_propose_and_test_follows_the_stream_of_its_generator(seed):
    token, accepted = propose_and_test(LESSON_P, LESSON_Q, np.random.default_rng(seed))
    rng = np.random.default_rng(seed)
    expected_token = int(rng.choice(3, p=LESSON_Q))
    expected_accepted = rng.random() < min(1, LESSON_P[expected_token] / LESSON_Q[expected_token])
    assert (token, accepted) == (expected_token, expected_accepted)


@pytest.mark.parametrize(
    ("uniform", "token", "expected"),
    [
        (0.5999, 1, True),  # p/q = 0.3 / 0.5 = 0.6 for token 1
        (0.3 / 0.5, 1, False),  # strict <: a draw equal to the probability rejects
        (0.99, 0, True),  # ratio 2: always accepted
        (0.0, 2, True),
    ],
)
def test_propose_and_test_accepts_iff_the_draw_is_below_accept_prob(uniform, token, expected):
    rng = ScriptedRng(uniforms=[uniform], tokens=[token])
    assert propose_and_test(LESSON_P, LESSON_Q, rng) == (token, expected)


def test_propose_and_test_rejects_mismatched_lengths_before_drawing():
    rng = RecordingRng()
    with pytest.raises(ValueError, match="same length"):
        propose_and_test([0.5, 0.5], [0.2, 0.3, 0.5], rng)
    assert rng.calls == []


# --- empirical_acceptance: definition, errors and the bit-identical vectorized path -----


def test_numpy_choice_with_p_consumes_one_uniform_and_searches_the_normalized_cdf():
    """The assumption behind the vectorized path, checked on this numpy."""
    q = np.array([0.1, 0.0, 0.35, 0.55])
    for seed in range(50):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        token = a.choice(4, p=q)
        cdf = q.cumsum()
        cdf /= cdf[-1]
        assert token == cdf.searchsorted(b.random(), side="right")
        assert a.bit_generator.state == b.bit_generator.state


DISTRIBUTIONS = {
    "lesson": (LESSON_P, LESSON_Q),
    "zeros-in-q": ([0.2, 0.3, 0.1, 0.4, 0.0], [0.0, 0.5, 0.0, 0.5, 0.0]),
    "zero-first-and-last": ([0.1, 0.4, 0.5], [0.0, 1.0, 0.0]),
    "p-zero-where-q-positive": ([0.0, 1.0, 0.0], [0.6, 0.1, 0.3]),
    "unnormalized-within-tolerance": ([0.5, 0.3, 0.2], [0.25 + 4e-9, 0.5, 0.25]),
    "unnormalized-below": ([0.5, 0.3, 0.2], [0.25, 0.5 - 7e-9, 0.25]),
    "single-token": ([1.0], [1.0]),
    "integers": ([0, 1, 0], [0, 1, 0]),
    "float32": (
        np.array([0.3, 0.3, 0.4], dtype=np.float32),
        np.array([0.7, 0.2, 0.1], dtype=np.float32),
    ),
    "float32-off-by-1e-5": (
        np.array([0.3, 0.3, 0.4], dtype=np.float32),
        np.array([0.7, 0.2, 0.10001], dtype=np.float32),
    ),
    "ratios-near-one": ([0.25, 0.25, 0.5], [0.25 + 1e-17, 0.25, 0.5]),
    "non-contiguous": (np.linspace(0, 1, 10)[::2] / 2.0, np.full(10, 0.1)[::2] * 2),
    "float16": (np.array([0.3, 0.7], dtype=np.float16), np.array([0.6, 0.41], dtype=np.float16)),
    "ratio-overflows-to-inf": ([1e10, 0.5, float("inf")], [5e-324, 1.0, 0.0]),
    "large-vocab": tuple(np.random.default_rng(99).dirichlet(np.ones(1000), size=2)),
}
SIZES = [1, 2, 3, 4, 5, 7, 10, 33, 100, 257, 1001]


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("trials", SIZES)
def test_vectorized_empirical_acceptance_is_bit_identical_to_the_loop(name, trials):
    p, q = DISTRIBUTIONS[name]
    for seed in range(12 if trials <= 100 else 2):
        loop = empirical_acceptance(p, q, trials, seed, vectorized=False)
        fast = empirical_acceptance(p, q, trials, seed, vectorized=True)
        assert type(loop) is float and type(fast) is float
        assert loop == fast, (name, trials, seed, loop, fast)


@pytest.mark.parametrize("trials", [1, 2, 6, 7, 8, 15, 50])
def test_vectorized_empirical_acceptance_is_identical_across_block_boundaries(trials, monkeypatch):
    monkeypatch.setattr(sampling_module, "_BLOCK", 3)
    for seed in range(10):
        for p, q in DISTRIBUTIONS.values():
            loop = empirical_acceptance(p, q, trials, seed, vectorized=False)
            assert empirical_acceptance(p, q, trials, seed) == loop


def test_vectorized_empirical_acceptance_is_identical_over_many_seeds():
    for seed in range(300):
        trials = 1 + seed % 41
        loop = empirical_acceptance(LESSON_P, LESSON_Q, trials, seed, vectorized=False)
        assert empirical_acceptance(LESSON_P, LESSON_Q, trials, seed) == loop


def test_both_paths_leave_a_passed_generator_in_the_same_state():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    empirical_acceptance(LESSON_P, LESSON_Q, 123, a, vectorized=False)
    empirical_acceptance(LESSON_P, LESSON_Q, 123, b, vectorized=True)
    assert a.bit_generator.state == b.bit_generator.state


def test_empirical_acceptance_is_trials_calls_of_propose_and_test():
    rng = np.random.default_rng(11)
    expected = sum(propose_and_test(LESSON_P, LESSON_Q, rng)[1] for _ in range(500)) / 500
    assert empirical_acceptance(LESSON_P, LESSON_Q, 500, 11, vectorized=False) == expected
    assert empirical_acceptance(LESSON_P, LESSON_Q, 500, 11) == expected


@pytest.mark.parametrize("vectorized", [False, True])
@pytest.mark.parametrize("trials", [0, -1])
def test_empirical_acceptance_rejects_fewer_than_one_trial(trials, vectorized):
    with pytest.raises(ValueError, match="trials"):
        empirical_acceptance(LESSON_P, LESSON_Q, trials, 0, vectorized=vectorized)


@pytest.mark.parametrize("vectorized", [False, True])
def test_empirical_acceptance_rejects_a_non_integer_trial_count(vectorized):
    with pytest.raises(TypeError):
        empirical_acceptance(LESSON_P, LESSON_Q, 100.0, 0, vectorized=vectorized)


@pytest.mark.parametrize(
    "q",
    [
        [0.5, 0.6, -0.1],  # negative
        [0.5, 0.3, 0.3],  # does not sum to 1
        [0.5, float("nan"), 0.5],
        [0.5, 0.5],  # wrong length
    ],
)
def test_both_paths_raise_the_same_error_on_an_invalid_draft(q):
    messages = []
    for vectorized in (False, True):
        with pytest.raises(ValueError) as info:
            empirical_acceptance(LESSON_P, q, 10, 0, vectorized=vectorized)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# --- speculative_step --------------------------------------------------------------------

TARGET = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]
DRAFT = [[0.25, 0.5, 0.25], [0.2, 0.2, 0.6]]


@pytest.mark.parametrize(
    ("tokens", "uniforms", "choices", "expected", "choice_p"),
    [
        # both accepted (ratios 2 and 1.33): bonus token from the last row
        ([0, 2], [0.9, 0.9], [1], [0, 2, 1], TARGET[2]),
        # first rejected (ratio 0.6 for token 1): resample from the residual of row 0
        ([1, 2], [0.7, 0.0], [0], [0], [1.0, 0.0, 0.0]),
        # first accepted (0.5 < 0.6), second rejected (draw 0.5 == ratio 0.5 for token 0)
        ([1, 0], [0.5, 0.5], [2], [1, 2], [0.0, 0.0, 1.0]),
        # inclusive vs strict: a draw equal to the probability rejects, as in propose_and_test
        ([1, 2], [0.6, 0.0], [2], [2], [1.0, 0.0, 0.0]),
    ],
)
def test_speculative_step_follows_its_random_number_protocol(
    tokens, uniforms, choices, expected, choice_p
):
    rng = ScriptedRng(uniforms=uniforms, tokens=choices)
    result = speculative_step(TARGET, DRAFT, tokens, rng)
    assert result == expected and all(type(t) is int for t in result)
    n_random = sum(1 for c in rng.calls if c[0] == "random")
    assert [c[0] for c in rng.calls] == ["random"] * n_random + ["choice"]
    assert rng.calls[-1][1] == 3
    np.testing.assert_allclose(rng.calls[-1][2], choice_p, rtol=1e-12, atol=1e-15)


def test_speculative_step_does_not_read_positions_after_the_first_rejection():
    # position 1 has q = 0 at its token and an empty residual: never reached
    draft = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    target = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    rng = RecordingRng(0)
    assert speculative_step(target, draft, [1, 0], rng) == [0]
    assert [c[0] for c in rng.calls] == ["random", "choice"]


def test_speculative_step_with_an_empty_draft_emits_one_target_token():
    rng = RecordingRng(4)
    result = speculative_step([[0.0, 0.0, 1.0]], [], [], rng)
    assert result == [2]
    assert [c[0] for c in rng.calls] == ["choice"]
    assert speculative_step([[0.0, 1.0]], np.zeros((0, 2)), np.array([], dtype=int), rng) == [1]


def test_speculative_step_matches_a_real_generator_stream():
    for seed in range(30):
        result = speculative_step(TARGET, DRAFT, [1, 2], np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        expected = []
        if rng.random() < 0.3 / 0.5:
            expected.append(1)
            if rng.random() < 1.0:
                expected.append(2)
                expected.append(int(rng.choice(3, p=TARGET[2])))
            else:  # pragma: no cover - ratio 0.8 / 0.6 > 1
                raise AssertionError
        else:
            expected.append(int(rng.choice(3, p=residual_distribution(TARGET[0], DRAFT[0]))))
        assert result == expected


@pytest.mark.parametrize(
    ("target", "draft", "tokens", "match"),
    [
        (TARGET[:2], DRAFT, [0, 2], "k \\+ 1 = 3 rows"),  # target has k rows
        (TARGET, DRAFT[:1], [0, 2], "draft_probs must have shape"),  # draft has k - 1 rows
        (TARGET, [r + [0.0] for r in DRAFT], [0, 2], "draft_probs must have shape"),
        (TARGET, DRAFT, [0, 3], "outside the vocabulary"),
        (TARGET, DRAFT, [-1, 0], "outside the vocabulary"),
        (TARGET, DRAFT, [0], "k \\+ 1 = 2 rows"),
        (TARGET[0], DRAFT, [0, 2], "shape \\(k \\+ 1, V\\)"),  # 1-D target
        (TARGET, [[0.0, 0.5, 0.5], [0.2, 0.2, 0.6]], [0, 2], "q must be > 0"),
        (TARGET, DRAFT, [[0, 2]], "draft_tokens must be 1-D"),
    ],
)
def test_speculative_step_rejects_inconsistent_inputs(target, draft, tokens, match):
    with pytest.raises(ValueError, match=match):
        speculative_step(target, draft, tokens, np.random.default_rng(0))


# --- greedy_step -------------------------------------------------------------------------

GREEDY_TARGET = [[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]


@pytest.mark.parametrize(
    ("target", "tokens", "expected"),
    [
        (GREEDY_TARGET, [1, 0], [1, 0, 2]),  # all match: plus the bonus argmax
        (GREEDY_TARGET, [1, 2], [1, 0]),  # mismatch at 1: the target's argmax replaces it
        (GREEDY_TARGET, [0, 0], [1]),  # mismatch at 0; the later match is discarded
        ([[0.4, 0.4, 0.2]], [], [0]),  # empty draft; tie: the first maximum
        ([[0.4, 0.4, 0.2], [0.0, 0.0, 1.0]], [1], [0]),  # tie: 1 is not the first maximum
        ([[0.4, 0.4, 0.2], [0.0, 0.0, 1.0]], [0], [0, 2]),
        (np.log(GREEDY_TARGET), np.array([1, 0]), [1, 0, 2]),  # logits work too
    ],
)
def test_greedy_step_accepts_while_the_draft_is_the_target_argmax(target, tokens, expected):
    result = greedy_step(target, tokens)
    assert result == expected and all(type(t) is int for t in result)


@pytest.mark.parametrize(
    ("target", "tokens", "match"),
    [
        (GREEDY_TARGET, [1], "k \\+ 1 = 2 rows"),
        (GREEDY_TARGET, [1, 0, 2], "k \\+ 1 = 4 rows"),
        (GREEDY_TARGET, [1, 5], "outside the vocabulary"),
    ],
)
def test_greedy_step_rejects_inconsistent_inputs(target, tokens, match):
    with pytest.raises(ValueError, match=match):
        greedy_step(target, tokens)


# --- expected_tokens, speed, speedup, walltime_improvement, optimal_k -------------------


def exact_expected_tokens(alpha: float, k: int) -> Fraction:
    a = Fraction(alpha)  # the exact value of the float
    return Fraction(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)


@pytest.mark.parametrize(
    ("alpha", "k", "expected"),
    [
        (0.8, 4, 3.3616),  # the chapter's worked example: 1 + 0.8 + 0.64 + 0.512 + 0.4096
        (1.0, 4, 5.0),  # the finite-sum limit
        (1, 0, 1.0),
        (0.0, 4, 1.0),  # nothing accepted: only the target's own token
        (0.5, 0, 1.0),
        (0.5, 1, 1.5),
        (0.5, 2, 1.75),
        (0.25, 3, 1 + 0.25 + 0.0625 + 0.015625),
        (np.float64(0.8), np.int64(4), 3.3616),
    ],
)
def test_expected_tokens_is_the_geometric_sum(alpha, k, expected):
    result = expected_tokens(alpha, k)
    assert type(result) is float
    assert result == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize(
    "alpha",
    [1 - 1e-9, 1 - 1e-12, 1 - 1e-15, np.nextafter(1.0, 0.0), 0.999, 0.9, 0.5, 0.49, 0.1, 1e-30],
)
@pytest.mark.parametrize("k", [1, 2, 4, 10, 100, 1000])
def test_expected_tokens_keeps_its_digits_near_one(alpha, k):
    exact = exact_expected_tokens(alpha, k)
    result = Fraction(expected_tokens(alpha, k))
    # a few ulps: no digits lost to cancellation (the naive formula loses ~8 at 1 - 1e-9)
    assert abs(result - exact) / exact < 1e-15


def test_the_naive_formula_would_lose_digits_at_one_minus_1e_9():
    alpha, k = 1 - 1e-9, 4
    exact = exact_expected_tokens(alpha, k)
    naive = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert abs(Fraction(naive) - exact) / exact > 1e-12  # why the stable form is needed
    assert abs(Fraction(expected_tokens(alpha, k)) - exact) / exact < 1e-15


@pytest.mark.parametrize(
    ("alpha", "k", "error"),
    [
        (-0.1, 4, ValueError),
        (1.1, 4, ValueError),
        (float("nan"), 4, ValueError),
        (0.5, -1, ValueError),
        (0.5, 2.5, TypeError),
    ],
)
def test_expected_tokens_rejects_invalid_arguments(alpha, k, error):
    with pytest.raises(error):
        expected_tokens(alpha, k)


def test_worked_example_numbers():
    """a = 0.8, k = 4, verify 12 ms, draft 1 ms, target-only 10 ms per token."""
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616, rel=1e-12)
    assert speed_estimate(0.8, 4, t_verify=0.012, t_draft=0.001) == pytest.approx(210.1, rel=1e-12)
    assert speedup(0.8, 4, t_verify=0.012, t_draft=0.001, t_target=0.010) == pytest.approx(
        2.101, rel=1e-12
    )
    # the same in milliseconds: 0.2101 tokens per ms, and a unit-free speed-up
    assert speed_estimate(0.8, 4, 12, 1) == pytest.approx(0.2101, rel=1e-12)
    assert speedup(0.8, 4, 12, 1, 10) == pytest.approx(2.101, rel=1e-12)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((1.0, 4, 0.012, 0.001), 5 / 0.016),
        ((0.8, 0, 0.010, 0.001), 100.0),  # no draft: the target alone
        ((0.5, 2, 1.0, 0.0), 1.75),  # a free draft
    ],
)
def test_speed_estimate_divides_expected_tokens_by_the_pass_time(args, expected):
    result = speed_estimate(*args)
    assert type(result) is float and result == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "args", [(0.8, 4, 0.0, 0.001), (0.8, 4, -1.0, 0.001), (0.8, 4, 0.012, -0.001)]
)
def test_speed_estimate_rejects_invalid_times(args):
    with pytest.raises(ValueError):
        speed_estimate(*args)


@pytest.mark.parametrize("t_target", [0.0, -0.01, float("nan")])
def test_speedup_rejects_a_target_time_that_is_not_positive(t_target):
    with pytest.raises(ValueError, match="t_target"):
        speedup(0.8, 4, 0.012, 0.001, t_target)


@pytest.mark.parametrize(
    ("alpha", "gamma", "c"),
    [(0.8, 4, 0.1), (0.6, 3, 0.05), (0.9, 7, 0.0), (0.3, 1, 1.0), (0.99, 20, 0.01)],
)
def test_walltime_improvement_is_theorem_3_8(alpha, gamma, c):
    formula = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
    result = walltime_improvement(alpha, gamma, c)
    assert type(result) is float and result == pytest.approx(formula, rel=1e-12)
    # the same as speedup with t_verify = t_target and t_draft = c * t_target
    assert result == pytest.approx(speedup(alpha, gamma, 1.0, c, 1.0), rel=1e-12)


@pytest.mark.parametrize(
    ("alpha", "gamma", "c", "expected"),
    [(1.0, 4, 0.25, 2.5), (0.5, 0, 0.3, 1.0), (0.0, 3, 0.1, 1 / 1.3)],
)
def test_walltime_improvement_edge_values(alpha, gamma, c, expected):
    assert walltime_improvement(alpha, gamma, c) == pytest.approx(expected, rel=1e-14)


def test_walltime_improvement_rejects_a_negative_cost():
    with pytest.raises(ValueError, match="c must be"):
        walltime_improvement(0.8, 4, -0.1)


@pytest.mark.parametrize(
    ("alpha", "c", "kwargs", "expected"),
    [
        (0.8, 0.05, {}, 8),
        (0.2, 0.5, {}, 0),  # a poor, slow draft: do not speculate
        (0.0, 0.0, {}, 0),  # all k tie at 1: the smallest k
        (1.0, 0.0, {"k_max": 10}, 10),  # still growing at k_max
        (0.9, 0.01, {"k_max": 5}, 5),
        (0.8, 0.05, {"k_max": 0}, 0),
    ],
)
def test_optimal_k_maximizes_the_walltime_improvement(alpha, c, kwargs, expected):
    result = optimal_k(alpha, c, **kwargs)
    assert type(result) is int and result == expected


@pytest.mark.parametrize("alpha", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("c", [0.01, 0.05, 0.1, 0.3])
def test_optimal_k_agrees_with_brute_force(alpha, c):
    values = [walltime_improvement(alpha, k, c) for k in range(65)]
    assert optimal_k(alpha, c) == values.index(max(values))


def test_optimal_k_rejects_a_negative_k_max():
    with pytest.raises(ValueError, match="k_max"):
        optimal_k(0.8, 0.1, k_max=-1)


# --- empirical_acceptance's batched order: what a vectorized learner writes -------------


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("trials", [1, 2, 7, 100, 1001])
def test_batched_order_is_all_tokens_then_all_accept_draws(name, trials):
    """order="batched" is rng.choice(len(q), size=trials, p=q), then rng.random(trials)."""
    p, q = DISTRIBUTIONS[name]
    for seed in range(5):
        rng = np.random.default_rng(seed)
        tokens = rng.choice(len(q), size=trials, p=q)
        u = rng.random(trials)
        kept = sum(float(u[i]) < accept_prob(p[t], q[t]) for i, t in enumerate(tokens.tolist()))
        got = empirical_acceptance(p, q, trials, seed, order="batched")
        assert type(got) is float and got == kept / trials, (name, trials, seed)


def test_batched_order_differs_from_the_loop_for_the_same_seed():
    """The two orders are different simulations: the seeded tests must know both."""
    loop = empirical_acceptance(LESSON_P, LESSON_Q, 1000, 0)
    batched = empirical_acceptance(LESSON_P, LESSON_Q, 1000, 0, order="batched")
    assert (loop, batched) == (0.776, 0.757)


@pytest.mark.parametrize(
    ("p", "q", "order", "words"),
    [
        (LESSON_P, LESSON_Q, "random", "order must be"),
        ([0.5, 0.5], [0.2, 0.3, 0.5], "batched", "same length"),
    ],
)
def test_batched_order_rejects_bad_arguments(p, q, order, words):
    with pytest.raises(ValueError, match=words):
        empirical_acceptance(p, q, 10, 0, order=order)
