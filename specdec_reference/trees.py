"""Token trees: tree attention, exact acceptance among several candidates, tree verification.

A tree of drafted tokens is a *parent array*: node 0 is the root, the last token already
emitted, with ``parents[0] = -1``; every other node ``i`` has a parent ``parents[i] < i``.
Node ``i`` stands for the text so far followed by the tokens on the path from the root
(excluded) to ``i`` (included).  One target pass scores every node at once: node ``i``
attends to itself and its ancestors only (:func:`tree_attention_mask`), at the position
of its depth (:func:`tree_depths`), so its row is the target's distribution after its
own path.  :func:`verify_tree` then walks down from the root and, at each node, chooses
among the children with :func:`multi_draft_accept` (SpecInfer's multi-step speculative
sampling), which keeps the output distributed exactly as the target's when the children
are drawn independently from the draft's distribution at that node.  The budget of a
tree (:func:`tree_expected_tokens`, :func:`best_tree`) and the exact distributions of
:func:`multi_draft_accept` are here too; drafting and decoding with real models is
:mod:`specdec_reference.tree_decoding`'s.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "tree_depths",
    "tree_attention_mask",
    "multi_draft_accept",
    "verify_tree",
    "greedy_verify_tree",
    "tree_expected_tokens",
    "best_tree",
    "chain_or_tree",
    "multi_draft_distribution",
    "multi_draft_acceptance",
]


def _parents(parents: Sequence[int]) -> list[int]:
    out = [operator.index(x) for x in np.asarray(parents).reshape(-1).tolist()]
    if not out or out[0] != -1:
        raise ValueError("parents[0] must be -1: node 0 is the root")
    for i, parent in enumerate(out[1:], 1):
        if not 0 <= parent < i:
            raise ValueError(f"parents[{i}] = {parent}: every parent must come before its child")
    return out


def _children(parents: Sequence[int]) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in parents]
    for i, parent in enumerate(parents):
        if i:
            kids[parent].append(i)
    return kids


def tree_depths(parents: Sequence[int]) -> list[int]:
    """Return the depth of every node of a tree given as a parent array.

    Parameters
    ----------
    parents : (n,) sequence of int
        ``parents[0] = -1`` (node 0 is the root), ``0 <= parents[i] < i`` for ``i >= 1``.

    Returns
    -------
    list of int
        ``depths[0] = 0`` and ``depths[i] = depths[parents[i]] + 1``.  Node ``i`` sits at
        position ``L - 1 + depths[i]`` of the text when the root is token ``L - 1``: its
        position is its depth, not its index (siblings share a position).

    Raises
    ------
    ValueError
        If ``parents`` is not a parent array in that order.

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer: Accelerating Large Language Model Serving with
       Tree-based Speculative Inference and Verification", ASPLOS 2024, arXiv:2305.09781.
    .. [2] T. Cai et al., "Medusa: Simple LLM Inference Acceleration Framework with
       Multiple Decoding Heads", ICML 2024, arXiv:2401.10774.

    Examples
    --------
    >>> tree_depths([-1, 0, 0, 1, 1, 2])
    [0, 1, 1, 2, 2, 2]
    """
    parents = _parents(parents)
    depths = [0] * len(parents)
    for i in range(1, len(parents)):
        depths[i] = depths[parents[i]] + 1  # the parent comes first, so its depth is known
    return depths


def tree_attention_mask(parents: Sequence[int]) -> np.ndarray:
    """Return the tree attention mask: node ``i`` sees itself and its ancestors only.

    Parameters
    ----------
    parents : (n,) sequence of int
        A parent array (see :func:`tree_depths`).

    Returns
    -------
    (n, n) ndarray of bool
        ``mask[i, j]`` is True exactly when ``j`` is ``i`` or an ancestor of ``i``.  Row
        ``i`` is the causal mask of the sequence root, ..., ``i``; siblings and cousins
        are hidden from each other.  The mask is lower triangular, since parents come
        before their children.

    Notes
    -----
    With this mask and the positions of :func:`tree_depths`, one pass over the ``n``
    nodes computes, for every node, what a pass over its own path alone would: the
    tree attention of SpecInfer (its topology-aware causal mask) and of Medusa.

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer", ASPLOS 2024, arXiv:2305.09781 (Section 4.2).
    .. [2] T. Cai et al., "Medusa", ICML 2024, arXiv:2401.10774 (Section 2.1.2).

    Examples
    --------
    >>> tree_attention_mask([-1, 0, 0, 1]).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [1, 0, 1, 0],
           [1, 1, 0, 1]])
    """
    parents = _parents(parents)
    n = len(parents)
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        mask[i, i] = True
        if i:
            mask[i] |= mask[parents[i]]  # everything the parent sees, and itself
    return mask


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    leftover = np.maximum(p - q, 0.0)
    total = leftover.sum()
    # A rejection has probability 0 when p <= q everywhere (then p = q): keep p.
    return leftover / total if total > 0 else p


def multi_draft_accept(
    p: npt.ArrayLike, q: npt.ArrayLike, candidates: Sequence[int], rng: np.random.Generator
) -> tuple[int, int | None]:
    """Choose among candidates drawn independently from ``q`` so that the output follows ``p``.

    Parameters
    ----------
    p : (V,) array_like
        The target's distribution at this node.
    q : (V,) array_like
        The draft's distribution that every candidate was drawn from.
    candidates : sequence of int
        ``m >= 0`` tokens, each an independent draw from ``q``.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    token : int
        The emitted token.
    index : int or None
        The position in ``candidates`` of the accepted candidate, or None when every
        candidate was rejected and ``token`` was drawn from the last residual.

    Notes
    -----
    Multi-step speculative sampling (SpecInfer's ``VerifyStochastic``).  Start with
    :math:`r_0 = p`.  Candidate :math:`j` is accepted with probability
    :math:`\\min(1, r_j(x_j) / q(x_j))`; on rejection
    :math:`r_{j+1} = \\max(0, r_j - q) / \\sum \\max(0, r_j - q)`.  If all :math:`m` are
    rejected the token is drawn from :math:`r_m`.  Each step is the single-draft accept
    step, which emits a token distributed as :math:`r_j` given the candidate :math:`x_j
    \\sim q`; by induction on :math:`m`, the output follows :math:`p`.  Draws: one
    ``rng.random()`` per candidate tested, in order, then one ``rng.choice(V, p=r_m)``
    if all were rejected.  Testing every candidate against the original :math:`p` and
    keeping the first that passes is biased towards :math:`\\min(p, q)`.

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer", ASPLOS 2024, arXiv:2305.09781 (Section 4.3,
       Theorem 4.2).
    .. [2] Z. Chen et al., "Sequoia: Scalable, Robust, and Hardware-aware Speculative
       Decoding", 2024, arXiv:2402.12374 (Algorithm 2, which draws without replacement).

    Examples
    --------
    >>> p, q = np.array([0.0, 1.0]), np.array([1.0, 0.0])
    >>> multi_draft_accept(p, q, [0, 0], np.random.default_rng(0))  # disjoint: never accepted
    (1, None)
    >>> multi_draft_accept(q, q, [0, 0, 0], np.random.default_rng(0))  # q = p: the first
    (0, 0)
    """
    current = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    for j, x in enumerate(candidates):
        x = operator.index(x)
        if rng.random() < min(1.0, current[x] / q[x]):
            return x, j
        current = _residual(current, q)  # the next candidate is tested against this
    return int(rng.choice(len(current), p=current)), None


def _tree(tree: Any) -> tuple[list[int], list[int]]:
    tokens, parents = tree
    tokens = [operator.index(t) for t in np.asarray(tokens).reshape(-1).tolist()]
    parents = _parents(parents)
    if len(tokens) != len(parents):
        raise ValueError("a tree needs one token per node")
    return tokens, parents


def verify_tree(
    tree: Any, target_rows: npt.ArrayLike, draft_rows: npt.ArrayLike, rng: np.random.Generator
) -> tuple[list[int], list[int]]:
    """Verify a drafted tree with one target pass: the accepted path and one target token.

    Parameters
    ----------
    tree : (tokens, parents)
        ``tokens[i]`` is node ``i``'s token (``tokens[0]`` the last emitted token) and
        ``parents`` a parent array.  The children of every node were drawn independently
        from ``draft_rows`` at that node.
    target_rows : (n, V) array_like
        Row ``i``: the target's distribution after node ``i``'s path.
    draft_rows : (n, V) array_like
        Row ``i``: the draft's distribution the children of node ``i`` were drawn from.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    emitted : list of int
        The tokens of the accepted path, then one token from the target: drawn from the
        last residual where every child was rejected, or the bonus token drawn from
        ``target_rows[leaf]`` when a leaf was accepted.
    path : list of int
        The accepted nodes, root excluded, in order (``len(emitted) = len(path) + 1``).

    Notes
    -----
    From the root, at each node with children, :func:`multi_draft_accept` runs over
    its children in index order; an accepted child becomes the next node, and a
    rejection of all of them ends the walk with the residual token.  Draws: those of
    each ``multi_draft_accept`` call, then ``rng.choice(V, p=target_rows[leaf])`` for
    the bonus token.

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer", ASPLOS 2024, arXiv:2305.09781 (Algorithm 2).

    Examples
    --------
    >>> rows = np.eye(3)[[1, 2, 0, 0]]  # the target wants 1, then 2, then 0
    >>> verify_tree(([0, 1, 2, 2], [-1, 0, 0, 1]), rows, rows, np.random.default_rng(0))
    ([1, 2, 0], [1, 3])
    """
    tokens, parents = _tree(tree)
    p_rows = np.asarray(target_rows, dtype=np.float64)
    q_rows = np.asarray(draft_rows, dtype=np.float64)
    kids = _children(parents)
    node, emitted, path = 0, [], []
    while kids[node]:
        token, index = multi_draft_accept(
            p_rows[node], q_rows[node], [tokens[c] for c in kids[node]], rng
        )
        emitted.append(token)
        if index is None:
            return emitted, path  # every child rejected: the residual token ends the pass
        node = kids[node][index]
        path.append(node)
    # A leaf was accepted (or the tree is only the root): the bonus token.
    emitted.append(int(rng.choice(p_rows.shape[1], p=p_rows[node])))
    return emitted, path


def greedy_verify_tree(tree: Any, target_argmax: Sequence[int]) -> tuple[list[int], list[int]]:
    """Verify a tree at temperature 0: the longest path that the target's argmax follows.

    Parameters
    ----------
    tree : (tokens, parents)
        As in :func:`verify_tree`.
    target_argmax : (n,) sequence of int
        ``target_argmax[i]``: the target's most likely token after node ``i``'s path.

    Returns
    -------
    emitted : list of int
        The tokens of the accepted path, then the target's own token at its end.
    path : list of int
        The accepted nodes, root excluded: from each node, a child whose token is the
        target's argmax there.  Where several children carry that token, any one gives a
        right greedy pass; this one follows the first (lowest index).

    References
    ----------
    .. [1] X. Miao et al., "SpecInfer", ASPLOS 2024, arXiv:2305.09781 (``VerifyGreedy``).

    Examples
    --------
    >>> greedy_verify_tree(([5, 1, 2, 3, 4], [-1, 0, 0, 2, 2]), [2, 0, 4, 0, 7])
    ([2, 4, 7], [2, 4])
    """
    tokens, parents = _tree(tree)
    best = [operator.index(t) for t in np.asarray(target_argmax).reshape(-1).tolist()]
    kids = _children(parents)
    node, emitted, path = 0, [], []
    while True:
        match = next((c for c in kids[node] if tokens[c] == best[node]), None)
        emitted.append(best[node])
        if match is None:
            return emitted, path
        node = match
        path.append(node)


def tree_expected_tokens(parents: Sequence[int], rates: Sequence[float]) -> float:
    """Return the expected tokens per pass of a tree under positional acceptance.

    Parameters
    ----------
    parents : (n,) sequence of int
        A parent array; the children of a node are ranked by index (first child rank 0).
    rates : sequence of float
        Sequoia's acceptance vector: ``rates[k]`` is the probability that, once a node is
        accepted, its child of rank ``k`` is the accepted one (0 beyond the vector).

    Returns
    -------
    float
        :math:`\\sum_{v} f(v)` with :math:`f(\\text{root}) = 1` and :math:`f(v)` the product
        of ``rates[rank]`` along the path to ``v``: the accepted drafted nodes on average,
        plus the target's own token.

    References
    ----------
    .. [1] Z. Chen et al., "Sequoia", 2024, arXiv:2402.12374 (Definitions 3.1-3.3,
       Proposition 3.4).

    Examples
    --------
    >>> round(tree_expected_tokens([-1, 0, 1, 2], [0.8]), 12)  # a chain: 1 + 0.8 + 0.64 + 0.512
    2.952
    >>> tree_expected_tokens([-1, 0, 0], [0.5, 0.2])
    1.7
    """
    parents = _parents(parents)
    rank = [0] * len(parents)
    seen = [0] * len(parents)
    score = [1.0] * len(parents)
    total = 1.0
    for i in range(1, len(parents)):
        rank[i] = seen[parents[i]]
        seen[parents[i]] += 1
        rate = float(rates[rank[i]]) if rank[i] < len(rates) else 0.0
        score[i] = score[parents[i]] * rate
        total += score[i]
    return total


def best_tree(rates: Sequence[float], budget: int) -> list[int]:
    """Return the parent array of the tree of ``budget`` drafted nodes with the most tokens.

    Parameters
    ----------
    rates : sequence of float
        A non-increasing acceptance vector (see :func:`tree_expected_tokens`).
    budget : int
        Drafted nodes, root excluded, ``budget >= 0``.

    Returns
    -------
    list of int
        ``budget + 1`` parents, nodes in the order they were added.

    Notes
    -----
    Best first: a node's score is at most its parent's and, with non-increasing rates, at
    most its elder sibling's, so the ``budget`` candidate nodes of highest score form a
    tree, and a heap of the candidate next children finds them.  Sequoia's dynamic
    program solves the same problem for any acceptance vector, and with a depth limit.

    References
    ----------
    .. [1] Z. Chen et al., "Sequoia", 2024, arXiv:2402.12374 (Section 3.1).

    Examples
    --------
    >>> best_tree([0.6, 0.2], 3)  # 0.6 * 0.6 * 0.6 beats a sibling's 0.2: a chain
    [-1, 0, 1, 2]
    >>> best_tree([0.3, 0.2, 0.1], 5)
    [-1, 0, 0, 0, 1, 2]
    """
    rates = [float(r) for r in rates]
    if any(b > a for a, b in zip(rates, rates[1:], strict=False)):
        raise ValueError("rates must be non-increasing")
    parents = [-1]
    score = [1.0]
    kids = [0]
    # Candidates: (-score, order, parent, rank) of the next child each node could get.
    heap: list[tuple[float, int, int, int]] = []
    if rates:
        heap.append((-rates[0], 0, 0, 0))
    order = 1
    for _ in range(operator.index(budget)):
        if not heap:
            break
        neg, _, parent, rank = heapq.heappop(heap)
        node = len(parents)
        parents.append(parent)
        score.append(-neg)
        kids.append(0)
        kids[parent] += 1
        for who, k in ((parent, rank + 1), (node, 0)):  # a younger sibling, a first child
            if k < len(rates) and rates[k] > 0:
                heapq.heappush(heap, (-score[who] * rates[k], order, who, k))
                order += 1
    while len(parents) < operator.index(budget) + 1:  # rates ran out: extra nodes add 0
        parents.append(len(parents) - 1)
    return parents


def chain_or_tree(rates: Sequence[float], budget: int) -> tuple[float, float]:
    """Return the expected tokens per pass of a chain and of the best tree, same budget.

    Parameters
    ----------
    rates : sequence of float
        A non-increasing acceptance vector; ``rates[0]`` is the chain's :math:`\\alpha`.
    budget : int
        Drafted nodes, ``budget >= 0``.

    Returns
    -------
    chain : float
        :math:`\\sum_{i=0}^{budget} \\alpha^i`, a chain of ``budget`` drafted tokens.
    tree : float
        :func:`tree_expected_tokens` of :func:`best_tree`.  Never below ``chain``, since
        the chain is one of the trees; equal when ``rates[1:]`` are 0.

    References
    ----------
    .. [1] Z. Chen et al., "Sequoia", 2024, arXiv:2402.12374.

    Examples
    --------
    >>> [round(x, 4) for x in chain_or_tree([0.6, 0.2], 3)]
    [2.176, 2.176]
    >>> [round(x, 4) for x in chain_or_tree([0.5, 0.25, 0.125], 6)]
    [1.9844, 2.375]
    """
    alpha = float(rates[0]) if len(rates) else 0.0
    chain = sum(alpha**i for i in range(operator.index(budget) + 1))
    return chain, tree_expected_tokens(best_tree(rates, budget), rates)


def multi_draft_distribution(
    p: npt.ArrayLike, q: npt.ArrayLike, m: int, mistake: str | None = None
) -> np.ndarray:
    """Return the exact output distribution of ``multi_draft_accept`` with ``m`` candidates.

    ``mistake`` computes a wrong rule instead: ``"any"`` tests every candidate against the
    original ``p`` (no residual update between candidates) and falls back on the residual
    of ``p``; ``"unchained"`` takes every residual from the original ``p``; ``"from-p"``
    chains the residuals but draws from ``p`` when all are rejected.

    Examples
    --------
    >>> p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])
    >>> multi_draft_distribution(p, q, 3)
    array([0.5, 0.5, 0. ])
    >>> multi_draft_distribution(p, q, 3, "any")
    array([0.125, 0.875, 0.   ])
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    out = np.zeros_like(p)
    alive, current = 1.0, p
    for _ in range(operator.index(m)):
        test = p if mistake == "any" else current
        accepted = np.minimum(test, q)  # q(x) min(1, test(x) / q(x))
        out += alive * accepted
        alive *= max(0.0, 1.0 - float(accepted.sum()))
        if mistake == "any":
            current = _residual(p, q)
        elif mistake == "unchained":
            current = _residual(p, q)
        else:
            current = _residual(current, q)
    fallback = p if mistake == "from-p" else current
    return out + alive * fallback


def multi_draft_acceptance(p: npt.ArrayLike, q: npt.ArrayLike, m: int) -> np.ndarray:
    """Return the exact distribution of the index that ``multi_draft_accept`` returns.

    With ``m`` candidates drawn independently from ``q``, entry ``j < m`` is the
    probability that candidate ``j`` is the accepted one, and entry ``m`` the probability
    that all are rejected (index None).

    Notes
    -----
    Candidate :math:`j` is a fresh draw from :math:`q`, independent of the earlier
    rejections, and is tested against the current distribution :math:`r_j` (:math:`r_0 = p`,
    each rejection replacing :math:`r_j` by its normalized residual), so given that the
    test reaches it, it is accepted with probability
    :math:`\\beta_j = \\sum_x q(x) \\min(1, r_j(x) / q(x)) = \\sum_x \\min(r_j(x), q(x))`.
    Hence :math:`P(\\text{index} = j) = \\beta_j \\prod_{i<j} (1 - \\beta_i)`, and some
    candidate is accepted with probability :math:`1 - \\prod_j (1 - \\beta_j)`.  Where
    :math:`r_j \\le q` everywhere, :math:`r_j = q` and :math:`\\beta_j = 1`: a rejection has
    probability 0, so the residual that would follow it (0 / 0) never matters.

    Examples
    --------
    >>> p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])
    >>> multi_draft_acceptance(p, q, 2)  # beta_0 = 0.5, then r_1 = (1, 0, 0): beta_1 = 0
    array([0.5, 0. , 0.5])
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    out = np.zeros(operator.index(m) + 1)
    alive, current = 1.0, p
    for j in range(operator.index(m)):
        beta = float(np.minimum(current, q).sum())
        out[j] = alive * beta
        alive *= max(0.0, 1.0 - beta)
        current = _residual(current, q)
    out[-1] = alive
    return out
