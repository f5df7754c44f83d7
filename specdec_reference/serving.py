"""Speculation in a serving system: what a pass costs at a batch, and when drafting pays.

Lesson E7.1's roofline prices one decoding step at ``max(memory time, compute
time)``.  In a server the target's pass scores ``positions`` tokens for each of
``batch`` requests at once: the weights are read once, the arithmetic grows with
``batch * positions``.  Below the ridge the extra ``k`` positions of a speculative pass
are free, as Leviathan et al. assume (their Theorem 3.8 charges one target step for
verification); past it they cost compute, and speculation can slow the server down.
vLLM's documentation positions speculative decoding for "medium-to-low QPS
(queries per second), memory-bound workloads".

``model`` and ``hardware`` are the mappings of :mod:`specdec_reference.specs`.
:func:`batch_step_time` leaves the key-value cache out (``seq_len = 0``, as in
:func:`~specdec_reference.roofline.verify_cost_ratio`); :func:`cached_step_time` puts it
back.  Decode reads every sequence's cache once a pass, whatever the number of positions
it scores, so at long contexts the pass stays memory-bound at every batch that fits in
memory (:func:`max_batch_in_memory`), which is why speculation can pay at large batch
with long contexts (Sadhukhan et al., MagicDec, ICLR 2025).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from . import roofline
from .analysis import expected_tokens
from .roofline import flops_per_token, weight_bytes

__all__ = [
    "batch_step_time",
    "speculative_speedup",
    "should_speculate",
    "break_even_batch",
    "cached_step_time",
    "cached_break_even_batch",
    "max_batch_in_memory",
    "adaptive_k",
]


def _positive_int(value: Any, name: str) -> int:
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def batch_step_time(
    model: Mapping[str, Any], hardware: Mapping[str, Any], batch: int, positions: int
) -> float:
    """Return the roofline time of one target pass scoring ``positions`` tokens per request.

    Parameters
    ----------
    model, hardware : mapping
        As in :func:`~specdec_reference.roofline.step_time`.
    batch : int
        Requests in the pass, ``>= 1``.
    positions : int
        Tokens each request scores, ``>= 1``: 1 for a plain decoding step, ``k + 1``
        to verify ``k`` drafted tokens.

    Returns
    -------
    float
        Seconds: the larger of the weights' read time and the compute time of
        ``batch * positions`` tokens at the peak.

    Notes
    -----
    .. math:: t(B, m) = \\max\\left(\\frac{W}{\\beta}, \\frac{B\\,m\\,F}{\\pi}\\right)

    with :math:`W` the weight bytes, :math:`F = 2N` the FLOPs of one token.
    ``batch_step_time(model, hardware, k + 1, 1)`` is E7.1's ``step_time(model,
    hardware, k + 1, 0)``: only the product ``batch * positions`` matters.

    References
    ----------
    .. [1] R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> round(batch_step_time(LLAMA2_7B, A100_SXM_80GB, 1, 5) * 1e3, 2)  # memory-bound
    6.61
    >>> round(batch_step_time(LLAMA2_7B, A100_SXM_80GB, 64, 5) * 1e3, 2)  # 320 tokens: compute
    13.82
    """
    batch, positions = _positive_int(batch, "batch"), _positive_int(positions, "positions")
    memory = weight_bytes(model["params"], model["bytes_per_param"]) / float(hardware["bandwidth"])
    compute = batch * positions * flops_per_token(model["params"]) / float(hardware["peak_flops"])
    return max(memory, compute)


def speculative_speedup(
    alpha: float,
    k: int,
    c: float,
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
) -> float:
    """Return Theorem 3.8's speedup with the verification pass priced by the roofline.

    Parameters
    ----------
    alpha : float
        Acceptance rate, in ``[0, 1]``.
    k : int
        Drafted tokens per pass, ``k >= 0``.
    c : float
        A draft step's time over a plain target step's time at the same batch, ``>= 0``.
    model, hardware : mapping
        As in :func:`batch_step_time`.
    batch : int
        Requests decoded together, ``>= 1``.

    Returns
    -------
    float
        Tokens per second per request with speculation over without:
        ``E[N] / (k * c + r)`` with ``r = batch_step_time(..., batch, k + 1) /
        batch_step_time(..., batch, 1)``.

    Notes
    -----
    A plain step costs :math:`T = t(B, 1)` and yields one token per request.  A
    speculative pass costs :math:`k c T` for the draft and :math:`t(B, k + 1)` for
    verification, and yields :math:`E[N]` tokens per request, so

    .. math:: S = \\frac{1 - \\alpha^{k+1}}{(1 - \\alpha)\\,(k c + r)},
              \\qquad r = \\frac{t(B, k + 1)}{t(B, 1)}.

    Leviathan et al.'s Theorem 3.8 is the case :math:`r = 1` (verification costs one
    step, true below the ridge).  Past it :math:`r` grows towards :math:`k + 1` and
    :math:`S` falls below 1.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Theorem 3.8).
    .. [2] R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> round(speculative_speedup(0.8, 4, 0.05, LLAMA2_7B, A100_SXM_80GB, 1), 4)  # 3.3616 / 1.2
    2.8013
    >>> speculative_speedup(0.8, 4, 0.05, LLAMA2_7B, A100_SXM_80GB, 128) < 1
    True
    """
    c = float(c)
    if not c >= 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    tokens = expected_tokens(alpha, k)  # validates alpha and k
    ratio = batch_step_time(model, hardware, batch, k + 1) / batch_step_time(
        model, hardware, batch, 1
    )
    return tokens / (k * c + ratio)


def should_speculate(
    alpha: float, c: float, model: Mapping[str, Any], hardware: Mapping[str, Any], batch: int
) -> bool:
    """Return whether some draft length ``k >= 1`` makes the server faster at this batch.

    Parameters
    ----------
    alpha : float
        Acceptance rate, in ``[0, 1]``.
    c : float
        Draft step cost over a plain target step at this batch, ``>= 0``.
    model, hardware : mapping
        As in :func:`batch_step_time`.
    batch : int
        Requests decoded together, ``>= 1``.

    Returns
    -------
    bool
        ``alpha > c + (r_1 - 1)`` with ``r_1 = t(batch, 2) / t(batch, 1)``: a drafted
        token must be accepted more often than the draft step and its verification
        position cost, in plain steps.

    Notes
    -----
    :math:`S_k > 1` means :math:`\\sum_{i=1}^k \\alpha^i > \\sum_{i=1}^k (c + d_i)`
    with :math:`d_i = r_i - r_{i-1}` the extra cost of the ``i``-th verified position.
    The gains :math:`\\alpha^i` never grow with :math:`i`, and the costs never
    shrink (:math:`t(B, m)` is convex in :math:`m`), so some :math:`k` pays exactly
    when :math:`k = 1` does: :math:`\\alpha > c + d_1`.  Below the ridge
    :math:`d_1 = 0` and this is Corollary 3.9 of Leviathan et al., :math:`\\alpha > c`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Corollary 3.9).

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> should_speculate(0.6, 0.05, LLAMA2_7B, A100_SXM_80GB, 1)
    True
    >>> should_speculate(0.6, 0.05, LLAMA2_7B, A100_SXM_80GB, 256)  # compute-bound: d_1 = 1
    False
    """
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")
    c = float(c)
    if not c >= 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    extra = batch_step_time(model, hardware, batch, 2) / batch_step_time(model, hardware, batch, 1)
    return alpha > c + (extra - 1.0)


def break_even_batch(
    alpha: float,
    k: int,
    c: float,
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    max_batch: int = 4096,
) -> int | None:
    """Return the smallest batch at which speculation with ``k`` drafted tokens slows decoding.

    Parameters
    ----------
    alpha, k, c, model, hardware
        As in :func:`speculative_speedup`.
    max_batch : int, default 4096
        Largest batch tried.

    Returns
    -------
    int or None
        The smallest ``batch`` in ``1..max_batch`` with
        ``speculative_speedup(...) < 1``; None if there is none.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> break_even_batch(0.8, 4, 0.05, LLAMA2_7B, A100_SXM_80GB)
    97
    """
    for batch in range(1, _positive_int(max_batch, "max_batch") + 1):
        if speculative_speedup(alpha, k, c, model, hardware, batch) < 1:
            return batch
    return None


def cached_step_time(
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    batch: int,
    positions: int,
    seq_len: int,
) -> float:
    """Return the roofline time of one pass that also reads every sequence's key-value cache.

    Parameters
    ----------
    model, hardware : mapping
        As in :func:`batch_step_time`; ``model`` also gives ``layers``, ``kv_heads``
        and ``head_dim``.
    batch : int
        Requests in the pass, ``>= 1``.
    positions : int
        Tokens each request scores, ``>= 1``.
    seq_len : int
        Tokens already cached for each request, ``>= 0``.

    Returns
    -------
    float
        Seconds: the larger of the time to read the weights once and every request's
        cache once, and the compute time of ``batch * positions`` tokens at the peak.

    Notes
    -----
    .. math:: t(B, m, L) = \\max\\left(\\frac{W + B\\,L\\,s}{\\beta},
              \\frac{B\\,m\\,F}{\\pi}\\right)

    with :math:`s` the cache bytes of one token (0.5 MiB for Llama-2-7B in 16-bit).
    The cache is read once a pass whatever ``positions`` is: the ``m`` positions of a
    verification pass attend to the same cached keys and values.  Attention's own
    arithmetic (about :math:`4 L d` FLOPs per layer and position, an intensity of
    about ``positions`` FLOPs per cached byte) is left out, as in lesson E7.1's
    ``step_time``, which is the case ``positions = 1``.

    References
    ----------
    .. [1] R. Sadhukhan et al., "MagicDec: Breaking the Latency-Throughput Tradeoff
       for Long Context Generation with Speculative Decoding", ICLR 2025,
       arXiv:2408.11049.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> round(cached_step_time(LLAMA2_7B, A100_SXM_80GB, 32, 5, 2048) * 1e3, 2)  # memory
    23.46
    """
    batch, positions = _positive_int(batch, "batch"), _positive_int(positions, "positions")
    read = weight_bytes(model["params"], model["bytes_per_param"]) + roofline.model_cache_bytes(
        model, seq_len, batch
    )
    compute = batch * positions * flops_per_token(model["params"]) / float(hardware["peak_flops"])
    return max(read / float(hardware["bandwidth"]), compute)


def cached_break_even_batch(
    alpha: float,
    k: int,
    c: float,
    model: Mapping[str, Any],
    hardware: Mapping[str, Any],
    seq_len: int,
    max_batch: int = 4096,
) -> int | None:
    """Return the smallest batch at which ``k`` drafted tokens slow decoding, cache included.

    As :func:`break_even_batch`, with each pass priced by :func:`cached_step_time` at
    ``seq_len`` cached tokens a request.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> cached_break_even_batch(0.8, 4, 0.05, LLAMA2_7B, A100_SXM_80GB, 0)
    97
    >>> cached_break_even_batch(0.8, 4, 0.05, LLAMA2_7B, A100_SXM_80GB, 2048) is None
    True
    """
    tokens = expected_tokens(alpha, k)
    for batch in range(1, _positive_int(max_batch, "max_batch") + 1):
        plain = cached_step_time(model, hardware, batch, 1, seq_len)
        ratio = cached_step_time(model, hardware, batch, k + 1, seq_len) / plain
        if tokens / (k * float(c) + ratio) < 1:
            return batch
    return None


def max_batch_in_memory(model: Mapping[str, Any], hardware: Mapping[str, Any], seq_len: int) -> int:
    """Return how many sequences of ``seq_len`` cached tokens fit beside the weights.

    Parameters
    ----------
    model : mapping
        As in :func:`cached_step_time`.
    hardware : mapping
        As in :func:`batch_step_time`, with ``memory`` in bytes.
    seq_len : int
        Tokens cached for each sequence, ``>= 1``.

    Returns
    -------
    int
        The largest ``B`` whose caches and the weights fit in ``memory``; 0 when the
        weights alone do not fit.

    Notes
    -----
    .. math:: B_{max} = \\left\\lfloor \\frac{M - W}{L\\,s} \\right\\rfloor

    Activations and the allocator's overhead are left out, so real servers fit a
    little fewer.  The count is lesson E7.1's :func:`~specdec_reference.roofline.max_batch`.

    Examples
    --------
    >>> from specdec_reference.specs import A100_SXM_80GB, LLAMA2_7B
    >>> gpu = dict(A100_SXM_80GB, memory=80e9)
    >>> max_batch_in_memory(LLAMA2_7B, gpu, 2048), max_batch_in_memory(LLAMA2_7B, gpu, 32768)
    (61, 3)
    """
    return roofline.max_batch(model, hardware, seq_len)


def adaptive_k(k: int, accepted: int, k_min: int = 1, k_max: int = 64) -> int:
    """Return the next draft length under Hugging Face's heuristic schedule.

    Parameters
    ----------
    k : int
        This pass's draft length, ``k_min <= k <= k_max``.
    accepted : int
        How many of its drafted tokens were accepted, ``0 <= accepted <= k``.
    k_min, k_max : int
        Bounds on the draft length, ``0 <= k_min <= k_max``.

    Returns
    -------
    int
        ``min(k + 2, k_max)`` after a fully accepted draft (``accepted == k``),
        ``max(k - 1, k_min)`` otherwise.

    Raises
    ------
    ValueError
        If the arguments are outside those ranges.

    Notes
    -----
    Hugging Face's assisted generation with ``num_assistant_tokens_schedule =
    "heuristic"`` adds 2 to ``num_assistant_tokens`` when every candidate was
    accepted and otherwise subtracts 1, never going below 1
    (``AssistedCandidateGenerator.update_candidate_strategy``); it has no upper bound,
    which ``k_max`` adds here.

    References
    ----------
    .. [1] Hugging Face transformers, ``src/transformers/generation/candidate_generator.py``.

    Examples
    --------
    >>> adaptive_k(4, 4), adaptive_k(4, 2), adaptive_k(1, 0), adaptive_k(7, 7, k_max=8)
    (6, 3, 1, 8)
    """
    k, accepted = operator.index(k), operator.index(accepted)
    k_min, k_max = operator.index(k_min), operator.index(k_max)
    if not 0 <= k_min <= k_max:
        raise ValueError(f"need 0 <= k_min <= k_max, got {k_min}, {k_max}")
    if not k_min <= k <= k_max:
        raise ValueError(f"k must be in [{k_min}, {k_max}], got {k}")
    if not 0 <= accepted <= k:
        raise ValueError(f"accepted must be in [0, k = {k}], got {accepted}")
    if accepted == k:
        return min(k + 2, k_max)
    return max(k - 1, k_min)
