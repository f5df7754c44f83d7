"""The lesson's models (lesson E7.4's), random trees, and a learner's lists of ints."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import numpy as np

from ..convert import as_int
from ..e7_4.shared import models as _e74_models

_MODELS_KEY = "_e75_models"


def models(namespace: MutableMapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Return ``(target, draft)``, the order-5 and order-3 models of lesson E7.4.

    Examples
    --------
    >>> target, draft = models()
    >>> target.order, draft.order
    (5, 3)
    """
    if namespace is not None and _MODELS_KEY in namespace:
        return namespace[_MODELS_KEY]
    pair = _e74_models()
    if namespace is not None:
        namespace[_MODELS_KEY] = pair
    return pair


def random_parents(rng: np.random.Generator, n: int) -> list[int]:
    """A random parent array of ``n`` nodes (each parent uniform among earlier nodes).

    Examples
    --------
    >>> random_parents(np.random.default_rng(0), 4)[0]
    -1
    """
    return [-1] + [int(rng.integers(0, i)) for i in range(1, n)]


def ints(got: Any, call: str, what: str) -> list[int]:
    """A learner's list of ints, or a failure naming the call."""
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected {what}."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, f"{call} (an entry of {what})") for x in got]
