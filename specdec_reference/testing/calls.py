"""Call learner code so that any exception becomes a message naming the call.

A ``NotImplementedError`` (the release's stub) says "write the function body first";
``KeyboardInterrupt``, which is how the grader's timeout arrives, is never caught.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .convert import _show, describe_call


def call_or_fail(
    fn: Callable[..., Any], *args: Any, call: str | None = None, hint: str = "", **kwargs: Any
) -> Any:
    """Call ``fn(*args, **kwargs)``; turn any exception into an ``AssertionError`` naming the call.

    Parameters
    ----------
    fn : callable
        The learner's function.
    *args, **kwargs
        Its arguments.
    call : str, optional
        How to show the call in the message; defaults to ``describe_call``.
    hint : str, optional
        Appended to the message when the call raises.

    Examples
    --------
    >>> def accept_prob(p, q):
    ...     raise NotImplementedError()
    >>> call_or_fail(accept_prob, 0.5, 0.8)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: accept_prob(0.5, 0.8) raised NotImplementedError: write the function body first.
    """
    if call is None:
        call = describe_call(getattr(fn, "__name__", "function"), *args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        message = f"{call} raised NotImplementedError: write the function body first."
    except Exception as exc:  # KeyboardInterrupt (a timeout) is not caught
        detail = f"{type(exc).__name__}: {exc}".rstrip(": ")
        message = f"{call} raised {detail}, expected it to return a result."
    raise AssertionError(f"{message} {hint}".strip())


def check_raises(
    exc_type: type[BaseException],
    fn: Callable[..., Any],
    *args: Any,
    call: str | None = None,
    why: str = "",
    **kwargs: Any,
) -> None:
    """Fail unless ``fn(*args, **kwargs)`` raises ``exc_type`` (or a subclass).

    Examples
    --------
    >>> def accept_prob(p, q):
    ...     return min(1.0, p / q)
    >>> check_raises(ValueError, accept_prob, 0.5, 0.0,
    ...              why="q must be > 0")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: accept_prob(0.5, 0.0) raised ZeroDivisionError: float division by zero;
    expected ValueError (q must be > 0).
    """
    if call is None:
        call = describe_call(getattr(fn, "__name__", "function"), *args, **kwargs)
    reason = f" ({why})" if why else ""
    try:
        result = fn(*args, **kwargs)
    except exc_type:
        return
    except NotImplementedError:
        raise AssertionError(
            f"{call} raised NotImplementedError: write the function body first."
        ) from None
    except Exception as exc:
        raise AssertionError(
            f"{call} raised {type(exc).__name__}: {exc}; expected {exc_type.__name__}{reason}."
        ) from None
    raise AssertionError(
        f"{call} returned {_show(result)}; expected it to raise {exc_type.__name__}{reason}."
    )
