"""Part 2: ``multi_draft_accept`` at one node: the output follows p, and the edge cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import trees
from ..calls import call_or_fail
from ..convert import _show, as_int
from ..e7_4.distribution import check_distribution

#: The wrong rules, their exact output distributions and what to do instead.  "any" is
#: also what a forgotten update gives (each residual computed, but the distribution the
#: candidates are tested against never replaced): the same distribution, the same name.
MISTAKES = {
    "any": (
        "the any-candidate rule (each candidate tested against the original p, no residual "
        "update between candidates)",
        "after each rejection replace the distribution r that candidates are tested against "
        "(p at first) by its normalized residual max(0, r - q), so that the next candidate "
        "is tested against the residual of p and the one after against the residual of "
        "that residual",
    ),
    "unchained": (
        "every residual taken from the original p",
        "each rejection replaces the current distribution r by max(0, r - q), normalized: "
        "chain them, r_1 from p, r_2 from r_1, ...",
    ),
    "from-p": (
        "resampling from p instead of the last residual",
        "when every candidate is rejected, draw from the last residual r_m",
    ),
}


def _result(got: Any, call: str, candidates: list[int]) -> tuple[int, int | None]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(
            f"{call} returned {_show(got)}, expected (token, index of the accepted candidate "
            "or None)."
        )
    token = as_int(got[0], call + " (the token)")
    index = None if got[1] is None else as_int(got[1], call + " (the index)")
    if index is not None and not (0 <= index < len(candidates) and candidates[index] == token):
        raise AssertionError(
            f"{call} returned ({token}, {index}) for candidates {candidates}: the index must "
            "be the position of the accepted candidate, whose token is returned, or None."
        )
    return token, index


def check_multi_draft_node(
    fn: Callable[..., Any],
    p: Any,
    q: Any,
    m: int,
    *,
    draws: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``draws`` calls with ``m`` fresh candidates from ``q`` emit ``p``.

    One ``np.random.default_rng(seed)`` first draws every call's candidates (one
    ``(draws, m)`` array, so each call's are i.i.d. from ``q``), then is passed to ``fn``;
    the token counts go to the L1 check with McDiarmid's bound
    (:func:`~specdec_reference.testing.e7_4.check_distribution`), and a distribution
    nearer to a mistake's exact one names it.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    rng = np.random.default_rng(seed)
    call = (
        f"multi_draft_accept(p, q, candidates, rng) with p = {_show(p.round(3))}, q = "
        f"{_show(q.round(3))} and {m} candidates drawn from q, over {draws} calls sharing "
        f"np.random.default_rng({seed})"
    )
    counts: dict[int, int] = {}
    drawn = rng.choice(len(q), size=(draws, m), p=q).tolist()  # every call's candidates
    for candidates in drawn:
        got = call_or_fail(fn, p.copy(), q.copy(), list(candidates), rng, call=call)
        token, _ = _result(got, call, candidates)
        counts[token] = counts.get(token, 0) + 1
    mistakes = {
        name: (dict(enumerate(trees.multi_draft_distribution(p, q, m, key).tolist())), advice)
        for key, (name, advice) in MISTAKES.items()
    }
    check_distribution(
        counts,
        dict(enumerate(p.tolist())),
        call=call,
        failure_prob=failure_prob,
        label="token",
        min_prob=0.005,
        mistakes=mistakes,
    )


def check_multi_draft_edges(fn: Callable[..., Any], seed: int) -> None:
    """Disjoint supports never accept; q = p accepts the first candidate; no candidates.

    Both hold with probability 1 for the exact rule, so the check is deterministic.
    """
    rng = np.random.default_rng(seed)
    p = np.array([0.5, 0.3, 0.2, 0.0, 0.0, 0.0])
    q = np.array([0.0, 0.0, 0.0, 0.6, 0.3, 0.1])
    for m in (2, 3, 5):
        for _ in range(20):
            cands = [int(x) for x in rng.choice(6, size=m, p=q)]
            call = f"multi_draft_accept(p={p.tolist()}, q={q.tolist()}, {cands}, rng)"
            token, index = _result(
                call_or_fail(fn, p.copy(), q.copy(), cands, rng, call=call), call, cands
            )
            if index is not None or p[token] == 0:
                raise AssertionError(
                    f"{call} returned ({token}, {index}): p and q have disjoint supports, so "
                    "p(x) = 0 for every candidate and none may be accepted; the token must come "
                    "from the last residual, which is p itself here."
                )
            cands = [int(x) for x in rng.choice(6, size=m, p=p)]
            call = f"multi_draft_accept(p={p.tolist()}, q=p, {cands}, rng)"
            got = _result(call_or_fail(fn, p.copy(), p.copy(), cands, rng, call=call), call, cands)
            if got != (cands[0], 0):
                raise AssertionError(
                    f"{call} returned {got}, expected ({cands[0]}, 0): with q = p the ratio "
                    "p(x)/q(x) is 1, so the first candidate is always accepted."
                )
    call = "multi_draft_accept([0, 1], [0.5, 0.5], [], rng)"
    got = _result(
        call_or_fail(fn, np.array([0.0, 1.0]), np.array([0.5, 0.5]), [], rng, call=call), call, []
    )
    if got != (1, None):
        raise AssertionError(
            f"{call} returned {got}, expected (1, None): with no candidates "
            "the token is drawn from p itself."
        )


def _index_mistakes(p: np.ndarray, q: np.ndarray, m: int) -> dict[str, tuple[dict, str]]:
    """The index distributions of the wrong rules: {name: ({index: prob}, advice)}."""
    test_them = (
        "test each candidate in turn against the current distribution r (p at first), "
        "accepting with probability min(1, r(x) / q(x)), and replace r by its normalized "
        "residual after each rejection"
    )
    beta = float(np.minimum(p, q).sum())
    lookup = [float((p * (1 - q) ** j * q).sum()) for j in range(m)]
    unchained = [beta]
    alive, rest = 1.0 - beta, float(np.minimum(trees._residual(p, q), q).sum())
    for _ in range(1, m):
        unchained.append(alive * rest)
        alive *= 1.0 - rest

    def dist(values: list[float]) -> dict:
        return {**dict(enumerate(values)), "None": max(0.0, 1.0 - sum(values))}

    return {
        "a token drawn from p and then looked up among the candidates, which are never tested": (
            dist(lookup),
            test_them,
        ),
        "a token drawn from p with the candidates ignored (none is ever accepted)": (
            dist([0.0] * m),
            test_them,
        ),
        MISTAKES["any"][0]: (dist([beta * (1 - beta) ** j for j in range(m)]), MISTAKES["any"][1]),
        MISTAKES["unchained"][0]: (dist(unchained), MISTAKES["unchained"][1]),
    }


def check_multi_draft_acceptance(
    fn: Callable[..., Any],
    p: Any,
    q: Any,
    m: int,
    *,
    draws: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless the accepted candidate's index follows the closed form.

    With ``m`` candidates drawn independently from ``q``, candidate ``j`` is the accepted
    one with probability :math:`\\beta_j \\prod_{i<j} (1 - \\beta_i)`, where
    :math:`\\beta_j = \\sum_x \\min(r_j(x), q(x))` and :math:`r_j` is the distribution after
    ``j`` rejections (:func:`~specdec_reference.trees.multi_draft_acceptance`); all are
    rejected with probability :math:`\\prod_j (1 - \\beta_j)`.  One
    ``np.random.default_rng(seed)`` draws every call's candidates, then is passed to
    ``fn``; the ``m + 1`` index frequencies go to the L1 check with McDiarmid's bound, and
    the nearest wrong rule is named: sampling from p and looking the token up among the
    candidates, sampling from p and ignoring them, the any-candidate rule, residuals all
    from the original p.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    rng = np.random.default_rng(seed)
    call = (
        f"multi_draft_accept(p, q, candidates, rng) with p = {_show(p.round(3))}, q = "
        f"{_show(q.round(3))} and {m} candidates drawn from q, over {draws} calls sharing "
        f"np.random.default_rng({seed}): which candidate is accepted"
    )
    counts: dict[Any, int] = {}
    for candidates in rng.choice(len(q), size=(draws, m), p=q).tolist():
        got = call_or_fail(fn, p.copy(), q.copy(), list(candidates), rng, call=call)
        _, index = _result(got, call, candidates)
        key = "None" if index is None else index
        counts[key] = counts.get(key, 0) + 1
    exact = trees.multi_draft_acceptance(p, q, m).tolist()
    check_distribution(
        counts,
        {**dict(enumerate(exact[:-1])), "None": exact[-1]},
        call=call,
        failure_prob=failure_prob,
        label="accepted-index",
        min_prob=0.005,
        mistakes=_index_mistakes(p, q, m),
    )
