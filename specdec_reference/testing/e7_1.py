"""Helpers shared by the hidden tests of lesson E7.1, *Why decoding is slow*.

The notebook's hidden cells call these with the learner's function as an argument,
for instance ``_e71.check_step_seconds(step_time, model, hardware, 1, 0)``; every
failure is an ``AssertionError`` whose message names the call, what was expected
and, when the wrong result matches one, the common mistake behind it.  Expected
values come from :mod:`specdec_reference.roofline` and
:mod:`specdec_reference.greedy`; the learner's functions get fresh plain dicts, so
nothing they do to their arguments reaches the reference's figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import greedy, roofline, specs
from .calls import call_or_fail
from .compare import check_close, check_equal
from .convert import _num, _show, as_float, as_int, unpack

__all__ = [
    "MODEL_KEYS",
    "HARDWARE_KEYS",
    "model_dict",
    "hardware_dict",
    "real_pairs",
    "random_model",
    "random_hardware",
    "random_pairs",
    "check_weight_bytes",
    "check_flops_per_token",
    "check_kv_cache_bytes",
    "check_step_seconds",
    "check_step_bound",
    "check_ridge_batch",
    "check_verify_cost_ratio",
    "MEMORY_BYTES",
    "capacity_dict",
    "exact_fit",
    "weight_bytes_of",
    "room_over_cache",
    "memory_for",
    "check_max_batch",
    "greedy_case",
    "check_greedy_prefix",
    "check_greedy_tokens",
    "check_greedy_types",
]

#: The keys of a model dict in the notebook, and of a hardware dict.
MODEL_KEYS = ("name", "params", "layers", "kv_heads", "head_dim", "bytes_per_param")
HARDWARE_KEYS = ("name", "bandwidth", "peak_flops")


def model_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh plain dict with the notebook's model keys, from a spec mapping.

    Examples
    --------
    >>> model_dict(specs.LLAMA2_70B)["kv_heads"]
    8
    """
    return {key: spec[key] for key in MODEL_KEYS}


def hardware_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh plain dict with the notebook's hardware keys.

    Examples
    --------
    >>> hardware_dict(specs.A100_SXM_80GB)["bandwidth"]
    2039000000000.0
    """
    return {key: spec[key] for key in HARDWARE_KEYS}


def real_pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (model, hardware) pair of the lesson's tables, as fresh dicts."""
    return [(model_dict(m), hardware_dict(h)) for m in specs.MODELS for h in specs.HARDWARE]


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_model(rng: np.random.Generator) -> dict[str, Any]:
    """A random dense model: 0.1 to 500 billion parameters, 1, 2 or 4 bytes each."""
    heads = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
    return {
        "name": "a random model",
        "params": int(_log_uniform(rng, 1e8, 5e11)),
        "layers": int(rng.integers(4, 129)),
        "kv_heads": heads,
        "head_dim": int(rng.choice([64, 80, 128, 256])),
        "bytes_per_param": int(rng.choice([1, 2, 4])),
    }


def random_hardware(rng: np.random.Generator) -> dict[str, Any]:
    """Random ceilings: 20 GB/s to 10 TB/s, 0.05 to 3000 TFLOP/s."""
    return {
        "name": "random hardware",
        "bandwidth": _log_uniform(rng, 2e10, 1e13),
        "peak_flops": _log_uniform(rng, 5e10, 3e15),
    }


def random_pairs(seed: int, n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``n`` random (model, hardware) pairs from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return [(random_model(rng), random_hardware(rng)) for _ in range(n)]


_NAMED = {spec["name"] for spec in (*specs.MODELS, *specs.HARDWARE)}


def _label(config: Mapping[str, Any], keys: Sequence[str]) -> str:
    """How a model or hardware dict is shown in a message: its name, or its numbers."""
    if config.get("name") in _NAMED:
        return str(config["name"])
    shown = {k: config[k] for k in keys if k != "name"}
    return _show(shown, limit=200)


def _m(model: Mapping[str, Any]) -> str:
    return _label(model, MODEL_KEYS)


def _h(hardware: Mapping[str, Any]) -> str:
    return _label(hardware, HARDWARE_KEYS)


# ---------------------------------------------------------------------------
# Bytes and FLOPs
# ---------------------------------------------------------------------------


def check_weight_bytes(fn: Callable[..., Any], params: Any, bytes_per_param: Any) -> None:
    """Compare ``fn(params, bytes_per_param)`` with ``params * bytes_per_param``.

    Examples
    --------
    >>> check_weight_bytes(lambda n, b: 8 * n * b, 1000, 2)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: weight_bytes(1000, 2) returned 16000.0, expected 2000.0. That is bits where
    bytes are meant: multiply by bytes_per_param only, without the factor 8.
    """
    call = f"weight_bytes({_show(params)}, {_show(bytes_per_param)})"
    expected = roofline.weight_bytes(params, bytes_per_param)
    n, b = float(params), float(bytes_per_param)
    check_close(
        call_or_fail(fn, params, bytes_per_param, call=call),
        expected,
        call=call,
        atol=1e-6,
        rtol=1e-9,
        mistakes={
            "bits where bytes are meant": (
                8 * expected,
                "multiply by bytes_per_param only, without the factor 8",
            ),
            "the parameter count alone": (n if b != 1 else None, "multiply by bytes_per_param"),
            "gigabytes instead of bytes": (expected / 1e9, "return bytes, not GB"),
        },
    )


def check_flops_per_token(fn: Callable[..., Any], params: Any) -> None:
    """Compare ``fn(params)`` with ``2 * params``.

    Examples
    --------
    >>> check_flops_per_token(lambda n: n, 1000)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: flops_per_token(1000) returned 1000.0, expected 2000.0. That is one FLOP
    per parameter instead of two: each weight is used for a multiply and an add.
    """
    call = f"flops_per_token({_show(params)})"
    n = float(params)
    check_close(
        call_or_fail(fn, params, call=call),
        roofline.flops_per_token(params),
        call=call,
        atol=1e-6,
        rtol=1e-9,
        mistakes={
            "one FLOP per parameter instead of two": (
                n,
                "each weight is used for a multiply and an add",
            ),
            "6 FLOPs per parameter, a training step's (forward and backward)": (
                6 * n,
                "decoding runs the forward pass only: 2 FLOPs per parameter",
            ),
        },
    )


def check_kv_cache_bytes(fn: Callable[..., Any], *args: Any) -> None:
    """Compare ``fn(layers, kv_heads, head_dim, seq_len, batch, bytes_per_value)``.

    Examples
    --------
    >>> check_kv_cache_bytes(lambda l, h, d, s, b, v: l * h * d * s * b * v,
    ...                      32, 32, 128, 1, 1, 2)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: kv_cache_bytes(32, 32, 128, 1, 1, 2) returned 262144.0, expected 524288.0.
    That is the keys only: each layer caches a key and a value per head and position:
    multiply by 2.
    """
    layers, _heads, _dim, seq_len, batch, _bytes = (float(a) for a in args)
    call = "kv_cache_bytes(" + ", ".join(_show(a) for a in args) + ")"
    expected = roofline.kv_cache_bytes(*args)
    check_close(
        call_or_fail(fn, *args, call=call),
        expected,
        call=call,
        atol=1e-6,
        rtol=1e-9,
        mistakes={
            "the keys only": (
                expected / 2,
                "each layer caches a key and a value per head and position: multiply by 2",
            ),
            "bits where bytes are meant": (8 * expected, "bytes_per_value is in bytes"),
            "one sequence's cache (the batch left out)": (
                expected / batch if batch > 1 else None,
                "every sequence of the batch has its own cache: multiply by batch",
            ),
            "one layer's cache": (
                expected / layers if layers > 1 else None,
                "every layer keeps its own keys and values: multiply by layers",
            ),
        },
    )


# ---------------------------------------------------------------------------
# step_time
# ---------------------------------------------------------------------------


def _step_call(model: Mapping[str, Any], hardware: Mapping[str, Any], batch: Any, seq: Any) -> str:
    return f"step_time(model={_m(model)}, hardware={_h(hardware)}, batch={batch}, seq_len={seq})"


def _parts(model: Mapping[str, Any], hardware: Mapping[str, Any], batch: int, seq_len: int):
    """(weights seconds, cache seconds, compute seconds) of one step, by the reference."""
    bandwidth = float(hardware["bandwidth"])
    weights = roofline.weight_bytes(model["params"], model["bytes_per_param"]) / bandwidth
    cache = roofline.model_cache_bytes(model, seq_len, batch) / bandwidth
    compute = batch * roofline.flops_per_token(model["params"]) / float(hardware["peak_flops"])
    return weights, cache, compute


def _bound(value: Any, call: str) -> str:
    text = str(value).strip().lower().replace("-", " ").removesuffix(" bound")
    if isinstance(value, (bytes, bytearray)) or text not in ("memory", "compute"):
        raise AssertionError(
            f"{call} returned the bound {_show(value)}, expected the string 'memory' or 'compute'."
        )
    return text


def _call_step(fn: Callable[..., Any], model, hardware, batch, seq_len, call: str):
    got = call_or_fail(fn, dict(model), dict(hardware), batch, seq_len, call=call)
    return unpack(got, ("seconds", "bound"), call)


def check_step_seconds(
    fn: Callable[..., Any],
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
    seq_len: int,
) -> None:
    """Compare the time ``fn(model, hardware, batch, seq_len)`` returns with the roofline's.

    Examples
    --------
    >>> def summed(model, hardware, batch, seq_len):
    ...     memory = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
    ...     return memory + batch * 2 * model["params"] / hardware["peak_flops"], "memory"
    >>> llama, a100 = model_dict(specs.LLAMA2_7B), hardware_dict(specs.A100_SXM_80GB)
    >>> check_step_seconds(summed, llama, a100, 1, 0)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: step_time(...) returned the time 0.006652..., expected 0.006609... That is
    the sum of the two times instead of their maximum: ...
    """
    call = _step_call(model, hardware, batch, seq_len)
    seconds, _ = _call_step(fn, model, hardware, batch, seq_len, call)
    weights, cache, compute = _parts(model, hardware, batch, seq_len)
    expected = max(weights + cache, compute)
    memory = weights + cache
    mistakes = {
        "the sum of the two times instead of their maximum": (
            memory + compute,
            "the memory reads and the arithmetic overlap, so the step takes the larger of "
            "the two: max(memory time, compute time)",
        ),
        "forgetting the KV cache": (
            max(weights, compute) if cache > 0 else None,
            "the step also reads each sequence's key-value cache: add kv_cache_bytes(...) "
            "to the weight bytes",
        ),
        "bits where bytes are meant": (
            max(8 * memory, compute),
            "the bandwidth is in bytes per second and the sizes are in bytes",
        ),
        "one FLOP per parameter instead of two": (
            max(memory, compute / 2),
            "each position costs flops_per_token(params) = 2 * params",
        ),
        "the memory time alone": (
            memory if compute > memory else None,
            "past the ridge the arithmetic takes longer: take the larger of the two times",
        ),
        "the compute time alone": (
            compute if memory > compute else None,
            "while memory-bound the step waits for the weights: take the larger of the two",
        ),
        "milliseconds instead of seconds": (1e3 * expected, "return seconds"),
        "one sequence's cache (the batch left out)": (
            max(weights + cache / batch, compute) if batch > 1 and cache > 0 else None,
            "each sequence of the batch reads its own cache",
        ),
    }
    value = as_float(seconds, call + " (the time)")
    if abs(value - expected) <= 1e-18 + 1e-9 * abs(expected):
        return
    check_close(
        value,
        expected,
        call=call,
        verb="returned the time",
        atol=1e-18,
        rtol=1e-9,
        mistakes=mistakes,
    )


def check_step_bound(
    fn: Callable[..., Any],
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
    seq_len: int,
) -> None:
    """Check that ``fn(model, hardware, batch, seq_len)`` names the larger of the two times.

    An exact tie, the two times equal to the last bit (the Apple M2 at batch 10: its
    ridge is exactly 10 FLOP/byte), is graded: the contract says ``"memory"``.  Other
    cases within a relative 1e-9 of a tie are skipped, since the order of a correct
    solution's arithmetic may tip them either way.

    Examples
    --------
    >>> swapped = lambda m, h, b, s: (0.0, "compute")
    >>> llama, a100 = model_dict(specs.LLAMA2_7B), hardware_dict(specs.A100_SXM_80GB)
    >>> check_step_bound(swapped, llama, a100, 1, 0)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: step_time(...) returned the bound 'compute', expected 'memory': the memory
    time is 0.006609... s and the compute time 4.3194...e-05 s...
    """
    weights, cache, compute = _parts(model, hardware, batch, seq_len)
    memory = weights + cache
    tie = memory == compute
    if not tie and abs(memory - compute) <= 1e-9 * max(memory, compute):
        return
    call = _step_call(model, hardware, batch, seq_len)
    _, bound = _call_step(fn, model, hardware, batch, seq_len, call)
    expected = "memory" if memory >= compute else "compute"
    got = _bound(bound, call)
    if got != expected and tie:
        raise AssertionError(
            f"{call} returned the bound {got!r}, expected 'memory': the memory time and the "
            f"compute time are both {_num(memory)} s. That is a tie named 'compute': the "
            "docstring says a tie is 'memory' (compare with >=, not >)."
        )
    if got != expected and cache > 0 and ("memory" if weights >= compute else "compute") == got:
        raise AssertionError(
            f"{call} returned the bound {got!r}, expected {expected!r}: the memory time is "
            f"{_num(memory)} s (the weights {_num(weights)} s and the KV caches {_num(cache)} s) "
            f"and the compute time {_num(compute)} s. That is comparing the weights' read time "
            "alone with the compute time: the step also waits for every sequence's KV cache, so "
            "compare the whole memory time."
        )
    if got != expected:
        raise AssertionError(
            f"{call} returned the bound {got!r}, expected {expected!r}: the memory time is "
            f"{_num(memory)} s and the compute time {_num(compute)} s, and the bound is the "
            "larger of the two (the one the step waits for)."
        )


# ---------------------------------------------------------------------------
# ridge_batch and verify_cost_ratio
# ---------------------------------------------------------------------------


def ridge(model: Mapping[str, Any], hardware: Mapping[str, Any], flops_per_param: float = 2.0):
    """The real-valued ridge: the batch at which compute time equals the weights' read time.

    Examples
    --------
    >>> round(ridge(specs.LLAMA2_7B, specs.A100_SXM_80GB), 3)
    153.016
    """
    weights = (
        float(model["params"]) * float(model["bytes_per_param"]) / float(hardware["bandwidth"])
    )
    per_sequence = flops_per_param * float(model["params"]) / float(hardware["peak_flops"])
    return weights / per_sequence


def check_ridge_batch(
    fn: Callable[..., Any], model: Mapping[str, Any], hardware: Mapping[str, Any]
) -> None:
    """Compare ``fn(model, hardware)`` with the first compute-bound batch.

    Examples
    --------
    >>> llama, a100 = model_dict(specs.LLAMA2_7B), hardware_dict(specs.A100_SXM_80GB)
    >>> check_ridge_batch(lambda m, h: 153, llama, a100)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: ridge_batch(...) returned 153, expected 154: ... That is the last
    memory-bound batch...
    """
    call = f"ridge_batch(model={_m(model)}, hardware={_h(hardware)})"
    got = call_or_fail(fn, dict(model), dict(hardware), call=call)
    expected = roofline.ridge_batch(model, hardware)
    x = ridge(model, hardware)
    number = as_float(got, call)
    if number != int(number) and abs(number - x) <= 1e-6 * x:
        raise AssertionError(
            f"{call} returned {_num(number)}, expected {expected}. That is the real-valued "
            "ridge, where compute time equals memory time: return the smallest whole batch "
            "that is compute-bound."
        )
    value = as_int(got, call)
    check_equal(
        value,
        expected,
        call=call,
        advice=(
            f"the memory time equals the compute time at batch {_num(x)} (weights only, "
            "seq_len = 0), so the first compute-bound batch is the next whole number"
        ),
        mistakes={
            "the last memory-bound batch, one too small": (
                expected - 1 if expected > 1 else None,
                "at that batch the step still waits for memory: add one",
            ),
            "one FLOP per parameter instead of two": (
                math.floor(ridge(model, hardware, 1.0)) + 1,
                "each sequence costs flops_per_token(params) = 2 * params",
            ),
            "bits where bytes are meant": (
                math.floor(8 * x) + 1,
                "the weights take params * bytes_per_param bytes",
            ),
        },
    )


def check_verify_cost_ratio(
    fn: Callable[..., Any], model: Mapping[str, Any], hardware: Mapping[str, Any], k: int
) -> None:
    """Compare ``fn(model, hardware, k)`` with the cost of ``k + 1`` positions over one.

    Examples
    --------
    >>> llama, a100 = model_dict(specs.LLAMA2_7B), hardware_dict(specs.A100_SXM_80GB)
    >>> five = lambda m, h, k: k + 1
    >>> check_verify_cost_ratio(five, llama, a100, 4)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: verify_cost_ratio(...) returned 5.0, expected 1.0. That is k + 1 full steps...
    """
    call = f"verify_cost_ratio(model={_m(model)}, hardware={_h(hardware)}, k={k})"
    got = call_or_fail(fn, dict(model), dict(hardware), k, call=call)
    expected = roofline.verify_cost_ratio(model, hardware, k)
    one = roofline.step_time(model, hardware, 1, 0)[0]
    check_close(
        got,
        expected,
        call=call,
        atol=1e-12,
        rtol=1e-9,
        mistakes={
            "k + 1 full steps, as if every position cost a step of its own": (
                float(k + 1) if abs(k + 1 - expected) > 1e-9 * expected else None,
                "the k + 1 positions share one read of the weights: "
                "step_time(model, hardware, k + 1, 0) over step_time(model, hardware, 1, 0)",
            ),
            "1, as if verification were always free": (
                1.0 if expected > 1 + 1e-9 else None,
                "past the ridge the arithmetic of k + 1 positions takes longer than reading "
                "the weights: compute the two step times",
            ),
            "k positions instead of k + 1": (
                roofline.verify_cost_ratio(model, hardware, k - 1) if k >= 1 else None,
                "the target scores the k drafted tokens and the position after them",
            ),
            "the inverse ratio": (1 / expected, "divide the k + 1 positions' time by one's"),
            "the time of the pass in seconds, not a ratio": (
                roofline.step_time(model, hardware, k + 1, 0)[0],
                f"divide by the time of one position ({_num(one)} s)",
            ),
        },
    )


# ---------------------------------------------------------------------------
# max_batch
# ---------------------------------------------------------------------------

#: Memory capacity of the lesson's hardware, in bytes (one table: ``specs``).
MEMORY_BYTES = specs.MEMORY_BYTES


def capacity_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh hardware dict with the notebook's keys and ``memory`` in bytes.

    Examples
    --------
    >>> capacity_dict(specs.A100_SXM_80GB)["memory"]
    80000000000.0
    """
    return {**hardware_dict(spec), "memory": MEMORY_BYTES[spec["name"]]}


def exact_fit(model: Mapping[str, Any], seq_len: int, batch: int) -> dict[str, Any]:
    """Hardware whose memory holds the weights and exactly ``batch`` caches of ``seq_len``.

    Examples
    --------
    >>> roofline.max_batch(specs.LLAMA2_7B, exact_fit(specs.LLAMA2_7B, 100, 7), 100)
    7
    """
    cache = roofline.model_cache_bytes(model, seq_len, batch)
    memory = roofline.weight_bytes(model["params"], model["bytes_per_param"]) + cache
    return {"name": "an exact fit", "bandwidth": 1e12, "peak_flops": 1e14, "memory": memory}


def weight_bytes_of(model: Mapping[str, Any]) -> float:
    """The bytes of a model's weights.

    Examples
    --------
    >>> weight_bytes_of(specs.LLAMA2_7B) / 1e9
    13.476831232
    """
    return roofline.weight_bytes(model["params"], model["bytes_per_param"])


def room_over_cache(model: Mapping[str, Any], hardware: Mapping[str, Any], seq_len: int) -> float:
    """The memory the weights leave, over one sequence's cache: a real-valued batch.

    Examples
    --------
    >>> round(room_over_cache(specs.LLAMA2_7B, {"memory": 80e9}, 4096), 2)
    30.98
    """
    return (float(hardware["memory"]) - weight_bytes_of(model)) / _one_cache(model, seq_len)


def memory_for(model: Mapping[str, Any], seq_len: int, sequences: float) -> dict[str, Any]:
    """Hardware whose memory, in whole bytes, holds the weights and ``sequences`` caches (>= 0).

    Examples
    --------
    >>> round(room_over_cache(specs.LLAMA2_7B, memory_for(specs.LLAMA2_7B, 4096, 2.5), 4096), 6)
    2.5
    """
    memory = max(0.0, float(round(weight_bytes_of(model) + sequences * _one_cache(model, seq_len))))
    return {"name": "random hardware", "bandwidth": 1e12, "peak_flops": 1e14, "memory": memory}


def _one_cache(model: Mapping[str, Any], seq_len: int) -> float:
    return roofline.model_cache_bytes(model, seq_len, 1)


def check_max_batch(
    fn: Callable[..., Any], model: Mapping[str, Any], hardware: Mapping[str, Any], seq_len: int
) -> None:
    """Compare ``fn(model, hardware, seq_len)`` with the number of caches that fit.

    Examples
    --------
    >>> llama, a100 = model_dict(specs.LLAMA2_7B), capacity_dict(specs.A100_SXM_80GB)
    >>> whole = lambda m, h, s: int(h["memory"] // (2 * 32 * 32 * 128 * s * 2))
    >>> check_max_batch(whole, llama, a100, 4096)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: max_batch(...) returned 37, expected 30: ... That is leaving the weights
    out: the weights stay in memory...
    """
    call = f"max_batch(model={_m(model)}, hardware={_h(hardware)}, seq_len={seq_len})"
    got = call_or_fail(fn, dict(model), dict(hardware), seq_len, call=call)
    expected = roofline.max_batch(model, hardware, seq_len)
    memory = float(hardware["memory"])
    weights = weight_bytes_of(model)
    per_sequence = _one_cache(model, seq_len)
    share = room_over_cache(model, hardware, seq_len)
    value = as_float(got, call)
    if value != int(value) and abs(value - share) <= 1e-6 * max(abs(share), 1):
        raise AssertionError(
            f"{call} returned {_num(value)}, expected {expected}. That is the room over one "
            "cache, not a whole number of sequences: a sequence either fits or it does not, so "
            "round down."
        )
    check_equal(
        as_int(got, call),
        expected,
        call=call,
        advice=(
            f"{_num(memory - weights)} bytes are left beside the weights and each sequence's "
            f"cache takes {_num(per_sequence)} bytes"
        ),
        mistakes={
            "leaving the weights out": (
                int(memory // per_sequence),
                "the weights stay in memory, so only what they leave holds caches",
            ),
            "a negative batch when the weights do not fit": (
                math.floor(share) if share < 0 else None,
                "no sequence fits: return 0",
            ),
            "rounding up": (
                math.ceil(share) if share > 0 and math.ceil(share) != expected else None,
                "the last, partial sequence does not fit: round down",
            ),
            "one position's cache a sequence (seq_len left out)": (
                int((memory - weights) // (per_sequence / seq_len)) if share > 0 else None,
                "each sequence's cache holds seq_len positions",
            ),
        },
    )


# ---------------------------------------------------------------------------
# greedy_verify
# ---------------------------------------------------------------------------


def greedy_case(
    rng: np.random.Generator, k: int, j: int, vocab: int = 50
) -> tuple[list[int], list[int]]:
    """A draft of ``k`` tokens whose first mismatch with the target is at ``j`` (``j = k``: none).

    Examples
    --------
    >>> best, drafted = greedy_case(np.random.default_rng(0), 4, 2)
    >>> len(best), len(drafted), drafted[:2] == best[:2], drafted[2] != best[2]
    (5, 4, True, True)
    """
    best = [int(t) for t in rng.integers(0, vocab, size=k + 1)]
    drafted = best[:k]
    for i in range(j + 1, k):  # after the mismatch anything goes, agreeing or not
        drafted[i] = int(rng.integers(0, vocab))
    if j < k:
        drafted[j] = (best[j] + 1 + int(rng.integers(0, vocab - 1))) % vocab  # never best[j]
    return best, drafted


def _greedy_call(target_argmax: Any, drafted: Any) -> str:
    return f"greedy_verify({_show(target_argmax)}, {_show(drafted)})"


def _tokens(got: Any, call: str) -> list[int]:
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool):
        raise AssertionError(
            f"{call} returned {_show(got)}, expected the list of emitted tokens. That is a "
            "count: return the accepted drafted tokens followed by the target's token."
        )
    if got is None or isinstance(got, (str, bytes)) or not hasattr(got, "__len__"):
        raise AssertionError(
            f"{call} returned {_show(got)}, expected a list of tokens (ints)."
            + (" Did you forget return?" if got is None else "")
        )
    return [as_int(x, call + " (a token)") for x in np.asarray(got, dtype=object).reshape(-1)]


def _run_greedy(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> list[int]:
    """Call ``fn`` on copies; fail if it changed the inputs it was given."""
    call = _greedy_call(target_argmax, drafted)
    given_best = target_argmax.copy() if hasattr(target_argmax, "copy") else target_argmax
    given_draft = drafted.copy() if hasattr(drafted, "copy") else drafted
    got = _tokens(call_or_fail(fn, given_best, given_draft, call=call), call)
    for name, mine, theirs in (
        ("drafted", drafted, given_draft),
        ("target_argmax", target_argmax, given_best),
    ):
        if [int(t) for t in mine] != [int(t) for t in theirs]:
            raise AssertionError(
                f"{call} changed the {name} it was given (now {_show(theirs)}): build a new "
                "list for the emitted tokens instead of appending to an argument."
            )
    return got


def check_greedy_prefix(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Check the accepted part: the drafted tokens up to the first mismatch, then at most one more.

    Examples
    --------
    >>> check_greedy_prefix(lambda b, d: [x for x, y in zip(d, b) if x == y] + [b[-1]],
    ...                     [1, 2, 3, 4], [1, 9, 3])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify([1, 2, 3, 4], [1, 9, 3]) returned [1, 3, 4], which does not
    start with the accepted prefix [1] followed by one token. That is carrying on after a
    mismatch: stop at the first drafted token that differs from the target's argmax; the
    tokens drafted after it continue a text that is discarded.
    """
    call = _greedy_call(target_argmax, drafted)
    got = _run_greedy(fn, target_argmax, drafted)
    best = [int(t) for t in target_argmax]
    draft = [int(t) for t in drafted]
    j = next((i for i in range(len(draft)) if draft[i] != best[i]), len(draft))
    if got[:j] == draft[:j] and len(got) in (j, j + 1):
        return
    matches = [x for x, y in zip(draft, best, strict=False) if x == y]
    hint = ""
    if j < len(draft) and (len(got) > j + 1 or got[: len(matches)] == matches):
        hint = (
            " That is carrying on after a mismatch: stop at the first drafted token that "
            "differs from the target's argmax; the tokens drafted after it continue a text "
            "that is discarded."
        )
    elif len(got) < j:
        hint = " It stops too early: every drafted token up to the first mismatch is kept."
    raise AssertionError(
        f"{call} returned {got}, which does not start with the accepted prefix "
        f"{draft[:j]} followed by one token.{hint}"
    )


def check_greedy_tokens(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Compare the whole output with ``drafted[:j] + [target_argmax[j]]``.

    Examples
    --------
    >>> check_greedy_tokens(lambda b, d: [], [4, 8], [3])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify([4, 8], [3]) returned [], expected [4]. That is dropping the
    target's token: a pass always emits one token of the target's, the correction at the
    first mismatch or the bonus after a fully accepted draft.
    """
    call = _greedy_call(target_argmax, drafted)
    got = _run_greedy(fn, target_argmax, drafted)
    expected = greedy.greedy_verify(target_argmax, drafted)
    draft = [int(t) for t in drafted]
    j = len(expected) - 1
    check_equal(
        got,
        expected,
        call=call,
        mistakes={
            "dropping the target's token": (
                expected[:-1],
                "a pass always emits one token of the target's, the correction at the first "
                "mismatch or the bonus after a fully accepted draft",
            ),
            "keeping the mismatched drafted token": (
                draft[: j + 1] if j < len(draft) else None,
                "at the first mismatch the target's argmax replaces the drafted token",
            ),
        },
    )


def check_greedy_types(fn: Callable[..., Any], target_argmax: Any, drafted: Any) -> None:
    """Check that arrays and tuples give what lists give (the learner's own list answer).

    Examples
    --------
    >>> joined = lambda b, d: list(d[:1] + b[1:2])  # list concatenation; arrays add instead
    >>> check_greedy_types(joined, [1, 2, 3], [1, 2])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: greedy_verify(array([1, 2, 3]), array([1, 2])) returned [3], but [1, 2]
    for the same tokens as lists: the docstring allows lists, tuples or 1-D arrays (with
    arrays, + adds elementwise instead of joining).
    """
    best = [int(t) for t in target_argmax]
    draft = [int(t) for t in drafted]
    own = _run_greedy(fn, list(best), list(draft))
    for convert, shown in (
        (lambda v: np.array(v, dtype=np.int64), "array"),
        (tuple, "tuple"),
    ):
        args = (convert(best), convert(draft))
        label = (
            f"greedy_verify({shown}({best}), {shown}({draft}))"
            if shown == "array"
            else _greedy_call(*args)
        )
        got = _run_greedy(fn, *args)
        if got != own:
            raise AssertionError(
                f"{label} returned {got}, but {own} for the same tokens as lists: the "
                "docstring allows lists, tuples or 1-D arrays (with arrays, + adds "
                "elementwise instead of joining)."
            )
