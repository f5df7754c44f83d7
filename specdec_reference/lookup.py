"""Prompt-lookup drafting: a draft that copies from the context instead of running a model.

Prompt lookup (Saxena 2023) looks for the last few tokens of the text earlier in the
text, and proposes the tokens that followed them there.  The draft costs no model
pass, and it is deterministic: its distribution puts all the mass on the drafted
token.  With ``q`` one-hot at the drafted token ``x``, the accept step of lesson E7.3
accepts with probability ``min(1, p(x) / 1) = p(x)``, and its residual
``max(0, p - q)`` is ``p`` with ``x`` removed; so the output still follows the target
exactly (:func:`deterministic_verify`, :func:`lookup_decode`).

:func:`prompt_lookup_draft` follows the three implementations: it tries the longest
n-gram first and copies after its **earliest** (leftmost) earlier occurrence, as Saxena's
``find_candidate_pred_tokens``, Hugging Face's ``PromptLookupCandidateGenerator`` and
vLLM's ``NgramProposer`` (v1) do.  Exactness does not depend on which occurrence is taken.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["prompt_lookup_draft", "deterministic_verify", "lookup_decode"]


def _ints(tokens: Any) -> list[int]:
    return [operator.index(t) for t in np.asarray(tokens).reshape(-1).tolist()]


def prompt_lookup_draft(
    context: Sequence[int], k: int, max_ngram: int = 3, min_ngram: int = 1
) -> list[int]:
    """Propose up to ``k`` tokens by copying what followed the context's last n-gram before.

    Parameters
    ----------
    context : sequence of int
        The tokens so far (prompt and output); not modified.
    k : int
        Most tokens to propose, ``k >= 0``.
    max_ngram, min_ngram : int
        The n-gram lengths tried, longest first: ``1 <= min_ngram <= max_ngram``.

    Returns
    -------
    list of int
        For the first ``n`` from ``max_ngram`` down to ``min_ngram`` whose last ``n``
        tokens occur earlier in ``context``: the up-to-``k`` tokens after the earliest
        (leftmost) such occurrence.  Fewer than ``k`` when the context ends sooner;
        empty when no n-gram matches (or ``k = 0``).

    Raises
    ------
    ValueError
        If ``k < 0`` or the n-gram lengths are not ``1 <= min_ngram <= max_ngram``.

    Notes
    -----
    An occurrence starts at ``s`` with ``context[s : s + n] == context[-n:]`` and
    ``s + n < len(context)``: at least one token follows it, which leaves out the
    context's own last ``n`` tokens (``s = len(context) - n``).  Occurrences may
    overlap those last tokens (``"aaaa"`` matches ``"aaa"`` at 0).  Ties between
    occurrences of the same ``n`` go to the smallest ``s``, the earliest, as in
    Saxena's code [1]_, Hugging Face's ``PromptLookupCandidateGenerator`` [2]_ and
    vLLM's ``NgramProposer`` [3]_.

    References
    ----------
    .. [1] A. Saxena, "Prompt Lookup Decoding", 2023,
       https://github.com/apoorvumang/prompt-lookup-decoding.
    .. [2] Hugging Face Transformers, ``PromptLookupCandidateGenerator.get_candidates``,
       src/transformers/generation/candidate_generator.py.
    .. [3] vLLM, ``NgramProposer``, vllm/v1/spec_decode/ngram_proposer.py.

    Examples
    --------
    >>> prompt_lookup_draft([1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3], 2)  # "1 2 3" twice: the first
    [9, 1]
    >>> prompt_lookup_draft([5, 6, 7], 4)  # nothing repeats
    []
    >>> prompt_lookup_draft([4, 1, 2, 8, 2], 3, max_ngram=2)  # "8 2" is new, "2" is not
    [8, 2]
    """
    k, max_ngram, min_ngram = (operator.index(v) for v in (k, max_ngram, min_ngram))
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
    tokens = _ints(context)
    length = len(tokens)
    if k == 0:
        return []
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        tail = tokens[length - n :]
        # Earliest start first; s = length - n is the tail itself, with nothing after it.
        for s in range(length - n):
            if tokens[s : s + n] == tail:
                return tokens[s + n : s + n + k]
    return []


def deterministic_verify(
    target_rows: npt.ArrayLike, drafted: Sequence[int], rng: np.random.Generator
) -> list[int]:
    """Run the accept step on a deterministic draft: ``q`` one-hot at each drafted token.

    Parameters
    ----------
    target_rows : (len(drafted) + 1, V) array_like
        Row ``i`` is the target's distribution at drafted position ``i``; the last row
        is the one after the draft.
    drafted : sequence of int
        The drafted tokens (possibly none).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    list of int
        The accepted prefix of ``drafted``, then one target token: drawn from the
        residual at the first rejection, or the bonus token from the last row.

    Notes
    -----
    For drafted token ``x`` at position ``i``: one ``rng.random()``, accepted if it is
    below ``p_i(x)``, which is :math:`\\min(1, p/q)` with :math:`q(x) = 1`.  At the
    first rejection one ``rng.choice(V, p=r)`` with the residual

    .. math:: r(y) = \\frac{\\max(0, p(y) - q(y))}{\\sum_z \\max(0, p(z) - q(z))}
              = \\frac{p(y)\\,[y \\ne x]}{1 - p(x)},

    ``p`` with ``x`` removed and renormalized.  So ``x`` is emitted with probability
    ``p(x)`` and any other ``y`` with ``(1 - p(x)) p(y) / (1 - p(x)) = p(y)``: exact.
    If every token is accepted, one ``rng.choice(V, p=target_rows[-1])``.  These are
    exactly the draws of :func:`~specdec_reference.sampling.speculative_step` given
    the one-hot rows.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> p = np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    >>> deterministic_verify(p, [1], np.random.default_rng(0))[0]  # p(1) = 1: always kept
    1
    >>> deterministic_verify(np.array([[0.5, 0.5]]), [], np.random.default_rng(0)) in ([0], [1])
    True
    """
    p = np.asarray(target_rows, dtype=np.float64)
    tokens = _ints(drafted)
    if p.ndim != 2 or p.shape[0] != len(tokens) + 1:
        raise ValueError(f"target_rows must have len(drafted) + 1 rows, got shape {p.shape}")
    vocab = p.shape[1]
    emitted: list[int] = []
    for i, x in enumerate(tokens):
        if rng.random() < p[i, x]:  # min(1, p(x) / q(x)) with q(x) = 1
            emitted.append(x)
            continue
        residual = p[i].copy()
        residual[x] = 0.0  # max(0, p - q): only x loses mass
        emitted.append(int(rng.choice(vocab, p=residual / residual.sum())))
        return emitted
    emitted.append(int(rng.choice(vocab, p=p[len(tokens)])))  # bonus token
    return emitted


def lookup_decode(
    target_model: Any,
    prompt: Sequence[int],
    n: int,
    k: int,
    rng: np.random.Generator,
    max_ngram: int = 3,
    min_ngram: int = 1,
    temperature: float = 1.0,
) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Decode ``n`` tokens with prompt-lookup drafts verified by one target pass each.

    Parameters
    ----------
    target_model : model
        Has ``probs_along(context, tokens)``.
    prompt : sequence of int
        The context to continue; not modified.
    n : int
        Number of tokens, ``n >= 0``.
    k : int
        Most tokens drafted per pass, ``k >= 0``.
    rng : numpy.random.Generator
        Source of randomness (only :func:`deterministic_verify` draws).
    max_ngram, min_ngram : int
        As in :func:`prompt_lookup_draft`.
    temperature : float, default 1.0
        Applied to the target.

    Returns
    -------
    tokens : list of int
        The first ``n`` tokens after ``prompt``.
    stats : list of (int, int, int)
        One ``(drafted, accepted, emitted)`` per pass; ``drafted`` is the draft's
        length, which may be below ``k`` (0 when nothing matched: a plain step).

    References
    ----------
    .. [1] A. Saxena, "Prompt Lookup Decoding", 2023,
       https://github.com/apoorvumang/prompt-lookup-decoding.

    Examples
    --------
    >>> from specdec_reference.ngram import decode, encode, train_ngram
    >>> text = encode("abcd" * 30)
    >>> model = train_ngram(text, order=3)
    >>> tokens, stats = lookup_decode(model, encode("abcdabc"), 12, 4, np.random.default_rng(0),
    ...                               temperature=0)
    >>> decode(tokens), [e for _, _, e in stats]
    ('dabcdabcdabc', [5, 5, 5])
    """
    from .decoding import with_temperature

    n, k = operator.index(n), operator.index(k)
    context = _ints(prompt)
    out: list[int] = []
    stats: list[tuple[int, int, int]] = []
    while len(out) < n:
        drafted = prompt_lookup_draft(context + out, k, max_ngram, min_ngram)
        p = with_temperature(target_model.probs_along(context + out, drafted), temperature)
        emitted = deterministic_verify(p, drafted, rng)
        out.extend(emitted)
        stats.append((len(drafted), len(emitted) - 1, len(emitted)))
    return out[:n], stats
