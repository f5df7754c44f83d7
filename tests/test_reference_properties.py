"""Properties of specdec_reference, checked with hypothesis.

No deadlines: timings vary on a loaded machine, and a slow example is not a failure.
"""

import math
from fractions import Fraction

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specdec_reference import (
    accept_prob,
    empirical_acceptance,
    expected_tokens,
    greedy_step,
    optimal_k,
    overall_acceptance,
    residual_distribution,
    spec_accept,
    speculative_step,
    speedup,
    walltime_improvement,
)

weights = st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False)
probability = st.floats(0.0, 1.0, allow_nan=False)
alphas = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def distribution_pairs(draw, max_size=8):
    """Two normalized distributions over the same vocabulary (zeros allowed)."""
    size = draw(st.integers(1, max_size))
    raw_p = draw(st.lists(weights, min_size=size, max_size=size))
    raw_q = draw(st.lists(weights, min_size=size, max_size=size))
    assume(sum(raw_p) > 1e-3 and sum(raw_q) > 1e-3)
    p = np.array(raw_p) / math.fsum(raw_p)
    q = np.array(raw_q) / math.fsum(raw_q)
    return p, q


@settings(deadline=None)
@given(distribution_pairs())
def test_overall_acceptance_is_symmetric(pq):
    p, q = pq
    assert overall_acceptance(p, q) == overall_acceptance(q, p)


@settings(deadline=None)
@given(distribution_pairs())
def test_overall_acceptance_lies_between_zero_and_one(pq):
    value = overall_acceptance(*pq)
    assert 0.0 <= value <= 1.0 + 1e-12


@settings(deadline=None)
@given(distribution_pairs())
def test_overall_acceptance_is_one_minus_the_total_variation_distance(pq):
    p, q = pq
    total_variation = 0.5 * math.fsum(np.abs(p - q).tolist())
    assert abs(overall_acceptance(p, q) - (1.0 - total_variation)) <= 1e-12


@settings(deadline=None)
@given(distribution_pairs())
def test_overall_acceptance_is_one_exactly_for_identical_distributions(pq):
    p, _ = pq
    assert abs(overall_acceptance(p, p) - 1.0) <= 1e-12


@settings(deadline=None)
@given(distribution_pairs())
def test_acceptance_plus_residual_rebuilds_the_target(pq):
    """min(p, q) + (1 - alpha) * residual == p, with alpha = overall_acceptance(p, q)."""
    p, q = pq
    assume(np.maximum(p - q, 0.0).sum() > 1e-6)  # a residual worth normalizing
    alpha = overall_acceptance(p, q)
    residual = residual_distribution(p, q)
    np.testing.assert_allclose(np.minimum(p, q) + (1.0 - alpha) * residual, p, atol=1e-9)
    assert np.all(residual >= 0.0) and abs(residual.sum() - 1.0) <= 1e-12
    assert np.all(residual[p <= q] == 0.0)  # no mass where the draft already covers p


@settings(deadline=None)
@given(probability, st.floats(1e-300, 1.0))
def test_accept_prob_is_a_probability_and_one_iff_p_at_least_q(p, q):
    value = accept_prob(p, q)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == (p / q >= 1.0)


@settings(deadline=None)
@given(st.data(), st.integers(0, 8))
def test_spec_accept_counts_the_unbroken_run_of_passes(data, k):
    p = data.draw(st.lists(probability, min_size=k, max_size=k))
    q = data.draw(st.lists(st.floats(1e-6, 1.0), min_size=k, max_size=k))
    r = data.draw(st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=k, max_size=k))
    passes = [r[i] <= min(1.0, p[i] / q[i]) for i in range(k)]
    expected = passes.index(False) if False in passes else k
    assert spec_accept(p, q, r) == expected
    # whatever follows the first rejection is never read, even an invalid q
    if expected < k - 1:
        garbage = expected + 1
        q2 = q[:garbage] + [0.0] * (k - garbage)
        assert spec_accept(p, q2, r) == expected


@settings(max_examples=60, deadline=None)
@given(distribution_pairs(max_size=6), st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_vectorized_empirical_acceptance_equals_the_loop(pq, trials, seed):
    p, q = pq
    loop = empirical_acceptance(p, q, trials, seed, vectorized=False)
    assert empirical_acceptance(p, q, trials, seed, vectorized=True) == loop


@settings(deadline=None)
@given(alphas, st.integers(0, 200))
def test_expected_tokens_is_between_one_and_k_plus_one_and_accurate(alpha, k):
    value = expected_tokens(alpha, k)
    assert 1.0 <= value <= k + 1
    a = Fraction(alpha)
    exact = Fraction(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)
    assert abs(Fraction(value) - exact) <= Fraction(1, 10**14) * exact


@settings(deadline=None)
@given(alphas, alphas, st.integers(0, 50))
def test_expected_tokens_grows_with_alpha(a, b, k):
    low, high = sorted((a, b))
    assert expected_tokens(low, k) <= expected_tokens(high, k) * (1 + 1e-14)


@settings(deadline=None)
@given(alphas, st.integers(0, 50))
def test_expected_tokens_grows_with_k(alpha, k):
    assert expected_tokens(alpha, k) <= expected_tokens(alpha, k + 1) * (1 + 1e-14)


@settings(deadline=None)
@given(alphas, st.integers(0, 30), st.floats(0.0, 2.0))
def test_walltime_improvement_is_speedup_with_target_time_units(alpha, gamma, c):
    assert math.isclose(
        walltime_improvement(alpha, gamma, c), speedup(alpha, gamma, 1.0, c, 1.0), rel_tol=1e-12
    )


@settings(deadline=None)
@given(alphas, st.floats(0.0, 1.0), st.integers(0, 40))
def test_optimal_k_is_no_worse_than_any_other_k(alpha, c, k_max):
    best = optimal_k(alpha, c, k_max=k_max)
    assert 0 <= best <= k_max
    top = walltime_improvement(alpha, best, c)
    assert all(walltime_improvement(alpha, k, c) <= top for k in range(k_max + 1))


@st.composite
def draft_steps(draw):
    """A (target, draft, tokens) triple in which each token has draft probability > 0."""
    vocab, k = draw(st.integers(1, 5)), draw(st.integers(0, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    target = rng.dirichlet(np.ones(vocab), size=k + 1)
    draft = rng.dirichlet(np.ones(vocab), size=k)
    tokens = [int(rng.choice(vocab, p=row)) for row in draft]
    return target, draft, tokens


@settings(deadline=None)
@given(draft_steps(), st.integers(0, 2**32 - 1))
def test_speculative_step_emits_an_accepted_prefix_then_one_target_token(step, seed):
    target, draft, tokens = step
    out = speculative_step(target, draft, tokens, np.random.default_rng(seed))
    k = len(tokens)
    assert 1 <= len(out) <= k + 1
    assert out[:-1] == tokens[: len(out) - 1]
    assert all(type(t) is int and 0 <= t < target.shape[1] for t in out)


@settings(deadline=None)
@given(draft_steps())
def test_greedy_step_emits_an_accepted_prefix_then_the_target_argmax(step):
    target, _, tokens = step
    out = greedy_step(target, tokens)
    n = len(out) - 1
    assert out[:n] == tokens[:n]
    assert all(tokens[i] == int(np.argmax(target[i])) for i in range(n))
    assert out[n] == int(np.argmax(target[n]))
    assert n == len(tokens) or tokens[n] != out[n]
