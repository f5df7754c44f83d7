"""Read a learner's vectors and token lists, and draw the random rows the tests use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..compare import Mistakes
from ..convert import as_float, as_int


def floats(got: Any, call: str) -> list[float]:
    """Return a learner's vector as a list of Python floats, or fail with a message.

    Examples
    --------
    >>> floats(np.array([0.5, 0.5]), "f()")
    [0.5, 0.5]
    >>> floats(None, "f()")
    Traceback (most recent call last):
    ...
    AssertionError: f() returned None, expected an array (or list) of probabilities. Did you forget return?
    """  # noqa: E501  (a doctest's expected output is one line)
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected an array (or list) of probabilities."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_float(x, call + " (an entry)") for x in got]


def check_vector(
    got: Any,
    expected: Sequence[float],
    *,
    call: str,
    mistakes: Mistakes | None = None,
    atol: float = 1e-9,
) -> None:
    """Fail unless the vector ``got`` equals ``expected`` entry by entry (absolute tolerance).

    ``mistakes`` maps a mistake's name to ``(vector, advice)``; the message names the
    first mistake whose vector ``got`` matches (a vector of None is skipped).

    Examples
    --------
    >>> check_vector([0.4, 0.2], [2 / 3, 1 / 3], call="residual_distribution(p, q)",
    ...              mistakes={"max(0, p - q) without dividing by its sum": (
    ...                  [0.4, 0.2], "normalize it")})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: residual_distribution(p, q) returned [0.4, 0.2], expected [0.666667, 0.333333].
    That is max(0, p - q) without dividing by its sum: normalize it.
    """
    values = floats(got, call)
    wanted_values = [float(x) for x in expected]

    def close(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and all(abs(x - y) <= atol for x, y in zip(a, b, strict=True))

    if close(values, wanted_values):
        return
    hint = ""
    for name, (vector, advice) in (mistakes or {}).items():
        if vector is not None and close(values, [float(x) for x in vector]):
            hint = f" That is {name}: {advice}."
            break
    shown = "[" + ", ".join(f"{x:.6g}" for x in values) + "]"
    wanted = "[" + ", ".join(f"{x:.6g}" for x in wanted_values) + "]"
    raise AssertionError(f"{call} returned {shown}, expected {wanted}.{hint}")


def tokens(got: Any, call: str) -> list[int]:
    """Return a learner's list of emitted tokens as Python ints, or fail with a message.

    Examples
    --------
    >>> tokens(np.array([3, 1]), "f()")
    [3, 1]
    >>> tokens(3, "f()")
    Traceback (most recent call last):
    ...
    AssertionError: f() returned 3, expected a list of tokens (ints).
    """
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected a list of tokens (ints)."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in got]


def rows(rng: np.random.Generator, n: int, vocab: int) -> np.ndarray:
    """Return ``n`` random probability rows over ``vocab`` tokens, every entry positive.

    Examples
    --------
    >>> block = rows(np.random.default_rng(0), 3, 4)
    >>> block.shape, bool((block > 0).all()), np.allclose(block.sum(axis=1), 1)
    ((3, 4), True, True)
    """
    block = rng.dirichlet(np.ones(vocab), size=n) + 1e-3
    return block / block.sum(axis=1, keepdims=True)
