"""Part 5, the ridge and verification: ``ridge_batch`` and ``verify_cost_ratio``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ... import roofline
from ..calls import call_or_fail
from ..compare import check_close, check_equal
from ..convert import _num, as_float, as_int
from .shared import _h, _m


def ridge(model: Mapping[str, Any], hardware: Mapping[str, Any], flops_per_param: float = 2.0):
    """The real-valued ridge: the batch at which compute time equals the weights' read time.

    Examples
    --------
    >>> from specdec_reference import specs
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
    >>> from specdec_reference import specs
    >>> from specdec_reference.testing.e7_1.shared import hardware_dict, model_dict
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
    >>> from specdec_reference import specs
    >>> from specdec_reference.testing.e7_1.shared import hardware_dict, model_dict
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
