"""Compare a learner's value with the reference's, and name the mistake it matches.

The comparisons use plain Python arithmetic (``abs(a - b) <= tol``), never numpy, so a
learner who monkeypatches numpy cannot change a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .convert import _num, _show, as_float

# A mistake is a value (or a predicate on the observed value), optionally with advice:
# {"the raw target probability p": (0.5, "accept with probability min(1, p/q)")}.
Mistakes = Mapping[str, Any]


def _close(a: float, b: float, atol: float, rtol: float) -> bool:
    return abs(a - b) <= atol + rtol * abs(b)


def _mistake_hint(
    observed: Any, mistakes: Mistakes | None, matches: Callable[[Any, Any], bool]
) -> str:
    """Return ' That is <name>: <advice>.' naming every mistake that ``observed`` matches.

    Two mistakes can give the same value (for p = 0.5, q = 0.25 the raw target
    probability and the capped inverted ratio are both 0.5); then both are named.
    """
    hits = []
    for name, spec in (mistakes or {}).items():
        target, advice = spec if isinstance(spec, tuple) else (spec, "")
        if target is None:
            continue  # the mistake is undefined for this input (a division by zero, say)
        try:
            hit = target(observed) if callable(target) else matches(observed, target)
        except Exception:
            hit = False
        if hit:
            hits.append((name, advice))
    if len(hits) == 1:
        name, advice = hits[0]
        return f" That is {name}" + (f": {advice}" if advice else "") + "."
    if hits:
        named = " or ".join(name + (f" ({advice})" if advice else "") for name, advice in hits)
        return f" That is {named}."
    return ""


def check_close(
    got: Any,
    expected: float,
    *,
    call: str,
    atol: float = 1e-9,
    rtol: float = 1e-9,
    mistakes: Mistakes | None = None,
    verb: str = "returned",
    advice: str = "",
) -> float:
    """Fail unless ``got`` is a number within ``atol + rtol * |expected|`` of ``expected``.

    Parameters
    ----------
    got : number
        What the learner's call returned.
    expected : float
        The reference value.
    call : str
        The call, as shown in the message.
    atol, rtol : float
        Absolute and relative tolerance; keep ``atol > 0`` where the value can be 0.
    mistakes : mapping, optional
        ``{name: value}`` or ``{name: (value, advice)}``; when ``got`` matches a
        mistake's value (within the same tolerance), the message names it.  A value
        may also be a predicate ``f(got) -> bool``, or None when undefined.
    verb : str, default "returned"
        Words the message; use ``"is"`` when ``call`` names a variable.
    advice : str, optional
        Said after the expected value whatever the wrong value, e.g. how to follow
        a prescribed protocol.

    Returns
    -------
    float
        ``got`` as a float.

    Examples
    --------
    >>> check_close(0.5, 0.625, call="accept_prob(p=0.5, q=0.8)",  # doctest: +NORMALIZE_WHITESPACE
    ...             mistakes={"the raw target probability p": (0.5, "accept with "
    ...                       "probability min(1, p/q), not p")})
    Traceback (most recent call last):
    ...
    AssertionError: accept_prob(p=0.5, q=0.8) returned 0.5, expected 0.625. That is the raw target
    probability p: accept with probability min(1, p/q), not p.
    """
    value = as_float(got, call, verb=verb)
    if _close(value, expected, atol, rtol):
        return value
    hint = _mistake_hint(value, mistakes, lambda v, t: _close(v, float(t), atol, rtol))
    tail = f": {advice}." if advice else "."
    raise AssertionError(
        f"{call} {verb} {_num(value)}, expected {_num(float(expected))}{tail}{hint}"
    )


def check_equal(
    got: Any, expected: Any, *, call: str, advice: str = "", mistakes: Mistakes | None = None
) -> None:
    """Fail unless ``got == expected`` (after the caller's conversions).

    Examples
    --------
    >>> check_equal((1, True), (0, True), call="propose_and_test(p, q, rng)",
    ...             advice="draw the token with rng.choice first")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: propose_and_test(p, q, rng) returned (1, True), expected (0, True): draw the
    token with rng.choice first.
    """
    if got == expected:
        return
    hint = _mistake_hint(got, mistakes, lambda v, t: v == t)
    tail = f": {advice}." if advice else "."
    raise AssertionError(f"{call} returned {_show(got)}, expected {_show(expected)}{tail}{hint}")
