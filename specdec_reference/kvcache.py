"""A key-value cache small enough to read, and the decoder that rolls it back (lesson E7.4).

A transformer does not rescore the whole text at every step: it keeps one key-value
entry per position it has processed and, given new tokens, computes only the
positions past its cache.  :class:`KVCache` keeps the tokens of those positions;
:class:`CachedModel` gives any model with ``probs(context)`` that behaviour: its
``forward(tokens)`` appends the tokens to the cache and returns the next-token
distribution after each of them, conditioned on whatever the cache holds.  So a
decoder that leaves rejected drafted tokens in a cache goes on scoring a text that was
never emitted, exactly as a real one would.

Cache lengths in :func:`speculative_decode_cached`, with ``text`` the prompt and every
token emitted so far, of length ``L`` when a pass starts:

- the target's cache holds ``text[:L - 1]``; the pass feeds it the last emitted token
  and the ``k`` drafted ones, ``k + 1`` entries, and scores those ``k + 1`` positions;
- the draft is fed what its cache lacks, then each drafted token but the last (the
  ``k``-th is sampled, never fed), so after drafting it holds ``L + k - 1`` entries;
- after ``a`` accepted tokens the text has ``L' = L + a + 1`` tokens and both caches
  are truncated to ``L' - 1``: the target drops ``d[a+1..k]``, keeps ``d[1..a]``,
  and has no entry for its own new token (the next pass's first input); the draft
  drops ``d[a+1..k-1]``, and after full acceptance it drops nothing and is one entry
  short (``L' - 2``).  Hugging Face's assisted generation crops the target to
  ``new_cur_len - 1`` and the assistant always one shorter, ``new_cur_len - 2``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .decoding import draft, with_temperature
from .sampling import speculative_step

__all__ = ["CachedModel", "KVCache", "speculative_decode_cached"]


class KVCache:
    """The positions a model has processed, one entry (here: its token) per position.

    Examples
    --------
    >>> cache = KVCache()
    >>> for t in (5, 6, 7):
    ...     cache.append(t)
    >>> cache.truncate(2)
    >>> len(cache), cache.tokens
    (2, [5, 6])
    >>> cache.truncate(9)  # longer than the cache: nothing to drop
    >>> len(cache)
    2
    """

    def __init__(self) -> None:
        #: The cached positions' tokens, oldest first: a plain list, as in the lesson's
        #: own ``KVCache``, so a learner who edits it directly is graded as they tested.
        self.tokens: list[int] = []

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"KVCache({len(self)} entries)"

    def append(self, token: int) -> None:
        """Add the entry of one more position."""
        self.tokens.append(operator.index(token))

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` entries and drop the rest (nothing when ``n >= len``)."""
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"cannot keep a negative number of entries ({n})")
        del self.tokens[n:]


class CachedModel:
    """A model with a key-value cache: ``forward`` scores only the positions it is fed.

    Parameters
    ----------
    model : model
        Has ``probs(context)`` and ``vocab_size``.

    Examples
    --------
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> model = CachedModel(train_ngram(encode("abcabcabc"), order=2))
    >>> model.forward(encode("ab")).shape, len(model.cache)
    ((2, 96), 2)
    """

    def __init__(self, model: Any) -> None:
        self.model, self.vocab_size, self.cache = model, model.vocab_size, KVCache()

    def forward(self, tokens: Sequence[int]) -> np.ndarray:
        """Append ``tokens`` to the cache; return the next-token distribution after each.

        Row ``i`` is the model's distribution after the cached tokens and
        ``tokens[: i + 1]``, a ``(len(tokens), V)`` array.
        """
        rows = []
        for token in tokens:
            self.cache.append(token)
            rows.append(self.model.probs(list(self.cache.tokens)))
        return np.array(rows, dtype=float).reshape(len(rows), self.vocab_size)


class _Fed:
    """``probs(context)`` of a cached model: feed it what its cache lacks of ``context``.

    With this view :func:`~specdec_reference.decoding.draft` drafts through a cache: its
    first call feeds the text past the cache, each later one the token drafted before,
    and the last drafted token is sampled but never fed.
    """

    def __init__(self, cached: CachedModel) -> None:
        self.cached, self.vocab_size = cached, cached.vocab_size

    def probs(self, context: Sequence[int]) -> np.ndarray:
        return self.cached.forward(list(context)[len(self.cached.cache) :])[-1]


def speculative_decode_cached(
    target: CachedModel,
    draft_model: CachedModel,
    prompt: Sequence[int],
    n: int,
    k: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Decode ``n`` tokens as :func:`~specdec_reference.decoding.speculative_decode` does,
    with both models behind key-value caches that each pass rolls back.

    Parameters
    ----------
    target, draft_model : CachedModel
        Their caches are empty or hold a prefix of ``prompt[:-1]``.
    prompt : sequence of int
        At least one token.
    n, k : int
        Tokens to produce (``n >= 1``) and to draft per pass (``k >= 1``).
    rng : numpy.random.Generator
        Source of randomness; the draws are those of ``speculative_decode``.
    temperature : float, default 1.0
        Applied to both models.

    Returns
    -------
    tokens, stats
        As ``speculative_decode`` returns them; with the same generator, the same.

    Notes
    -----
    After each pass both caches are truncated to ``len(text) - 1``, everything but the
    last emitted token (the module docstring gives the counts).

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318 (Algorithm 2).

    Examples
    --------
    >>> from specdec_reference.decoding import speculative_decode
    >>> from specdec_reference.ngram import encode, train_ngram
    >>> text = encode("the cat sat on the mat. " * 20)
    >>> big, small = train_ngram(text, order=4), train_ngram(text, order=2)
    >>> cached = speculative_decode_cached(CachedModel(big), CachedModel(small), encode("the "),
    ...                                    15, 3, np.random.default_rng(5))
    >>> cached == speculative_decode(big, small, encode("the "), 15, 3, np.random.default_rng(5))
    True
    """
    n, k = operator.index(n), operator.index(k)
    text = [operator.index(t) for t in prompt]
    if not text or n < 1 or k < 1:
        raise ValueError("need a non-empty prompt, n >= 1 and k >= 1")
    start = len(text)
    stats: list[tuple[int, int, int]] = []
    while len(text) - start < n:
        # Draft: feed what the draft's cache lacks, then every drafted token but the last.
        drafted, q = draft(_Fed(draft_model), text, k, rng, temperature)
        # One target pass: the last emitted token and the k drafted ones.
        scored = target.forward(text[len(target.cache) :] + drafted)[-(k + 1) :]
        emitted = speculative_step(with_temperature(scored, temperature), q, drafted, rng)
        text += emitted
        # The rollback: keep the entries of every emitted token but the last.
        target.cache.truncate(len(text) - 1)
        draft_model.cache.truncate(len(text) - 1)
        stats.append((k, len(emitted) - 1, len(emitted)))
    return text[start : start + n], stats
