"""Why decoding is slow: bytes read, FLOPs done, and the roofline of one decoding step.

A decoding step of a dense transformer reads every weight once and, for each
sequence of the batch, the key-value cache of the tokens before it; it does about
two floating-point operations (a multiply and an add) per weight and per sequence.
The step takes at least the larger of the time to read those bytes and the time to
do that arithmetic (Pope et al. 2022, Section 2).  At small batches the weights
dominate, the step is memory-bound, and scoring ``k + 1`` positions costs about
what one does: the spare arithmetic speculative decoding spends on verification
(Leviathan et al. 2023, Section 1).

``model`` and ``hardware`` are mappings with the keys of
:mod:`specdec_reference.specs`: ``params``, ``layers``, ``kv_heads``,
``head_dim``, ``bytes_per_param``; ``bandwidth`` (bytes/s) and ``peak_flops``
(FLOP/s), and for :func:`max_batch` ``memory`` (the card's capacity in bytes).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

__all__ = [
    "weight_bytes",
    "flops_per_token",
    "kv_cache_bytes",
    "step_time",
    "ridge_batch",
    "verify_cost_ratio",
    "arithmetic_intensity",
    "max_batch",
]


def _count(value: Any, name: str) -> float:
    value = float(value)
    if not value >= 0:  # also rejects NaN
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def weight_bytes(params: float, bytes_per_param: float) -> float:
    """Return the bytes that reading every weight once moves: ``params * bytes_per_param``.

    Parameters
    ----------
    params : float
        Number of parameters (weights), ``>= 0``.
    bytes_per_param : float
        Bytes per stored weight: 2 for 16-bit, 1 for 8-bit, 0.5 for 4-bit.

    Returns
    -------
    float
        Bytes (not bits).

    Notes
    -----
    .. math:: W = N\\,b

    Examples
    --------
    >>> weight_bytes(6_738_415_616, 2) / 1e9  # Llama-2-7B in 16-bit: 13.5 GB
    13.476831232
    """
    return _count(params, "params") * _count(bytes_per_param, "bytes_per_param")


def flops_per_token(params: float) -> float:
    """Return the floating-point operations of one position's forward pass: ``2 * params``.

    Parameters
    ----------
    params : float
        Number of parameters, ``>= 0``.

    Returns
    -------
    float
        FLOPs: one multiply and one add per weight (attention's own FLOPs, which
        grow with the context, are left out).

    Notes
    -----
    .. math:: F = 2N

    Examples
    --------
    >>> flops_per_token(6_738_415_616) / 1e9
    13.476831232
    """
    return 2.0 * _count(params, "params")


def kv_cache_bytes(
    layers: int,
    kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch: int,
    bytes_per_value: float,
) -> float:
    """Return the bytes of the key-value cache: keys and values, every layer and position.

    Parameters
    ----------
    layers : int
        Transformer layers.
    kv_heads : int
        Key-value heads per layer (fewer than the query heads under grouped-query
        attention: 8 for Llama-2-70B).
    head_dim : int
        Width of one head.
    seq_len : int
        Cached positions per sequence, ``>= 0``.
    batch : int
        Sequences, ``>= 0``.
    bytes_per_value : float
        Bytes per cached number (2 for 16-bit).

    Returns
    -------
    float
        Bytes.

    Notes
    -----
    Each layer caches a key and a value vector per head and position:

    .. math:: C = 2\\,L\\,h_{kv}\\,d_h\\,s\\,B\\,b

    Examples
    --------
    >>> kv_cache_bytes(32, 32, 128, 1, 1, 2) / 2**20  # Llama-2-7B: 0.5 MiB per token
    0.5
    >>> kv_cache_bytes(80, 8, 128, 1, 1, 2) / 2**20  # Llama-2-70B, 8 key-value heads
    0.3125
    """
    values = 2.0  # a key and a value
    for value, name in (
        (layers, "layers"),
        (kv_heads, "kv_heads"),
        (head_dim, "head_dim"),
        (seq_len, "seq_len"),
        (batch, "batch"),
        (bytes_per_value, "bytes_per_value"),
    ):
        values *= _count(value, name)
    return values


def _times(model: Mapping[str, Any], hardware: Mapping[str, Any], batch: int, seq_len: int):
    """(memory seconds, compute seconds) of one decoding step."""
    read = weight_bytes(model["params"], model["bytes_per_param"]) + model_cache_bytes(
        model, seq_len, batch
    )
    work = _count(batch, "batch") * flops_per_token(model["params"])
    return read / float(hardware["bandwidth"]), work / float(hardware["peak_flops"])


def model_cache_bytes(model: Mapping[str, Any], seq_len: int, batch: int) -> float:
    """:func:`kv_cache_bytes` of ``model`` (a mapping as in :func:`step_time`): ``batch``
    sequences of ``seq_len`` cached positions, stored with ``bytes_per_param`` bytes a
    value.

    Examples
    --------
    >>> from specdec_reference.specs import LLAMA2_7B
    >>> model_cache_bytes(LLAMA2_7B, 4096, 1) / 2**30
    2.0
    """
    return kv_cache_bytes(
        model["layers"],
        model["kv_heads"],
        model["head_dim"],
        seq_len,
        batch,
        model["bytes_per_param"],
    )


def step_time(
    model: Mapping[str, Any], hardware: Mapping[str, Any], batch: int, seq_len: int
) -> tuple[float, str]:
    """Return the roofline time of one decoding step and the bound that sets it.

    Parameters
    ----------
    model : mapping
        ``params``, ``layers``, ``kv_heads``, ``head_dim``, ``bytes_per_param``
        (the weights and the cache are stored with it).
    hardware : mapping
        ``bandwidth`` in bytes/s and ``peak_flops`` in FLOP/s.
    batch : int
        Sequences decoded together, ``>= 1``: each adds one position.
    seq_len : int
        Positions already in each sequence's key-value cache, ``>= 0``.

    Returns
    -------
    seconds : float
        The larger of the memory time (weights and cache read once) and the
        compute time (``batch * flops_per_token(params)`` at the peak).
    bound : {"memory", "compute"}
        Which of the two is larger; ``"memory"`` on a tie.

    Notes
    -----
    .. math:: t = \\max\\left(\\frac{W + C(s, B)}{\\beta}, \\frac{B\\,F}{\\pi}\\right)

    with bandwidth :math:`\\beta` and peak :math:`\\pi`.  Real kernels reach
    neither ceiling, so the roofline time is a lower bound.

    References
    ----------
    .. [1] R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102.
    .. [2] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> seconds, bound = step_time(LLAMA2_7B, A100_SXM_80GB, 1, 0)
    >>> round(seconds * 1e3, 2), bound
    (6.61, 'memory')
    >>> step_time(LLAMA2_7B, A100_SXM_80GB, 512, 0)[1]
    'compute'
    """
    memory, compute = _times(model, hardware, batch, seq_len)
    return max(memory, compute), "memory" if memory >= compute else "compute"


def ridge_batch(model: Mapping[str, Any], hardware: Mapping[str, Any]) -> int:
    """Return the smallest batch at which a decoding step is no longer memory-bound.

    Parameters
    ----------
    model, hardware : mapping
        As in :func:`step_time`.

    Returns
    -------
    int
        The smallest ``batch >= 1`` for which :func:`step_time` at ``seq_len = 0``
        (the weights alone) is compute-bound: 1 when even one sequence is.

    Notes
    -----
    Compute time passes memory time when :math:`B F / \\pi > W / \\beta`, that is
    for :math:`B > (W / F)\\,(\\pi / \\beta)`: the hardware's ridge intensity
    :math:`\\pi / \\beta` (FLOP per byte) over the step's intensity at batch 1,
    :math:`F / W = 2 / b`.  A key-value cache adds bytes that grow with the batch
    and pushes the ridge further out, or removes it.

    References
    ----------
    .. [1] R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102.
    .. [2] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> ridge_batch(LLAMA2_7B, A100_SXM_80GB)  # 312 / 2.039 = 153.0: batch 154
    154
    """
    weights = weight_bytes(model["params"], model["bytes_per_param"])
    per_sequence = flops_per_token(model["params"])
    if per_sequence == 0:
        raise ValueError("a model without parameters is never compute-bound")
    ridge = weights / float(hardware["bandwidth"]) / (per_sequence / float(hardware["peak_flops"]))
    # Start at the closed form, then settle on step_time's own comparison.
    batch = max(1, math.floor(ridge))
    while batch > 1 and step_time(model, hardware, batch - 1, 0)[1] == "compute":
        batch -= 1
    while step_time(model, hardware, batch, 0)[1] == "memory":
        batch += 1
    return batch


def verify_cost_ratio(model: Mapping[str, Any], hardware: Mapping[str, Any], k: int) -> float:
    """Return the time of one pass over ``k + 1`` positions over the time of one position.

    Parameters
    ----------
    model, hardware : mapping
        As in :func:`step_time`.
    k : int
        Drafted tokens, ``k >= 0``: the target scores them and the position after.

    Returns
    -------
    float
        ``step_time(model, hardware, k + 1, 0)[0] / step_time(model, hardware, 1,
        0)[0]``: about 1 while the ``k + 1`` positions stay memory-bound, growing
        towards ``k + 1`` past the ridge.

    Notes
    -----
    The ``k + 1`` positions of one sequence are one pass: the weights are read
    once for all of them, like a batch of ``k + 1`` (the sequence's cache, read
    once either way, is left out).

    References
    ----------
    .. [1] R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102.
    .. [2] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> verify_cost_ratio(LLAMA2_7B, A100_SXM_80GB, 4)
    1.0
    >>> round(verify_cost_ratio(LLAMA2_7B, A100_SXM_80GB, 511), 2)  # 512 / 153.0
    3.35
    """
    if operator.index(k) < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return step_time(model, hardware, k + 1, 0)[0] / step_time(model, hardware, 1, 0)[0]


def arithmetic_intensity(model: Mapping[str, Any], batch: int, seq_len: int) -> float:
    """Return the FLOPs a decoding step does per byte it reads.

    Parameters
    ----------
    model : mapping
        As in :func:`step_time`.
    batch : int
        Sequences, ``>= 1``.
    seq_len : int
        Cached positions per sequence, ``>= 0``.

    Returns
    -------
    float
        :math:`B F / (W + C(s, B))`: about 1 FLOP/byte for 16-bit weights at batch
        1, against 153 for an A100 at its ridge.

    Examples
    --------
    >>> from specdec_reference.specs import LLAMA2_7B
    >>> arithmetic_intensity(LLAMA2_7B, 1, 0)
    1.0
    """
    read = weight_bytes(model["params"], model["bytes_per_param"]) + model_cache_bytes(
        model, seq_len, batch
    )
    return _count(batch, "batch") * flops_per_token(model["params"]) / read


def max_batch(model: Mapping[str, Any], hardware: Mapping[str, Any], seq_len: int) -> int:
    """Return how many sequences' key-value caches fit in memory beside the weights.

    Parameters
    ----------
    model : mapping
        As in :func:`step_time`.
    hardware : mapping
        ``memory``: the card's capacity in bytes.
    seq_len : int
        Positions each sequence holds in its cache, ``>= 1``.

    Returns
    -------
    int
        The largest ``B >= 0`` with ``W + C(seq_len, B) <= memory``: the weights
        stay resident, each sequence has its own cache of ``seq_len`` positions,
        and nothing else is reserved (no activations, no allocator slack).  ``0``
        when the weights alone leave no room for one sequence, as for any model
        too large for the card.

    Notes
    -----
    .. math:: B_{max} = \\left\\lfloor \\frac{M - W}{C(s, 1)} \\right\\rfloor

    Capacity, not only bandwidth, limits the batch: at long contexts the largest
    batch that fits can sit far below :func:`ridge_batch`.

    Examples
    --------
    >>> from specdec_reference.specs import LLAMA2_7B
    >>> max_batch(LLAMA2_7B, {"memory": 80e9}, 4096)  # 66.5 GB of room, 2 GiB a sequence
    30
    """
    if operator.index(seq_len) < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    room = _count(hardware["memory"], "memory") - weight_bytes(
        model["params"], model["bytes_per_param"]
    )
    per_sequence = model_cache_bytes(model, seq_len, 1)
    if room < per_sequence:
        return 0
    # Floor division of the two floats is exact: no rounding can add a sequence.
    return int(room // per_sequence)
