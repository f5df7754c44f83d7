"""The key-value cache after a tree pass: which entries to keep, in order (lesson E7.5).

A chain's cache is rolled back by truncation (:mod:`~specdec_reference.kvcache`): the
accepted tokens are a prefix of what the pass fed.  A tree pass feeds every node, in
index order, after the cached context, so the accepted path's entries are scattered
among rejected siblings and their subtrees; before the next pass they must be gathered
into one contiguous sequence, as SpecInfer's and Medusa's implementations do.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

__all__ = ["tree_cache_keep"]


def tree_cache_keep(parents: Sequence[int], path: Sequence[int], cached: int) -> list[int]:
    """Return the cache positions to keep after a tree pass, in the order they stay.

    Parameters
    ----------
    parents : (n,) sequence of int
        The tree's parent array (``parents[0] = -1``, ``parents[i] < i``).
    path : sequence of int
        The accepted nodes, root excluded, from the root down, as ``verify_tree``
        returns them: each a child of the one before.
    cached : int
        Entries the cache held before the pass: positions ``0 .. cached - 1``, the text
        before the root.  The pass appended one entry per node, node ``i`` at position
        ``cached + i``.

    Returns
    -------
    list of int
        The whole cached context, then the root's entry, then the accepted nodes'
        entries along the path: ``cached + 1 + len(path)`` positions.  The entries kept
        are those of the text that the next pass continues; the token the pass emitted
        last (residual or bonus) has no entry yet, as after a chain's pass.

    Raises
    ------
    ValueError
        If ``path`` is not a path down from the root of this tree, or ``cached < 0``.

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer", ASPLOS 2024, arXiv:2305.09781 (Section 4.2).

    Examples
    --------
    >>> tree_cache_keep([-1, 0, 0, 1, 1, 2], [2, 5], 3)  # nodes 1, 3, 4 were rejected
    [0, 1, 2, 3, 5, 8]
    """
    parents = [operator.index(x) for x in np.asarray(parents).reshape(-1).tolist()]
    path = [operator.index(v) for v in np.asarray(path).reshape(-1).tolist()]
    cached = operator.index(cached)
    if cached < 0:
        raise ValueError(f"cached = {cached}: a cache holds no fewer than 0 entries")
    node = 0
    for v in path:
        if not 0 < v < len(parents) or parents[v] != node:
            raise ValueError(f"{path} is not a path down from the root of {parents}")
        node = v
    # The context stays where it is; the root and the path close up behind it.
    return list(range(cached)) + [cached + v for v in [0, *path]]
