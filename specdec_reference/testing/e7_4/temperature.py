"""Part 1: ``with_temperature`` against the reference, and its usual mistakes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import decoding
from ..calls import call_or_fail
from ..convert import describe_call
from .shared import _max_gap


def check_with_temperature(fn: Callable[..., Any], probs: Any, temperature: float) -> None:
    """Compare ``fn(probs, temperature)`` with the reference; name the usual mistakes.

    Examples
    --------
    >>> check_with_temperature(lambda p, t: p, [0.2, 0.8], 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: with_temperature([0.2, 0.8], 0.5) returned [0.2, 0.8], expected ...
    """
    call = describe_call("with_temperature", probs, temperature)
    p = np.asarray(probs, dtype=float)
    got = call_or_fail(fn, probs, temperature, call=call)
    try:
        values = np.array(got, dtype=float)
    except (TypeError, ValueError):
        values = None
    if values is None or values.shape != p.shape:
        shape = None if values is None else values.shape
        raise AssertionError(
            f"{call} returned {got!r} (shape {shape}), expected an array of shape {p.shape}."
            + (" Did you forget return?" if got is None else "")
        )
    expected = decoding.with_temperature(p, temperature)
    if _max_gap(values, expected) <= 1e-9:
        return
    mistakes = {}
    if temperature > 0:
        powered = p**temperature
        mistakes["raising p to the power T instead of 1/T"] = (
            powered / powered.sum(axis=-1, keepdims=True),
            "p ** (1 / T): a small T must sharpen the distribution",
        )
        mistakes["p ** (1 / T) without renormalizing"] = (
            p ** (1 / temperature),
            "divide by the sum along the last axis so that each row sums to 1",
        )
        mistakes["dividing the probabilities by T, which changes nothing once normalized"] = (
            p,
            "temperature divides the logits log(p), not the probabilities",
        )
    hint = ""
    for name, (value, advice) in mistakes.items():
        if value.shape == values.shape and _max_gap(values, value) <= 1e-9:
            hint = f" That is {name}: {advice}."
            break
    if temperature == 0 and not np.isfinite(values).all():
        hint = " At T = 0 dividing by T fails: put all the mass on the first maximum instead."
    shown = np.array2string(values, precision=4, separator=", ", threshold=12)
    wanted = np.array2string(expected, precision=4, separator=", ", threshold=12)
    raise AssertionError(f"{call} returned {shown}, expected {wanted}.{hint}")
