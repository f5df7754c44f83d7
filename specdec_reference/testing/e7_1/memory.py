"""Part 5, the memory: ``max_batch``, how many sequences' caches fit beside the weights,
and the hardware dicts its cases use."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ... import roofline, specs
from ..calls import call_or_fail
from ..compare import check_equal
from ..convert import _num, as_float, as_int
from .shared import _h, _m, hardware_dict

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
    >>> from specdec_reference.testing.e7_1.shared import model_dict
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
