"""Part 1: ``tree_depths`` and ``tree_attention_mask`` against the reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import trees
from ..calls import call_or_fail
from ..compare import check_equal
from ..convert import describe_call
from .shared import ints


def check_tree_depths(fn: Callable[..., Any], parents: Sequence[int]) -> None:
    """Compare ``fn(parents)`` with the reference; name the index-for-depth mistake.

    Examples
    --------
    >>> check_tree_depths(lambda p: list(range(len(p))), [-1, 0, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: tree_depths([-1, 0, 0]) returned [0, 1, 2]... node indices...
    """
    call = describe_call("tree_depths", list(parents))
    got = ints(call_or_fail(fn, list(parents), call=call), call, "a list of depths")
    expected = trees.tree_depths(parents)
    check_equal(
        got,
        expected,
        call=call,
        mistakes={
            "positions taken as node indices instead of depths": (
                list(range(len(parents))),
                "siblings share a position: a node's position is its parent's plus 1, so node i "
                "sits at depths[parents[i]] + 1",
            ),
            "depths counted from 1": ([d + 1 for d in expected], "the root has depth 0"),
        },
    )


def _matrix(got: Any, n: int, call: str) -> list[list[bool]]:
    try:
        arr = np.asarray(got)
    except Exception:
        arr = None
    if arr is None or arr.shape != (n, n):
        shape = None if arr is None else arr.shape
        raise AssertionError(
            f"{call} returned {got!r:.80} (shape {shape}), expected an ({n}, {n}) boolean array."
        )
    values = arr.tolist()
    for row in values:
        for v in row:
            if v not in (0, 1, True, False):
                raise AssertionError(f"{call} returned an entry {v!r}, expected True or False.")
    return [[bool(v) for v in row] for row in values]


def check_tree_attention_mask(fn: Callable[..., Any], parents: Sequence[int]) -> None:
    """Compare ``fn(parents)`` with the reference mask; name the usual mistakes.

    Examples
    --------
    >>> causal = lambda p: np.tril(np.ones((len(p), len(p)), dtype=bool))
    >>> check_tree_attention_mask(causal, [-1, 0, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: tree_attention_mask([-1, 0, 0]): row 2 ... siblings see each other...
    """
    parents = list(parents)
    n = len(parents)
    call = describe_call("tree_attention_mask", parents)
    got = _matrix(call_or_fail(fn, parents, call=call), n, call)
    expected = trees.tree_attention_mask(parents).tolist()
    if got == expected:
        return
    i = next(r for r in range(n) if got[r] != expected[r])
    shown = [j for j in range(n) if got[i][j]]
    wanted = [j for j in range(n) if expected[i][j]]
    siblings = [
        [expected[a][b] or (b <= a and parents[a] == parents[b] and a > 0) for b in range(n)]
        for a in range(n)
    ]
    hint = ""
    causal = np.tril(np.ones((n, n), dtype=bool)).tolist()
    if got == causal and got == siblings:  # a star: the two mistakes give the same mask
        hint = (
            " That is a mask letting siblings see each other, the sequence's causal mask "
            "(every earlier node) on this tree: a node may see only itself and its ancestors"
        )
    elif got == causal:
        hint = (
            " That is the sequence's causal mask (every earlier node), with which siblings "
            "see each other: a node may see only itself and its ancestors"
        )
    elif got == siblings:
        hint = " That is a mask letting siblings see each other: keep only the ancestors"
    elif got == [list(r) for r in zip(*expected, strict=True)]:
        hint = " That is the mask transposed: row i is what node i sees (its ancestors)"
    elif got == [[expected[a][b] and a != b for b in range(n)] for a in range(n)]:
        hint = " That is the mask without the diagonal: a node sees itself too"
    raise AssertionError(
        f"{call}: row {i} (what node {i} sees) is True at {shown}, expected {wanted}, node {i} "
        f"and its ancestors.{hint}.".replace("..", ".")
    )
