"""An empirical distribution against an exact one, in L1 distance with McDiarmid's bound."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


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
