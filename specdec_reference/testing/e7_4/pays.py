"""Part 6: when speculation pays at all, ``alpha > c`` (Corollary 3.9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..calls import call_or_fail
from ..convert import as_bool, describe_call


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
