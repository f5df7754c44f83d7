"""Part 3: ``verify_tree``: each pass's path, and the distribution of the decoded text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding, ngram, trees
from ..calls import call_or_fail
from ..e7_4.distribution import check_distribution
from .accept import MISTAKES
from .shared import ints


def _checked(fn: Callable[..., Any], call: str) -> Callable[..., Any]:
    """``fn`` with its result checked: ``(emitted, path)``, the path a walk from the root."""

    def verify(tree: Any, p_rows: np.ndarray, q_rows: np.ndarray, rng: Any) -> tuple:
        tokens, parents = tree
        got = call_or_fail(fn, (list(tokens), list(parents)), p_rows, q_rows, rng, call=call)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call} returned {got!r:.80}, expected (emitted, path).")
        emitted = ints(got[0], call, "a list of emitted tokens")
        path = ints(got[1], call, "a list of accepted nodes")
        node = 0
        for v in path:
            if not (0 < v < len(parents)) or parents[v] != node:
                raise AssertionError(
                    f"{call} returned the path {path} for parents {list(parents)}: a path goes "
                    "down from the root, each node a child of the one before, root excluded."
                )
            node = v
        leaf = node not in parents[1:]
        if len(emitted) == len(path) and leaf:
            raise AssertionError(
                f"{call} returned {len(emitted)} tokens for the path {path}, which ends at a leaf: "
                "when a leaf is accepted the same pass adds the bonus token, drawn from the "
                "target's row at that leaf. That is the missing bonus token."
            )
        if len(emitted) != len(path) + 1 or emitted[:-1] != [tokens[v] for v in path]:
            raise AssertionError(
                f"{call} returned emitted {emitted} and path {path}: the emitted tokens must be "
                "the path's tokens, then one more token from the target (len(path) + 1 in all)."
            )
        return emitted, path

    return verify


def check_verify_tree_paths(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    widths: Sequence[int],
    passes: int,
    seed: int,
) -> None:
    """Run ``fn`` on ``passes`` drafted trees; check that each result is a path and a token."""
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = f"verify_tree(tree, target_rows, draft_rows, rng) on a tree of widths {tuple(widths)}"
    verify = _checked(fn, call)
    for _ in range(passes):
        tree, q_rows = trees.draft_tree(draft_model, context, widths, rng)
        verify(tree, trees.tree_rows(target, context, tree), q_rows, rng)


def check_tree_sequence_distribution(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    widths: Sequence[int],
    temperature: float,
    runs: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless tree decoding with ``fn`` gives the target's first 2 characters.

    ``runs`` decodes of 2 characters with :func:`~specdec_reference.trees.tree_decode`
    and ``fn`` as its verification share one ``np.random.default_rng(seed)``; the first
    character and the 2-character strings are compared with the exact distributions by
    the L1 check with McDiarmid's bound, at ``failure_prob / 2`` each.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = (f"tree decoding with your verify_tree after {prompt!r}, widths {tuple(widths)}, "
            f"T = {temperature}, over {runs} runs sharing np.random.default_rng({seed})")
    verify = _checked(fn, "verify_tree(tree, target_rows, draft_rows, rng)")
    counts: dict[str, int] = {}
    firsts: dict[str, int] = {}
    for _ in range(runs):
        out, _ = trees.tree_decode(target, draft_model, context, 2, widths, rng, temperature,
                                   verify)
        text = ngram.decode(out)
        counts[text] = counts.get(text, 0) + 1
        firsts[text[0]] = firsts.get(text[0], 0) + 1
    p = decoding.with_temperature(target.probs(context), temperature)
    q = decoding.with_temperature(draft_model.probs(context), temperature)
    mistakes = {
        name: ({ngram.ALPHABET[i]: float(v) for i, v in
                enumerate(trees.multi_draft_distribution(p, q, widths[0], key))}, advice)
        for key, (name, advice) in MISTAKES.items()
    }
    check_distribution(firsts, {ngram.ALPHABET[i]: float(v) for i, v in enumerate(p)},
                       call=call + ", first character", failure_prob=failure_prob / 2,
                       label="first character", mistakes=mistakes)
    exact = decoding.prefix_distribution(target, context, 2, temperature)
    probs = {ngram.decode(ix): float(exact[ix])
             for ix in zip(*np.nonzero(exact >= 1e-4), strict=True)}
    check_distribution(counts, probs, call=call, failure_prob=failure_prob / 2,
                       label="2-character string",
                       advice="at each node run multi_draft_accept over the node's children with "
                       "the node's own rows, continue into the accepted child, and stop at the "
                       "residual token")
