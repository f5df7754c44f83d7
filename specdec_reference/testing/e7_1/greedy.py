"""Part 6: the greedy accept step, ``greedy_verify``: its accepted prefix, its whole
output, and its answer for arrays and tuples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import greedy
from ..calls import call_or_fail
from ..compare import check_equal
from ..convert import _show, as_int


def greedy_case(
    rng: np.random.Generator, k: int, j: int, vocab: int = 50
) -> tuple[list[int], list[int]]:
    """A draft of ``k`` tokens whose first mismatch with the target is at ``j`` (``j = k``: none).

    Examples
    --------
    >>> best, drafted = greedy_case(np.random.default_rng(0), 4, 2)
    >>> len(best), len(drafted), drafted[:2] == best[:2], drafted[2] != best[2]
    (5, 4, True, True)
    """
    best = [int(t) for t in rng.integers(0, vocab, size=k + 1)]
    drafted = best[:k]
    for i in range(j + 1, k):  # after the mismatch anything goes, agreeing or not
        drafted[i] = int(rng.integers(0, vocab))
    if j < k:
        drafted[j] = (best[j] + 1 + int(rng.integers(0, vocab - 1))) % vocab  # never best[j]
    return best, drafted


def _greedy_call(target_argmax: Any, drafted: Any) -> str:
    return f"greedy_verify({_show(target_argmax)}, {_show(drafted)})"


def _tokens(got: Any, call: str) -> list[int]:
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool):
        raise AssertionError(
            f"{call} returned {_show(got)}, expected the list of emitted tokens. That is a "
            "count: return the accepted drafted tokens followed by the target's token."
        )
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {_show(got)}, expected a list of tokens (ints)."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in np.asarray(got, dtype=object).reshape(-1)]


def _run_greedy(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> list[int]:
    """Call ``fn`` on copies; fail if it changed the inputs it was given."""
    call = _greedy_call(target_argmax, drafted)
    given_best = target_argmax.copy() if hasattr(target_argmax, "copy") else target_argmax
    given_draft = drafted.copy() if hasattr(drafted, "copy") else drafted
    got = _tokens(call_or_fail(fn, given_best, given_draft, call=call), call)
    for name, mine, theirs in (
        ("drafted", drafted, given_draft),
        ("target_argmax", target_argmax, given_best),
    ):
        if [int(t) for t in mine] != [int(t) for t in theirs]:
            raise AssertionError(
                f"{call} changed the {name} it was given (now {_show(theirs)}): build a new "
                "list for the emitted tokens instead of appending to an argument."
            )
    return got


def check_greedy_prefix(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Check the accepted part: the drafted tokens up to the first mismatch, then at most one more.

    Examples
    --------
    >>> check_greedy_prefix(lambda b, d: [x for x, y in zip(d, b) if x == y] + [b[-1]],
    ...                     [1, 2, 3, 4], [1, 9, 3])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify([1, 2, 3, 4], [1, 9, 3]) returned [1, 3, 4], which does not
    start with the accepted prefix [1] followed by one token. That is carrying on after a
    mismatch: stop at the first drafted token that differs from the target's argmax; the
    tokens drafted after it continue a text that is discarded.
    """
    call = _greedy_call(target_argmax, drafted)
    got = _run_greedy(fn, target_argmax, drafted)
    best = [int(t) for t in target_argmax]
    draft = [int(t) for t in drafted]
    j = next((i for i in range(len(draft)) if draft[i] != best[i]), len(draft))
    if got[:j] == draft[:j] and len(got) in (j, j + 1):
        return
    matches = [x for x, y in zip(draft, best, strict=False) if x == y]
    hint = ""
    if j < len(draft) and (len(got) > j + 1 or got[: len(matches)] == matches):
        hint = (
            " That is carrying on after a mismatch: stop at the first drafted token that "
            "differs from the target's argmax; the tokens drafted after it continue a text "
            "that is discarded."
        )
    elif len(got) < j:
        hint = " It stops too early: every drafted token up to the first mismatch is kept."
    raise AssertionError(
        f"{call} returned {got}, which does not start with the accepted prefix "
        f"{draft[:j]} followed by one token.{hint}"
    )


def check_greedy_tokens(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Compare the whole output with ``drafted[:j] + [target_argmax[j]]``.

    Examples
    --------
    >>> check_greedy_tokens(lambda b, d: [], [4, 8], [3])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify([4, 8], [3]) returned [], expected [4]. That is dropping the
    target's token: a pass always emits one token of the target's, the correction at the
    first mismatch or the bonus after a fully accepted draft.
    """
    call = _greedy_call(target_argmax, drafted)
    got = _run_greedy(fn, target_argmax, drafted)
    expected = greedy.greedy_verify(target_argmax, drafted)
    draft = [int(t) for t in drafted]
    j = len(expected) - 1
    check_equal(
        got,
        expected,
        call=call,
        mistakes={
            "dropping the target's token": (
                expected[:-1],
                "a pass always emits one token of the target's, the correction at the first "
                "mismatch or the bonus after a fully accepted draft",
            ),
            "keeping the mismatched drafted token": (
                draft[: j + 1] if j < len(draft) else None,
                "at the first mismatch the target's argmax replaces the drafted token",
            ),
        },
    )


def check_greedy_types(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Check that arrays and tuples give what lists give (the learner's own list answer).

    Examples
    --------
    >>> joined = lambda b, d: list(d[:1] + b[1:2])  # list concatenation; arrays add instead
    >>> check_greedy_types(joined, [1, 2, 3], [1, 2])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify(array([1, 2, 3]), array([1, 2])) returned [3], but [1, 2]
    for the same tokens as lists: the docstring allows lists, tuples or 1-D arrays (with
    arrays, + adds elementwise instead of joining).
    """
    best = [int(t) for t in target_argmax]
    draft = [int(t) for t in drafted]
    own = _run_greedy(fn, list(best), list(draft))
    for convert, shown in (
        (lambda v: np.array(v, dtype=np.int64), "array"),
        (tuple, "tuple"),
    ):
        args = (convert(best), convert(draft))
        label = (
            f"greedy_verify({shown}({best}), {shown}({draft}))"
            if shown == "array"
            else _greedy_call(*args)
        )
        got = _run_greedy(fn, *args)
        if got != own:
            raise AssertionError(
                f"{label} returned {got}, but {own} for the same tokens as lists: the "
                "docstring allows lists, tuples or 1-D arrays (with arrays, + adds "
                "elementwise instead of joining)."
            )
