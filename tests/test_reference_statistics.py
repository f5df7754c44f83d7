"""Sampling checks: speculative decoding emits the target's distribution.

Each statistical check states its seed, its sample size and its false-failure
probability, and is shown able to fail: the same check run on a mutant fails.
"""

import itertools
import math

import numpy as np
import pytest

from specdec_reference import (
    accept_prob,
    empirical_acceptance,
    greedy_step,
    overall_acceptance,
    speculative_step,
)

# --- a toy language model: bigram tables over a 3-token vocabulary ----------------------

VOCAB, START, DRAFT_LEN, SEQ_LEN = 3, 0, 2, 3
TARGET_BIGRAM = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.3, 0.5, 0.2]])
DRAFT_BIGRAM = np.array([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.2, 0.2, 0.6]])
# Inverse-CDF sampling from the draft, as Generator.choice does it, but cheaper.
DRAFT_CDF = np.cumsum(DRAFT_BIGRAM, axis=1) / DRAFT_BIGRAM.sum(axis=1, keepdims=True)


def speculative_sequence(step, rng):
    """Decode SEQ_LEN tokens after START with draft-and-verify passes made by ``step``."""
    out = []
    while len(out) < SEQ_LEN:
        context = out[-1] if out else START
        tokens, draft_rows, target_rows = [], [], []
        for _ in range(DRAFT_LEN):
            # The draft proposes from its own table, continuing its own proposals.
            row = DRAFT_BIGRAM[context]
            token = int(DRAFT_CDF[context].searchsorted(rng.random(), side="right"))
            target_rows.append(TARGET_BIGRAM[context])
            draft_rows.append(row)
            tokens.append(token)
            context = token
        target_rows.append(TARGET_BIGRAM[context])  # the bonus row after the whole draft
        out.extend(step(np.array(target_rows), np.array(draft_rows), tokens, rng))
    return tuple(out[:SEQ_LEN])


def target_sequence_probabilities():
    """Exact probability of every sequence of SEQ_LEN tokens under the target bigram."""
    probs = {}
    for seq in itertools.product(range(VOCAB), repeat=SEQ_LEN):
        prob, prev = 1.0, START
        for token in seq:
            prob *= TARGET_BIGRAM[prev, token]
            prev = token
        probs[seq] = prob
    return probs


def assert_emits_the_target_distribution(step, *, seed=20240611, n=5_000):
    """Fail unless ``step`` decodes sequences distributed as the target bigram model.

    Test: each of the m = 27 sequence probabilities is estimated from n = 5,000
    decoded sequences (seed 20240611).  Hoeffding's inequality bounds each estimate:
    P(|f - P| >= eps) <= 2 exp(-2 n eps^2); with a union bound over the m outcomes,
    eps = sqrt(ln(2 m / delta) / (2 n)) = 0.0448 gives a false-failure probability
    of at most delta = 1e-7 < 1e-6 for a correct ``step``.  (The mutant below is off
    by about 0.20 on the sequence (0, 0, 0): it fails by a wide margin.)
    """
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(target_sequence_probabilities(), 0)
    for _ in range(n):
        counts[speculative_sequence(step, rng)] += 1
    delta = 1e-7
    eps = math.sqrt(math.log(2 * len(counts) / delta) / (2 * n))
    for seq, prob in target_sequence_probabilities().items():
        freq = counts[seq] / n
        assert abs(freq - prob) < eps, (
            f"sequence {seq}: frequency {freq:.4f}, target probability {prob:.4f}, "
            f"allowed deviation {eps:.4f}"
        )


def speculative_step_resampling_from_p(target_probs, draft_probs, draft_tokens, rng):
    """Mutant: on rejection, resample from the target row p instead of the residual."""
    target = np.asarray(target_probs)
    draft = np.asarray(draft_probs)
    out = []
    for i, x in enumerate(draft_tokens):
        if rng.random() < accept_prob(target[i, x], draft[i, x]):
            out.append(x)
            continue
        out.append(int(rng.choice(target.shape[1], p=target[i])))  # the mistake
        return out
    out.append(int(rng.choice(target.shape[1], p=target[len(draft_tokens)])))
    return out


def test_speculative_step_emits_the_target_distribution():
    assert_emits_the_target_distribution(speculative_step)


def test_the_distribution_check_fails_on_a_mutant_that_resamples_from_p():
    with pytest.raises(AssertionError, match="allowed deviation"):
        assert_emits_the_target_distribution(speculative_step_resampling_from_p)


# --- empirical acceptance converges to sum(min(p, q)) -----------------------------------

P = [0.5, 0.3, 0.2]
Q = [0.25, 0.5, 0.25]


def assert_estimates_overall_acceptance(estimate, *, seed=7, n=200_000):
    """Fail unless ``estimate(p, q, n, seed)`` is within Hoeffding's bound of sum(min(p, q)).

    n = 200,000 Bernoulli trials (seed 7): P(|f - alpha| >= eps) <= 2 exp(-2 n eps^2),
    so eps = sqrt(ln(2 / delta) / (2 n)) = 0.0065 gives a false-failure probability
    delta = 1e-7 < 1e-6.
    """
    delta = 1e-7
    eps = math.sqrt(math.log(2 / delta) / (2 * n))
    value, alpha = estimate(P, Q, n, seed), overall_acceptance(P, Q)
    assert abs(value - alpha) < eps, f"estimate {value}, expected {alpha} +- {eps:.4f}"


def empirical_acceptance_on_raw_target(p, q, trials, seed):
    """Mutant: accept the drafted token with probability p[t] instead of min(1, p/q)."""
    u = np.random.default_rng(seed).random(2 * trials)
    tokens = np.searchsorted(np.cumsum(q), u[0::2], side="right")  # as rng.choice draws
    return float(np.mean(u[1::2] < np.asarray(p)[tokens]))


def test_empirical_acceptance_converges_to_overall_acceptance():
    # the loop path is bit-identical (test_reference.py), so the fast path is enough here
    assert_estimates_overall_acceptance(empirical_acceptance)


def test_the_convergence_check_fails_on_a_mutant_that_accepts_on_the_raw_target():
    with pytest.raises(AssertionError, match="expected 0.75"):
        assert_estimates_overall_acceptance(empirical_acceptance_on_raw_target)


# --- greedy: speculative greedy decoding is plain greedy decoding -----------------------


def plain_greedy(target_bigram, start, length):
    out, prev = [], start
    for _ in range(length):
        prev = int(np.argmax(target_bigram[prev]))
        out.append(prev)
    return out


def speculative_greedy(target_bigram, propose, start, length, k):
    """Greedy decoding with drafts from ``propose(context)``, verified by greedy_step."""
    out, passes = [], 0
    while len(out) < length:
        context = out[-1] if out else start
        tokens, rows = [], []
        for _ in range(k):
            token = propose(context)
            rows.append(target_bigram[context])
            tokens.append(token)
            context = token
        rows.append(target_bigram[context])
        out.extend(greedy_step(np.array(rows), tokens))
        passes += 1
    return out[:length], passes


@pytest.mark.parametrize("seed", range(24))
def test_speculative_greedy_decoding_equals_plain_greedy_decoding(seed):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 9))
    target = rng.dirichlet(np.ones(vocab), size=vocab)
    if seed % 2:
        target = np.round(target, 1)  # coarse values: many ties, first maximum wins
    draft = rng.dirichlet(np.ones(vocab), size=vocab)
    k, length, start = int(rng.integers(1, 5)), 20, int(rng.integers(vocab))
    expected = plain_greedy(target, start, length)

    proposers = {
        "draft-argmax": lambda ctx: int(np.argmax(draft[ctx])),
        "random-tokens": lambda ctx: int(rng.integers(vocab)),
        "perfect-draft": lambda ctx: int(np.argmax(target[ctx])),
    }
    for name, propose in proposers.items():
        tokens, passes = speculative_greedy(target, propose, start, length, k)
        assert tokens == expected, name
        assert passes <= length
    # a draft that always agrees uses one target pass per k + 1 tokens
    _, passes = speculative_greedy(target, proposers["perfect-draft"], start, length, k)
    assert passes == math.ceil(length / (k + 1))
