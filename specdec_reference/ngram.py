"""Character-level n-gram language models trained on Python's own standard library.

Lesson E7.4 needs a real target and a real draft model without downloading
anything, in JupyterLab and in the grading sandbox alike (which shows the kernel
the Python installation read-only).  So both are n-gram models over a fixed
96-character alphabet, trained in a fraction of a second on :data:`CORPUS_FILES`,
standard-library modules read from the running interpreter's library directory.
The target is a high-order model, the draft a low-order one; Witten-Bell
interpolation gives every character a positive probability in every context.

A model is used through two methods, the interface of the lesson:

- ``model.probs(context)``: the next-character distribution after ``context``;
- ``model.probs_along(context, tokens)``: the distributions after ``context``,
  ``context + tokens[:1]``, ..., ``context + tokens``, as one ``(len(tokens) + 1,
  V)`` array (what one pass of a transformer over those positions computes).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALPHABET",
    "CORPUS_FILES",
    "NGramModel",
    "corpus_text",
    "decode",
    "encode",
    "train_ngram",
]

#: The vocabulary: newline, then the 95 printable ASCII characters (token 0 is "\n").
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))
#: Standard-library modules the models learn from (present in Python 3.8 to 3.14).
CORPUS_FILES = (
    "textwrap.py",
    "string.py",
    "heapq.py",
    "bisect.py",
    "fnmatch.py",
    "colorsys.py",
    "shlex.py",
    "calendar.py",
    "glob.py",
    "queue.py",
    "sched.py",
    "getopt.py",
    "fractions.py",
    "random.py",
    "copy.py",
)

# Byte -> token: the alphabet maps to itself, a tab to a space, anything else to "?".
_TABLE = np.full(256, ALPHABET.index("?"), dtype=np.int64)
_TABLE[[ord(c) for c in ALPHABET]] = np.arange(len(ALPHABET))
_TABLE[ord("\t")] = ALPHABET.index(" ")


def encode(text: str) -> list[int]:
    """Return the tokens of ``text``: one per character, non-ASCII characters as ``"?"``.

    Examples
    --------
    >>> encode("def f():\\n")
    [69, 70, 71, 1, 71, 9, 10, 27, 0]
    >>> decode(encode("naïve\\tcafé"))
    'na?ve caf?'
    """
    return _encode_array(text).tolist()


def _encode_array(text: str) -> np.ndarray:
    return _TABLE[np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8)]


def decode(tokens: Sequence[int]) -> str:
    """Return the text of ``tokens``.

    Examples
    --------
    >>> decode([69, 70, 71])
    'def'
    """
    return "".join(ALPHABET[int(t)] for t in tokens)


def corpus_text(files: Sequence[str] = CORPUS_FILES, directory: str | Path | None = None) -> str:
    """Return the concatenated text of the standard-library ``files`` that exist.

    Parameters
    ----------
    files : sequence of str
        File names relative to ``directory``.
    directory : str or Path, optional
        Defaults to the running interpreter's standard library,
        ``sysconfig.get_paths()["stdlib"]``.

    Returns
    -------
    str
        The files' texts in the given order, each ending with a newline.  A file
        missing from this Python version is skipped.

    Raises
    ------
    FileNotFoundError
        If none of the files exists.
    """
    folder = Path(directory if directory is not None else sysconfig.get_paths()["stdlib"])
    texts = [
        (folder / name).read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"
        for name in files
        if (folder / name).is_file()
    ]
    if not texts:
        raise FileNotFoundError(f"none of {list(files)} is in {folder}")
    return "".join(texts)


class NGramModel:
    """A character n-gram model with Witten-Bell interpolation.

    Parameters
    ----------
    counts : list of (codes, counts) pairs
        For each context length ``m = 0 .. order - 1``: the sorted codes of the
        ``(m + 1)``-grams seen (base-``V`` numbers, oldest character first) and how
        often each was seen.
    vocab_size : int
        ``V``, the number of tokens.

    Notes
    -----
    With :math:`c(hx)` the count of context :math:`h` followed by :math:`x`,
    :math:`c(h) = \\sum_x c(hx)` and :math:`u(h)` the number of distinct
    characters seen after :math:`h`,

    .. math:: P(x \\mid h) = \\frac{c(hx) + u(h)\\, P(x \\mid h')}{c(h) + u(h)},

    where :math:`h'` drops the oldest character of :math:`h`, and below the
    empty context :math:`P` is uniform.  An unseen context (:math:`c(h) = 0`)
    gives the lower order's distribution.  Every probability is positive.
    Distributions are cached per context, so a decoder that revisits contexts
    pays for each only once.

    References
    ----------
    .. [1] I. H. Witten, T. C. Bell, "The zero-frequency problem", IEEE Trans.
       Information Theory 37(4), 1991.
    .. [2] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [3] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.
    """

    def __init__(self, counts: list[tuple[np.ndarray, np.ndarray]], vocab_size: int):
        self.order = len(counts)
        self.vocab_size = int(vocab_size)
        self._counts = counts
        self._cache: dict[tuple[int, ...], np.ndarray] = {}

    def __repr__(self) -> str:
        return f"NGramModel(order={self.order}, vocab_size={self.vocab_size})"

    def _distribution(self, history: tuple[int, ...]) -> np.ndarray:
        cached = self._cache.get(history)
        if cached is not None:
            return cached
        V = self.vocab_size
        probs = np.full(V, 1.0 / V)
        code = 0
        for m in range(len(history) + 1):
            if m:  # the context grows by one older character at each order
                code += history[-m] * V ** (m - 1)
            codes, counts = self._counts[m]
            lo, hi = np.searchsorted(codes, [code * V, code * V + V])
            if lo == hi:
                break  # unseen context: longer ones are unseen too
            seen = np.zeros(V)
            seen[codes[lo:hi] - code * V] = counts[lo:hi]
            total, distinct = seen.sum(), hi - lo
            probs = (seen + distinct * probs) / (total + distinct)
        self._cache[history] = probs
        return probs

    def _history(self, context: Sequence[int]) -> tuple[int, ...]:
        keep = self.order - 1
        tail = list(context)[len(context) - keep :] if keep else []
        for t in tail:
            if not 0 <= int(t) < self.vocab_size:
                raise ValueError(f"token {t!r} is outside the vocabulary 0..{self.vocab_size - 1}")
        return tuple(int(t) for t in tail)

    def probs(self, context: Sequence[int]) -> np.ndarray:
        """Return the next-token distribution after ``context``.

        Parameters
        ----------
        context : sequence of int
            The tokens so far (only the last ``order - 1`` matter).

        Returns
        -------
        (V,) ndarray of float
            A fresh array (changing it does not change the model); positive, sums to 1.

        Examples
        --------
        >>> model = train_ngram(encode("abab" * 10), order=2)
        >>> p = model.probs(encode("a"))
        >>> decode([int(p.argmax())]), bool(p.min() > 0), round(float(p.sum()), 12)
        ('b', True, 1.0)
        """
        return self._distribution(self._history(context)).copy()

    def probs_along(self, context: Sequence[int], tokens: Sequence[int]) -> np.ndarray:
        """Return the next-token distributions after each prefix of ``tokens``.

        Parameters
        ----------
        context : sequence of int
            The tokens before ``tokens``.
        tokens : sequence of int
            ``k`` tokens (``k = 0`` allowed).

        Returns
        -------
        (k + 1, V) ndarray of float
            Row ``i`` is ``probs(context + tokens[:i])``: what one target pass over
            the ``k`` drafted positions and the one after them computes.

        Examples
        --------
        >>> model = train_ngram(encode("abab" * 10), order=2)
        >>> model.probs_along(encode("a"), encode("b")).shape
        (2, 96)
        """
        full = [*context, *tokens]
        start = len(full) - len(tokens)
        return np.stack(
            [self._distribution(self._history(full[: start + i])) for i in range(len(tokens) + 1)]
        )


def train_ngram(tokens: npt.ArrayLike, order: int, vocab_size: int = len(ALPHABET)) -> NGramModel:
    """Count the n-grams of ``tokens`` and return the interpolated model.

    Parameters
    ----------
    tokens : (N,) array_like of int
        Training text, as tokens in ``0 .. vocab_size - 1``.
    order : int
        ``n``: the model conditions on the last ``n - 1`` tokens, ``order >= 1``.
    vocab_size : int, default 96
        ``V``; ``V ** order`` must fit in a 64-bit integer.

    Returns
    -------
    NGramModel

    Raises
    ------
    ValueError
        If ``order < 1``, or ``V ** order`` is too large.

    Examples
    --------
    >>> model = train_ngram(encode(corpus_text()), order=5)
    >>> model
    NGramModel(order=5, vocab_size=96)
    >>> decode([int(model.probs(encode("impor")).argmax())])
    't'
    """
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    if vocab_size**order >= 2**63:
        raise ValueError(f"vocab_size ** order = {vocab_size}**{order} does not fit in int64")
    data = np.asarray(tokens, dtype=np.int64)
    counts = []
    code = data.copy()  # code of the (m + 1)-gram ending at each position
    for m in range(order):
        if m:
            code = data[m:] + vocab_size * code[:-1]
        codes, freq = np.unique(code, return_counts=True)
        counts.append((codes, freq.astype(np.float64)))
    return NGramModel(counts, vocab_size)
