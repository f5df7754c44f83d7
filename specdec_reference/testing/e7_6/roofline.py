"""Parts 3 to 5: a pass's time at a batch, the speedup it allows, when to speculate, and
the key-value cache: a pass's time with the cache read, and how many sequences fit."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ... import analysis, roofline, serving, specs
from ..calls import call_or_fail
from ..compare import check_close, check_equal
from ..convert import as_bool, as_int
from ..e7_1.shared import _h, _m, random_hardware, random_model


def _times(model: Mapping[str, Any], hardware: Mapping[str, Any], tokens: float):
    memory = roofline.weight_bytes(model["params"], model["bytes_per_param"]) / float(
        hardware["bandwidth"]
    )
    compute = tokens * roofline.flops_per_token(model["params"]) / float(hardware["peak_flops"])
    return memory, compute


def check_batch_step_time(
    fn: Callable[..., Any],
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
    positions: int,
) -> None:
    """Compare ``fn(model, hardware, batch, positions)`` with the roofline; name the mistake.

    Examples
    --------
    >>> from specdec_reference.testing.e7_1 import real_pairs
    >>> m, h = real_pairs()[0]
    >>> check_batch_step_time(lambda m, h, b, p: 0.0, m, h, 1, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: batch_step_time(Llama-2-7B, A100 SXM 80 GB, 1, 1) returned 0.0, expected ...
    """
    call = f"batch_step_time({_m(model)}, {_h(hardware)}, {batch}, {positions})"
    got = call_or_fail(fn, dict(model), dict(hardware), batch, positions, call=call)
    memory, compute = _times(model, hardware, batch * positions)
    check_close(
        got,
        serving.batch_step_time(model, hardware, batch, positions),
        call=call,
        atol=0.0,
        rtol=1e-9,
        advice="the larger of the weights' read time and the "
        "compute time of batch * positions tokens",
        mistakes={
            "the memory and compute times added": (memory + compute, "they overlap: take the max"),
            "compute for batch tokens only, not batch * positions": (
                max(memory, _times(model, hardware, batch)[1]),
                "each request scores positions tokens: batch * positions in all",
            ),
            "compute for positions tokens only, not batch * positions": (
                max(memory, _times(model, hardware, positions)[1]),
                "every request of the batch scores its positions: batch * positions in all",
            ),
            "the weights read once per request": (
                max(batch * memory, compute),
                "the batch shares one read of the weights",
            ),
        },
    )


def check_speculative_speedup(
    fn: Callable[..., Any],
    alpha: float,
    k: int,
    c: float,
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
) -> None:
    """Compare ``fn(alpha, k, c, model, hardware, batch)`` with the reference; name the mistake.

    Examples
    --------
    >>> from specdec_reference.testing.e7_1 import real_pairs
    >>> m, h = real_pairs()[0]
    >>> check_speculative_speedup(lambda *a: analysis.walltime_improvement(0.8, 4, 0.05),
    ...                           0.8, 4, 0.05, m, h, 128)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: ... That is the verification cost taken as constant in batch...
    """
    call = f"speculative_speedup({alpha!r}, {k}, {c!r}, {_m(model)}, {_h(hardware)}, {batch})"
    closed_form = (
        "That is the closed form (1 - alpha**(k + 1)) / (1 - alpha) used at alpha = 1, where it "
        "is 0/0: there every drafted token is accepted and a pass yields k + 1 tokens "
        "(expected_tokens handles it)."
    )
    got = call_or_fail(
        fn,
        alpha,
        k,
        c,
        dict(model),
        dict(hardware),
        batch,
        call=call,
        hint=closed_form if alpha == 1 else "",
    )
    if alpha == 1 and isinstance(got, (int, float, np.floating)) and not np.isfinite(got):
        raise AssertionError(f"{call} returned {got!r}. {closed_form}")
    tokens = analysis.expected_tokens(alpha, k)
    t = serving.batch_step_time
    plain, verify = t(model, hardware, batch, 1), t(model, hardware, batch, k + 1)
    one = t(model, hardware, 1, 1)
    constant = "the verification cost taken as constant in batch"
    check_close(
        got,
        serving.speculative_speedup(alpha, k, c, model, hardware, batch),
        call=call,
        atol=1e-12,
        rtol=1e-9,
        mistakes={
            f"{constant} (Theorem 3.8 as it is, one step)": (
                tokens / (k * c + 1),
                "price the pass with batch_step_time(model, hardware, batch, "
                "k + 1) over a plain step batch_step_time(model, hardware, batch, 1)",
            ),
            f"{constant} (the pass's cost at batch 1)": (
                tokens / (k * c + t(model, hardware, 1, k + 1) / one),
                "the pass's cost depends on the batch: compare both at this batch",
            ),
            "the pass at this batch over a plain step at batch 1": (
                tokens / (k * c + verify / one) if verify != plain else None,
                "a plain step at this batch is batch_step_time(model, hardware, batch, 1)",
            ),
            "leaving out the draft's cost": (
                tokens / (verify / plain) if k * c else None,
                "the k draft steps cost k * c",
            ),
        },
    )


def check_should_speculate(
    fn: Callable[..., Any],
    alpha: float,
    c: float,
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
) -> None:
    """Compare ``fn(alpha, c, model, hardware, batch)`` with the lesson's rule; name the mistake.

    Examples
    --------
    >>> from specdec_reference.testing.e7_1 import real_pairs
    >>> m, h = real_pairs()[0]
    >>> check_should_speculate(lambda a, c, m, h, b: a > c, 0.6, 0.05, m, h, 256)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: ... That is Corollary 3.9 without the batch...
    """
    call = f"should_speculate({alpha!r}, {c!r}, {_m(model)}, {_h(hardware)}, {batch})"
    got = as_bool(call_or_fail(fn, alpha, c, dict(model), dict(hardware), batch, call=call), call)
    expected = serving.should_speculate(alpha, c, model, hardware, batch)
    if got == expected:
        return
    t = serving.batch_step_time
    extra = t(model, hardware, batch, 2) / t(model, hardware, batch, 1) - 1
    hint = ""
    if got == (alpha > c):
        hint = (
            " That is Corollary 3.9 without the batch (alpha > c): at this batch a second "
            f"position costs {extra:.4g} plain steps more, so alpha must exceed c + "
            f"{extra:.4g}."
        )
    raise AssertionError(
        f"{call} returned {got}, expected {expected}: speculate when alpha > c + (t(batch, 2) "
        f"/ t(batch, 1) - 1) = {c + extra:.6g}.{hint}"
    )


def speedup_cases(seed: int, count: int) -> list[tuple]:
    """Random ``(alpha, k, c, model, hardware, batch)`` on both sides of the ridge.

    Examples
    --------
    >>> len(speedup_cases(0, 3))
    3
    """
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        model, hardware = random_model(gen), random_hardware(gen)
        ridge = float(serving.batch_step_time(model, hardware, 1, 1)) / float(
            _times(model, hardware, 1)[1]
        )
        batch = max(1, int(ridge * float(np.exp(gen.uniform(-3, 1.5)))))
        out.append(
            (
                float(gen.uniform(0, 0.99)),
                int(gen.integers(0, 12)),
                float(gen.uniform(0, 0.5)),
                model,
                hardware,
                min(batch, 100_000),
            )
        )
    return out


def should_cases(seed: int, count: int) -> list[tuple]:
    """Random ``(alpha, c, model, hardware, batch)``, none within 1e-6 of the rule's tie.

    Examples
    --------
    >>> len(should_cases(0, 3))
    3
    """
    out = []
    for alpha, _, c, model, hardware, batch in speedup_cases(seed, 4 * count):
        t = serving.batch_step_time
        edge = c + t(model, hardware, batch, 2) / t(model, hardware, batch, 1) - 1
        if abs(alpha - edge) > 1e-6:
            out.append((alpha, c, model, hardware, batch))
        if len(out) == count:
            break
    return out


# ---------------------------------------------------------------------------
# Part 5: the key-value cache
# ---------------------------------------------------------------------------


def with_memory(hardware: Mapping[str, Any]) -> dict[str, Any]:
    """The lesson's hardware mapping with its ``memory`` in bytes (80 GB for both GPUs)."""
    return dict(hardware, memory=specs.MEMORY_BYTES[hardware["name"]])


def check_cached_step_time(
    fn: Callable[..., Any],
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
    positions: int,
    seq_len: int,
) -> None:
    """Compare ``fn(model, hardware, batch, positions, seq_len)`` with the reference.

    Examples
    --------
    >>> from specdec_reference.testing.e7_1 import real_pairs
    >>> m, h = real_pairs()[0]
    >>> check_cached_step_time(lambda m, h, b, p, s: serving.batch_step_time(m, h, b, p),
    ...                        m, h, 8, 5, 2048)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: ... That is the cache left out: ...
    """
    call = f"cached_step_time({_m(model)}, {_h(hardware)}, {batch}, {positions}, {seq_len})"
    got = call_or_fail(fn, dict(model), dict(hardware), batch, positions, seq_len, call=call)
    weights = roofline.weight_bytes(model["params"], model["bytes_per_param"])
    bandwidth = float(hardware["bandwidth"])
    compute = _times(model, hardware, batch * positions)[1]
    cache = roofline.model_cache_bytes(model, seq_len, batch)
    check_close(
        got,
        serving.cached_step_time(model, hardware, batch, positions, seq_len),
        call=call,
        atol=0.0,
        rtol=1e-9,
        advice="the weights and every request's cache are read once a pass; the arithmetic "
        "is that of batch * positions tokens; the two overlap",
        mistakes={
            "the cache left out": (
                max(weights / bandwidth, compute) if cache else None,
                "every request's cache of seq_len tokens is read once a pass, "
                "kv_cache_bytes(model, seq_len) bytes each",
            ),
            "the cache read once per scored position": (
                max((weights + positions * cache) / bandwidth, compute)
                if positions > 1 and cache
                else None,
                "the positions of one pass attend to the same cached keys and values, read "
                "once whatever positions is",
            ),
            "one request's cache, not the batch's": (
                max((weights + cache / batch) / bandwidth, compute)
                if batch > 1 and cache
                else None,
                "every request has its own cache: batch of them are read",
            ),
            "the memory and compute times added": (
                (weights + cache) / bandwidth + compute,
                "the reads and the arithmetic overlap: take the larger",
            ),
        },
    )


def check_max_batch_in_memory(
    fn: Callable[..., Any], model: Mapping[str, Any], hardware: Mapping[str, Any], seq_len: int
) -> None:
    """Compare ``fn(model, hardware, seq_len)`` with the reference; name the mistake.

    Examples
    --------
    >>> from specdec_reference.testing.e7_1 import real_pairs
    >>> m, h = real_pairs()[0]
    >>> check_max_batch_in_memory(lambda m, h, s: 74, m, with_memory(h), 2048)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: ... That is the weights left out: ...
    """
    call = f"max_batch_in_memory({_m(model)}, {_h(hardware)}, {seq_len})"
    got = as_int(call_or_fail(fn, dict(model), dict(hardware), seq_len, call=call), call)
    expected = serving.max_batch_in_memory(model, hardware, seq_len)
    weights = roofline.weight_bytes(model["params"], model["bytes_per_param"])
    one = roofline.model_cache_bytes(model, seq_len, 1)
    room = float(hardware["memory"]) - weights
    check_equal(
        got,
        expected,
        call=call,
        advice=f"{float(hardware['memory']):.4g} bytes of memory, {weights:.4g} of weights, "
        f"{one:.4g} of cache a sequence",
        mistakes={
            "the weights left out": (
                int(float(hardware["memory"]) // one),
                "the weights take their share of memory first",
            ),
            "a partial sequence counted (rounded up)": (
                math.ceil(room / one) if room > 0 and room % one else None,
                "only whole sequences fit: round down",
            ),
            "a negative batch when the weights alone do not fit": (
                math.floor(room / one) if room < 0 else None,
                "no sequence fits then: return 0",
            ),
            "the cache of keys only (or values only)": (
                int(room // (one / 2)) if room > 0 else None,
                "kv_cache_bytes counts a key and a value vector per head, layer and token",
            ),
        },
    )


def capacity_cases(seed: int, count: int) -> list[tuple]:
    """Random ``(model, hardware with memory, seq_len)``; some models do not fit at all.

    Examples
    --------
    >>> len(capacity_cases(0, 3))
    3
    """
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        model, hardware = random_model(gen), random_hardware(gen)
        weights = roofline.weight_bytes(model["params"], model["bytes_per_param"])
        hardware["memory"] = float(weights * np.exp(gen.uniform(-0.5, 3)))
        out.append((model, hardware, int(np.exp(gen.uniform(0, np.log(131072))))))
    return out


def cached_cases(seed: int, count: int) -> list[tuple]:
    """Random ``(model, hardware, batch, positions, seq_len)`` on both sides of the ridge.

    Examples
    --------
    >>> len(cached_cases(0, 3))
    3
    """
    gen = np.random.default_rng(seed)
    out = []
    for _alpha, k, _c, model, hardware, batch in speedup_cases(seed, count):
        out.append((model, hardware, batch, k + 1, int(gen.choice([0, 1, 512, 2048, 32768]))))
    return out
