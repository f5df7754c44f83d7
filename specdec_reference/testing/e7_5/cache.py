"""Part 6: ``tree_cache_keep``, the cache positions kept after a tree pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import tree_cache
from ..calls import call_or_fail
from ..compare import check_equal
from ..convert import describe_call
from .shared import ints


def check_tree_cache_keep(
    fn: Callable[..., Any], parents: Sequence[int], path: Sequence[int], cached: int
) -> None:
    """Compare ``fn(parents, path, cached)`` with the reference; name the usual mistakes.

    Examples
    --------
    >>> chain = lambda parents, path, cached: list(range(cached + 1 + path[-1]))
    >>> check_tree_cache_keep(chain, [-1, 0, 0, 2], [2, 3], 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: tree_cache_keep(...) returned [0, 1, 2, 3, 4]... truncated...
    """
    parents, path = list(parents), list(path)
    call = describe_call("tree_cache_keep", parents, path, cached)
    got = ints(call_or_fail(fn, parents, path, cached, call=call), call, "a list of positions")
    want = tree_cache.tree_cache_keep(parents, path, cached)
    prefix = list(range(cached))
    last = path[-1] if path else 0
    check_equal(
        got,
        want,
        call=call,
        advice="the cached context, then the root's entry at position cached, then each "
        "accepted node's entry at cached + node, in the path's order",
        mistakes={
            "the cache truncated after the last accepted node, as after a chain, which keeps "
            "the rejected nodes fed before it": (
                list(range(cached + last + 1)),
                "in a tree pass the accepted nodes are not a prefix of what was fed: gather "
                "the path's positions instead",
            ),
            "every node of the tree kept": (
                list(range(cached + len(parents))),
                "the rejected nodes' entries hold text that was never emitted: drop them",
            ),
            "node indices used as cache positions": (
                prefix + [0, *path],
                "node i's entry sits at position cached + i, after the cached context",
            ),
            "the root's entry left out": (
                prefix + [cached + v for v in path],
                "the root (the last emitted token) was fed by this pass too: keep position cached",
            ),
            "the cached context dropped": (
                [cached + v for v in [0, *path]],
                "the entries before the pass stay: positions 0 .. cached - 1 come first",
            ),
        },
    )


def random_path(rng: np.random.Generator, parents: Sequence[int]) -> list[int]:
    """A random accepted path: from the root, a uniform child, until a leaf or a stop (1/3).

    Examples
    --------
    >>> random_path(np.random.default_rng(0), [-1])
    []
    """
    kids: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        kids[parents[i]].append(i)
    path, node = [], 0
    while kids[node] and rng.random() > 1 / 3:
        node = kids[node][int(rng.integers(0, len(kids[node])))]
        path.append(node)
    return path
