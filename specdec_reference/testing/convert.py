"""Render learner values for messages and convert them to plain Python values.

Every conversion accepts what a correct solution may return (Python or numpy numbers,
``1`` or ``1.0``, ``bool`` or ``numpy.bool_``, lists or arrays) and turns anything else
into an ``AssertionError`` that names the call and what came back.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Mapping, Sequence
from typing import Any


def _show(value: Any, limit: int = 120) -> str:
    """Return a short, readable rendering of ``value`` for a message."""
    if isinstance(value, float):
        text = repr(value)
    elif type(value).__name__ == "Generator" and hasattr(value, "bit_generator"):
        text = "rng"
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        try:
            text = repr(value.tolist())
        except Exception:  # an object with an odd tolist: fall back to repr
            text = repr(value)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _num(x: float) -> str:
    """Format a number for a message: 0.625, 1.0, 3000.0, nan (12 significant digits)."""
    if not math.isfinite(x) or x == int(x):
        return repr(x)
    return f"{x:.12g}"


def describe_call(name: str, *args: Any, **kwargs: Any) -> str:
    """Render a call for a message.

    Examples
    --------
    >>> describe_call("accept_prob", p=0.5, q=0.8)
    'accept_prob(p=0.5, q=0.8)'
    >>> describe_call("overall_acceptance", [0.5, 0.5], [1.0, 0.0])
    'overall_acceptance([0.5, 0.5], [1.0, 0.0])'
    """
    parts = [_show(a) for a in args] + [f"{k}={_show(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def as_float(value: Any, call: str, *, verb: str = "returned") -> float:
    """Return ``value`` as a Python float, or fail saying that ``call`` returned a non-number.

    Python and numpy numbers, 0-d arrays and booleans convert; ``None``, strings and
    sequences do not.  ``verb`` words the message: ``"answer_1 is None"`` reads better
    than ``"answer_1 returned None"`` for a variable.

    Examples
    --------
    >>> as_float(1, "f()")
    1.0
    >>> as_float(None, "f()")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: f() returned None (NoneType), expected a number. Did you forget return?
    """
    hint = " Did you forget return?" if value is None and verb == "returned" else ""
    if value is None or isinstance(value, (str, bytes)):
        raise AssertionError(
            f"{call} {verb} {_show(value)} ({type(value).__name__}), expected a number.{hint}"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy deprecates float() of 1-element arrays
            return float(value)
    except (TypeError, ValueError):
        raise AssertionError(
            f"{call} {verb} {_show(value)} ({type(value).__name__}), expected a single number."
        ) from None


def as_int(value: Any, call: str) -> int:
    """Return ``value`` as a Python int, or fail; ``2``, ``np.int64(2)`` and ``2.0`` all give 2.

    Examples
    --------
    >>> as_int(2.0, "f()")
    2
    >>> as_int(2.5, "f()")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: f() returned 2.5 (float), expected an integer.
    """
    try:
        return operator.index(value)
    except TypeError:
        pass
    number = as_float(value, call) if not isinstance(value, (str, bytes)) else None
    if number is not None and math.isfinite(number) and number == int(number):
        return int(number)
    raise AssertionError(
        f"{call} returned {_show(value)} ({type(value).__name__}), expected an integer."
    )


def as_bool(value: Any, call: str) -> bool:
    """Return ``value`` as a Python bool; accepts ``bool``, ``numpy.bool_``, 0 and 1.

    Examples
    --------
    >>> as_bool(1, "f()"), as_bool(False, "f()")
    (True, False)
    >>> as_bool(0.5, "f()")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: f() returned 0.5 (float), expected True or False.
    """
    if not isinstance(value, (str, bytes)) and value is not None:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number in (0.0, 1.0):
            return number == 1.0
    raise AssertionError(
        f"{call} returned {_show(value)} ({type(value).__name__}), expected True or False."
    )


def unpack(value: Any, names: Sequence[str], call: str) -> tuple[Any, ...]:
    """Return ``value`` as a tuple of ``len(names)`` items, or fail naming the expected items.

    Tuples, lists and arrays of the right length all unpack.

    Examples
    --------
    >>> unpack([1, True], ("token", "accepted"), "f()")
    (1, True)
    >>> unpack(1, ("token", "accepted"), "f()")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: f() returned 1 (int), expected 2 values (token, accepted).
    """
    try:
        items = tuple(value)
    except TypeError:
        items = None
    if items is None or len(items) != len(names) or isinstance(value, (str, bytes, dict)):
        raise AssertionError(
            f"{call} returned {_show(value)} ({type(value).__name__}), expected "
            f"{len(names)} values ({', '.join(names)})."
        )
    return items


def require_defined(namespace: Mapping[str, Any], name: str, where: str = "") -> Any:
    """Return ``namespace[name]``, or fail saying that the learner has not defined it yet.

    Examples
    --------
    >>> require_defined({}, "answer_1", "the Part 1 cell")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: answer_1 is not defined: run the Part 1 cell after filling it in.
    """
    if name not in namespace:
        place = where or "the cell that defines it"
        raise AssertionError(f"{name} is not defined: run {place} after filling it in.")
    return namespace[name]


def chosen_letter(namespace: Mapping[str, Any], letters: str) -> str:
    """The letter (upper case) that ``choice`` in the *Check your understanding* cell
    names; fail unless it is one of ``letters``.

    Examples
    --------
    >>> chosen_letter({"choice": " b"}, "ABC")
    'B'
    >>> chosen_letter({"choice": "E"}, "ABCD")
    Traceback (most recent call last):
    ...
    AssertionError: choice is 'E', expected "A", "B", "C" or "D".
    """
    value = require_defined(namespace, "choice", "the Check your understanding cell")
    got = str(value).strip().upper()
    if got not in letters or len(got) != 1:
        *others, last = (f'"{letter}"' for letter in letters)
        raise AssertionError(f"choice is {value!r}, expected {', '.join(others)} or {last}.")
    return got
