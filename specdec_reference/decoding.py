"""Speculative decoding end to end: draft, verify, repeat; temperature; measured statistics.

The models are anything with the two methods of :mod:`specdec_reference.ngram`'s
models: ``probs(context)`` for one position and ``probs_along(context, tokens)``
for the ``len(tokens) + 1`` positions that one target pass scores.  One pass of
:func:`speculative_decode` drafts ``k`` tokens with the draft model, scores them
with one ``probs_along`` call of the target, and keeps what
:func:`~specdec_reference.sampling.speculative_step` (lesson E7.3's accept step)
emits.  Every function takes an explicit :class:`numpy.random.Generator` and
documents its draws, so that two correct implementations given the same
generator produce the same tokens.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .sampling import speculative_step

__all__ = [
    "with_temperature",
    "draft",
    "generate",
    "speculative_decode",
    "measured_alpha",
    "tokens_per_pass",
    "prefix_distribution",
]


def with_temperature(probs: npt.ArrayLike, temperature: float) -> np.ndarray:
    """Return the distribution ``probs`` sharpened or flattened by a temperature.

    Parameters
    ----------
    probs : (V,) or (m, V) array_like
        Probability vector(s); the temperature applies along the last axis.
    temperature : float
        ``T >= 0``.  ``T = 1`` leaves ``probs`` unchanged, ``T < 1`` sharpens,
        ``T > 1`` flattens, ``T = 0`` is greedy.

    Returns
    -------
    ndarray of float, the shape of ``probs``
        :math:`p_i^{1/T} / \\sum_j p_j^{1/T}` for ``T > 0``; for ``T = 0`` all the
        mass on the first maximum (``numpy.argmax``).  That is a convention: as
        ``T -> 0`` the limit spreads the mass evenly over tied maxima.

    Raises
    ------
    ValueError
        If ``T`` is negative or NaN.

    Notes
    -----
    With logits :math:`z = \\log p`, this is :math:`\\operatorname{softmax}(z / T)`,
    computed from the logits less their maximum.  Since :math:`p \\le 1`, nothing
    can overflow; the danger is underflow: at small ``T`` every :math:`p^{1/T}` may
    round to 0, and the normalization divides 0 by 0.  Shifted, the largest entry
    is :math:`e^0 = 1`.  Speculative sampling at temperature :math:`T` is exact for
    the tempered target :math:`p_T` whatever distribution the draft samples from,
    provided that distribution is the ``q`` given to the accept step: the draft's
    temperature changes only the acceptance rate.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> with_temperature([0.2, 0.3, 0.5], 1.0)
    array([0.2, 0.3, 0.5])
    >>> with_temperature([0.2, 0.3, 0.5], 0.5).round(4)  # squares, renormalized
    array([0.1053, 0.2368, 0.6579])
    >>> with_temperature([[0.4, 0.4, 0.2]], 0.0)  # greedy: the first maximum
    array([[1., 0., 0.]])
    """
    temperature = float(temperature)
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    p = np.asarray(probs, dtype=np.float64)
    if temperature == 0:
        out = np.zeros_like(p)
        np.put_along_axis(out, np.argmax(p, axis=-1)[..., None], 1.0, axis=-1)
        return out
    with np.errstate(divide="ignore"):
        logits = np.log(p)
    scaled = (logits - logits.max(axis=-1, keepdims=True)) / temperature
    weights = np.exp(scaled)
    return weights / weights.sum(axis=-1, keepdims=True)


def _tokens(context: Sequence[int]) -> list[int]:
    return [operator.index(t) for t in np.asarray(context).reshape(-1).tolist()]


def draft(
    draft_model: Any,
    context: Sequence[int],
    k: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> tuple[list[int], np.ndarray]:
    """Draw ``k`` tokens from the draft model, one at a time.

    Parameters
    ----------
    draft_model : model
        Has ``probs(context) -> (V,) array``.
    context : sequence of int
        The tokens so far; not modified.
    k : int
        Number of tokens to draft, ``k >= 0``.
    rng : numpy.random.Generator
        Source of randomness.
    temperature : float, default 1.0
        Both the sampling and the returned distributions use it.

    Returns
    -------
    tokens : list of int
        The ``k`` drafted tokens.
    rows : (k, V) ndarray
        Row ``i`` is the distribution token ``i`` was drawn from:
        ``with_temperature(draft_model.probs(context + tokens[:i]), temperature)``.

    Notes
    -----
    Exactly ``k`` draws, ``rng.choice(V, p=rows[i])`` for ``i = 0, 1, ...``.  The
    rows must be the distributions actually sampled from: reporting the
    untempered ``q`` while sampling at ``T != 1`` breaks the exactness of the
    accept step.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318 (Algorithm 2).

    Examples
    --------
    >>> from specdec_reference.ngram import decode, encode, train_ngram
    >>> model = train_ngram(encode("abcabcabc"), order=2)
    >>> tokens, rows = draft(model, encode("a"), 3, np.random.default_rng(0), temperature=0)
    >>> decode(tokens), rows.shape
    ('bca', (3, 96))
    """
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    running = _tokens(context)
    tokens: list[int] = []
    rows = []
    for _ in range(k):
        # The draft's distribution at this position, tempered as it is sampled.
        q = with_temperature(draft_model.probs(running), temperature)
        token = int(rng.choice(q.shape[-1], p=q))
        tokens.append(token)
        rows.append(q)
        running.append(token)  # our own copy: the caller's context is not touched
    vocab = len(rows[0]) if rows else len(draft_model.probs(running))
    return tokens, np.array(rows).reshape(k, vocab)


def generate(
    model: Any,
    prompt: Sequence[int],
    n: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> list[int]:
    """Decode ``n`` tokens with one model alone, one pass per token.

    Parameters
    ----------
    model : model
        Has ``probs(context)``.
    prompt : sequence of int
        The context to continue.
    n : int
        Number of tokens, ``n >= 0``.
    rng : numpy.random.Generator
        Source of randomness (not used at ``temperature = 0``).
    temperature : float, default 1.0
        ``0`` is greedy decoding.

    Returns
    -------
    list of int
        The ``n`` tokens after ``prompt``.

    Notes
    -----
    One ``rng.choice(V, p=with_temperature(model.probs(context), T))`` per token
    for ``T > 0``; the argmax (first maximum) and no draw for ``T = 0``.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> from specdec_reference.ngram import decode, encode, train_ngram
    >>> model = train_ngram(encode("abcabcabc"), order=3)
    >>> decode(generate(model, encode("ab"), 5, np.random.default_rng(0), temperature=0))
    'cabca'
    """
    context = _tokens(prompt)
    out: list[int] = []
    for _ in range(operator.index(n)):
        p = model.probs(context + out)
        if float(temperature) == 0:
            token = int(np.argmax(p))
        else:
            token = int(rng.choice(len(p), p=with_temperature(p, temperature)))
        out.append(token)
    return out


def speculative_decode(
    target_model: Any,
    draft_model: Any,
    prompt: Sequence[int],
    n: int,
    k: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Decode ``n`` tokens by drafting ``k`` and verifying them with one target pass.

    Parameters
    ----------
    target_model, draft_model : model
        Have ``probs(context)`` and ``probs_along(context, tokens)``.
    prompt : sequence of int
        The context to continue; not modified.
    n : int
        Number of tokens to produce, ``n >= 0``.
    k : int
        Tokens drafted per pass, ``k >= 0``.
    rng : numpy.random.Generator
        Source of randomness.
    temperature : float, default 1.0
        Applied to both models.  ``0`` reproduces greedy decoding with the
        target, token for token.

    Returns
    -------
    tokens : list of int
        The first ``n`` tokens produced after ``prompt``.
    stats : list of (int, int, int)
        One ``(drafted, accepted, emitted)`` per target pass: ``drafted = k``,
        ``accepted`` the length of the accepted prefix, ``emitted = accepted + 1``
        (the last pass may emit more tokens than ``tokens`` keeps).

    Notes
    -----
    Each pass, with ``context = prompt + tokens so far``:

    1. ``drafted, q = draft(draft_model, context, k, rng, temperature)``;
    2. ``p = with_temperature(target_model.probs_along(context, drafted), T)``,
       one target pass over the ``k + 1`` positions;
    3. ``speculative_step(p, q, drafted, rng)``: the accepted prefix, then one
       token from the residual at the first rejection or the bonus token.

    The tokens drafted after a rejection are discarded: the next pass starts
    from the emitted tokens only (in a transformer, both models' key-value caches
    are rolled back to them).  Passes repeat until ``n`` tokens are out.  The
    output follows the tempered target's distribution over whole sequences.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318 (Algorithm 2).

    Examples
    --------
    >>> from specdec_reference.ngram import decode, encode, train_ngram
    >>> text = encode("the cat sat on the mat. " * 20)
    >>> target, small = train_ngram(text, order=4), train_ngram(text, order=2)
    >>> tokens, stats = speculative_decode(target, small, encode("the "), 12, 3,
    ...                                    np.random.default_rng(0), temperature=0)
    >>> decode(tokens) == decode(generate(target, encode("the "), 12, None, temperature=0))
    True
    >>> all(e == a + 1 and d == 3 for d, a, e in stats)
    True
    """
    n, k = operator.index(n), operator.index(k)
    if n < 0 or k < 0:
        raise ValueError(f"n and k must be >= 0, got n = {n}, k = {k}")
    context = _tokens(prompt)
    out: list[int] = []
    stats: list[tuple[int, int, int]] = []
    while len(out) < n:
        drafted, q = draft(draft_model, context + out, k, rng, temperature)
        # One target pass scores the k drafted positions and the one after them.
        p = with_temperature(target_model.probs_along(context + out, drafted), temperature)
        emitted = speculative_step(p, q, drafted, rng)
        # Only the emitted tokens extend the text: drafted tokens after a rejection are
        # dropped (the cache rollback).
        out.extend(emitted)
        stats.append((k, len(emitted) - 1, len(emitted)))
    return out[:n], stats


def _as_stats(stats: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
    rows = [tuple(operator.index(x) for x in row) for row in stats]
    if not rows:
        raise ValueError("stats is empty: no target pass was made")
    for d, a, e in rows:
        if not 0 <= a <= d:
            raise ValueError(f"accepted must be between 0 and drafted, got {(d, a, e)}")
    return rows


def measured_alpha(stats: Sequence[Sequence[int]]) -> float:
    """Return the acceptance rate measured from per-pass statistics.

    Parameters
    ----------
    stats : sequence of (drafted, accepted, emitted)
        As :func:`speculative_decode` returns them.

    Returns
    -------
    float
        Accepted tokens over *tested* tokens.  A pass tests its drafted tokens up
        to and including the first rejection, so it tests ``accepted + 1`` tokens
        when ``accepted < drafted`` and ``drafted`` when all are accepted.

    Raises
    ------
    ValueError
        If ``stats`` is empty, inconsistent, or no token was tested.

    Notes
    -----
    Under the model of constant acceptance :math:`\\alpha`, the accepted prefix of
    a pass is geometric, truncated at :math:`k`; the maximum-likelihood estimate
    of :math:`\\alpha` is :math:`\\sum a / (\\sum a + R)` with :math:`R` the number
    of passes that ended in a rejection.  Dividing by :math:`\\sum k` instead
    counts the untested tokens after a rejection as rejected and underestimates
    :math:`\\alpha`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Section 3.1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> measured_alpha([(4, 4, 5), (4, 1, 2), (4, 0, 1)])  # 5 accepted of 7 tested
    0.7142857142857143
    """
    rows = _as_stats(stats)
    accepted = sum(a for _, a, _ in rows)
    tested = sum(a + (a < d) for d, a, _ in rows)
    if tested == 0:
        raise ValueError("no drafted token was tested (every pass drafted k = 0)")
    return accepted / tested


def tokens_per_pass(stats: Sequence[Sequence[int]]) -> float:
    """Return the mean number of tokens one target pass emitted.

    Parameters
    ----------
    stats : sequence of (drafted, accepted, emitted)
        As :func:`speculative_decode` returns them.

    Returns
    -------
    float
        ``sum(emitted) / len(stats)``: the measured counterpart of
        :func:`~specdec_reference.analysis.expected_tokens`.

    Raises
    ------
    ValueError
        If ``stats`` is empty or inconsistent.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Equation 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> tokens_per_pass([(4, 4, 5), (4, 1, 2), (4, 0, 1)])
    2.6666666666666665
    """
    rows = _as_stats(stats)
    return sum(e for _, _, e in rows) / len(rows)


def prefix_distribution(
    model: Any, prompt: Sequence[int], length: int, temperature: float = 1.0
) -> np.ndarray:
    """Return the exact distribution of the first ``length`` tokens after ``prompt``.

    Parameters
    ----------
    model : model
        Has ``probs(context)``.
    prompt : sequence of int
        The context.
    length : int
        Number of tokens, ``1 <= length <= 3`` (``V ** length`` entries).
    temperature : float, default 1.0
        Applied at every position.

    Returns
    -------
    ndarray of shape ``(V,) * length``
        Entry ``[x1, ..., xL]`` is
        :math:`\\prod_i P_T(x_i \\mid \\text{prompt}, x_1, \\dots, x_{i-1})`.

    Raises
    ------
    ValueError
        If ``length`` is not 1, 2 or 3.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> model = train_ngram(encode("abab"), order=2)
    >>> dist = prefix_distribution(model, encode("a"), 2)
    >>> dist.shape, round(float(dist.sum()), 12)
    ((96, 96), 1.0)
    """
    length = operator.index(length)
    if not 1 <= length <= 3:
        raise ValueError(f"length must be 1, 2 or 3, got {length}")
    context = _tokens(prompt)
    first = with_temperature(model.probs(context), temperature)
    if length == 1:
        return first
    rows = np.stack(
        [
            prefix_distribution(model, [*context, x], length - 1, temperature)
            for x in range(len(first))
        ]
    )
    return first.reshape((-1,) + (1,) * (length - 1)) * rows
