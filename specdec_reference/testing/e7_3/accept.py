"""Check ``spec_accept`` against the reference and name the mistake a wrong count matches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import specdec_reference as ref

from ..calls import call_or_fail
from ..compare import Mistakes, check_equal
from ..convert import as_int, describe_call


def prefix(
    p: Sequence[float],
    q: Sequence[float],
    r: Sequence[float],
    accept: Callable[[float, float, float], bool],
) -> int:
    """Return the length of the leading run of positions where ``accept(p_i, q_i, r_i)`` holds.

    Examples
    --------
    >>> prefix([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2], lambda p, q, r: r <= p)
    1
    """
    run = 0
    for p_i, q_i, r_i in zip(p, q, r, strict=True):
        if not accept(p_i, q_i, r_i):
            break
        run += 1
    return run


def spec_accept_mistakes(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> Mistakes:
    """Return what each common ``spec_accept`` mistake returns on this draft, with advice.

    Examples
    --------
    >>> found = spec_accept_mistakes([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2])
    >>> found["the brute-force count, which keeps tokens after a rejection"][0]
    2
    """
    brute = sum(r_i <= min(1.0, p_i / q_i) for p_i, q_i, r_i in zip(p, q, r, strict=True))
    raw = prefix(p, q, r, lambda p_i, q_i, r_i: r_i <= p_i)
    strict = prefix(p, q, r, lambda p_i, q_i, r_i: r_i < min(1.0, p_i / q_i))
    inverted = (
        prefix(p, q, r, lambda p_i, q_i, r_i: r_i <= min(1.0, q_i / p_i))
        if all(p_i > 0 for p_i in p)
        else None
    )
    return {
        "the brute-force count, which keeps tokens after a rejection": (
            brute,
            "stop at the first rejection; the tokens after it continue a prefix "
            "that the output will never contain",
        ),
        "accepting on the raw target probability": (
            raw,
            "accept when r[i] <= min(1, p[i] / q[i]), the ratio of target to draft "
            "probability, not when r[i] <= p[i]",
        ),
        "a strict comparison": (
            strict,
            "the boundary is inclusive: accept when r[i] <= threshold, not <",
        ),
        "the inverted ratio q/p": (
            inverted,
            "divide the target's probability by the draft's: min(1, p[i] / q[i])",
        ),
    }


def check_spec_accept(
    spec_accept: Callable[..., Any],
    p: Sequence[float],
    q: Sequence[float],
    r: Sequence[float],
    *,
    as_array: bool = False,
) -> None:
    """Compare ``spec_accept(p, q, r)`` with the reference; name the mistake the value matches.

    ``p``, ``q`` and ``r`` are lists of floats; with ``as_array`` the learner gets them as
    float arrays.

    Examples
    --------
    >>> def brute(p, q, r):
    ...     return sum(r_i <= min(1, p_i / q_i) for p_i, q_i, r_i in zip(p, q, r, strict=True))
    >>> check_spec_accept(brute, [0.9, 0.2, 0.8], [0.5, 0.8, 0.4],
    ...                   [0.1, 0.5, 0.2])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: spec_accept([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2]) (given lists)
    returned 2, expected 1. That is the brute-force count, which keeps tokens after a rejection:
    stop at the first rejection; the tokens after it continue a prefix that the output will never
    contain.
    """
    args = [np.array(x, dtype=float) for x in (p, q, r)] if as_array else [p, q, r]
    kind = "arrays" if as_array else "lists"
    call = describe_call("spec_accept", *args) + f" (given {kind})"
    got = as_int(call_or_fail(spec_accept, *args, call=call), call)
    expected = ref.spec_accept(p, q, r)
    check_equal(got, expected, call=call, mistakes=spec_accept_mistakes(p, q, r))


def clear_token(rng: np.random.Generator, accept: bool) -> tuple[float, float, float]:
    """Return ``(p, q, r)`` for a drafted token that passes (or fails) its test by a margin.

    A pass has ``r < p <= min(1, p/q)``; a failure has ``p < 0.8 q`` and ``r > p/q + 0.01``,
    so no rounding and no variant of the boundary changes the verdict.

    Examples
    --------
    >>> p, q, r = clear_token(np.random.default_rng(0), False)
    >>> r > p / q
    True
    """
    if accept:
        q = float(rng.uniform(0.05, 1.0))
        p = float(rng.uniform(0.05, 1.0))
        return p, q, float(rng.uniform(0.0, p))
    q = float(rng.uniform(0.3, 1.0))
    p = float(rng.uniform(0.0, 0.8 * q))
    return p, q, float(rng.uniform(p / q + 0.01, 1.0))
