"""Greedy draft-and-verify: keep the drafted tokens the target would have chosen itself.

At temperature 0 the target's choice at each position is its argmax.  One target
pass over ``k`` drafted tokens gives ``k + 1`` argmaxes (one per drafted position
and one after the draft); the drafted tokens are kept up to the first one the
target disagrees with, and the target's own token follows.  The output is token
for token what plain greedy decoding with the target writes, so the check is exact
by construction (Leviathan et al. 2023, Section 2.3, with temperature 0).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

__all__ = ["greedy_verify"]


def greedy_verify(target_argmax: Sequence[int], drafted: Sequence[int]) -> list[int]:
    """Return the accepted prefix of a greedy draft followed by the target's own token.

    Parameters
    ----------
    target_argmax : (k + 1,) sequence of int
        The target's argmax at each drafted position and at the position after the
        draft (a list, tuple or 1-D array).
    drafted : (k,) sequence of int
        The drafted tokens.

    Returns
    -------
    list of int
        ``drafted[:j] + [target_argmax[j]]``, where ``j`` is the first position at
        which the draft and the target disagree (``j = k`` when they agree
        everywhere): between 1 and ``k + 1`` tokens.

    Raises
    ------
    ValueError
        If ``target_argmax`` does not have ``len(drafted) + 1`` entries.

    Notes
    -----
    With :math:`y_i` the target's argmax and :math:`x_i` the drafted tokens,
    :math:`j = \\min\\{i : x_i \\ne y_i\\}` and the pass emits
    :math:`x_0, \\dots, x_{j-1}, y_j`.  Since :math:`x_i = y_i` for :math:`i < j`,
    that is :math:`y_0, \\dots, y_j`: exactly the target's greedy choices.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.

    Examples
    --------
    >>> greedy_verify([5, 7, 2, 9], [5, 7, 1])  # the third drafted token is rejected
    [5, 7, 2]
    >>> greedy_verify([4, 8], [3])  # a mismatch at the first position: 1 token
    [4]
    >>> greedy_verify([1, 2, 3], [1, 2])  # all accepted: k + 1 tokens
    [1, 2, 3]
    """
    best = [operator.index(t) for t in target_argmax]
    draft = [operator.index(t) for t in drafted]
    if len(best) != len(draft) + 1:
        raise ValueError(
            f"target_argmax must have len(drafted) + 1 = {len(draft) + 1} entries, got {len(best)}"
        )
    emitted = []
    for x, y in zip(draft, best, strict=False):
        if x != y:
            break  # the first disagreement: the target's token replaces the draft's
        emitted.append(x)
    emitted.append(best[len(emitted)])  # the target's own token (the bonus when all agree)
    return emitted
