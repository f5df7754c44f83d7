"""Helpers for the hidden tests of the chapter E7 notebooks.

Every helper turns a failure into an ``AssertionError`` whose message alone helps a
learner: it names the call, what came back and what was expected, and, when the
wrong value matches one, the common mistake behind it.  Feedback pages show these
messages and never the hidden code, so the message is all a learner gets.

The comparisons use plain Python arithmetic (``abs(a - b) <= tol``), never numpy,
so a learner who monkeypatches numpy cannot change a verdict, and every correct
answer passes whatever its type: Python or numpy numbers, ``1`` or ``1.0``,
``bool`` or ``numpy.bool_``, lists or arrays.

A hidden test cell starts like this (the first line records, once per kernel,
whether the learner's code had imported the reference before any test did)::

    import sys as _sys
    globals().setdefault("_specdec_preloaded", "specdec_reference" in _sys.modules)
    import specdec_reference as _ref
    from specdec_reference import checks as _checks
    _checks.reference_guard(globals(), ["accept_prob"])

and, when the function under test calls another learner function, substitutes the
reference for the callee so that one bug costs points once: for the rest of the cell,
the visible asserts after the hidden block included, with ::

    _checks.use_reference_for_cell(globals(), "accept_prob", _ref.accept_prob)

or for one block (outside a kernel too) with ::

    with _checks.use_reference(globals(), "accept_prob", _ref.accept_prob):
        ...  # test the learner's propose_and_test

Statistical checks take a fixed seed, a sample size and a false-failure probability,
and derive their tolerance from Hoeffding's inequality and a union bound, so a
correct solution fails with probability below the stated bound.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import math
import operator
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

__all__ = [
    "PRELOADED_KEY",
    "REFERENCE_PACKAGE",
    "as_bool",
    "as_float",
    "as_int",
    "assert_no_reference",
    "call_or_fail",
    "check_close",
    "check_equal",
    "check_frequencies",
    "check_raises",
    "check_rate",
    "check_rates_by_category",
    "describe_call",
    "global_random_state_preserved",
    "hoeffding_tolerance",
    "reference_guard",
    "require_defined",
    "unpack",
    "use_reference",
    "use_reference_for_cell",
]

#: The package that learner code must not use.
REFERENCE_PACKAGE = "specdec_reference"
#: Notebook global in which the first hidden test records whether the reference
#: was already imported (by the learner) before any test imported it.
PRELOADED_KEY = "_specdec_preloaded"
#: Markers of cells written by the instructor, skipped when scanning learner cells.
_TEST_CELL_MARKERS = ("### BEGIN HIDDEN TESTS", "reference_guard(")

# A mistake is a value (or a predicate on the observed value), optionally with advice:
# {"the raw target probability p": (0.5, "accept with probability min(1, p/q)")}.
Mistakes = Mapping[str, Any]


# ---------------------------------------------------------------------------
# Formatting and conversion
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Calling learner code
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Isolation: no cascade, no global state, no reference
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def use_reference(
    namespace: MutableMapping[str, Any], name: str, reference_fn: Callable[..., Any]
) -> Iterator[None]:
    """Temporarily bind ``namespace[name]`` to ``reference_fn``, then restore it.

    Use it when the learner function under test calls another learner function:
    the callee is the reference while the test runs, so a bug in the callee costs
    points only in the callee's own tests.  The learner's binding (or its absence)
    comes back even when the test fails.

    Examples
    --------
    >>> ns = {"accept_prob": "learner's"}
    >>> with use_reference(ns, "accept_prob", "reference's"):
    ...     ns["accept_prob"]
    "reference's"
    >>> ns["accept_prob"]
    "learner's"
    """
    missing = object()
    saved = namespace.get(name, missing)
    namespace[name] = reference_fn
    try:
        yield
    finally:
        if saved is missing:
            namespace.pop(name, None)
        else:
            namespace[name] = saved


def use_reference_for_cell(
    namespace: MutableMapping[str, Any], name: str, reference_fn: Callable[..., Any]
) -> None:
    """Bind ``namespace[name]`` to ``reference_fn`` until the current notebook cell ends.

    A hidden test calls this first, so that the rest of the cell, the visible asserts
    after the hidden block included, runs the function under test with the reference
    callee.  IPython's ``post_run_cell`` event restores the learner's binding when the
    cell finishes, also when an assertion in it fails.  ``namespace`` must be an IPython
    user namespace (it holds ``get_ipython``); outside a kernel use :func:`use_reference`.

    Examples
    --------
    >>> class Events:
    ...     def __init__(self):
    ...         self.callbacks = []
    ...     def register(self, event, fn):
    ...         self.callbacks.append(fn)
    ...     def unregister(self, event, fn):
    ...         self.callbacks.remove(fn)
    >>> shell = type("Shell", (), {"events": Events()})()
    >>> ns = {"get_ipython": lambda: shell, "accept_prob": "learner's"}
    >>> use_reference_for_cell(ns, "accept_prob", "reference's")
    >>> ns["accept_prob"]
    "reference's"
    >>> for callback in list(shell.events.callbacks):  # what IPython does after the cell
    ...     callback(None)
    >>> ns["accept_prob"], shell.events.callbacks
    ("learner's", [])
    """
    get_ipython = namespace.get("get_ipython")
    shell = get_ipython() if callable(get_ipython) else None
    if shell is None:
        raise RuntimeError("use_reference_for_cell needs an IPython kernel; use use_reference")
    missing = object()
    saved = namespace.get(name, missing)
    namespace[name] = reference_fn

    def restore(*_result: Any) -> None:
        shell.events.unregister("post_run_cell", restore)
        if saved is missing:
            namespace.pop(name, None)
        else:
            namespace[name] = saved

    shell.events.register("post_run_cell", restore)


def _plain(value: Any) -> Any:
    """Turn nested dicts of arrays into plain Python values that compare with ==."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.tolist() if hasattr(value, "tolist") else value


def _numpy_global_state() -> Any:
    np = sys.modules.get("numpy")
    return None if np is None else _plain(np.random.get_state(legacy=False))


@contextlib.contextmanager
def global_random_state_preserved(call: str) -> Iterator[None]:
    """Fail if the block changes numpy's global random state (``np.random.seed``...).

    Examples
    --------
    >>> import numpy as np
    >>> with global_random_state_preserved("f()"):
    ...     _ = np.random.default_rng(0).random()
    >>> with global_random_state_preserved("f()"):  # doctest: +NORMALIZE_WHITESPACE
    ...     _ = np.random.random()
    Traceback (most recent call last):
    ...
    AssertionError: f() changed numpy's global random state (np.random.seed, np.random.random,
    np.random.choice...), expected it untouched: use only a Generator, e.g.
    rng = np.random.default_rng(seed).
    """
    before = _numpy_global_state()
    yield
    if _numpy_global_state() != before:
        raise AssertionError(
            f"{call} changed numpy's global random state (np.random.seed, np.random.random, "
            "np.random.choice...), expected it untouched: use only a Generator, e.g. "
            "rng = np.random.default_rng(seed)."
        )


def _is_reference_object(value: Any) -> bool:
    """True for the reference package, its modules, and anything defined in them."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
    else:
        name = getattr(value, "__module__", None)
        if not isinstance(name, str):
            return False
    return name == REFERENCE_PACKAGE or name.startswith(REFERENCE_PACKAGE + ".")


def _mentions_reference(text: str) -> bool:
    return text == REFERENCE_PACKAGE or text.startswith(REFERENCE_PACKAGE + ".")


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """Yield ``code`` and every code object nested in it (inner functions, lambdas...)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reference_uses(fn: Any, seen: set[int]) -> list[str]:
    """Return how ``fn`` (and the notebook functions it calls) reach the reference."""
    if id(fn) in seen:
        return []
    seen.add(id(fn))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if _is_reference_object(fn):
        return [f"{name} is the reference's own {type(fn).__name__}"]
    # Unwrap partials, decorated functions and bound methods to the code underneath.
    inner = [
        getattr(fn, attr)
        for attr in ("func", "__wrapped__", "__func__")
        if hasattr(fn, attr) and not isinstance(fn, type)
    ]
    if isinstance(fn, functools.partial):
        inner += list(fn.args) + list(fn.keywords.values())
    found = [use for obj in inner for use in _reference_uses(obj, seen)]
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return found
    fn_globals = getattr(fn, "__globals__", {})
    referenced: list[Any] = list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    referenced += [cell.cell_contents for cell in (fn.__closure__ or ()) if _cell_is_set(cell)]
    for sub in _code_objects(code):
        for word in sub.co_names:
            if _mentions_reference(word):
                found.append(f"{name} uses the name {word}")
            elif word in fn_globals:
                referenced.append(fn_globals[word])
        for const in sub.co_consts:
            if isinstance(const, str) and _mentions_reference(const):
                found.append(f"{name} names {const!r}")
    for value in referenced:
        if _is_reference_object(value):
            found.append(
                f"{name} uses {getattr(value, '__name__', _show(value))} from {REFERENCE_PACKAGE}"
            )
        elif isinstance(value, (types.FunctionType, functools.partial)):
            found += _reference_uses(value, seen)
    return found


def _cell_is_set(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (raises ValueError while empty)
    except ValueError:
        return False
    return True


def assert_no_reference(fn: Any, *, name: str | None = None) -> None:
    r"""Fail if ``fn``, or a notebook function it calls, uses ``specdec_reference``.

    Looks at the function itself, its code and every nested code object (names,
    imports, string constants), the globals it reads, its defaults and closure,
    and recursively the functions those lead to.

    Examples
    --------
    >>> notebook = {"__name__": "__main__"}
    >>> exec("import specdec_reference\n"
    ...      "def accept_prob(p, q):\n"
    ...      "    return specdec_reference.accept_prob(p, q)\n", notebook)
    >>> assert_no_reference(notebook["accept_prob"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: accept_prob must be your own code, but accept_prob uses the name
    specdec_reference. Graded functions may not use the reference implementation
    specdec_reference.
    >>> exec("def own(p, q):\n    return min(1.0, p / q)\n", notebook)
    >>> assert_no_reference(notebook["own"])
    """
    uses = _reference_uses(fn, set())
    if uses:
        label = name or getattr(fn, "__name__", "this function")
        raise AssertionError(
            f"{label} must be your own code, but {'; '.join(dict.fromkeys(uses))}. Graded "
            f"functions may not use the reference implementation {REFERENCE_PACKAGE}."
        )


def _learner_cells_using_reference(history: Sequence[Any]) -> list[str]:
    """Return the lines of executed learner cells that import or name the reference."""
    found = []
    for source in history:
        if not isinstance(source, str) or any(m in source for m in _TEST_CELL_MARKERS):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                hit = any(_mentions_reference(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                hit = node.level == 0 and _mentions_reference(node.module or "")
            elif isinstance(node, ast.Name):
                hit = _mentions_reference(node.id)
            elif isinstance(node, ast.Constant):
                hit = isinstance(node.value, str) and _mentions_reference(node.value)
            else:
                hit = False
            if hit:
                line = source.splitlines()[node.lineno - 1].strip()
                found.append(line)
    return list(dict.fromkeys(found))


def reference_guard(namespace: Mapping[str, Any], names: Sequence[str] = ()) -> None:
    """Fail if the learner's notebook imported or uses ``specdec_reference``.

    Three checks, so that the hidden tests' own imports of the reference do not
    count against the learner:

    1. ``namespace[PRELOADED_KEY]``: recorded by the first hidden test before it
       imported anything, True when the reference was already in ``sys.modules``;
    2. the cells executed so far (IPython's ``_ih``), skipping instructor test
       cells, must not import or name the reference;
    3. each function in ``names`` must pass :func:`assert_no_reference`.

    Examples
    --------
    >>> ns = {"_ih": ["", "from specdec_reference import accept_prob"]}
    >>> reference_guard(ns)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: Your notebook uses the reference implementation (from specdec_reference
    import accept_prob). The graded functions must be your own code, so every hidden test fails
    while it does: remove it, restart the kernel and run all cells.
    """
    problems = []
    if namespace.get(PRELOADED_KEY):
        problems.append(f"{REFERENCE_PACKAGE} was imported before the tests ran")
    problems += _learner_cells_using_reference(namespace.get("_ih") or ())
    if problems:
        raise AssertionError(
            f"Your notebook uses the reference implementation ({'; '.join(problems)}). "
            "The graded functions must be your own code, so every hidden test fails while "
            "it does: remove it, restart the kernel and run all cells."
        )
    for name in names:
        if name in namespace:
            assert_no_reference(namespace[name], name=name)
