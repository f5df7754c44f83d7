"""Part 4: the roofline of one step, ``step_time``: its time and the bound it names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ... import roofline
from ..calls import call_or_fail
from ..compare import check_close
from ..convert import _num, _show, as_float, unpack
from .shared import _h, _m


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
    >>> from specdec_reference import specs
    >>> from specdec_reference.testing.e7_1.shared import hardware_dict, model_dict
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
    >>> from specdec_reference import specs
    >>> from specdec_reference.testing.e7_1.shared import hardware_dict, model_dict
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
