"""Part 2: the accept step on a deterministic draft, draw by draw and in distribution."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding, lookup, ngram
from ..calls import call_or_fail
from ..compare import check_equal
from ..e7_4.distribution import check_distribution
from ..e7_4.shared import tokens


def _rows_text(rows: np.ndarray) -> str:
    return np.array2string(rows, precision=3, separator=", ", threshold=20)


def check_verify_draws(
    fn: Callable[..., Any], rows: Any, drafted: Sequence[int], seed: int
) -> None:
    """Compare ``fn(rows, drafted, np.random.default_rng(seed))`` with the reference's tokens.

    The reference makes one ``rng.random()`` per tested token, then one ``rng.choice``.

    Examples
    --------
    >>> rows = np.array([[0.5, 0.5], [0.5, 0.5]])
    >>> check_verify_draws(lambda p, d, rng: [0, 0], rows, [1], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: deterministic_verify(...
    """
    p = np.array(rows, dtype=float)
    call = f"deterministic_verify({_rows_text(p)}, {list(drafted)}, np.random.default_rng({seed}))"
    got = tokens(
        call_or_fail(fn, p.copy(), list(drafted), np.random.default_rng(seed), call=call), call
    )
    expected = lookup.deterministic_verify(p, drafted, np.random.default_rng(seed))
    check_equal(
        got,
        expected,
        call=call,
        advice=(
            "for each drafted token one rng.random(), accepted if below p_i(x); at the first "
            "rejection one rng.choice(V, p=residual) and stop; after a fully accepted draft one "
            "rng.choice(V, p=last row)"
        ),
        mistakes=draw_mistakes(p, drafted, seed),
    )


def draw_mistakes(rows: np.ndarray, drafted: Sequence[int], seed: int) -> dict[str, Any]:
    """The tokens of the two wrong accept steps for this seed, by name, with advice.

    Examples
    --------
    >>> rows = np.array([[0.0, 1.0], [0.5, 0.5]])
    >>> draw_mistakes(rows, [0], 0)["accepting every drafted token"][0][0]
    0
    """
    p = np.asarray(rows, dtype=float)
    drafted = [int(x) for x in drafted]
    rng = np.random.default_rng(seed)
    from_p: list[int] = []
    for i, x in enumerate(drafted):
        if rng.random() < p[i, x]:
            from_p.append(x)
            continue
        from_p.append(int(rng.choice(p.shape[1], p=p[i])))
        break
    else:
        from_p.append(int(rng.choice(p.shape[1], p=p[len(drafted)])))
    rng = np.random.default_rng(seed)
    always = drafted + [int(rng.choice(p.shape[1], p=p[len(drafted)]))]
    return {
        "resampling from p instead of p with x removed": (
            from_p,
            "after a rejection the residual max(0, p - q) is p with the drafted token x set "
            "to 0, renormalized",
        ),
        "accepting every drafted token": (
            always,
            "accept x only if rng.random() < p(x), the target's probability of it",
        ),
    }


def _decode(
    verify: Callable[..., Any],
    target: Any,
    prompt: list[int],
    n: int,
    k: int,
    rng: np.random.Generator,
    max_ngram: int,
    call: str,
) -> list[int]:
    """The lesson's decoder with ``verify`` in place of the reference's accept step."""
    out: list[int] = []
    while len(out) < n:
        drafted = lookup.prompt_lookup_draft(prompt + out, k, max_ngram, 1)
        p = target.probs_along(prompt + out, drafted)
        out += tokens(call_or_fail(verify, p, list(drafted), rng, call=call), call)
    return out[:n]


def first_token_mistakes(target: Any, prompt: list[int], k: int, max_ngram: int):
    """The first character's distribution under two wrong accept steps, by text."""
    drafted = lookup.prompt_lookup_draft(prompt, k, max_ngram, 1)
    p = target.probs(prompt)
    if not drafted:
        return {}
    x = drafted[0]
    from_p = p * (1 - p[x])  # resampling from p itself after a rejection
    from_p[x] += p[x]
    always = np.zeros_like(p)
    always[x] = 1.0
    out = {
        "resampling from p instead of p with x removed": (
            from_p,
            "after a rejection the residual max(0, p - q) is p with the drafted token "
            "x set to 0, renormalized",
        ),
        "accepting every drafted token": (
            always,
            "accept x only if rng.random() < p(x), the target's probability of it",
        ),
    }
    return {
        name: ({ngram.ALPHABET[i]: float(v) for i, v in enumerate(d)}, why)
        for name, (d, why) in out.items()
    }


def check_lookup_exactness(
    verify: Callable[..., Any],
    target: Any,
    *,
    prompt: str,
    k: int,
    max_ngram: int,
    runs: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless prompt-lookup decoding with ``verify`` emits 2-character strings as the target.

    ``runs`` decodes of 2 tokens after ``prompt`` share ``np.random.default_rng(seed)``;
    drafts come from the reference ``prompt_lookup_draft``.  The first character and
    the 2-character strings are each compared with the target's exact distribution
    (:func:`~specdec_reference.decoding.prefix_distribution`) by the L1 test of
    :func:`~specdec_reference.testing.e7_4.check_distribution` at ``failure_prob / 2``.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = (
        f"prompt-lookup decoding of 2 characters after {prompt!r} (k = {k}, max_ngram = "
        f"{max_ngram}) with your deterministic_verify, {runs} runs sharing "
        f"np.random.default_rng({seed})"
    )
    counts: dict[str, int] = {}
    firsts: dict[str, int] = {}
    for _ in range(runs):
        text = ngram.decode(_decode(verify, target, list(context), 2, k, rng, max_ngram, call))
        counts[text] = counts.get(text, 0) + 1
        firsts[text[0]] = firsts.get(text[0], 0) + 1
    exact = decoding.prefix_distribution(target, context, 2)
    probs = {
        ngram.decode(ix): float(exact[ix]) for ix in zip(*np.nonzero(exact >= 1e-4), strict=True)
    }
    first = target.probs(context)
    check_distribution(
        firsts,
        {ngram.ALPHABET[i]: float(v) for i, v in enumerate(first)},
        call=call + ", first character",
        failure_prob=failure_prob / 2,
        label="first character",
        mistakes=first_token_mistakes(target, list(context), k, max_ngram),
    )
    check_distribution(
        counts,
        probs,
        call=call,
        failure_prob=failure_prob / 2,
        label="2-character string",
        advice="accept a drafted x with probability p(x); after a rejection draw from p with "
        "x removed and renormalized; after a fully accepted draft draw the bonus token from "
        "the last row",
    )
