"""Check ``greedy_step`` on single drafts and by decoding with toy bigram models."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..calls import call_or_fail
from ..compare import Mistakes
from .values import tokens


def greedy_mistakes(target: Any, draft: Sequence[int]) -> Mistakes:
    """Return what each common ``greedy_step`` mistake returns on this input, with advice.

    Examples
    --------
    >>> found = greedy_mistakes([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]], [1, 2])
    >>> found["the draft without the bonus token"][0]
    [1, 2]
    """
    best = [int(np.argmax(row)) for row in target]
    k = len(draft)
    j = next((i for i in range(k) if draft[i] != best[i]), k)
    return {
        "the draft without the bonus token": (
            list(draft) if j == k else None,
            "when every drafted token matches, also emit the argmax of the last row",
        ),
        "keeping the mismatched drafted token": (
            list(draft[: j + 1]) if j < k else None,
            "at the first mismatch emit the target's argmax, not the drafted token",
        ),
        "carrying on after a mismatch": (
            best[:k] + [best[k]] if j < k else None,
            "stop at the first mismatch: later drafted tokens continue a discarded prefix",
        ),
    }


def plain_greedy(model: np.ndarray, start: int, n: int) -> list[int]:
    """Return ``n`` tokens of plain greedy decoding with a bigram table, after ``start``.

    Examples
    --------
    >>> plain_greedy(np.array([[0.1, 0.9], [0.8, 0.2]]), 0, 3)
    [1, 0, 1]
    """
    out = [start]
    for _ in range(n):
        out.append(int(np.argmax(model[out[-1]])))
    return out[1:]


def speculative_greedy(
    greedy_step: Callable[..., Any],
    target: np.ndarray,
    draft: np.ndarray,
    start: int,
    n: int,
    k: int,
) -> list[int]:
    """Return ``n`` tokens of speculative greedy decoding with the learner's ``greedy_step``.

    Each pass drafts ``k`` tokens greedily with the ``draft`` bigram table and verifies
    them with one ``greedy_step`` call on the ``k + 1`` target rows; a call that returns
    fewer than 1 or more than ``k + 1`` tokens fails with a message.

    Examples
    --------
    >>> from specdec_reference import greedy_step
    >>> model = np.array([[0.1, 0.9], [0.8, 0.2]])
    >>> speculative_greedy(greedy_step, model, model[::-1], 0, 3, 2)
    [1, 0, 1]
    """
    out = [start]
    for _ in range(n + 1):  # every pass emits at least one token
        if len(out) > n:
            break
        proposal = plain_greedy(draft, out[-1], k)
        contexts = [out[-1]] + proposal
        call = (
            f"greedy_step(target_probs, {proposal}) at step {len(out) - 1} of speculative "
            f"greedy decoding with k = {k}"
        )
        emitted = tokens(call_or_fail(greedy_step, target[contexts], proposal, call=call), call)
        assert 1 <= len(emitted) <= k + 1, (
            f"{call} returned {emitted}: expected between 1 and {k + 1} tokens"
        )
        out += emitted
    return out[1 : n + 1]
