"""The reference of lesson E7.4: n-gram models, temperature, draft, the decoder, statistics.

The statistical tests check that ``speculative_decode`` samples the target's distribution
over whole strings, with the check the hidden tests use
(``specdec_reference.testing.e7_4.check_sequence_distribution``), and that the same check
fails on each decoder mutant that changes the distribution.  Dropping the bonus token
does not change it (every emitted token still follows the target given the text before
it), so that mutant passes the distribution check and fails the pass-by-pass check.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from specdec_reference import (
    decoding,
    draft,
    generate,
    kvcache,
    measured_alpha,
    ngram,
    prefix_distribution,
    speculative_decode,
    speculative_step,
    tokens_per_pass,
    with_temperature,
)
from specdec_reference.acceptance import residual_distribution
from specdec_reference.testing import e7_4


@pytest.fixture(scope="module")
def models():
    return e7_4.models()


# ---------------------------------------------------------------------------
# n-gram models
# ---------------------------------------------------------------------------


def _witten_bell(text: str, order: int, context: str) -> np.ndarray:
    """The interpolated distribution, counted with a dict: an independent implementation."""
    V = len(ngram.ALPHABET)
    probs = np.full(V, 1.0 / V)
    history = context[len(context) - (order - 1) :] if order > 1 else ""
    for m in range(len(history) + 1):
        h = history[len(history) - m :]
        follow = Counter(text[i + m] for i in range(len(text) - m) if text[i : i + m] == h)
        if not follow:
            break
        seen = np.zeros(V)
        for ch, count in follow.items():
            seen[ngram.ALPHABET.index(ch)] = count
        probs = (seen + len(follow) * probs) / (sum(follow.values()) + len(follow))
    return probs


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("context", ["", "a", "ab", "the ", "zzz", "e c"])
def test_ngram_probabilities_are_the_witten_bell_formula(order, context):
    text = "the cat sat on the mat; the bat ate the rat. abab abba\n"
    model = ngram.train_ngram(ngram.encode(text), order)
    expected = _witten_bell(text, order, context)
    assert np.allclose(model.probs(ngram.encode(context)), expected, rtol=1e-12, atol=0)


def test_ngram_distributions_are_positive_and_sum_to_one(models):
    target, draft_model = models
    rng = np.random.default_rng(1)
    for model in (target, draft_model):
        for _ in range(50):
            context = rng.integers(0, 96, size=int(rng.integers(0, 8))).tolist()
            p = model.probs(context)
            assert p.shape == (96,) and p.min() > 0 and math.isclose(p.sum(), 1.0)


def test_probs_along_rows_are_probs_of_each_prefix(models):
    target, _ = models
    context, tokens = ngram.encode("import "), ngram.encode("sys")
    rows = target.probs_along(context, tokens)
    assert rows.shape == (4, 96)
    for i in range(4):
        assert np.array_equal(rows[i], target.probs(context + tokens[:i]))


def test_probs_returns_a_copy_and_rejects_unknown_tokens(models):
    target, _ = models
    p = target.probs([1, 2])
    p[:] = 0
    assert target.probs([1, 2]).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        target.probs([1, 2, 300])


def test_encode_and_decode_round_trip_printable_ascii():
    text = "def f(x):\n    return x ** 2  # ok\n"
    assert ngram.decode(ngram.encode(text)) == text
    assert ngram.decode(ngram.encode("tab\there é")) == "tab here ?"


def test_corpus_skips_missing_files_and_refuses_none(tmp_path: Path):
    (tmp_path / "a.py").write_text("x = 1")
    assert ngram.corpus_text(["a.py", "missing.py"], tmp_path) == "x = 1\n"
    with pytest.raises(FileNotFoundError):
        ngram.corpus_text(["missing.py"], tmp_path)


def test_the_target_knows_more_python_than_the_draft(models):
    """Cross-entropy on the training text: the order-5 target far below the order-3 draft."""
    target, draft_model = models
    text = ngram.encode(ngram.corpus_text())[:3000]
    nll = {
        name: -np.mean([np.log(m.probs(text[:i])[text[i]]) for i in range(8, len(text))])
        for name, m in (("target", target), ("draft", draft_model))
    }
    assert nll["target"] < 0.7 * nll["draft"]


# ---------------------------------------------------------------------------
# Temperature
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.01, 0.3, 1.0, 2.5])
def test_with_temperature_is_the_tempered_softmax(temperature):
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(7), size=3)
    expected = p ** (1 / temperature) / (p ** (1 / temperature)).sum(axis=1, keepdims=True)
    got = with_temperature(p, temperature)
    assert np.all(np.isfinite(got)) and np.allclose(got.sum(axis=1), 1.0)
    if temperature >= 0.3:  # below, p ** (1 / T) itself underflows
        assert np.allclose(got, expected, rtol=1e-12)


def test_temperature_zero_is_greedy_with_ties_to_the_first_maximum():
    assert with_temperature([0.3, 0.35, 0.35], 0).tolist() == [0.0, 1.0, 0.0]
    assert with_temperature([0.0, 1.0], 1e-6).tolist() == [0.0, 1.0]


def test_temperature_sharpens_below_one_and_flattens_above():
    p = np.array([0.1, 0.2, 0.7])
    assert with_temperature(p, 0.5)[2] > 0.7 > with_temperature(p, 2.0)[2]


@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_negative_or_nan_temperature_raises(bad):
    with pytest.raises(ValueError, match="temperature"):
        with_temperature([0.5, 0.5], bad)


# ---------------------------------------------------------------------------
# draft, generate, speculative_decode
# ---------------------------------------------------------------------------


def test_draft_returns_the_rows_it_sampled_from_and_leaves_the_context(models):
    _, draft_model = models
    context = ngram.encode("for ")
    tokens, rows = draft(draft_model, context, 5, np.random.default_rng(3), 0.6)
    assert context == ngram.encode("for ") and len(tokens) == 5 and rows.shape == (5, 96)
    for i in range(5):
        assert np.array_equal(
            rows[i], with_temperature(draft_model.probs(context + tokens[:i]), 0.6)
        )


def test_draft_makes_one_choice_per_token(models):
    _, draft_model = models
    rng, replay = np.random.default_rng(4), np.random.default_rng(4)
    tokens, rows = draft(draft_model, [1], 3, rng)
    assert tokens == [int(replay.choice(96, p=row)) for row in rows]
    assert rng.random() == replay.random()  # no other draws


def test_an_empty_draft_has_no_rows(models):
    _, draft_model = models
    tokens, rows = draft(draft_model, [1], 0, np.random.default_rng(0))
    assert tokens == [] and rows.shape == (0, 96)


@pytest.mark.parametrize("prompt", ["def ", "import ", "    return ", "\n", "class A:\n"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_speculative_decode_at_temperature_zero_is_greedy_decoding(models, prompt, k):
    target, draft_model = models
    context = ngram.encode(prompt)
    out, stats = speculative_decode(
        target, draft_model, context, 60, k, np.random.default_rng(k), 0
    )
    assert out == generate(target, context, 60, None, 0)
    assert all(row[0] == k and row[2] == row[1] + 1 for row in stats)


@pytest.mark.parametrize("n, k", [(1, 1), (7, 3), (50, 4), (30, 0)])
def test_speculative_decode_passes_are_what_the_hidden_tests_require(models, n, k):
    target, draft_model = models
    if k == 0:  # no draft: one target token per pass
        out, stats = speculative_decode(target, draft_model, [1], n, 0, np.random.default_rng(5))
        assert len(out) == n and stats == [(0, 0, 1)] * n
        return
    e7_4.check_decode_passes(
        speculative_decode, target, draft_model, prompt="x = ", n=n, k=k, temperature=0.8, seed=5
    )


def test_speculative_decode_of_nothing_makes_no_pass(models):
    target, draft_model = models
    assert speculative_decode(target, draft_model, [1], 0, 3, np.random.default_rng(0)) == ([], [])
    with pytest.raises(ValueError):
        speculative_decode(target, draft_model, [1], 5, -1, np.random.default_rng(0))


# ---------------------------------------------------------------------------
# measured_alpha, tokens_per_pass, prefix_distribution
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stats, alpha, per_pass",
    [
        ([(4, 4, 5), (4, 1, 2), (4, 0, 1)], 5 / 7, 8 / 3),
        ([(3, 3, 4)], 1.0, 4.0),
        ([(2, 0, 1), (2, 0, 1)], 0.0, 1.0),
        ([(1, 1, 2), (1, 0, 1)], 0.5, 1.5),
    ],
)
def test_measured_statistics(stats, alpha, per_pass):
    assert measured_alpha(stats) == pytest.approx(alpha, rel=1e-15)
    assert tokens_per_pass(stats) == pytest.approx(per_pass, rel=1e-15)


@pytest.mark.parametrize("bad", [[], [(2, 3, 4)], [(0, 0, 1)]])
def test_measured_alpha_refuses_what_it_cannot_measure(bad):
    with pytest.raises(ValueError):
        measured_alpha(bad)


def test_measured_alpha_is_unbiased_for_a_constant_acceptance_rate():
    """Simulated passes with alpha = 0.6, k = 4 (seed 9, 20,000 passes): the estimate and the
    tokens per pass land within 0.01 and 0.02 of 0.6 and E[N] (many standard errors)."""
    from specdec_reference import expected_tokens

    stats = e7_4.random_stats(np.random.default_rng(9), 20_000, 4, 0.6)
    assert abs(measured_alpha(stats) - 0.6) < 0.01
    assert abs(tokens_per_pass(stats) - expected_tokens(0.6, 4)) < 0.02


def test_prefix_distribution_is_the_chain_rule(models):
    target, _ = models
    context = ngram.encode("im")
    dist = prefix_distribution(target, context, 3, 0.7)
    assert dist.shape == (96, 96, 96) and math.isclose(dist.sum(), 1.0)
    x, y, z = ngram.encode("por")
    expected = (
        with_temperature(target.probs(context), 0.7)[x]
        * with_temperature(target.probs(context + [x]), 0.7)[y]
        * with_temperature(target.probs(context + [x, y]), 0.7)[z]
    )
    assert math.isclose(dist[x, y, z], expected, rel_tol=1e-12)
    with pytest.raises(ValueError):
        prefix_distribution(target, context, 4)


# ---------------------------------------------------------------------------
# Exactness over sequences, and the mutants it catches
# ---------------------------------------------------------------------------


def mutant_decode(mutant: str):
    """The reference decoder with one mistake (the lesson's common mistakes)."""

    def decode(target, draft_model, prompt, n, k, rng, temperature=1.0):
        out, stats, cache = [], [], list(prompt)
        while len(out) < n:
            context = cache if mutant == "no-rollback" else list(prompt) + out
            drafted, q = draft(draft_model, context, k, rng, temperature)
            if mutant == "q-at-temperature-one":
                q = np.array([draft_model.probs(context + drafted[:i]) for i in range(k)])
            p = with_temperature(target.probs_along(context, drafted), temperature)
            emitted, accepted = [], 0
            for i, x in enumerate(drafted):
                if rng.random() < min(1.0, p[i, x] / q[i, x]):
                    emitted.append(x)
                    accepted += 1
                    continue
                row = p[i] if mutant == "resample-from-p" else residual_distribution(p[i], q[i])
                emitted.append(int(rng.choice(96, p=row)))
                break
            else:
                if mutant != "no-bonus":
                    emitted.append(int(rng.choice(96, p=p[k])))
            out += emitted
            cache = context + drafted + emitted[-1:]  # the cache that was never rolled back
            stats.append((k, accepted, len(emitted)))
        return out[:n], stats

    return decode


EXACTNESS = dict(prompt="import ", length=2, k=2, runs=4000, failure_prob=1e-6)


@pytest.mark.parametrize("temperature, seed", [(1.0, 1), (1.0, 2), (0.5, 3), (0.5, 4)])
def test_speculative_decode_samples_the_target_sequence_distribution(models, temperature, seed):
    """4,000 decodes of 2 characters per seed; false-failure probability below 1e-6 each."""
    target, draft_model = models
    e7_4.check_sequence_distribution(
        speculative_decode, target, draft_model, temperature=temperature, seed=seed, **EXACTNESS
    )


@pytest.mark.parametrize(
    "mutant, temperature, words",
    [
        ("resample-from-p", 1.0, "resampling from p instead of the residual"),
        ("q-at-temperature-one", 0.5, "q at temperature 1 while sampling at T"),
        ("no-rollback", 1.0, "L1 distance"),
    ],
)
def test_the_exactness_check_fails_each_mutant_that_changes_the_distribution(
    models, mutant, temperature, words
):
    target, draft_model = models
    with pytest.raises(AssertionError, match=words):
        e7_4.check_sequence_distribution(
            mutant_decode(mutant),
            target,
            draft_model,
            temperature=temperature,
            seed=11,
            **EXACTNESS,
        )


def test_dropping_the_bonus_token_keeps_the_distribution_but_fails_the_pass_check(models):
    target, draft_model = models
    decode = mutant_decode("no-bonus")
    e7_4.check_sequence_distribution(
        decode, target, draft_model, temperature=1.0, seed=12, **EXACTNESS
    )
    with pytest.raises(AssertionError, match="without the bonus token"):
        e7_4.check_decode_passes(
            decode, target, draft_model, prompt="def ", n=40, k=2, temperature=1.0, seed=12
        )


def test_the_mutants_are_far_outside_the_tolerance_in_expectation(models):
    """The first character of each mutant, computed exactly: L1 distance to the target more
    than 1.5 x the tolerance of a 4,000-run check (so they fail for almost any seed)."""
    target, draft_model = models
    context = ngram.encode(EXACTNESS["prompt"])
    for temperature in (1.0, 0.5):
        p = with_temperature(target.probs(context), temperature)
        kept = p >= 0.01  # the categories of the check, and "other"

        def coarse(dist, kept=kept):
            return np.append(dist[kept], 1 - dist[kept].sum())

        expected = coarse(p)
        tol = np.sqrt(expected * (1 - expected) / 4000).sum()
        tol += math.sqrt(2 * math.log(2 / 1e-6) / 4000)
        for name, (dist, _) in e7_4.first_token_mistakes(
            target, draft_model, context, temperature
        ).items():
            wrong = coarse(np.array([dist[c] for c in ngram.ALPHABET]))
            assert np.abs(wrong - expected).sum() > 1.5 * tol, (name, temperature)


def test_decoding_uses_lesson_e7_3s_accept_step():
    assert decoding.speculative_step is speculative_step


# ---------------------------------------------------------------------------
# Temperature: only the target must be tempered
# ---------------------------------------------------------------------------


def two_temperatures(t_draft: float | None):
    """The reference loop with the draft sampled at t_draft, or the target left untempered
    (t_draft None); the decoder's temperature applies to the other model."""

    def decode(target, draft_model, prompt, n, k, rng, temperature=1.0):
        out, stats = [], []
        while len(out) < n:
            context = list(prompt) + out
            at = temperature if t_draft is None else t_draft
            drafted, q = draft(draft_model, context, k, rng, at)
            p = target.probs_along(context, drafted)
            if t_draft is not None:
                p = with_temperature(p, temperature)
            emitted = speculative_step(p, q, drafted, rng)
            out += emitted
            stats.append((k, len(emitted) - 1, len(emitted)))
        return out[:n], stats

    return decode


@pytest.mark.parametrize("t_draft, seed", [(1.0, 21), (1.5, 22), (0.25, 23)])
def test_the_output_follows_the_tempered_target_whatever_the_draft_samples_at(
    models, t_draft, seed
):
    """Target at T = 0.5, draft at another temperature: 4,000 decodes of 2 characters, the
    check's false-failure probability below 1e-6 each."""
    target, draft_model = models
    e7_4.check_sequence_distribution(
        two_temperatures(t_draft), target, draft_model, temperature=0.5, seed=seed, **EXACTNESS
    )


def test_an_untempered_target_fails_the_check_and_is_named(models):
    target, draft_model = models
    with pytest.raises(AssertionError, match="nearer to the target not tempered"):
        e7_4.check_sequence_distribution(
            two_temperatures(None), target, draft_model, temperature=0.5, seed=24, **EXACTNESS
        )


def test_a_stale_draft_context_keeps_the_distribution_but_fails_the_pass_check(models):
    """Drafting from the prompt alone is exact (verify tests the q it sampled from), so only
    the pass check, which reads the draft's contexts, can see it."""
    target, draft_model = models

    def stale(target, draft_model, prompt, n, k, rng, temperature=1.0):
        out, stats = [], []
        while len(out) < n:
            drafted, q = draft(draft_model, list(prompt), k, rng, temperature)
            p = with_temperature(target.probs_along(list(prompt) + out, drafted), temperature)
            emitted = speculative_step(p, q, drafted, rng)
            out += emitted
            stats.append((k, len(emitted) - 1, len(emitted)))
        return out[:n], stats

    e7_4.check_sequence_distribution(
        stale, target, draft_model, temperature=1.0, seed=25, **EXACTNESS
    )
    with pytest.raises(AssertionError, match="draft-side cache-rollback mistake"):
        e7_4.check_decode_passes(
            stale, target, draft_model, prompt="def ", n=40, k=3, temperature=1.0, seed=25
        )


# ---------------------------------------------------------------------------
# The key-value cache and its rollback
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, temperature, seed", [(1, 1.0, 1), (3, 0.6, 2), (4, 0.0, 3), (6, 1.3, 4)]
)
def test_the_cached_decoder_draws_what_the_plain_decoder_draws(models, k, temperature, seed):
    target, draft_model = models
    prompt = ngram.encode("class A:\n")
    cached = kvcache.speculative_decode_cached(
        kvcache.CachedModel(target),
        kvcache.CachedModel(draft_model),
        prompt,
        45,
        k,
        np.random.default_rng(seed),
        temperature,
    )
    plain = speculative_decode(
        target, draft_model, prompt, 45, k, np.random.default_rng(seed), temperature
    )
    assert cached == plain


@pytest.mark.parametrize("seed", range(6))
def test_the_cached_reference_passes_the_rollback_check(models, seed):
    target, draft_model = models
    e7_4.check_cached_decode(
        kvcache.speculative_decode_cached,
        target,
        draft_model,
        prompt="def ",
        n=30 + seed,
        k=1 + seed % 4,
        temperature=[1.0, 0.6, 0.0][seed % 3],
        seed=seed,
    )


def test_the_caches_after_each_pass_hold_what_the_lesson_says(models):
    """Before each pass the target's cache is the text less its last token; the draft's is
    the same, or exactly one entry fewer after a fully accepted pass."""
    target, draft_model = models
    log = []
    big = e7_4.CacheRecorder(target, log, "target")
    small = e7_4.CacheRecorder(draft_model, log, "draft")
    prompt, k = ngram.encode("import "), 3
    out, stats = kvcache.speculative_decode_cached(
        big, small, prompt, 200, k, np.random.default_rng(8)
    )
    firsts, length, passes = {}, len(prompt), 0
    for who, cache, _ in log:
        if who == "target":
            if passes:
                full = stats[passes - 1][1] == k
                assert len(cache) == length - 1
                assert len(firsts["draft"]) == (length - 2 if full else length - 1)
            length += stats[passes][2]
            passes, firsts = passes + 1, {}
        firsts.setdefault(who, cache)
    assert passes == len(stats) and any(a == k for _, a, _ in stats)
    assert any(a < k for _, a, _ in stats)


def test_kvcache_truncate_keeps_a_prefix():
    cache = kvcache.KVCache()
    for t in range(5):
        cache.append(t)
    cache.truncate(7)
    assert cache.tokens == [0, 1, 2, 3, 4]
    cache.truncate(2)
    assert cache.tokens == [0, 1] and len(cache) == 2
    with pytest.raises(ValueError):
        cache.truncate(-1)


def test_speculation_pays_exactly_when_best_k_is_positive():
    from specdec_reference import optimal_k, speculation_pays

    rng = np.random.default_rng(31)
    pairs = [(float(a), float(c)) for a, c in rng.uniform(0, 1, (400, 2))]
    pairs += [(t, t) for t in (0.0, 0.25, 0.5, 1.0)]
    for alpha, c in pairs:
        assert speculation_pays(alpha, c) == (optimal_k(alpha, c, 60) > 0), (alpha, c)
