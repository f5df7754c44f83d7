"""Lesson E7.4: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants
below).  Which cells each sample loses is checked through the real grader by
test_lessons.py (``expected.json``).  This module declares what the lessons' contract
checks (test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``,
``GRADED_PHRASES``) and checks the lesson's own rules.  The reference's own tests are
in test_reference_decoding.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.lessons import Lesson, failing

#: Ungraded cells the test cells' visible parts rely on (models, generate, verify, caches).
LESSON = Lesson(
    "e7_4_end_to_end",
    support_cells={
        "code-setup",
        "code-models",
        "code-generate",
        "code-verify",
        "code-cache",
        "code-expected-tokens",
    },
)
SCENARIOS = LESSON.scenarios
EXPECTED = LESSON.expected
TEST_CELLS = LESSON.test_cells
SOLUTION_CELLS = LESSON.solution_cells
DECODE_CELLS = {g for g in TEST_CELLS if g.startswith("test_speculative_decode")}
CACHED_CELLS = {g for g in TEST_CELLS if g.startswith("test_speculative_decode_cached")}
EXACT = ("test_speculative_decode_exact", "test_speculative_decode_exact_at_temperature")


def execute(bodies=None, *, only=None, replace=None):
    return LESSON.run(bodies, only=only, replace=replace).outcomes


lost_cells = LESSON.lost_cells


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


# Correct, but draws each token with the Gumbel-max trick (V uniforms per token) instead
# of rng.choice: only the seeded cell (1 point) may tell it from the reference.
DRAFT_OTHER_DRAWS = """
running, tokens, rows = list(context), [], []
for _ in range(k):
    q = with_temperature(draft_model.probs(running), temperature)
    with np.errstate(divide="ignore"):
        token = int(np.argmax(np.log(q) - np.log(-np.log(rng.random(len(q))))))
    tokens.append(token)
    rows.append(q)
    running.append(token)
return tokens, np.array(rows).reshape(k, len(q) if rows else draft_model.vocab_size)
"""

# Correct, but draws every uniform of a pass first (k + 1 of them) and inverts the CDF
# itself: no seeded cell grades speculative_decode, so it keeps every point.
DECODE_OTHER_DRAWS = """
out, stats = [], []
while len(out) < n:
    context = list(prompt) + out
    drafted, q = draft(draft_model, context, k, rng, temperature)
    p = with_temperature(target_model.probs_along(context, drafted), temperature)
    u = rng.random(k + 1)
    emitted = []
    for i, x in enumerate(drafted):
        if u[i] * q[i][x] < p[i][x]:
            emitted.append(x)
            continue
        residual = np.maximum(0.0, p[i] - q[i])
        cdf = np.cumsum(residual)
        emitted.append(int(min(np.searchsorted(cdf, u[k] * cdf[-1], side="right"), len(cdf) - 1)))
        break
    else:
        cdf = np.cumsum(p[k])
        emitted.append(int(min(np.searchsorted(cdf, u[k] * cdf[-1], side="right"), len(cdf) - 1)))
    out += emitted
    stats.append((k, len(emitted) - 1, len(emitted)))
return out[:n], stats
"""


def test_a_draft_with_another_draw_method_loses_only_the_seeded_point():
    draft_cells = {g for g in TEST_CELLS if g.startswith("test_draft")}
    lost = failing(execute({"draft": DRAFT_OTHER_DRAWS}, only=draft_cells))
    assert set(lost) == {"test_draft_seeded"}, lost
    assert "one rng.choice(V, p=q_i) per token" in lost["test_draft_seeded"]


def test_a_decoder_with_another_draw_order_keeps_every_point():
    assert failing(execute({"speculative_decode": DECODE_OTHER_DRAWS}, only=DECODE_CELLS)) == {}


# Correct, but feeds the draft every drafted token, the last one too (its row is never
# used), rolls the target back one entry at a time, and cuts the draft's list of tokens
# directly, as the notebook's own KVCache allows: every point stays.
CACHED_FEEDS_EVERY_DRAFTED_TOKEN = """
text, stats = list(prompt), []
while len(text) - len(prompt) < n:
    rows = draft_model.forward(text[len(draft_model.cache):])
    drafted, q = [], []
    for _ in range(k):
        q.append(with_temperature(rows[-1], temperature))
        drafted.append(int(rng.choice(len(q[-1]), p=q[-1])))
        rows = draft_model.forward([drafted[-1]])
    scored = target.forward(text[len(target.cache):] + drafted)
    emitted = verify(with_temperature(scored[len(scored) - k - 1:], temperature), np.array(q),
                     drafted, rng)
    text = text + list(emitted)
    while len(target.cache) > len(text) - 1:
        target.cache.truncate(len(target.cache) - 1)
    del draft_model.cache.tokens[len(text) - 1:]  # the notebook's KVCache keeps a plain list
    stats.append((k, len(emitted) - 1, len(emitted)))
return text[len(prompt):len(prompt) + n], stats
"""


def test_a_cached_decoder_that_feeds_the_last_drafted_token_too_keeps_every_point():
    bodies = {"speculative_decode_cached": CACHED_FEEDS_EVERY_DRAFTED_TOKEN}
    assert failing(execute(bodies, only=CACHED_CELLS)) == {}


def test_broken_callees_cost_nothing_in_the_decoder_cells():
    """No cascade: draft and with_temperature are the reference's in the decoder's cells."""
    broken = {"draft": "raise NotImplementedError()", "with_temperature": "return probs"}
    assert failing(execute(broken, only=DECODE_CELLS)) == {}


def test_a_broken_improvement_factor_costs_nothing_in_the_best_k_and_pays_cells():
    cells = {
        g
        for g in TEST_CELLS
        if g.startswith(("test_improvement", "test_best_k", "test_speculation"))
    }
    bodies = {
        "improvement_factor": "return 0.0",
        "speculation_pays": "return improvement_factor(alpha, 1, c) > 1",  # leans on it
    }
    lost = failing(execute(bodies, only=cells))
    assert set(lost) == {"test_improvement_factor_values", "test_improvement_factor_limits"}


# ---------------------------------------------------------------------------
# Each sample mistake loses its cells, and the message names it
# ---------------------------------------------------------------------------

#: {scenario: {lost cell: words its message must contain}}.
SAMPLE_MESSAGES = {
    "mistake-temperature-power-t": {
        "test_with_temperature_values": "raising p to the power T instead of 1/T",
        "test_with_temperature_greedy_and_small": "raising p to the power T",
    },
    "mistake-q-at-temperature-one": {
        "test_draft_rows": "reporting q at T = 1 while sampling at T",
    },
    "mistake-draft-changes-context": {
        "test_draft_rows": "changed the context list it was given",
    },
    "mistake-resample-from-p": {
        "test_speculative_decode_exact": "resampling from p instead of the residual",
        "test_speculative_decode_exact_at_temperature": "resampling from p instead of the residual",
    },
    "mistake-no-bonus-token": {
        "test_speculative_decode_passes": "the draft without the bonus token",
    },
    "mistake-no-cache-rollback": {
        "test_speculative_decode_passes": "cache-rollback mistake",
        "test_speculative_decode_exact": "probability below",
        "test_speculative_decode_exact_at_temperature": "probability below",
        "test_speculative_decode_greedy": "plain greedy decoding",
    },
    "mistake-draft-empty-crash": {"test_draft_empty": "without np.stack([])"},
    "mistake-target-not-tempered": {
        "test_speculative_decode_exact_at_temperature": "nearer to the target not tempered",
        "test_speculative_decode_greedy": "plain greedy decoding",
    },
    "mistake-stale-draft-context": {
        "test_speculative_decode_passes": "draft-side cache-rollback mistake",
    },
    "mistake-cache-not-truncated": {
        "test_speculative_decode_cached_rollback": "cache-rollback mistake",
        "test_speculative_decode_cached_greedy": "truncate it to len(text) - 1",
    },
    "mistake-cached-one-pass-too-many": {
        "test_speculative_decode_cached_rollback": "That is one pass too many"
    },
    "mistake-pays-at-a-tie": {"test_speculation_pays_iff_alpha_exceeds_c": "not >="},
    "mistake-alpha-over-drafted": {"test_measured_alpha_values": "accepted over drafted tokens"},
    "mistake-closed-form-at-one": {"test_improvement_factor_limits": "closed form is 0/0"},
    "mistake-best-k-from-one": {
        "test_best_k_values": "starting the search at k = 1",
        "test_best_k_limits": "smallest k on ties",
    },
}


# Mistakes without a sample notebook: {name: (bodies, cells to run, {lost cell: words})}.
# At T = 1 tempering changes nothing, so the temperature mutants skip the T = 1 cell.
AT_TEMPERATURE = DECODE_CELLS - {EXACT[0]}
EXTRA_MUTANTS = {
    # Samples its own draft at T, but gives verify the untempered q.
    "decoder-tests-q-at-temperature-one": (
        {
            "speculative_decode": """
            out, stats = [], []
            while len(out) < n:
                context = list(prompt) + out
                running, drafted, rows = list(context), [], []
                for _ in range(k):
                    raw = draft_model.probs(running)
                    x = int(rng.choice(len(raw), p=with_temperature(raw, temperature)))
                    drafted.append(x)
                    rows.append(raw)
                    running.append(x)
                p = with_temperature(target_model.probs_along(context, drafted), temperature)
                emitted = verify(p, np.array(rows), drafted, rng)
                out += emitted
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """
        },
        AT_TEMPERATURE,
        {"test_speculative_decode_exact_at_temperature": "q at temperature 1 while sampling at T"},
    ),
    # Correct text, but one target call per position instead of one pass.
    "decoder-calls-the-target-per-position": (
        {
            "speculative_decode": """
            out, stats = [], []
            while len(out) < n:
                context = list(prompt) + out
                drafted, q = draft(draft_model, context, k, rng, temperature)
                rows = [target_model.probs(context + drafted[:i]) for i in range(k + 1)]
                p = with_temperature(np.array(rows), temperature)
                emitted = verify(p, q, drafted, rng)
                out += emitted
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """
        },
        {"test_speculative_decode_passes", "test_speculative_decode_greedy"},
        {"test_speculative_decode_passes": "one target_model.probs_along(context, drafted) call"},
    ),
    # Goes on drafting after n tokens are out.
    "decoder-one-pass-too-many": (
        {
            "speculative_decode": """
            out, stats = [], []
            while len(out) <= n:
                context = list(prompt) + out
                drafted, q = draft(draft_model, context, k, rng, temperature)
                p = with_temperature(target_model.probs_along(context, drafted), temperature)
                emitted = verify(p, q, drafted, rng)
                out += emitted
                stats.append((k, len(emitted) - 1, len(emitted)))
            return out[:n], stats
            """
        },
        {"test_speculative_decode_passes"},
        {"test_speculative_decode_passes": "That is one pass too many"},
    ),
    "temperature-divides-probabilities": (
        {
            "with_temperature": """
            p = np.asarray(probs) / temperature
            return p / p.sum(-1, keepdims=True)
            """
        },
        {"test_with_temperature_values", "test_with_temperature_greedy_and_small"},
        {
            "test_with_temperature_values": "dividing the probabilities by T",
            "test_with_temperature_greedy_and_small": "returned",
        },
    ),
    "draft-rows-from-the-context-alone": (
        {
            "draft": """
            q = with_temperature(draft_model.probs(context), temperature)
            return [int(rng.choice(len(q), p=q)) for _ in range(k)], np.tile(q, (k, 1))
            """
        },
        {"test_draft_rows"},
        {"test_draft_rows": "extend the context with each one"},
    ),
    # Reports the tempered rows but draws from the untempered ones.
    "draft-samples-at-temperature-one": (
        {
            "draft": """
            running, tokens, rows = list(context), [], []
            for _ in range(k):
                raw = draft_model.probs(running)
                tokens.append(int(rng.choice(len(raw), p=raw)))
                rows.append(with_temperature(raw, temperature))
                running.append(tokens[-1])
            return tokens, np.array(rows).reshape(k, draft_model.vocab_size)
            """
        },
        {"test_draft_rows", "test_draft_follows_q", "test_draft_seeded"},
        {
            "test_draft_follows_q": "nearer to sampling at temperature 1",
            "test_draft_seeded": "one rng.choice(V, p=q_i) per token",
        },
    ),
    # Off by one: keeps an entry for the position of the target's new token, which holds the
    # rejected drafted token.
    "cached-truncates-to-the-text-length": (
        {
            "speculative_decode_cached": LESSON.samples.cached_loop(
                ["target.cache.truncate(len(text))", "draft_model.cache.truncate(len(text))"]
            )
        },
        CACHED_CELLS,
        {
            "test_speculative_decode_cached_rollback": "cache-rollback mistake",
            "test_speculative_decode_cached_greedy": "truncate it to len(text) - 1",
        },
    ),
    # Rolls the target back but never the draft: after a rejection the draft's cache
    # reaches past the text, and the next pass has nothing to feed it.
    "cached-rolls-back-only-the-target": (
        {
            "speculative_decode_cached": LESSON.samples.cached_loop(
                ["target.cache.truncate(len(text) - 1)"]
            )
        },
        CACHED_CELLS,
        {
            "test_speculative_decode_cached_rollback": "the draft was fed nothing",
            "test_speculative_decode_cached_greedy": "the draft was fed nothing",
        },
    ),
    # Correct text, but it empties both caches and feeds the whole text again every pass.
    "cached-recomputes-everything": (
        {
            "speculative_decode_cached": LESSON.samples.cached_loop(
                [], before=["target.cache.truncate(0)", "draft_model.cache.truncate(0)"]
            )
        },
        CACHED_CELLS,
        {"test_speculative_decode_cached_rollback": "than the rollback needs"},
    ),
    "tokens-per-pass-without-the-target-token": (
        {"tokens_per_pass": "return sum(a for _, a, _ in stats) / len(stats)"},
        {"test_tokens_per_pass_values"},
        {"test_tokens_per_pass_values": "without the target's own token"},
    ),
    "improvement-factor-without-the-target-step": (
        {"improvement_factor": "return sum(alpha**i for i in range(k + 1)) / max(k * c, 1e-300)"},
        {"test_improvement_factor_values"},
        {"test_improvement_factor_values": "the pass also costs one target step"},
    ),
    "best-k-ties-to-the-largest": (
        {
            "best_k": """
            best, value = 0, improvement_factor(alpha, 0, c)
            for k in range(1, k_max + 1):
                if improvement_factor(alpha, k, c) >= value:
                    best, value = k, improvement_factor(alpha, k, c)
            return best
            """
        },
        {"test_best_k_values", "test_best_k_limits"},
        {"test_best_k_limits": "smallest k on ties"},
    ),
}


# ---------------------------------------------------------------------------
# The statistical checks: other seeds, stated bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [1000])
def test_the_exactness_checks_fail_resampling_from_p_for_other_seeds(offset):
    """The reference decoder passes the same checks for many seeds: test_reference_decoding."""
    seeds = {f"seed={s}": f"seed={s + offset}" for s in (7430, 7431)}
    lost = failing(execute(SCENARIOS["mistake-resample-from-p"], only=set(EXACT), replace=seeds))
    assert set(lost) == set(EXACT)


def test_the_statistical_cells_state_a_false_failure_probability_below_one_in_a_million():
    for gid in EXACT:
        cell = TEST_CELLS[gid].source
        assert "failure_prob=9e-7" in cell and "below 1e-6" in cell
        assert "adds less than 4e-9" in cell and "< 0.13" in cell and "range(600)" in cell
    assert 9e-7 + 2 * np.exp(-2 * 600 * 0.13**2) < 1e-6
    cell = TEST_CELLS["test_draft_follows_q"].source
    assert "failure_prob=9e-7" in cell and "< 0.1" in cell and "range(1000)" in cell
    assert 9e-7 + 2 * np.exp(-2 * 1000 * 0.1**2) < 1e-6


# ---------------------------------------------------------------------------
# The notebook's models are the reference's; docstrings; visible parts
# ---------------------------------------------------------------------------


def test_the_notebook_models_give_the_reference_distributions():
    """The visible helper and specdec_reference.ngram build the same models, bit for bit."""
    from specdec_reference.testing import e7_4

    ns = LESSON.run(only=set()).namespace
    target, draft_model = e7_4.models()
    assert ns["ALPHABET"] == e7_4.ngram.ALPHABET
    assert ns["draft_model"].order == draft_model.order == e7_4.DRAFT_ORDER
    assert ns["target_model"].order == target.order == e7_4.TARGET_ORDER
    rng = np.random.default_rng(0)
    text = e7_4.ngram.corpus_text()
    assert ns["encode"](text) == e7_4.ngram.encode(text)
    for _ in range(200):
        start = int(rng.integers(0, len(text) - 12))
        context = ns["encode"](text[start : start + int(rng.integers(0, 10))])
        for mine, ref in ((ns["target_model"], target), (ns["draft_model"], draft_model)):
            assert np.array_equal(mine.probs(context), ref.probs(context))
            assert np.array_equal(
                mine.probs_along(context, [5, 6]), ref.probs_along(context, [5, 6])
            )


GRADED_PHRASES = {
    "with_temperature": ["p ** (1 / T)", "first maximum", "1e-9", "(m, V)", "T = 0.01"],
    "draft": [
        "rng.choice(V, p=q_i)",
        "Must not be modified",
        "Make no other draws",
        "(1 point) k = 0",
        "k >= 0",
    ],
    "speculative_decode": [
        "exactly one target_model.probs_along(context, drafted) call",
        "(drafted, accepted, emitted)",
        "T = 1 and T = 0.5",
        "plain greedy decoding",
        "replaced by correct ones",
    ],
    "measured_alpha": ["tested", "accepted + 1"],
    "tokens_per_pass": ["mean, over the passes, of the tokens each one emitted"],
    "improvement_factor": ["Theorem 3.8", "at alpha == 1 the limit", "relative 1e-9"],
    "best_k": ["0..k_max", "smallest such k on ties"],
    "speculative_decode_cached": [
        "exactly one target.forward(text[len(target.cache):] +",
        "truncate both caches to len(text) - 1 entries",
        "the last one included",
        "or one entry fewer",
        "plain greedy decoding",
        "replaced by a correct one",
    ],
    "speculation_pays": ["improvement factor above 1", "ties alpha == c included"],
}


def test_the_notebook_cache_behaves_as_the_reference_cache():
    """The visible KVCache and CachedModel, which learners use, and the ones the hidden tests
    pass in (specdec_reference.kvcache) append, truncate and score alike."""
    from specdec_reference import kvcache
    from specdec_reference.testing import e7_4

    ns = LESSON.run(only=set()).namespace
    target, _ = e7_4.models()
    mine, ref = ns["CachedModel"](target), kvcache.CachedModel(target)
    for step in (e7_4.ngram.encode("def f"), [5], e7_4.ngram.encode("(x)")):
        assert np.array_equal(mine.forward(step), ref.forward(step))
        assert mine.cache.tokens == ref.cache.tokens and len(mine.cache) == len(ref.cache)
    for n in (9, 4, 4, 0):
        mine.cache.truncate(n)
        ref.cache.truncate(n)
        assert mine.cache.tokens == ref.cache.tokens
    for cache in (mine.cache, ref.cache):
        with pytest.raises(ValueError):
            cache.truncate(-1)


def test_the_temperature_test_says_the_target_must_be_tempered():
    cell = TEST_CELLS["test_speculative_decode_exact_at_temperature"].source
    assert "the target must be tempered" in cell.splitlines()[0]
    assert "q must be tempered" not in cell


def test_the_source_states_the_temperature_facts_as_they_are():
    """Exact for any draft distribution; only an untempered target or a wrong q breaks it."""
    text = " ".join(" ".join(c.source.split()) for c in LESSON.source_nb.cells)
    assert "both must use the same" not in text and "Tempering only one" not in text
    for phrase in (
        "the **target** must be tempered",
        "the **draft** may sample from any distribution",
        "the $q$ given to `verify` must be the one sampled from",
    ):
        assert phrase in text, phrase
