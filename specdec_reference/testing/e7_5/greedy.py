"""Part 4: ``greedy_verify_tree`` against the reference, and greedy tree decoding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding, ngram, tree_decoding, trees
from ..calls import call_or_fail
from ..compare import check_equal
from .shared import ints


def _call(
    fn: Callable[..., Any], tokens: list[int], parents: list[int], best: list[int], call: str
) -> tuple[list[int], list[int]]:
    got = call_or_fail(fn, (list(tokens), list(parents)), list(best), call=call)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r:.80}, expected (emitted, path).")
    return ints(got[0], call, "a list of emitted tokens"), ints(got[1], call, "a list of nodes")


def check_greedy_verify_tree(
    fn: Callable[..., Any], tokens: Sequence[int], parents: Sequence[int], best: Sequence[int]
) -> None:
    """Compare ``fn((tokens, parents), best)`` with the reference; name the usual mistakes."""
    tokens, parents, best = list(tokens), list(parents), list(best)
    call = f"greedy_verify_tree(({tokens}, {parents}), {best})"
    emitted, path = _call(fn, tokens, parents, best, call)
    want = trees.greedy_verify_tree((tokens, parents), best)
    if greedy_path(tokens, parents, best, path) and emitted == _emitted(tokens, best, path):
        return  # another child with the same matching token followed: right too
    check_equal(
        (emitted, path),
        want,
        call=call,
        mistakes={
            "the path's tokens without the target's own token": (
                (want[0][:-1], want[1]),
                "the target's argmax at the last accepted node is emitted "
                "too: it is free, computed by the same pass",
            ),
            "the whole tree searched for the token, not the children of the current node": (
                lambda got: any(
                    not 0 < v < len(parents) or parents[v] != u
                    for u, v in zip([0, *got[1]], got[1], strict=False)
                ),
                "from each accepted node look only at its own children",
            ),
        },
    )


def greedy_path(
    tokens: Sequence[int], parents: Sequence[int], best: Sequence[int], path: Sequence[int]
) -> bool:
    """True when ``path`` goes from the root through children whose token is the target's
    argmax at their parent, and no child of its last node matches: a right greedy path.

    Where two children carry the same matching token, each gives a right path; the
    reference follows the first.

    >>> greedy_path([5, 1, 1, 3], [-1, 0, 0, 2], [1, 0, 3, 0], [2, 3])
    True
    >>> greedy_path([5, 1, 1, 3], [-1, 0, 0, 2], [1, 0, 3, 0], [2])  # node 3 matches too
    False
    """
    node = 0
    for v in path:
        if not 0 < v < len(parents) or parents[v] != node or tokens[v] != best[node]:
            return False
        node = v
    return not any(parents[c] == node and tokens[c] == best[node] for c in range(1, len(parents)))


def _emitted(tokens: Sequence[int], best: Sequence[int], path: Sequence[int]) -> list[int]:
    """What a pass along ``path`` emits: its tokens, then the target's argmax at its end."""
    return [tokens[v] for v in path] + [best[path[-1] if path else 0]]


def check_greedy_tree_decoding(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    widths: Sequence[int],
) -> None:
    """Fail unless decoding with top-k trees and ``fn`` reproduces greedy decoding."""
    context = ngram.encode(prompt)
    call = (
        f"greedy tree decoding with your greedy_verify_tree after {prompt!r}, n = {n}, "
        f"top-k trees of widths {tuple(widths)}"
    )
    out: list[int] = []
    while len(out) < n:
        text = context + out
        tokens, parents = tree_decoding.topk_tree(draft_model, text, widths)
        best = [int(np.argmax(r)) for r in tree_decoding.tree_rows(target, text, (tokens, parents))]
        emitted, _ = _call(fn, tokens, parents, best, "greedy_verify_tree(tree, target_argmax)")
        if not emitted:
            raise AssertionError(
                f"{call}: a pass emitted nothing; it must emit at least the target's own token."
            )
        out += emitted
    plain = decoding.generate(target, context, n, None, temperature=0)
    if out[:n] != plain:
        first = next(i for i in range(n) if out[i] != plain[i])
        raise AssertionError(
            f"{call} gave {ngram.decode(out[:n])!r}, greedy decoding gives "
            f"{ngram.decode(plain)!r}: they differ from character {first}. Follow a child only "
            "when its token is the target's argmax at the current node, and end with that argmax."
        )
