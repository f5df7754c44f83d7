"""Helpers shared by the hidden tests of lesson E7.3, *The accept step*.

The notebook's hidden cells call these with the learner's function as an argument,
for instance ``_e73.check_spec_accept(spec_accept, p, q, r)``; every failure is an
``AssertionError`` whose message names the call, the expected value and, when the
wrong value matches one, the common mistake behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import specdec_reference as ref

from .calls import call_or_fail
from .compare import Mistakes, check_equal
from .convert import as_float, as_int, describe_call


def prefix(
    p: Sequence[float],
    q: Sequence[float],
    r: Sequence[float],
    accept: Callable[[float, float, float], bool],
) -> int:
    """Return the length of the leading run of positions where ``accept(p_i, q_i, r_i)`` holds.

    Examples
    --------
    >>> prefix([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2], lambda p, q, r: r <= p)
    1
    """
    run = 0
    for p_i, q_i, r_i in zip(p, q, r, strict=True):
        if not accept(p_i, q_i, r_i):
            break
        run += 1
    return run


def spec_accept_mistakes(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> Mistakes:
    """Return what each common ``spec_accept`` mistake returns on this draft, with advice.

    Examples
    --------
    >>> found = spec_accept_mistakes([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2])
    >>> found["the brute-force count, which keeps tokens after a rejection"][0]
    2
    """
    brute = sum(r_i <= min(1.0, p_i / q_i) for p_i, q_i, r_i in zip(p, q, r, strict=True))
    raw = prefix(p, q, r, lambda p_i, q_i, r_i: r_i <= p_i)
    strict = prefix(p, q, r, lambda p_i, q_i, r_i: r_i < min(1.0, p_i / q_i))
    inverted = (
        prefix(p, q, r, lambda p_i, q_i, r_i: r_i <= min(1.0, q_i / p_i))
        if all(p_i > 0 for p_i in p)
        else None
    )
    return {
        "the brute-force count, which keeps tokens after a rejection": (
            brute,
            "stop at the first rejection; the tokens after it continue a prefix "
            "that the output will never contain",
        ),
        "accepting on the raw target probability": (
            raw,
            "accept when r[i] <= min(1, p[i] / q[i]), the ratio of target to draft "
            "probability, not when r[i] <= p[i]",
        ),
        "a strict comparison": (
            strict,
            "the boundary is inclusive: accept when r[i] <= threshold, not <",
        ),
        "the inverted ratio q/p": (
            inverted,
            "divide the target's probability by the draft's: min(1, p[i] / q[i])",
        ),
    }


def check_spec_accept(
    spec_accept: Callable[..., Any],
    p: Sequence[float],
    q: Sequence[float],
    r: Sequence[float],
    *,
    as_array: bool = False,
) -> None:
    """Compare ``spec_accept(p, q, r)`` with the reference; name the mistake the value matches.

    ``p``, ``q`` and ``r`` are lists of floats; with ``as_array`` the learner gets them as
    float arrays.

    Examples
    --------
    >>> def brute(p, q, r):
    ...     return sum(r_i <= min(1, p_i / q_i) for p_i, q_i, r_i in zip(p, q, r, strict=True))
    >>> check_spec_accept(brute, [0.9, 0.2, 0.8], [0.5, 0.8, 0.4],
    ...                   [0.1, 0.5, 0.2])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: spec_accept([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2]) (given lists)
    returned 2, expected 1. That is the brute-force count, which keeps tokens after a rejection:
    stop at the first rejection; the tokens after it continue a prefix that the output will never
    contain.
    """
    args = [np.array(x, dtype=float) for x in (p, q, r)] if as_array else [p, q, r]
    kind = "arrays" if as_array else "lists"
    call = describe_call("spec_accept", *args) + f" (given {kind})"
    got = as_int(call_or_fail(spec_accept, *args, call=call), call)
    expected = ref.spec_accept(p, q, r)
    check_equal(got, expected, call=call, mistakes=spec_accept_mistakes(p, q, r))


def floats(got: Any, call: str) -> list[float]:
    """Return a learner's vector as a list of Python floats, or fail with a message.

    Examples
    --------
    >>> floats(np.array([0.5, 0.5]), "f()")
    [0.5, 0.5]
    >>> floats(None, "f()")
    Traceback (most recent call last):
    ...
    AssertionError: f() returned None, expected an array (or list) of probabilities. Did you forget return?
    """  # noqa: E501  (a doctest's expected output is one line)
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected an array (or list) of probabilities."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_float(x, call + " (an entry)") for x in got]


def check_vector(
    got: Any,
    expected: Sequence[float],
    *,
    call: str,
    mistakes: Mistakes | None = None,
    atol: float = 1e-9,
) -> None:
    """Fail unless the vector ``got`` equals ``expected`` entry by entry (absolute tolerance).

    ``mistakes`` maps a mistake's name to ``(vector, advice)``; the message names the
    first mistake whose vector ``got`` matches (a vector of None is skipped).

    Examples
    --------
    >>> check_vector([0.4, 0.2], [2 / 3, 1 / 3], call="residual_distribution(p, q)",
    ...              mistakes={"max(0, p - q) without dividing by its sum": (
    ...                  [0.4, 0.2], "normalize it")})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: residual_distribution(p, q) returned [0.4, 0.2], expected [0.666667, 0.333333].
    That is max(0, p - q) without dividing by its sum: normalize it.
    """
    values = floats(got, call)
    wanted_values = [float(x) for x in expected]

    def close(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and all(abs(x - y) <= atol for x, y in zip(a, b, strict=True))

    if close(values, wanted_values):
        return
    hint = ""
    for name, (vector, advice) in (mistakes or {}).items():
        if vector is not None and close(values, [float(x) for x in vector]):
            hint = f" That is {name}: {advice}."
            break
    shown = "[" + ", ".join(f"{x:.6g}" for x in values) + "]"
    wanted = "[" + ", ".join(f"{x:.6g}" for x in wanted_values) + "]"
    raise AssertionError(f"{call} returned {shown}, expected {wanted}.{hint}")


def tokens(got: Any, call: str) -> list[int]:
    """Return a learner's list of emitted tokens as Python ints, or fail with a message.

    Examples
    --------
    >>> tokens(np.array([3, 1]), "f()")
    [3, 1]
    >>> tokens(3, "f()")
    Traceback (most recent call last):
    ...
    AssertionError: f() returned 3, expected a list of tokens (ints).
    """
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {got!r}, expected a list of tokens (ints)."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in got]


def rows(rng: np.random.Generator, n: int, vocab: int) -> np.ndarray:
    """Return ``n`` random probability rows over ``vocab`` tokens, every entry positive.

    Examples
    --------
    >>> block = rows(np.random.default_rng(0), 3, 4)
    >>> block.shape, bool((block > 0).all()), np.allclose(block.sum(axis=1), 1)
    ((3, 4), True, True)
    """
    block = rng.dirichlet(np.ones(vocab), size=n) + 1e-3
    return block / block.sum(axis=1, keepdims=True)


def clear_token(rng: np.random.Generator, accept: bool) -> tuple[float, float, float]:
    """Return ``(p, q, r)`` for a drafted token that passes (or fails) its test by a margin.

    A pass has ``r < p <= min(1, p/q)``; a failure has ``p < 0.8 q`` and ``r > p/q + 0.01``,
    so no rounding and no variant of the boundary changes the verdict.

    Examples
    --------
    >>> p, q, r = clear_token(np.random.default_rng(0), False)
    >>> r > p / q
    True
    """
    if accept:
        q = float(rng.uniform(0.05, 1.0))
        p = float(rng.uniform(0.05, 1.0))
        return p, q, float(rng.uniform(0.0, p))
    q = float(rng.uniform(0.3, 1.0))
    p = float(rng.uniform(0.0, 0.8 * q))
    return p, q, float(rng.uniform(p / q + 0.01, 1.0))


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
    >>> model = np.array([[0.1, 0.9], [0.8, 0.2]])
    >>> speculative_greedy(ref.greedy_step, model, model[::-1], 0, 3, 2)
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
