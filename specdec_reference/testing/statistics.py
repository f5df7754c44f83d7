"""Statistical checks with a stated false-failure probability.

Each check takes a sample size and a false-failure probability and derives its
tolerance from Hoeffding's inequality (with a union bound over categories), so a
correct solution fails with probability below the stated bound, and the message says
so.  The caller fixes the seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .compare import Mistakes, _mistake_hint
from .convert import _num, as_float


def hoeffding_tolerance(n: int, failure_prob: float) -> float:
    """Return the half-width ``t`` with ``P(|mean - mu| >= t) <= failure_prob``.

    For the mean of ``n`` independent draws in ``[0, 1]``, Hoeffding's inequality
    gives :math:`P(|\\bar X - \\mu| \\ge t) \\le 2 e^{-2 n t^2}`, so
    :math:`t = \\sqrt{\\ln(2/\\delta) / (2n)}`.

    Examples
    --------
    >>> round(hoeffding_tolerance(4000, 1e-6), 4)
    0.0426
    """
    if n < 1:
        raise ValueError(f"need at least one draw, got n = {n}")
    if not 0 < failure_prob < 1:
        raise ValueError(f"failure_prob must be in (0, 1), got {failure_prob}")
    return math.sqrt(math.log(2 / failure_prob) / (2 * n))


def check_rate(
    observed: Any,
    n: int,
    expected: float,
    *,
    call: str,
    failure_prob: float = 1e-6,
    what: str = "a rate",
    mistakes: Mistakes | None = None,
) -> float:
    """Fail unless ``observed``, a mean of ``n`` independent [0, 1] draws, is near ``expected``.

    The tolerance is ``hoeffding_tolerance(n, failure_prob)``: a correct solution
    fails with probability at most ``failure_prob``.  A mistake matches when its
    value lies within the same tolerance of ``observed``.

    Examples
    --------
    >>> check_rate(3000, 4000, 0.75, call="empirical_acceptance(p, q, 4000, seed=1)",
    ...            what="sum(min(p, q))",  # doctest: +NORMALIZE_WHITESPACE
    ...            mistakes={"a count, not a fraction": (lambda x: x > 1, "divide by trials")})
    Traceback (most recent call last):
    ...
    AssertionError: empirical_acceptance(p, q, 4000, seed=1) returned 3000.0, expected
    sum(min(p, q)) = 0.75 within ±0.0426 (n = 4000; a correct solution lands outside with
    probability below 1e-06). That is a count, not a fraction: divide by trials.
    """
    value = as_float(observed, call)
    tol = hoeffding_tolerance(n, failure_prob)
    if abs(value - expected) <= tol:
        return value
    hint = _mistake_hint(value, mistakes, lambda v, t: abs(v - float(t)) <= tol)
    raise AssertionError(
        f"{call} returned {_num(value)}, expected {what} = {_num(float(expected))} within "
        f"±{tol:.3g} (n = {n}; a correct solution lands outside with probability below "
        f"{failure_prob:g}).{hint}"
    )


def check_frequencies(
    counts: Sequence[int],
    probs: Sequence[float],
    *,
    call: str,
    failure_prob: float = 1e-6,
    label: str = "token",
    mistakes: Mistakes | None = None,
) -> None:
    """Fail unless the category frequencies ``counts / n`` follow ``probs``.

    Each category's frequency is a mean of ``n = sum(counts)`` indicators, so with
    ``K`` categories and a union bound the tolerance
    ``hoeffding_tolerance(n, failure_prob / K)`` keeps the false-failure probability
    of the whole check below ``failure_prob``.  A mistake's value is another
    probability vector (or a predicate on ``counts``); it matches when every
    frequency lies within the tolerance of it.

    Examples
    --------
    >>> check_frequencies([510, 290, 200], [0.25, 0.5, 0.25], call="1000 draws",
    ...                   mistakes={"drawing from p": ([0.5, 0.3, 0.2], "draw from q")},
    ...                   )  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: 1000 draws: token frequencies [0.51, 0.29, 0.2], expected [0.25, 0.5, 0.25]
    within ±0.0883 each (n = 1000; a correct solution lands outside with probability below
    1e-06); token 0 is off by 0.26. That is drawing from p: draw from q.
    """
    counts = [int(c) for c in counts]
    n, k = sum(counts), len(probs)
    if n < 1:
        raise AssertionError(f"{call}: no draws were recorded.")
    tol = hoeffding_tolerance(n, failure_prob / k)
    freqs = [c / n for c in counts]
    worst = max(range(k), key=lambda i: abs(freqs[i] - probs[i]))
    if abs(freqs[worst] - probs[worst]) <= tol:
        return

    def matches(observed: list[float], alternative: Sequence[float]) -> bool:
        return all(abs(f - a) <= tol for f, a in zip(observed, alternative, strict=True))

    hint = _mistake_hint(freqs, mistakes, matches)
    shown = "[" + ", ".join(f"{f:.4g}" for f in freqs) + "]"
    wanted = "[" + ", ".join(f"{float(x):.4g}" for x in probs) + "]"
    raise AssertionError(
        f"{call}: {label} frequencies {shown}, expected {wanted} within ±{tol:.3g} each "
        f"(n = {n}; a correct solution lands outside with probability below {failure_prob:g}); "
        f"{label} {worst} is off by {abs(freqs[worst] - probs[worst]):.3g}.{hint}"
    )


def check_rates_by_category(
    successes: Sequence[int],
    totals: Sequence[int],
    expected: Sequence[float],
    *,
    call: str,
    failure_prob: float = 1e-6,
    label: str = "token",
    event: str = "accepted",
    mistakes: Mistakes | None = None,
) -> None:
    """Fail unless, within each category, the rate of an event is near its expected value.

    Conditionally on the categories drawn, the events of a correct solution are
    independent with the category's probability, so Hoeffding's inequality applies
    to each category with ``totals[i]`` draws; a union bound over the ``K``
    categories (``failure_prob / K`` each) bounds the whole check.  Categories
    never drawn are skipped.  A mistake's value is another vector of rates and
    matches when every checked rate lies within its category's tolerance.

    Examples
    --------
    >>> check_rates_by_category([400, 300], [400, 1000], [1.0, 0.6],
    ...                         call="calls")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: calls: token 1 was accepted in 300 of its 1000 draws (rate 0.3), expected 0.6
    within ±0.0872 (a correct solution lands outside with probability below 1e-06).
    """
    k = len(expected)
    checked = [i for i in range(k) if totals[i] > 0]
    tols = {i: hoeffding_tolerance(totals[i], failure_prob / k) for i in checked}
    rates = {i: successes[i] / totals[i] for i in checked}
    bad = [i for i in checked if abs(rates[i] - expected[i]) > tols[i]]
    if not bad:
        return
    worst = max(bad, key=lambda i: abs(rates[i] - expected[i]) / tols[i])

    def matches(observed: dict[int, float], alternative: Sequence[float]) -> bool:
        return all(abs(observed[i] - alternative[i]) <= tols[i] for i in checked)

    hint = _mistake_hint(rates, mistakes, matches)
    raise AssertionError(
        f"{call}: {label} {worst} was {event} in {successes[worst]} of its {totals[worst]} "
        f"draws (rate {rates[worst]:.4g}), expected {float(expected[worst]):.4g} within "
        f"±{tols[worst]:.3g} (a correct solution lands outside with probability below "
        f"{failure_prob:g}).{hint}"
    )
