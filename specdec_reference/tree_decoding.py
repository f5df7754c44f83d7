"""Lesson E7.5's tree drafter and decoder on real models: draft a tree (sampled or top-k),
score it with one tree pass, verify it, and decode with one tree per target pass."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .decoding import with_temperature
from .trees import _tree, greedy_verify_tree, verify_tree

__all__ = ["draft_tree", "topk_tree", "tree_rows", "tree_decode"]


def _context(context: Sequence[int]) -> list[int]:
    return [operator.index(t) for t in np.asarray(context).reshape(-1).tolist()]


def _paths(context: list[int], tokens: list[int], parents: list[int]) -> list[list[int]]:
    """The text each node stands for: the context, then the path's tokens after the root."""
    paths = [list(context)]
    for i in range(1, len(parents)):
        paths.append(paths[parents[i]] + [tokens[i]])
    return paths


def draft_tree(
    draft_model: Any,
    context: Sequence[int],
    widths: Sequence[int],
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> tuple[tuple[list[int], list[int]], np.ndarray]:
    """Draft a tree: every node at depth ``d`` gets ``widths[d]`` children drawn i.i.d.

    Returns ``((tokens, parents), draft_rows)``: nodes in breadth-first order, node 0
    the last token of ``context``, and row ``i`` the tempered draft distribution after
    node ``i``'s path, from which its children were drawn (duplicates are kept: the
    exactness of :func:`~specdec_reference.trees.multi_draft_accept` needs independent
    draws).  Draws: for each node in order, ``widths[depth]`` calls ``rng.choice(V, p=row)``.

    Examples
    --------
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> model = train_ngram(encode("abcabc"), order=2)
    >>> (tokens, parents), rows = draft_tree(model, encode("a"), (2, 1), np.random.default_rng(0))
    >>> parents, rows.shape
    ([-1, 0, 0, 1, 2], (5, 96))
    """
    context = _context(context)
    tokens, parents, depth = [context[-1]], [-1], [0]
    rows = []
    i = 0
    while i < len(tokens):
        path = context + [tokens[j] for j in _path_nodes(parents, i)]
        q = with_temperature(draft_model.probs(path), temperature)
        rows.append(q)
        if depth[i] < len(widths):
            for _ in range(operator.index(widths[depth[i]])):
                tokens.append(int(rng.choice(len(q), p=q)))
                parents.append(i)
                depth.append(depth[i] + 1)
        i += 1
    return (tokens, parents), np.array(rows)


def topk_tree(
    draft_model: Any, context: Sequence[int], widths: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Draft a tree of the draft's top tokens: ``widths[d]`` most likely children per node.

    The deterministic trees of SpecInfer's expansion and of Medusa, for greedy
    verification; no two siblings share a token.

    Examples
    --------
    >>> from specdec_reference.ngram import decode, encode, train_ngram
    >>> model = train_ngram(encode("abcabcabd"), order=2)
    >>> tokens, parents = topk_tree(model, encode("b"), (2,))
    >>> decode(tokens), parents
    ('bcd', [-1, 0, 0])
    """
    context = _context(context)
    tokens, parents, depth = [context[-1]], [-1], [0]
    i = 0
    while i < len(tokens):
        if depth[i] < len(widths):
            q = draft_model.probs(context + [tokens[j] for j in _path_nodes(parents, i)])
            for token in np.argsort(-q, kind="stable")[: operator.index(widths[depth[i]])]:
                tokens.append(int(token))
                parents.append(i)
                depth.append(depth[i] + 1)
        i += 1
    return tokens, parents


def _path_nodes(parents: list[int], node: int) -> list[int]:
    """The nodes from the root (excluded) down to ``node`` (included)."""
    out = []
    while node > 0:
        out.append(node)
        node = parents[node]
    return out[::-1]


def tree_rows(
    model: Any, context: Sequence[int], tree: Any, temperature: float = 1.0
) -> np.ndarray:
    """Return what one tree-attention pass computes: row ``i`` after node ``i``'s path.

    Examples
    --------
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> model = train_ngram(encode("abab"), order=2)
    >>> tree_rows(model, encode("a"), ([65, 66, 65], [-1, 0, 0])).shape
    (3, 96)
    """
    context = _context(context)
    tokens, parents = _tree(tree)
    return with_temperature(
        np.stack([model.probs(path) for path in _paths(context, tokens, parents)]), temperature
    )


def tree_decode(
    target_model: Any,
    draft_model: Any,
    prompt: Sequence[int],
    n: int,
    widths: Sequence[int],
    rng: np.random.Generator,
    temperature: float = 1.0,
    verify: Any = None,
) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Decode ``n`` tokens with one drafted tree and one target pass per step.

    ``verify`` (default :func:`verify_tree`) is called as ``verify(tree, target_rows,
    draft_rows, rng)``.  At ``temperature = 0`` the tree is :func:`topk_tree` and the
    verification :func:`greedy_verify_tree`.  Returns the tokens and one ``(drafted
    nodes, accepted, emitted)`` row per pass.

    Examples
    --------
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> from specdec_reference.decoding import generate
    >>> text = encode("the cat sat on the mat. " * 20)
    >>> target, small = train_ngram(text, order=4), train_ngram(text, order=2)
    >>> out, _ = tree_decode(target, small, encode("the "), 12, (2, 2), None, temperature=0)
    >>> out == generate(target, encode("the "), 12, None, temperature=0)
    True
    """
    context = _context(prompt)
    out: list[int] = []
    stats: list[tuple[int, int, int]] = []
    while len(out) < operator.index(n):
        text = context + out
        if float(temperature) == 0:
            tree = topk_tree(draft_model, text, widths)
            best = [int(np.argmax(row)) for row in tree_rows(target_model, text, tree)]
            emitted, path = greedy_verify_tree(tree, best)
        else:
            tree, q_rows = draft_tree(draft_model, text, widths, rng, temperature)
            p_rows = tree_rows(target_model, text, tree, temperature)
            emitted, path = (verify or verify_tree)(tree, p_rows, q_rows, rng)
        out.extend(int(t) for t in emitted)
        stats.append((len(tree[0]) - 1, len(emitted) - 1, len(emitted)))
    return out[: operator.index(n)], stats
