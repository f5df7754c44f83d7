"""Keep one learner bug from costing points twice, and keep tests off global state.

:func:`use_reference` and :func:`use_reference_for_cell` put the reference in place of a
learner function that the function under test calls (no cascade);
:func:`global_random_state_preserved` fails a block that touches numpy's global
random state.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any


@contextlib.contextmanager
def use_reference(
    namespace: MutableMapping[str, Any], name: str, reference_fn: Callable[..., Any]
) -> Iterator[None]:
    """Temporarily bind ``namespace[name]`` to ``reference_fn``, then restore it.

    Use it when the learner function under test calls another learner function:
    the callee is the reference while the test runs, so a bug in the callee costs
    points only in the callee's own tests.  The learner's binding (or its absence)
    comes back even when the test fails.

    Examples
    --------
    >>> ns = {"accept_prob": "learner's"}
    >>> with use_reference(ns, "accept_prob", "reference's"):
    ...     ns["accept_prob"]
    "reference's"
    >>> ns["accept_prob"]
    "learner's"
    """
    missing = object()
    saved = namespace.get(name, missing)
    namespace[name] = reference_fn
    try:
        yield
    finally:
        if saved is missing:
            namespace.pop(name, None)
        else:
            namespace[name] = saved


def use_reference_for_cell(
    namespace: MutableMapping[str, Any], name: str, reference_fn: Callable[..., Any]
) -> None:
    """Bind ``namespace[name]`` to ``reference_fn`` until the current notebook cell ends.

    A hidden test calls this first, so that the rest of the cell, the visible asserts
    after the hidden block included, runs the function under test with the reference
    callee.  IPython's ``post_run_cell`` event restores the learner's binding when the
    cell finishes, also when an assertion in it fails.  ``namespace`` must be an IPython
    user namespace (it holds ``get_ipython``); outside a kernel use :func:`use_reference`.

    Examples
    --------
    >>> class Events:
    ...     def __init__(self):
    ...         self.callbacks = []
    ...     def register(self, event, fn):
    ...         self.callbacks.append(fn)
    ...     def unregister(self, event, fn):
    ...         self.callbacks.remove(fn)
    >>> shell = type("Shell", (), {"events": Events()})()
    >>> ns = {"get_ipython": lambda: shell, "accept_prob": "learner's"}
    >>> use_reference_for_cell(ns, "accept_prob", "reference's")
    >>> ns["accept_prob"]
    "reference's"
    >>> for callback in list(shell.events.callbacks):  # what IPython does after the cell
    ...     callback(None)
    >>> ns["accept_prob"], shell.events.callbacks
    ("learner's", [])
    """
    get_ipython = namespace.get("get_ipython")
    shell = get_ipython() if callable(get_ipython) else None
    if shell is None:
        raise RuntimeError("use_reference_for_cell needs an IPython kernel; use use_reference")
    missing = object()
    saved = namespace.get(name, missing)
    namespace[name] = reference_fn

    def restore(*_result: Any) -> None:
        shell.events.unregister("post_run_cell", restore)
        if saved is missing:
            namespace.pop(name, None)
        else:
            namespace[name] = saved

    shell.events.register("post_run_cell", restore)


def _plain(value: Any) -> Any:
    """Turn nested dicts of arrays into plain Python values that compare with ==."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.tolist() if hasattr(value, "tolist") else value


def _numpy_global_state() -> Any:
    np = sys.modules.get("numpy")
    return None if np is None else _plain(np.random.get_state(legacy=False))


@contextlib.contextmanager
def global_random_state_preserved(call: str) -> Iterator[None]:
    """Fail if the block changes numpy's global random state (``np.random.seed``...).

    Examples
    --------
    >>> import numpy as np
    >>> with global_random_state_preserved("f()"):
    ...     _ = np.random.default_rng(0).random()
    >>> with global_random_state_preserved("f()"):  # doctest: +NORMALIZE_WHITESPACE
    ...     _ = np.random.random()
    Traceback (most recent call last):
    ...
    AssertionError: f() changed numpy's global random state (np.random.seed, np.random.random,
    np.random.choice...), expected it untouched: use only a Generator, e.g.
    rng = np.random.default_rng(seed).
    """
    before = _numpy_global_state()
    yield
    if _numpy_global_state() != before:
        raise AssertionError(
            f"{call} changed numpy's global random state (np.random.seed, np.random.random, "
            "np.random.choice...), expected it untouched: use only a Generator, e.g. "
            "rng = np.random.default_rng(seed)."
        )
