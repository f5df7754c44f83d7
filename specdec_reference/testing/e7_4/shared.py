"""The lesson's two models, a model that records its calls, a learner's tokens and rows."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

import numpy as np

from ... import ngram
from ..convert import as_int

TARGET_ORDER, DRAFT_ORDER = 5, 3


_MODELS_KEY = "_e74_models"


def models(namespace: MutableMapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Return ``(target, draft)``: the lesson's order-5 and order-3 models, built once.

    With a notebook namespace the pair is kept there (under ``_e74_models``) for the
    later test cells of the same kernel.

    Examples
    --------
    >>> target, draft = models()
    >>> target.order, draft.order
    (5, 3)
    """
    if namespace is not None and _MODELS_KEY in namespace:
        return namespace[_MODELS_KEY]
    data = ngram.encode(ngram.corpus_text())
    pair = (ngram.train_ngram(data, TARGET_ORDER), ngram.train_ngram(data, DRAFT_ORDER))
    if namespace is not None:
        namespace[_MODELS_KEY] = pair
    return pair


class Recorder:
    """A model that records every call made to it, then answers as ``model`` does.

    ``calls`` holds ``("probs", context)`` and ``("probs_along", context, tokens)``
    tuples, with the arguments copied to lists of ints at the time of the call.

    Examples
    --------
    >>> target, _ = models()
    >>> rec = Recorder(target)
    >>> rec.probs_along([1, 2], [3]).shape, rec.calls
    ((2, 96), [('probs_along', [1, 2], [3])])
    """

    def __init__(self, model: Any, log: list[tuple] | None = None, name: str = "model"):
        self.model = model
        self.vocab_size = model.vocab_size
        self.order = model.order
        self.calls: list[tuple] = []
        self._log, self._name = log, name

    def _record(self, call: tuple) -> None:
        self.calls.append(call)
        if self._log is not None:  # shared by two models: the order of their calls
            self._log.append((self._name, *call))

    def probs(self, context: Sequence[int]) -> np.ndarray:
        self._record(("probs", _ints(context)))
        return self.model.probs(context)

    def probs_along(self, context: Sequence[int], tokens: Sequence[int]) -> np.ndarray:
        self._record(("probs_along", _ints(context), _ints(tokens)))
        return self.model.probs_along(context, tokens)


def _ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def tokens(got: Any, call: str, what: str = "a list of tokens (ints)") -> list[int]:
    """Return a learner's token list as Python ints, or fail with a message.

    Examples
    --------
    >>> tokens((1, 2), "f()")
    [1, 2]
    """
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected {what}."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in got]


def _rows(got: Any, shape: tuple[int, int], call: str) -> np.ndarray:
    try:
        arr = np.array(got, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{call} returned rows {got!r}, expected a {shape} array") from None
    if shape[0] == 0 and arr.size == 0:
        return arr.reshape(shape)
    if arr.shape != shape:
        raise AssertionError(f"{call} returned rows of shape {arr.shape}, expected {shape}.")
    return arr


def _max_gap(a: np.ndarray, b: np.ndarray) -> float:
    return max(
        (abs(float(x) - float(y)) for x, y in zip(a.ravel(), b.ravel(), strict=True)), default=0.0
    )
