"""Part 3: the decoder's output follows the target, first character and whole strings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding, ngram
from ..calls import call_or_fail
from .distribution import check_distribution
from .shared import tokens


def first_token_mistakes(
    target: Any, draft_model: Any, prompt: Sequence[int], temperature: float
) -> dict[str, tuple[dict[str, float], str]]:
    """Return the first-character distributions of two common decoder mistakes, by text.

    Examples
    --------
    >>> from specdec_reference.testing.e7_4 import models
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
