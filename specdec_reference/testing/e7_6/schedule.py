"""Part 5: one step of the heuristic schedule for k, at its bounds too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import serving
from ..calls import call_or_fail
from ..compare import check_equal
from ..convert import as_int, describe_call


def check_adaptive_k(fn: Callable[..., Any], k: int, accepted: int, k_min: int, k_max: int) -> None:
    """Compare ``fn(k, accepted, k_min, k_max)`` with the schedule; name the mistake.

    Examples
    --------
    >>> check_adaptive_k(lambda k, a, lo, hi: k + 2, 8, 8, 1, 8)
    Traceback (most recent call last):
    ...
    AssertionError: adaptive_k(8, 8, 1, 8) returned 10, expected 8. That is going past k_max: \
the schedule is not clamped to [k_min, k_max]; after a fully accepted draft the next k is \
min(k + 2, k_max).
    """
    call = describe_call("adaptive_k", k, accepted, k_min, k_max)
    got = as_int(call_or_fail(fn, k, accepted, k_min, k_max, call=call), call)
    full = accepted == k
    check_equal(
        got,
        serving.adaptive_k(k, accepted, k_min, k_max),
        call=call,
        mistakes={
            "going past k_max": (
                k + 2 if full and k + 2 > k_max else None,
                "the schedule is not clamped to [k_min, k_max]; after a fully accepted draft the "
                "next k is min(k + 2, k_max)",
            ),
            "going below k_min": (
                k - 1 if not full and k - 1 < k_min else None,
                "the schedule is not clamped to [k_min, k_max]; after a rejection the next k is "
                "max(k - 1, k_min)",
            ),
            "adding 1 after a full acceptance": (
                min(k + 1, k_max) if full and k + 1 < k_max else None,
                "Hugging Face's schedule adds 2",
            ),
            "subtracting 2 after a rejection": (
                max(k - 2, k_min) if not full and k - 2 >= k_min else None,
                "Hugging Face's schedule removes 1",
            ),
            "growing k whenever a token was accepted": (
                min(k + 2, k_max) if 0 < accepted < k else None,
                "k grows only when every drafted token was accepted (accepted == k)",
            ),
            "resetting k to k_min after a rejection": (
                k_min if not full and k - 1 > k_min else None,
                "remove 1, not everything",
            ),
        },
    )
