"""Part 2: the accept step on a deterministic draft: how often it accepts, draw by draw,
and in distribution.

:func:`check_accept_rates` grades the mechanism: a drafted ``x`` is kept with
probability ``p(x)`` (closed form, Hoeffding-bounded), never when ``p(x) = 0`` and always
when ``p(x) = 1``.  :func:`check_verify_draws` grades the prescribed draws for fixed
seeds (:func:`seeded_cases` puts rows with ``p(x)`` exactly 0 and 1 among them), and
:func:`check_lookup_exactness` the output distribution of prompt-lookup decoding.
"""

from __future__ import annotations

import math
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


def _skipping(p: np.ndarray, drafted: list[int], seed: int, sure: tuple) -> list[int]:
    """The reference's tokens, but with no ``rng.random()`` when ``p(x)`` is in ``sure``."""
    rng = np.random.default_rng(seed)
    out: list[int] = []
    for i, x in enumerate(drafted):
        accepted = p[i, x] == 1.0 if p[i, x] in sure else rng.random() < p[i, x]
        if accepted:
            out.append(x)
            continue
        residual = p[i].copy()
        residual[x] = 0.0
        return out + [int(rng.choice(p.shape[1], p=residual / residual.sum()))]
    return out + [int(rng.choice(p.shape[1], p=p[len(drafted)]))]


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
    first_row = [int(np.random.default_rng(seed).choice(p.shape[1], p=p[0]))]
    skipping = {sure: _skipping(p, drafted, seed, sure) for sure in ((0.0, 1.0), (1.0,), (0.0,))}
    return {
        "one draw from the first row, ignoring the draft": (
            first_row if drafted else None,
            "the step must test each drafted token: one rng.random() per token, kept if "
            "below p_i(x)",
        ),
        "skipping rng.random() when p(x) is exactly 0 or 1": (
            skipping[0.0, 1.0],
            "draw the uniform for every tested token, even when its outcome is sure",
        ),
        "skipping rng.random() when p(x) is exactly 1": (
            skipping[(1.0,)],
            "draw the uniform for every tested token, even when it is sure to be accepted",
        ),
        "skipping rng.random() when p(x) is exactly 0": (
            skipping[(0.0,)],
            "draw the uniform for every tested token, even when it is sure to be rejected",
        ),
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


def seeded_cases(seed: int, trials: int) -> list[tuple[np.ndarray, list[int], int]]:
    """``(rows, drafted, seed)`` for the seeded cell; many rows have p(x) exactly 0 or 1.

    Each drafted position's row is a Dirichlet draw; a quarter of them are then made
    one-hot at the drafted token (p(x) = 1), and a quarter have the drafted token's
    mass removed and the rest renormalized (p(x) = 0).

    Examples
    --------
    >>> cases = seeded_cases(7621, 60)
    >>> sure = [r[i, x] for r, d, _ in cases for i, x in enumerate(d)]
    >>> (0.0 in sure, 1.0 in sure, len(cases))
    (True, True, 60)
    """
    gen = np.random.default_rng(seed)
    out = []
    for trial in range(trials):
        vocab, k = int(gen.integers(2, 7)), int(gen.integers(0, 6))
        rows = gen.dirichlet(np.full(vocab, 0.6), size=k + 1)
        drafted = gen.integers(0, vocab, k).tolist()
        for i, x in enumerate(drafted):
            kind = gen.random()
            if kind < 0.25:
                rows[i] = 0.0
                rows[i, x] = 1.0
            elif kind < 0.5 and rows[i].sum() - rows[i, x] > 1e-3:
                rows[i, x] = 0.0
                rows[i] /= rows[i].sum()
        out.append((rows, drafted, seed + trial))
    return out


#: Rows and drafts of the acceptance cell: p(x) strictly between 0 and 1, then exactly 0
#: and exactly 1, then no draft at all.
ACCEPT_CASES = (
    (
        np.array(
            [
                [0.1, 0.6, 0.2, 0.1],
                [0.25, 0.25, 0.5, 0.0],
                [0.7, 0.1, 0.1, 0.1],
                [0.4, 0.3, 0.2, 0.1],
            ]
        ),
        [1, 2, 0],
    ),
    (np.array([[0.3, 0.2, 0.5], [0.2, 0.2, 0.6]]), [0]),
    (np.array([[0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]), [1, 0]),
    (np.array([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5]]), [1, 0]),
)


def _tail_probs(rows: np.ndarray, drafted: Sequence[int]) -> list[float]:
    """P(the first j drafted tokens are all accepted), j = 1..k, for a correct step."""
    out, prob = [], 1.0
    for i, x in enumerate(drafted):
        prob *= float(rows[i, x])
        out.append(prob)
    return out


def check_accept_rates(
    fn: Callable[..., Any],
    cases: Sequence[tuple[Any, Sequence[int]]],
    *,
    runs: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``fn`` keeps a drafted x with probability p(x), and stops at a rejection.

    Each case is called ``runs`` times, all sharing ``np.random.default_rng(seed)``.
    Every output must be the drafted prefix plus one token, never accept a token of
    probability 0 nor reject one of probability 1, and never emit the token it has just
    rejected.  For every ``j`` with ``0 < P(first j accepted) < 1`` the share of runs
    that accepted the first ``j`` tokens must be within ``eps`` of the product of their
    ``p_i(x_i)``: by Hoeffding's inequality and a union bound over those ``m``
    comparisons, a correct step fails with probability at most
    ``2 m exp(-2 runs eps**2) = failure_prob``.

    Examples
    --------
    >>> rows = np.array([[0.5, 0.5], [0.5, 0.5]])
    >>> check_accept_rates(lambda p, d, rng: [int(rng.choice(2, p=p[0]))], [(rows, [1])],
    ...                    runs=400, seed=0, failure_prob=1e-6)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: ... That is one draw from the first row, ignoring the draft: ...
    """
    rng = np.random.default_rng(seed)
    prepared = [(np.array(r, dtype=float), [int(x) for x in d]) for r, d in cases]
    m = sum(1 for rows, d in prepared for q in _tail_probs(rows, d) if 0.0 < q < 1.0)
    eps = math.sqrt(math.log(2 * max(m, 1) / failure_prob) / (2 * runs))
    for rows, drafted in prepared:
        k = len(drafted)
        call = (
            f"deterministic_verify({_rows_text(rows)}, {drafted}, rng), {runs} calls sharing "
            f"np.random.default_rng({seed})"
        )
        reached = [0] * (k + 1)  # reached[j]: runs that accepted the first j drafted tokens
        resampled: list[int] = []  # a call that emitted the token it had just rejected
        for _ in range(runs):
            out = tokens(call_or_fail(fn, rows.copy(), list(drafted), rng, call=call), call)
            accepted = len(out) - 1
            if not 0 <= accepted <= k or out[:accepted] != drafted[:accepted]:
                raise AssertionError(
                    f"{call}: one call returned {out}, which is not an accepted prefix of the "
                    f"draft {drafted} followed by one target token."
                )
            if accepted < k and out[accepted] == drafted[accepted] and not resampled:
                resampled = out
            for i in range(min(accepted + 1, k)):
                if i < accepted and rows[i, drafted[i]] == 0.0:
                    raise AssertionError(
                        f"{call}: one call accepted the drafted token {drafted[i]} at position "
                        f"{i}, to which the target gives probability 0 ({out}): keep x only if "
                        "rng.random() < p(x)."
                    )
                if i == accepted and rows[i, drafted[i]] == 1.0:
                    raise AssertionError(
                        f"{call}: one call rejected the drafted token {drafted[i]} at position "
                        f"{i}, to which the target gives probability 1 ({out}): keep x if "
                        "rng.random() < p(x), which always holds then."
                    )
            for j in range(accepted + 1):
                reached[j] += 1
        for j, expected in enumerate(_tail_probs(rows, drafted), start=1):
            share = reached[j] / runs
            if abs(share - expected) <= eps:
                continue
            rates = {
                "one draw from the first row, ignoring the draft": 0.0,
                "accepting every drafted token": 1.0,
                "accepting x when rng.random() is above p(x), with probability 1 - p(x)": (
                    float(np.prod([1 - rows[i, x] for i, x in enumerate(drafted[:j])]))
                ),
            }
            named = [
                n for n, v in rates.items() if abs(share - v) <= eps and abs(v - expected) > eps
            ]
            hint = (
                f" That is {named[0]}: keep each drafted x only if rng.random() < p(x)."
                if named
                else ""
            )
            raise AssertionError(
                f"{call}: the first {j} drafted token(s) were all accepted in {share:.3f} of the "
                f"runs, but a correct step accepts them with probability {expected:.3f}, the "
                f"product of the target's p_i(x_i) (tolerance {eps:.3f}: a correct step is "
                f"this far off with probability below {failure_prob:.0e}).{hint}"
            )
        if resampled:
            raise AssertionError(
                f"{call}: one call rejected the drafted token {drafted[len(resampled) - 1]} and "
                f"then emitted it anyway ({resampled}). That is resampling from p instead of p "
                "with x removed: after a rejection draw from p with the drafted token set to 0, "
                "renormalized."
            )


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
