"""Parts 2 and 3: a model's bytes and FLOPs, ``weight_bytes`` and ``flops_per_token``,
and the key-value cache's size, ``kv_cache_bytes``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import roofline
from ..calls import call_or_fail
from ..compare import check_close
from ..convert import _show


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
