"""Helpers shared by the hidden tests of lesson E7.4, *Speculative decoding end to end*.

The notebook's hidden cells call these with the learner's function as an argument,
for instance ``_e74.check_draft_rows(draft, models, ...)``; every failure is an
``AssertionError`` whose message names the call, what was expected and, when the
wrong result matches one, the common mistake behind it.  The models are built here
from the reference (:mod:`specdec_reference.ngram`), on the same standard-library
files as the notebook's, so every expected value is computed at run time from the
Python version that runs the notebook.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from .. import decoding, kvcache, ngram
from .. import sampling as _sampling
from .calls import call_or_fail
from .compare import Mistakes, check_close
from .convert import as_bool, as_int, describe_call

__all__ = [
    "DRAFT_ORDER",
    "TARGET_ORDER",
    "CacheRecorder",
    "Recorder",
    "check_cached_decode",
    "check_decode_passes",
    "check_distribution",
    "check_draft_empty",
    "check_draft_follows_q",
    "check_draft_rows",
    "check_greedy_equivalence",
    "check_sequence_distribution",
    "check_speculation_pays",
    "check_stat",
    "improvement_by_sum",
    "check_with_temperature",
    "models",
    "tokens",
]

TARGET_ORDER, DRAFT_ORDER = 5, 3
_MODELS_KEY = "_e74_models"


def models(namespace: MutableMapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Return ``(target, draft)``: the lesson's order-5 and order-3 models, built once.

    With a notebook namespace the pair is kept there (under ``_e74_models``) for the
    later test cells of the same kernel.

    Examples
    --------
    >>> target, draft = models()
    >>> target.order, draft.order
    (5, 3)
    """
    if namespace is not None and _MODELS_KEY in namespace:
        return namespace[_MODELS_KEY]
    data = ngram.encode(ngram.corpus_text())
    pair = (ngram.train_ngram(data, TARGET_ORDER), ngram.train_ngram(data, DRAFT_ORDER))
    if namespace is not None:
        namespace[_MODELS_KEY] = pair
    return pair


class Recorder:
    """A model that records every call made to it, then answers as ``model`` does.

    ``calls`` holds ``("probs", context)`` and ``("probs_along", context, tokens)``
    tuples, with the arguments copied to lists of ints at the time of the call.

    Examples
    --------
    >>> target, _ = models()
    >>> rec = Recorder(target)
    >>> rec.probs_along([1, 2], [3]).shape, rec.calls
    ((2, 96), [('probs_along', [1, 2], [3])])
    """

    def __init__(self, model: Any, log: list[tuple] | None = None, name: str = "model"):
        self.model = model
        self.vocab_size = model.vocab_size
        self.order = model.order
        self.calls: list[tuple] = []
        self._log, self._name = log, name

    def _record(self, call: tuple) -> None:
        self.calls.append(call)
        if self._log is not None:  # shared by two models: the order of their calls
            self._log.append((self._name, *call))

    def probs(self, context: Sequence[int]) -> np.ndarray:
        self._record(("probs", _ints(context)))
        return self.model.probs(context)

    def probs_along(self, context: Sequence[int], tokens: Sequence[int]) -> np.ndarray:
        self._record(("probs_along", _ints(context), _ints(tokens)))
        return self.model.probs_along(context, tokens)


def _ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def tokens(got: Any, call: str, what: str = "a list of tokens (ints)") -> list[int]:
    """Return a learner's token list as Python ints, or fail with a message.

    Examples
    --------
    >>> tokens((1, 2), "f()")
    [1, 2]
    """
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected {what}."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in got]


def _rows(got: Any, shape: tuple[int, int], call: str) -> np.ndarray:
    try:
        arr = np.array(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{call} returned rows {got!r}, expected a {shape} array") from None
    if shape[0] == 0 and arr.size == 0:
        return arr.reshape(shape)
    if arr.shape != shape:
        raise AssertionError(f"{call} returned rows of shape {arr.shape}, expected {shape}.")
    return arr


def _max_gap(a: np.ndarray, b: np.ndarray) -> float:
    return max(
        (abs(float(x) - float(y)) for x, y in zip(a.ravel(), b.ravel(), strict=True)), default=0.0
    )


# ---------------------------------------------------------------------------
# with_temperature
# ---------------------------------------------------------------------------


def check_with_temperature(fn: Callable[..., Any], probs: Any, temperature: float) -> None:
    """Compare ``fn(probs, temperature)`` with the reference; name the usual mistakes.

    Examples
    --------
    >>> check_with_temperature(lambda p, t: p, [0.2, 0.8], 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: with_temperature([0.2, 0.8], 0.5) returned [0.2, 0.8], expected ...
    """
    call = describe_call("with_temperature", probs, temperature)
    p = np.asarray(probs, dtype=float)
    got = call_or_fail(fn, probs, temperature, call=call)
    try:
        values = np.array(got, dtype=float)
    except (TypeError, ValueError):
        values = None
    if values is None or values.shape != p.shape:
        shape = None if values is None else values.shape
        raise AssertionError(
            f"{call} returned {got!r} (shape {shape}), expected an array of shape {p.shape}."
            + (" Did you forget return?" if got is None else "")
        )
    expected = decoding.with_temperature(p, temperature)
    if _max_gap(values, expected) <= 1e-9:
        return
    mistakes = {}
    if temperature > 0:
        powered = p**temperature
        mistakes["raising p to the power T instead of 1/T"] = (
            powered / powered.sum(axis=-1, keepdims=True),
            "p ** (1 / T): a small T must sharpen the distribution",
        )
        mistakes["p ** (1 / T) without renormalizing"] = (
            p ** (1 / temperature),
            "divide by the sum along the last axis so that each row sums to 1",
        )
        mistakes["dividing the probabilities by T, which changes nothing once normalized"] = (
            p,
            "temperature divides the logits log(p), not the probabilities",
        )
    hint = ""
    for name, (value, advice) in mistakes.items():
        if value.shape == values.shape and _max_gap(values, value) <= 1e-9:
            hint = f" That is {name}: {advice}."
            break
    if temperature == 0 and not np.isfinite(values).all():
        hint = " At T = 0 dividing by T fails: put all the mass on the first maximum instead."
    shown = np.array2string(values, precision=4, separator=", ", threshold=12)
    wanted = np.array2string(expected, precision=4, separator=", ", threshold=12)
    raise AssertionError(f"{call} returned {shown}, expected {wanted}.{hint}")


# ---------------------------------------------------------------------------
# draft
# ---------------------------------------------------------------------------


def check_draft_rows(
    fn: Callable[..., Any],
    model: Any,
    context: Sequence[int],
    k: int,
    temperature: float,
    seed: int,
) -> list[int]:
    """Run ``fn(model, context, k, rng, temperature)`` and check what it returned.

    The tokens must be ``k`` in-vocabulary ints; row ``i`` must be the tempered draft
    distribution after ``context + tokens[:i]`` (the distribution token ``i`` was
    drawn from); ``context`` must come back unchanged.  Returns the tokens.
    """
    given = list(context)
    call = (
        f"draft(draft_model, {ngram.decode(given)!r} (as tokens), {k}, "
        f"np.random.default_rng({seed}), temperature={temperature})"
    )
    got = call_or_fail(fn, model, given, k, np.random.default_rng(seed), temperature, call=call)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, rows).")
    drafted = tokens(got[0], call)
    if given != list(context):
        raise AssertionError(
            f"{call} changed the context list it was given (it now ends "
            f"{ngram.decode(given[-12:])!r}): that is the cache-rollback mistake in the "
            "making, the caller's text now holds drafted tokens. Extend a copy instead."
        )
    if len(drafted) != k or not all(0 <= t < model.vocab_size for t in drafted):
        raise AssertionError(f"{call} returned tokens {drafted}, expected {k} tokens in 0..95.")
    rows = _rows(got[1], (k, model.vocab_size), call)
    for i in range(k):
        raw = model.probs(given + drafted[:i])
        expected = decoding.with_temperature(raw, temperature)
        if _max_gap(rows[i], expected) <= 1e-9:
            continue
        if temperature != 1 and _max_gap(rows[i], raw) <= 1e-9:
            raise AssertionError(
                f"{call}: row {i} is the draft's distribution at temperature 1, but the "
                f"tokens must be drawn at temperature {temperature}. That is reporting q at "
                "T = 1 while sampling at T: return the tempered row you sampled from, or "
                "the accept step tests the wrong q and the output is no longer exact."
            )
        if (
            i
            and _max_gap(rows[i], decoding.with_temperature(model.probs(given), temperature)) < 1e-9
        ):
            raise AssertionError(
                f"{call}: row {i} is the distribution after the context alone. Token {i} "
                "continues the tokens drafted before it: extend the context with each one."
            )
        raise AssertionError(
            f"{call}: row {i} is not with_temperature(draft_model.probs(context + "
            f"tokens[:{i}]), temperature), the distribution token {i} was drawn from "
            f"(largest difference {_max_gap(rows[i], expected):.3g})."
        )
    return drafted


def check_draft_follows_q(
    fn: Callable[..., Any],
    model: Any,
    *,
    prompt: str,
    temperature: float,
    draws: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``fn``'s one-token drafts after ``prompt`` follow the tempered draft.

    ``draws`` calls ``fn(model, prompt, 1, rng, temperature)`` share one
    ``np.random.default_rng(seed)``; :func:`check_distribution` compares the drafted
    tokens with ``with_temperature(model.probs(prompt), temperature)``.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = f"{draws} calls of draft(draft_model, {prompt!r}, 1, rng, temperature={temperature})"
    counts: dict[str, int] = {}
    for _ in range(draws):
        got = call_or_fail(fn, model, list(context), 1, rng, temperature, call=call)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call}: a call returned {got!r}, expected (tokens, rows).")
        drafted = tokens(got[0], call)
        if len(drafted) != 1:
            raise AssertionError(f"{call}: a call returned tokens {drafted}, expected one.")
        counts[ngram.ALPHABET[drafted[0]]] = counts.get(ngram.ALPHABET[drafted[0]], 0) + 1
    raw = model.probs(context)
    by_char = {
        "target": decoding.with_temperature(raw, temperature),
        "sampling at temperature 1": raw,
    }
    dists = {
        name: {ngram.ALPHABET[i]: float(v) for i, v in enumerate(d)} for name, d in by_char.items()
    }
    check_distribution(
        counts,
        dists["target"],
        call=call,
        failure_prob=failure_prob,
        label="drafted token",
        mistakes={
            "sampling at temperature 1": (
                dists["sampling at temperature 1"],
                "draw each token from with_temperature(q, temperature)",
            )
        },
    )


# ---------------------------------------------------------------------------
# Distributions
# ---------------------------------------------------------------------------


def check_distribution(
    counts: Mapping[Any, int],
    probs: Mapping[Any, float],
    *,
    call: str,
    failure_prob: float,
    min_prob: float = 0.01,
    label: str = "outcome",
    mistakes: Mapping[str, tuple[Mapping[Any, float], str]] | None = None,
    advice: str = "",
) -> None:
    """Fail unless the empirical distribution of ``counts`` is near ``probs`` in L1 distance.

    Outcomes with probability ``>= min_prob`` are categories of their own, the rest
    one category "other" (so the test is fixed before any draw).  With ``n`` draws,
    ``D = sum |freq - prob|`` over the categories changes by at most ``2 / n`` when
    one draw changes, so McDiarmid's inequality gives
    :math:`P(D \\ge E[D] + t) \\le e^{-n t^2 / 2}`, and
    :math:`E[D] \\le \\sum_i \\sqrt{p_i (1 - p_i) / n}`.  The tolerance
    :math:`\\sum_i \\sqrt{p_i(1-p_i)/n} + \\sqrt{2 \\ln(1/\\delta) / n}` is exceeded
    by a correct sampler with probability below ``failure_prob`` = :math:`\\delta`.
    A mistake's distribution is named when the observed one is nearer to it.

    Examples
    --------
    >>> check_distribution({"a": 700, "b": 300}, {"a": 0.5, "b": 0.5}, call="1000 draws",
    ...                    failure_prob=1e-6)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: 1000 draws: the outcome frequencies are 0.4 away from the expected
    distribution in L1 distance, more than the tolerance 0.198 (n = 1000; a correct
    sampler lands outside with probability below 1e-06). Largest gaps: 'b' 0.3 vs 0.5,
    'a' 0.7 vs 0.5.
    """
    n = sum(int(c) for c in counts.values())
    if n < 1:
        raise AssertionError(f"{call}: no draws were recorded.")
    keys = [key for key, p in probs.items() if p >= min_prob]

    def coarse(dist: Mapping[Any, float], total: float) -> list[float]:
        kept = [float(dist.get(key, 0.0)) / total for key in keys]
        return [*kept, max(0.0, 1.0 - sum(kept))]

    expected = coarse(probs, 1.0)
    observed = coarse(counts, float(n))
    distance = sum(abs(o - e) for o, e in zip(observed, expected, strict=True))
    tol = sum(math.sqrt(e * (1 - e) / n) for e in expected)
    tol += math.sqrt(2 * math.log(1 / failure_prob) / n)
    if distance <= tol:
        return
    gaps = sorted(range(len(keys)), key=lambda i: -abs(observed[i] - expected[i]))[:3]
    shown = ", ".join(f"{keys[i]!r} {observed[i]:.3g} vs {expected[i]:.3g}" for i in gaps)
    hint = ""
    nearest = distance
    for name, (dist, why) in (mistakes or {}).items():
        other = coarse(dist, 1.0)
        gap = sum(abs(o - m) for o, m in zip(observed, other, strict=True))
        if gap < nearest:  # the mistake nearest to what was observed, if nearer than probs
            nearest, hint = gap, f" The frequencies are nearer to {name}: {why}."
    if not hint and advice:
        hint = f" {advice[0].upper()}{advice[1:]}."
    raise AssertionError(
        f"{call}: the {label} frequencies are {distance:.3g} away from the expected "
        f"distribution in L1 distance, more than the tolerance {tol:.3g} (n = {n}; a correct "
        f"sampler lands outside with probability below {failure_prob:g}). Largest gaps: "
        f"{shown}.{hint}"
    )


def first_token_mistakes(
    target: Any, draft_model: Any, prompt: Sequence[int], temperature: float
) -> dict[str, tuple[dict[str, float], str]]:
    """Return the first-character distributions of two common decoder mistakes, by text.

    Examples
    --------
    >>> target, draft_model = models()
    >>> sorted(first_token_mistakes(target, draft_model, ngram.encode("def "), 0.7))[0]
    'q at temperature 1 while sampling at T'
    """
    raw_q = draft_model.probs(prompt)
    q = decoding.with_temperature(raw_q, temperature)
    p = decoding.with_temperature(target.probs(prompt), temperature)
    overlap = np.minimum(p, q)
    from_p = overlap + (1 - overlap.sum()) * p
    out = {
        "resampling from p instead of the residual": (
            from_p,
            "after a rejection the verify step must draw from max(0, p - q), normalized",
        )
    }
    if temperature != 1:
        # An untempered target p verified against the tempered q emits the raw p exactly.
        out["the target not tempered"] = (
            target.probs(prompt),
            "temper the target's rows too, p = with_temperature(target_model.probs_along("
            "context, drafted), temperature): the output follows whatever p verify is given",
        )
        accept = q * np.minimum(1.0, p / raw_q)
        residual = np.maximum(0.0, p - raw_q)
        wrong_q = accept + (1 - accept.sum()) * residual / residual.sum()
        out["q at temperature 1 while sampling at T"] = (
            wrong_q,
            "the q given to the accept step must be the tempered distribution the draft "
            "sampled from",
        )
    return {
        name: ({ngram.ALPHABET[i]: float(v) for i, v in enumerate(dist)}, advice)
        for name, (dist, advice) in out.items()
    }


def check_sequence_distribution(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    length: int,
    k: int,
    temperature: float,
    runs: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``fn``'s first ``length`` characters after ``prompt`` follow the target.

    ``runs`` calls ``fn(target, draft_model, prompt, length, k, rng, temperature)``
    share one ``np.random.default_rng(seed)``; the counts of the generated strings
    are compared with :func:`~specdec_reference.decoding.prefix_distribution` of the
    (tempered) target by :func:`check_distribution`.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = (
        f"speculative_decode(target_model, draft_model, {prompt!r}, n={length}, k={k}, rng, "
        f"temperature={temperature}) over {runs} runs sharing np.random.default_rng({seed})"
    )
    counts: dict[str, int] = {}
    firsts: dict[str, int] = {}
    for _ in range(runs):
        got = call_or_fail(
            fn, target, draft_model, list(context), length, k, rng, temperature, call=call
        )
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call}: a run returned {got!r}, expected (tokens, stats).")
        text = ngram.decode(tokens(got[0], call)[:length])
        if len(text) != length:
            raise AssertionError(f"{call}: a run returned {text!r}, expected {length} tokens.")
        counts[text] = counts.get(text, 0) + 1
        firsts[text[0]] = firsts.get(text[0], 0) + 1
    exact = decoding.prefix_distribution(target, context, length, temperature)
    probs = {
        ngram.decode(ix): float(exact[ix]) for ix in zip(*np.nonzero(exact >= 1e-4), strict=True)
    }
    first = decoding.with_temperature(target.probs(context), temperature)
    check_distribution(
        firsts,
        {ngram.ALPHABET[i]: float(v) for i, v in enumerate(first)},
        call=call + ", first character",
        failure_prob=failure_prob / 2,
        label="first character",
        mistakes=first_token_mistakes(target, draft_model, context, temperature),
    )
    check_distribution(
        counts,
        probs,
        call=call,
        failure_prob=failure_prob / 2,
        label=f"{length}-character string",
        advice="the usual causes are resampling from p instead of the residual, a q that is "
        "not the distribution the draft sampled from, a target that is not tempered, and a "
        "target context that keeps rejected drafted tokens",
    )


# ---------------------------------------------------------------------------
# speculative_decode: passes, statistics, greedy
# ---------------------------------------------------------------------------


def _decoded(
    got: Any, call: str, n: int, prompt_intact: bool
) -> tuple[list[int], list[tuple[int, ...]]]:
    """A decoder's ``(tokens, stats)`` as lists of ints, or a failure that says what is wrong."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, stats).")
    out = tokens(got[0], call)
    if not prompt_intact:
        raise AssertionError(f"{call} changed the prompt list it was given; extend a copy.")
    try:
        stats = [tuple(int(x) for x in row) for row in got[1]]
    except (TypeError, ValueError):
        raise AssertionError(
            f"{call} returned stats {got[1]!r}, expected a list of (drafted, accepted, "
            "emitted) tuples."
        ) from None
    if len(out) != n:
        raise AssertionError(f"{call} returned {len(out)} tokens, expected n = {n}.")
    return out, stats


def _pass_emitted(
    row: tuple[int, ...],
    k: int,
    out: list[int],
    produced: list[int],
    drafted: list[int],
    where: str,
) -> list[int]:
    """The tokens one pass added to ``out``, after checking its stats row against them."""
    if len(row) != 3:
        raise AssertionError(f"{where}: stats row {row}, expected (drafted, accepted, emitted).")
    d, a, e = row
    if d != k or not 0 <= a <= k or e != a + 1:
        hint = (
            " That is the draft without the bonus token: when all k are accepted the "
            "same target pass adds one more token."
            if a == k and e == k
            else ""
        )
        raise AssertionError(
            f"{where}: stats row {row}, expected (k, accepted, accepted + 1) with k = {k}.{hint}"
        )
    emitted = out[len(produced) : len(produced) + e]
    if emitted[:a] != drafted[:a][: len(emitted)]:
        raise AssertionError(
            f"{where}: the pass reports {a} accepted tokens, but the tokens it added, "
            f"{ngram.decode(emitted)!r}, do not start with the first {a} drafted ones, "
            f"{ngram.decode(drafted[:a])!r}."
        )
    return emitted


def check_decode_passes(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    k: int,
    temperature: float,
    seed: int,
) -> None:
    """Run ``fn`` with recording models and check every pass against the algorithm.

    Each pass must make exactly one ``target.probs_along(context, drafted)`` call with
    ``context = prompt + tokens so far`` (the rollback) and ``k`` drafted tokens; the
    draft's calls before it must be on that context, extended by the pass's drafted
    tokens only (a stale draft context is the draft-side rollback mistake); its
    tokens must be the accepted prefix of ``drafted`` and then one more token;
    ``stats`` must say ``(k, accepted, accepted + 1)``; the output must have ``n``
    tokens, and the decoder must stop once it has them.
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    rec_target = Recorder(target, log, "target")
    rec_draft = Recorder(draft_model, log, "draft")
    call = (
        f"speculative_decode(target_model, draft_model, {prompt!r}, n={n}, k={k}, "
        f"np.random.default_rng({seed}), temperature={temperature})"
    )
    given = list(context)
    got = call_or_fail(
        fn, rec_target, rec_draft, given, n, k, np.random.default_rng(seed), temperature, call=call
    )
    out, stats = _decoded(got, call, n, given == context)
    passes = [c for c in rec_target.calls if c[0] == "probs_along"]
    if any(c[0] == "probs" for c in rec_target.calls):
        raise AssertionError(
            f"{call} called target_model.probs: verify each draft with one "
            "target_model.probs_along(context, drafted) call, the one target pass."
        )
    if len(stats) != len(passes):
        raise AssertionError(
            f"{call} made {len(passes)} target passes but returned {len(stats)} stats rows: "
            "one (drafted, accepted, emitted) per pass."
        )
    draft_calls = _draft_calls_by_pass(log, len(passes))
    produced: list[int] = []
    for i, ((_, ctx, drafted), row) in enumerate(zip(passes, stats, strict=True)):
        where = f"{call}, pass {i + 1}"
        if len(row) != 3:
            raise AssertionError(
                f"{where}: stats row {row}, expected (drafted, accepted, emitted)."
            )
        if ctx != context + produced:
            extra = ngram.decode(ctx[len(context) :])
            raise AssertionError(
                f"{where}: the target was run on the context prompt + {extra!r}, but the "
                f"text so far is prompt + {ngram.decode(produced)!r}. That is the "
                "cache-rollback mistake: drafted tokens after a rejection must be discarded; "
                "the next pass starts from the emitted tokens only."
            )
        if len(drafted) != k:
            raise AssertionError(f"{where}: {len(drafted)} tokens were verified, expected k = {k}.")
        _check_draft_contexts(draft_calls[i], context, produced, drafted, where)
        produced += _pass_emitted(row, k, out, produced, drafted, where)
        if len(produced) >= n and i + 1 < len(passes):
            raise AssertionError(f"{where}: {n} tokens were out, yet the decoder went on.")
    if len(produced) < n:
        raise AssertionError(
            f"{call}: the passes account for {len(produced)} tokens, but {n} were returned. "
            "Did a pass emit more tokens than accepted + 1?"
        )
    if produced[:n] != out:
        raise AssertionError(f"{call}: the returned tokens are not the passes' tokens in order.")


def _draft_calls_by_pass(log: Sequence[tuple], passes: int) -> list[list[list[int]]]:
    """The contexts of the draft's calls, grouped by the target pass that followed them."""
    groups: list[list[list[int]]] = [[] for _ in range(max(passes, 1))]
    current = 0
    for who, kind, ctx, *_ in log:
        if who == "target" and kind == "probs_along":
            current += 1
        elif who == "draft" and current < len(groups):
            groups[current].append(ctx)
    return groups


def _check_draft_contexts(
    contexts: Sequence[list[int]],
    prompt: list[int],
    produced: list[int],
    drafted: list[int],
    where: str,
) -> None:
    """Fail unless the draft was run on prompt + the emitted tokens (+ drafted ones)."""
    base = prompt + produced
    if drafted and not contexts:
        raise AssertionError(
            f"{where}: {len(drafted)} tokens were drafted, but draft_model was never called "
            "in this pass: draft each pass's tokens with draft(draft_model, context, k, ...)."
        )
    for ctx in contexts:
        grown = ctx[len(base) :]
        if ctx[: len(base)] == base and grown == drafted[: len(grown)]:
            continue
        raise AssertionError(
            f"{where}: the draft was run on the context prompt + "
            f"{ngram.decode(ctx[len(prompt) :])!r}, but the text so far is prompt + "
            f"{ngram.decode(produced)!r}. That is the draft-side cache-rollback mistake: "
            "the draft must continue the emitted text, not a stale context (the prompt "
            "alone, or one that keeps rejected tokens). The output stays exact, because "
            "verify tests the q the draft sampled from, but the draft proposes for a text "
            "that was never written and far fewer tokens are accepted."
        )
    if drafted and base not in [list(c) for c in contexts]:
        raise AssertionError(
            f"{where}: no draft call was made on prompt + the tokens emitted so far "
            f"({ngram.decode(produced)!r}): the first drafted token continues the emitted text."
        )


def check_greedy_equivalence(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    k: int,
    cached: bool = False,
) -> None:
    """Fail unless ``fn`` at temperature 0 reproduces plain greedy decoding with the target.

    With ``cached``, ``fn`` is ``speculative_decode_cached`` and gets the two models
    behind fresh :class:`~specdec_reference.kvcache.CachedModel` caches.
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    if cached:
        call = _cached_call(prompt, n, k, 0, "rng")
        models_given = (
            CacheRecorder(target, log, "target"),
            CacheRecorder(draft_model, log, "draft"),
        )
        why = (
            "the output must be the target's greedy text; when it drifts after a rejection, "
            "the target's cache still holds the rejected drafted tokens (truncate it to "
            "len(text) - 1 after each pass)."
        )
    else:
        call = (
            f"speculative_decode(target_model, draft_model, {prompt!r}, n={n}, k={k}, rng, "
            "temperature=0)"
        )
        models_given = (target, draft_model)
        why = (
            "both models put all their mass on their argmax, so the accept step keeps a "
            "drafted token only when it is the target's argmax, and the output must be the "
            "target's greedy text."
        )
    try:
        got = call_or_fail(
            fn, *models_given, list(context), n, k, np.random.default_rng(0), 0.0, call=call
        )
    except AssertionError as exc:  # a cache left too long often ends in an IndexError
        _check_feeds(log, k, call, f" The decoder then failed: {exc}")
        raise
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, stats).")
    out = tokens(got[0], call)
    plain = decoding.generate(target, context, n, None, temperature=0)
    if out == plain:
        return
    first = next((i for i in range(min(len(out), n)) if out[i] != plain[i]), min(len(out), n))
    raise AssertionError(
        f"{call} gave {ngram.decode(out)!r}, plain greedy decoding with the target gives "
        f"{ngram.decode(plain)!r}: they differ from character {first}. At T = 0 {why}"
    )


def check_draft_empty(fn: Callable[..., Any], model: Any) -> None:
    """Fail unless ``fn(model, context, 0, rng, T)`` returns no tokens and no rows, drawing nothing.

    The rows may be a ``(0, V)`` array or anything else with no element (an empty list).
    """
    V = model.vocab_size
    for text, temperature in (("def ", 1.0), ("x", 0.5), ("\n", 0.0)):
        context = ngram.encode(text)
        rng = np.random.default_rng(7406)
        before = rng.bit_generator.state
        call = f"draft(draft_model, {text!r} (as tokens), 0, rng, temperature={temperature})"
        got = call_or_fail(
            fn,
            model,
            list(context),
            0,
            rng,
            temperature,
            call=call,
            hint="With k = 0 the loop runs no time: build the (0, V) rows without "
            "np.stack([]) (np.array(rows).reshape(k, V), or np.empty((0, V))).",
        )
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call} returned {got!r}, expected ([], rows of shape (0, {V})).")
        drafted = tokens(got[0], call)
        if drafted:
            raise AssertionError(f"{call} returned tokens {drafted}, expected none.")
        try:
            shape = np.shape(got[1])
        except ValueError:  # a ragged list
            shape = None
        if shape is None or 0 not in shape or (len(shape) == 2 and shape != (0, V)):
            raise AssertionError(
                f"{call} returned rows of shape {shape}, expected (0, {V}): no rows (an empty "
                f"list also does), one per drafted token."
            )
        if rng.bit_generator.state != before:
            raise AssertionError(f"{call} drew from rng, but k = 0 tokens need no draw.")


# ---------------------------------------------------------------------------
# speculative_decode_cached: the key-value caches and their rollback
# ---------------------------------------------------------------------------


class CacheRecorder(kvcache.CachedModel):
    """A :class:`~specdec_reference.kvcache.CachedModel` that logs each ``forward`` call.

    ``log`` (shared by the two models) gets ``(name, cache tokens before the call, fed
    tokens)``.

    Examples
    --------
    >>> target, _ = models()
    >>> log = []
    >>> rec = CacheRecorder(target, log, "target")
    >>> rec.forward([1, 2]).shape, log
    ((2, 96), [('target', [], [1, 2])])
    """

    def __init__(self, model: Any, log: list[tuple], name: str) -> None:
        super().__init__(model)
        self._log, self._name = log, name

    def forward(self, tokens: Sequence[int]) -> np.ndarray:
        fed = _ints(tokens) if len(tokens) else []
        self._log.append((self._name, list(self.cache.tokens), fed))
        return super().forward(fed)


def _cached_call(prompt: str, n: int, k: int, temperature: float, rng: str) -> str:
    return (
        f"speculative_decode_cached(CachedModel(target_model), CachedModel(draft_model), "
        f"{prompt!r}, n={n}, k={k}, {rng}, temperature={temperature})"
    )


def _check_cache_after(
    name: str,
    cache: list[int],
    text: list[int],
    prompt: list[int],
    where: str,
    length: int | None = None,
) -> None:
    """Fail unless the cache after a pass is what the rollback leaves (see kvcache).

    ``text`` is the text as far as it is known; ``length`` its true length when the
    last pass emitted more tokens than the decoder returned.
    """
    want = (len(text) if length is None else length) - 1
    shown = ngram.decode(cache[len(prompt) :]) if cache[: len(prompt)] == prompt else None
    known = min(len(cache), len(text))
    if cache[:known] != text[:known] or len(cache) > want:
        held = f"prompt + {shown!r}" if shown is not None else repr(ngram.decode(cache))
        if name == "target":
            why = (
                "it goes on scoring a context that was never emitted, so the next pass "
                "verifies against the wrong text and the output is no longer the target's"
            )
        else:
            why = (
                "it drafts continuations of a text that was never emitted (still exact, "
                "since verify tests the q it sampled from, but fewer tokens are accepted)"
            )
        raise AssertionError(
            f"{where}: the {name}'s cache holds {len(cache)} entries, {held}, but the text "
            f"is prompt + {ngram.decode(text[len(prompt) :])!r}. That is the cache-rollback "
            f"mistake: after each pass truncate the {name}'s cache to len(text) - 1 = {want}, "
            f"or {why}."
        )
    low = want if name == "target" else want - 1
    if len(cache) < low:
        raise AssertionError(
            f"{where}: the {name}'s cache holds {len(cache)} entries, but after this pass it "
            f"should keep {want} (every emitted token but the last"
            + (", or one fewer for the draft" if name == "draft" else "")
            + "): it was cut back further than the rollback needs, so those positions are "
            "computed again."
        )


def _check_feeds(log: Sequence[tuple], k: int, call: str, then: str) -> None:
    """Fail if a forward call was fed too little: the symptom of a cache left too long.

    A correct pass feeds the target the last emitted token and the ``k`` drafted ones,
    and the draft at least the last emitted token, so fewer means the cache already
    held positions past the emitted text.
    """
    passes = 0
    for who, cache, fed in log:
        passes += who == "target"
        if who == "target" and len(fed) < k + 1:
            raise AssertionError(
                f"{call}, pass {passes}: the target's cache held {len(cache)} entries and it "
                f"was fed only {len(fed)} tokens, fewer than the last emitted token and the "
                f"k = {k} drafted ones: its cache still holds drafted tokens from an earlier "
                "pass. That is the cache-rollback mistake: after each pass truncate both caches "
                "to len(text) - 1, or the target scores a context that was never emitted." + then
            )
        if who == "draft" and not fed:
            raise AssertionError(
                f"{call}, pass {passes + 1}: the draft was fed nothing, its cache of "
                f"{len(cache)} entries already reaching past the emitted text. That is the "
                "cache-rollback mistake: after each pass truncate the draft's cache too, to "
                "len(text) - 1." + then
            )


def check_cached_decode(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    k: int,
    temperature: float,
    seed: int,
) -> None:
    """Run ``fn`` with two recording cached models; check both caches after every pass.

    Each pass must feed the target once, with the tokens its cache lacks, the last
    emitted token and ``k`` drafted ones; after each pass (seen before the next pass's
    first call, and at the end) the target's cache must be the text less its last
    token and the draft's the same or one entry shorter; the draft must only be fed
    the emitted text and the pass's drafted tokens; ``stats`` and the tokens must
    agree with the passes, as in :func:`check_decode_passes`.
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    rec_target = CacheRecorder(target, log, "target")
    rec_draft = CacheRecorder(draft_model, log, "draft")
    call = _cached_call(prompt, n, k, temperature, f"np.random.default_rng({seed})")
    given = list(context)
    try:
        got = call_or_fail(
            fn,
            rec_target,
            rec_draft,
            given,
            n,
            k,
            np.random.default_rng(seed),
            temperature,
            call=call,
        )
    except AssertionError as exc:  # a cache left too long often ends in an IndexError
        _check_feeds(log, k, call, f" The decoder then failed: {exc}")
        raise
    _check_feeds(log, k, call, "")
    out, stats = _decoded(got, call, n, given == context)
    passes = [i for i, entry in enumerate(log) if entry[0] == "target"]
    if len(stats) != len(passes):
        raise AssertionError(
            f"{call} fed the target {len(passes)} times but returned {len(stats)} stats rows: "
            "one target.forward call per pass, and one (drafted, accepted, emitted) row."
        )
    produced: list[int] = []
    for i, (at, row) in enumerate(zip(passes, stats, strict=True)):
        where = f"{call}, pass {i + 1}"
        text = context + produced
        start = passes[i - 1] + 1 if i else 0
        firsts: dict[str, list[int]] = {}
        for who, cache, _ in log[start : at + 1]:
            firsts.setdefault(who, cache)
        if i:  # the caches as the previous pass left them
            for name in ("target", "draft"):
                if name in firsts:
                    _check_cache_after(name, firsts[name], text, context, f"{call}, after pass {i}")
        _, before, fed = log[at]
        scored = before + fed
        drafted = scored[len(text) :]
        if len(before) > len(text) - 1 or scored[: len(text)] != text or len(drafted) != k:
            raise AssertionError(
                f"{where}: the target's cache held {len(before)} entries and was fed "
                f"{ngram.decode(fed)!r}, so it scored prompt + "
                f"{ngram.decode(scored[len(context) :])!r}; the pass must score prompt + "
                f"{ngram.decode(produced)!r} and then the {k} drafted tokens: feed the tokens "
                "its cache lacks (the last emitted one) followed by the draft, in one call."
            )
        for who, cache, fed_draft in log[start:at]:
            seen = cache + fed_draft
            grown = seen[len(text) :]
            if who == "draft" and (
                seen[: len(text)] != text[: len(seen)] or grown != drafted[: len(grown)]
            ):
                raise AssertionError(
                    f"{where}: the draft was fed {ngram.decode(fed_draft)!r} after a cache of "
                    f"{len(cache)} entries, so it scored prompt + "
                    f"{ngram.decode(seen[len(context) :])!r}, which is neither the text so far "
                    f"(prompt + {ngram.decode(produced)!r}) nor its continuation by this pass's "
                    "drafted tokens: truncate the draft's cache too, and feed it what it lacks."
                )
        produced += _pass_emitted(row, k, out, produced, drafted, where)
    if len(produced) < n or produced[:n] != out:
        raise AssertionError(f"{call}: the returned tokens are not the passes' tokens in order.")
    length = len(context) + sum(e for _, _, e in stats)  # the last pass may emit past n
    for name, model in (("target", rec_target), ("draft", rec_draft)):
        _check_cache_after(
            name,
            model.cache.tokens,
            context + produced,
            context,
            f"{call}, after the last pass",
            length,
        )


def improvement_by_sum(alpha: float, k: int, c: float) -> float:
    """Theorem 3.8's factor as the plain sum over ``k * c + 1``: exactly 1 at ``k = 1``,
    ``alpha == c``, which the learner's ``speculation_pays`` may rely on.

    Examples
    --------
    >>> improvement_by_sum(0.3, 1, 0.3)
    1.0
    """
    return sum(float(alpha) ** i for i in range(int(k) + 1)) / (int(k) * float(c) + 1.0)


def check_speculation_pays(fn: Callable[..., Any], alpha: float, c: float) -> None:
    """Compare ``fn(alpha, c)`` with ``alpha > c`` (Corollary 3.9); name the usual mistakes."""
    call = describe_call("speculation_pays", alpha, c)
    got = call_or_fail(fn, alpha, c, call=call)
    verdict = as_bool(got, call)
    expected = alpha > c
    if verdict == expected:
        return
    if alpha == c:
        hint = (
            " At alpha = c the best factor is exactly 1, (1 + alpha) / (1 + c) for k = 1: "
            "drafting costs as much as it saves, so it does not pay (compare with >, not >=)."
        )
    elif expected:
        hint = f" With k = 1 the factor is (1 + alpha) / (1 + c) = {(1 + alpha) / (1 + c):.4g} > 1."
    else:
        hint = (
            " No k helps when alpha <= c: each drafted token costs c for sure and is "
            "accepted with probability at most alpha, so E[N] <= 1 + k * alpha <= 1 + k * c."
        )
    raise AssertionError(f"{call} returned {got!r}, expected {expected}.{hint}")


def check_stat(fn: Callable[..., Any], stats: Sequence[tuple[int, int, int]], name: str) -> None:
    """Compare ``measured_alpha`` or ``tokens_per_pass`` on ``stats`` with the reference."""
    call = f"{name}({list(stats)})"
    got = call_or_fail(fn, [tuple(s) for s in stats], call=call)
    accepted = sum(a for _, a, _ in stats)
    drafted = sum(d for d, _, _ in stats)
    passes = len(stats)
    mistakes: Mistakes
    if name == "measured_alpha":
        expected = decoding.measured_alpha(stats)
        mistakes = {
            "accepted over drafted tokens": (
                accepted / drafted if drafted else None,
                "a pass stops testing at its first rejection; the drafted tokens after it "
                "were never tested, so divide by the tested tokens (accepted, plus 1 per "
                "pass that ended in a rejection)",
            ),
            "accepted tokens per pass": (accepted / passes, "divide by tested tokens"),
        }
    else:
        expected = decoding.tokens_per_pass(stats)
        mistakes = {
            "accepted tokens per pass, without the target's own token": (
                accepted / passes,
                "every pass also emits one token of the target (resampled or bonus)",
            ),
        }
    check_close(got, expected, call=call, atol=1e-12, rtol=1e-9, mistakes=mistakes)


def random_stats(rng: np.random.Generator, passes: int, k: int, alpha: float) -> list[tuple]:
    """Return per-pass statistics of a decoder that accepts each token with ``alpha``.

    Examples
    --------
    >>> random_stats(np.random.default_rng(0), 2, 3, 1.0)
    [(3, 3, 4), (3, 3, 4)]
    """
    out = []
    for _ in range(passes):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        out.append((k, accepted, accepted + 1))
    return out


#: The verification step the notebook gives learners (lesson E7.3's accept step).
verify = _sampling.speculative_step
