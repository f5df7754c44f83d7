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


def _checked(fn: Callable[..., Any], call: str, *, bonus: bool = True) -> Callable[..., Any]:
    """``fn`` with its result checked: ``(emitted, path)``, the path a walk from the root.

    With ``bonus=False`` a pass that ends at a leaf without the bonus token is let through:
    it wastes a token but leaves the text's distribution exact, which is what the caller
    checks (the path check names that mistake).
    """

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
        if len(emitted) == len(path) and leaf and not bonus and path:
            if emitted == [tokens[v] for v in path]:
                return emitted, path
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


class _Drafter:
    """Draft trees as :func:`~specdec_reference.tree_decoding.draft_tree` does, faster.

    The same distribution (each node's children i.i.d. from its tempered draft row,
    duplicates kept), but each node's children come from one ``rng.random(width)`` through
    the row's cumulative sum, and every path's rows (draft and target, tempered) are
    computed once per check.  The checks decode thousands of passes from one prompt, so
    the same paths come back again and again.
    """

    def __init__(self, target: Any, draft_model: Any, temperature: float) -> None:
        self.target, self.draft_model, self.temperature = target, draft_model, temperature
        self._rows: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _row(self, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if path not in self._rows:
            both = decoding.with_temperature(
                np.stack([self.target.probs(path), self.draft_model.probs(path)]),
                self.temperature,
            )
            self._rows[path] = (both[0], both[1], np.cumsum(both[1]))
        return self._rows[path]

    def tree(
        self, context: list[int], widths: Sequence[int], rng: np.random.Generator
    ) -> tuple[tuple[list[int], list[int]], np.ndarray, np.ndarray]:
        """``((tokens, parents), target_rows, draft_rows)`` of one drafted tree."""
        tokens, parents, depth = [context[-1]], [-1], [0]
        paths = [tuple(context)]
        p_rows, q_rows = [], []
        i = 0
        while i < len(tokens):
            p, q, cdf = self._row(paths[i])
            p_rows.append(p)
            q_rows.append(q)
            if depth[i] < len(widths):
                drawn = np.searchsorted(cdf, rng.random(widths[depth[i]]) * cdf[-1], side="right")
                for x in np.minimum(drawn, len(cdf) - 1).tolist():
                    tokens.append(int(x))
                    parents.append(i)
                    depth.append(depth[i] + 1)
                    paths.append(paths[i] + (int(x),))
            i += 1
        return (tokens, parents), np.array(p_rows), np.array(q_rows)


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
    drafter = _Drafter(target, draft_model, 1.0)
    for _ in range(passes):
        tree, p_rows, q_rows = drafter.tree(context, widths, rng)
        verify(tree, p_rows, q_rows, rng)


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

    ``runs`` decodes of 2 characters, each :func:`~specdec_reference.tree_decoding.tree_decode`'s
    loop with ``fn`` as its verification (trees drafted by :class:`_Drafter`), share one
    ``np.random.default_rng(seed)``; the first
    character and the 2-character strings are compared with the exact distributions by
    the L1 check with McDiarmid's bound, at ``failure_prob / 2`` each.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = (
        f"tree decoding with your verify_tree after {prompt!r}, widths {tuple(widths)}, "
        f"T = {temperature}, over {runs} runs sharing np.random.default_rng({seed})"
    )
    verify = _checked(fn, "verify_tree(tree, target_rows, draft_rows, rng)", bonus=False)
    counts: dict[str, int] = {}
    firsts: dict[str, int] = {}
    drafter = _Drafter(target, draft_model, temperature)
    for _ in range(runs):
        out: list[int] = []
        while len(out) < 2:  # tree_decoding.tree_decode's loop, with the rows memoized
            tree, p_rows, q_rows = drafter.tree(context + out, widths, rng)
            out += verify(tree, p_rows, q_rows, rng)[0]
        text = ngram.decode(out[:2])
        counts[text] = counts.get(text, 0) + 1
        firsts[text[0]] = firsts.get(text[0], 0) + 1
    p = decoding.with_temperature(target.probs(context), temperature)
    q = decoding.with_temperature(draft_model.probs(context), temperature)
    mistakes = {
        name: (
            {
                ngram.ALPHABET[i]: float(v)
                for i, v in enumerate(trees.multi_draft_distribution(p, q, widths[0], key))
            },
            advice,
        )
        for key, (name, advice) in MISTAKES.items()
    }
    check_distribution(
        firsts,
        {ngram.ALPHABET[i]: float(v) for i, v in enumerate(p)},
        call=call + ", first character",
        failure_prob=failure_prob / 2,
        label="first character",
        mistakes=mistakes,
    )
    exact = decoding.prefix_distribution(target, context, 2, temperature)
    probs = {
        ngram.decode(ix): float(exact[ix]) for ix in zip(*np.nonzero(exact >= 1e-4), strict=True)
    }
    strings = dict(
        call=call,
        failure_prob=failure_prob / 2,
        label="2-character string",
        advice="at each node run multi_draft_accept over the node's children with "
        "the node's own rows, continue into the accepted child, stop at the "
        "residual token, and after an accepted leaf draw the bonus token from the "
        "target's row at that leaf",
    )
    try:
        check_distribution(counts, probs, **strings)
    except AssertionError:
        if len(widths) != 1:
            raise
        # A depth-1 tree: the second character is the bonus token whenever a child is
        # accepted, so a bonus from the draft's row has an exact distribution to name.
        wrong = _draft_bonus_strings(target, draft_model, context, widths[0], temperature)
        check_distribution(
            counts, probs, mistakes={_DRAFT_BONUS[0]: (wrong, _DRAFT_BONUS[1])}, **strings
        )


_DRAFT_BONUS = (
    "the bonus token drawn from a row other than target_rows[leaf], such as the draft's",
    "draw it from target_rows[leaf], the target's distribution after the accepted path",
)


def _draft_bonus_strings(
    target: Any, draft_model: Any, context: list[int], width: int, temperature: float
) -> dict[str, float]:
    """The 2-character strings' distribution when a depth-1 tree's bonus comes from the draft.

    The first character is exact; it is an accepted child with probability
    ``accepted[x]`` (a candidate of rank j: the chance the test reaches it times
    ``min(r_j, q)``), and then the second comes from the draft's row after it; otherwise
    it is the residual token, and the next pass gives the second character exactly.
    """
    p = decoding.with_temperature(target.probs(context), temperature)
    q = decoding.with_temperature(draft_model.probs(context), temperature)
    accepted, alive, current = np.zeros_like(p), 1.0, p
    for _ in range(width):
        accepted += alive * np.minimum(current, q)
        alive *= max(0.0, 1.0 - float(np.minimum(current, q).sum()))
        current = trees._residual(current, q)
    out: dict[str, float] = {}
    for x in np.flatnonzero(p > 0).tolist():
        rows = decoding.with_temperature(
            np.stack([target.probs([*context, x]), draft_model.probs([*context, x])]), temperature
        )
        second = accepted[x] * rows[1] + (p[x] - accepted[x]) * rows[0]
        for y in np.flatnonzero(second >= 1e-4).tolist():
            out[ngram.decode([x, y])] = float(second[y])
    return out


def _all_accept_tree(
    rng: np.random.Generator, parents: list[int], vocab: int
) -> tuple[list[int], np.ndarray, np.ndarray, dict[int, int], dict[int, int]]:
    """A tree on which every candidate is accepted, and leaves whose two rows differ.

    Each node with children gets a one-hot row on a token of its own, the same for the
    target and the draft, and all its children carry that token: every candidate is
    then accepted with probability 1.  Each leaf's target row is one-hot on a bonus
    token, its draft row on another token, both unlike its parent's.  Returns
    ``(tokens, target_rows, draft_rows, bonus, draft_bonus)``, the last two by leaf.
    """
    n = len(parents)
    kids = trees._children(parents)
    label = [int(x) for x in rng.integers(0, vocab, n)]
    tokens = [label[0]] + [label[parents[i]] for i in range(1, n)]
    p_rows, q_rows = np.zeros((n, vocab)), np.zeros((n, vocab))
    bonus, draft_bonus = {}, {}
    for i in range(n):
        if kids[i]:
            p_rows[i, label[i]] = q_rows[i, label[i]] = 1.0
            continue
        taken = {tokens[i]} if i else set()
        b, d = (int(x) for x in rng.choice([t for t in range(vocab) if t not in taken], 2, False))
        bonus[i], draft_bonus[i] = b, d
        p_rows[i, b], q_rows[i, d] = 1.0, 1.0
    return tokens, p_rows, q_rows, bonus, draft_bonus


def check_verify_tree_walk(
    fn: Callable[..., Any], parents_list: Sequence[Sequence[int]], *, seed: int
) -> None:
    """Fail unless ``fn`` walks every all-accept tree down to a leaf and adds its bonus.

    On the trees of :func:`_all_accept_tree` every candidate is accepted, so a right
    verifier's path ends at a leaf (any leaf: siblings carry the same token), and its
    last token is the bonus from that leaf's *target* row.  Deterministic: no draw can
    change the outcome.  The three wrong walks are named: the tree ignored (one token
    from the root's row), one level walked (an ``if`` where a loop belongs), and the
    bonus drawn from the leaf's draft row.
    """
    rng = np.random.default_rng(seed)
    for parents in parents_list:
        parents = [int(x) for x in parents]
        tokens, p_rows, q_rows, bonus, draft_bonus = _all_accept_tree(rng, parents, 8)
        call = (
            f"verify_tree(({tokens}, {parents}), target_rows, draft_rows, rng) with one-hot "
            "rows, the draft's equal to the target's at every node with children, so every "
            "candidate is accepted"
        )
        got = call_or_fail(
            fn, (list(tokens), list(parents)), p_rows.copy(), q_rows.copy(), rng, call=call
        )
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call} returned {got!r:.80}, expected (emitted, path).")
        emitted = ints(got[0], call, "a list of emitted tokens")
        path = ints(got[1], call, "a list of accepted nodes")
        node = 0
        for v in path:
            if not (0 < v < len(parents)) or parents[v] != node:
                raise AssertionError(
                    f"{call} returned the path {path}: a path goes down from the root, each "
                    "node a child of the one before, root excluded."
                )
            node = v
        said = f"{call} returned ({emitted}, {path})"
        if not path:
            raise AssertionError(
                f"{said}: the tree was ignored. Every child of the root is accepted here, "
                "so the walk must go down the tree to a leaf; run multi_draft_accept over "
                "the children of each node in turn."
            )
        if node in parents[1:]:
            raise AssertionError(
                f"{said}: the walk stopped at node {node}, which has children, after one "
                "accepted child. That is one level walked (an if where a loop belongs): "
                "after a child is accepted, test its own children, and draw the bonus "
                "token only at a leaf."
            )
        want = [tokens[v] for v in path] + [bonus[node]]
        if emitted == want:
            continue
        if emitted == want[:-1]:
            raise AssertionError(
                f"{said}, expected {want}: the walk reached the leaf {node}, and then the "
                "pass ended. That is the missing bonus token: when a leaf is accepted, the "
                f"same pass draws one more token from target_rows[{node}]."
            )
        if emitted[:-1] == want[:-1] and emitted[-1:] == [draft_bonus[node]]:
            raise AssertionError(
                f"{said}, expected {want}: the bonus token came from the draft's row at the "
                f"leaf {node}. That is the bonus drawn from the draft: draw it from "
                f"target_rows[{node}], the target's distribution after the accepted path."
            )
        raise AssertionError(
            f"{said}, expected {want}: the path's tokens, then the bonus token from "
            f"target_rows[{node}] at the leaf {node}."
        )
