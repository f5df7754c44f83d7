"""The reference of lesson E7.1: published figures, the roofline of a step, the greedy check."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdec_reference import (
    arithmetic_intensity,
    flops_per_token,
    greedy_verify,
    kv_cache_bytes,
    ridge_batch,
    specs,
    step_time,
    verify_cost_ratio,
    weight_bytes,
)
from specdec_reference.roofline import max_batch

MIB = 2**20


# ---------------------------------------------------------------------------
# The published figures
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", specs.MODELS, ids=lambda m: m["name"])
def test_the_parameter_counts_follow_from_the_published_configurations(model):
    config = {k: model[k] for k in ("hidden", "intermediate", "layers", "heads", "kv_heads")}
    assert specs.llama_param_count(**config, vocab=model["vocab"]) == model["params"]
    assert model["hidden"] // model["heads"] == model["head_dim"] == 128


@pytest.mark.parametrize(
    ("hardware", "bandwidth", "dense_peak", "sparse_peak"),
    [
        (specs.A100_SXM_80GB, 2039e9, 312e12, 624e12),
        (specs.H100_SXM, 3.35e12, 989.5e12, 1979e12),
        (specs.RTX_4090, 1008e9, 165.2e12, 330.4e12),
    ],
    ids=["A100", "H100", "RTX 4090"],
)
def test_the_gpu_peaks_are_the_dense_halves_of_the_datasheets_sparsity_figures(
    hardware, bandwidth, dense_peak, sparse_peak
):
    assert hardware["bandwidth"] == bandwidth
    assert hardware["peak_flops"] == dense_peak == sparse_peak / 2


def test_the_figures_cannot_be_changed_by_the_code_that_reads_them():
    with pytest.raises(TypeError):
        specs.A100_SXM_80GB["bandwidth"] = 1.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("model", "per_token_mib"),
    [(specs.LLAMA2_7B, 0.5), (specs.LLAMA2_70B, 0.3125)],
    ids=["7B", "70B (8 key-value heads)"],
)
def test_the_kv_cache_per_token_is_what_the_lesson_states(model, per_token_mib):
    one = kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"], 1, 1, 2)
    assert one == per_token_mib * MIB


# ---------------------------------------------------------------------------
# The lesson's worked numbers
# ---------------------------------------------------------------------------


def test_a_batch_1_step_of_llama_2_7b_on_an_a100_takes_6_6_ms_and_is_memory_bound():
    seconds, bound = step_time(specs.LLAMA2_7B, specs.A100_SXM_80GB, 1, 0)
    assert seconds == pytest.approx(13.476831232e9 / 2.039e12, rel=1e-12)
    assert round(seconds * 1e3, 1) == 6.6 and bound == "memory"
    assert arithmetic_intensity(specs.LLAMA2_7B, 1, 0) == 1.0


@pytest.mark.parametrize(
    ("hardware", "ridge"),
    [
        (specs.A100_SXM_80GB, 154),  # 312 / 2.039 = 153.02
        (specs.H100_SXM, 296),  # 989.5 / 3.35 = 295.37
        (specs.RTX_4090, 164),  # 165.2 / 1.008 = 163.89
        (specs.APPLE_M2, 11),  # 1 / 0.1 = 10, a tie: still memory-bound
    ],
    ids=["A100", "H100", "RTX 4090", "M2"],
)
def test_the_ridge_batch_is_the_first_whole_batch_past_the_ridge_intensity(hardware, ridge):
    for model in specs.MODELS:
        assert ridge_batch(model, hardware) == ridge
        assert step_time(model, hardware, ridge - 1, 0)[1] == "memory"
        assert step_time(model, hardware, ridge, 0)[1] == "compute"


def test_a_tie_counts_as_memory_bound():
    hardware = {"bandwidth": 1e12, "peak_flops": 1e12}  # batch 1 of 16-bit weights: a tie
    model = {"params": 10**9, "layers": 1, "kv_heads": 1, "head_dim": 1, "bytes_per_param": 2}
    assert step_time(model, hardware, 1, 0)[1] == "memory"
    assert ridge_batch(model, hardware) == 2


def test_about_30_sequences_of_4096_tokens_fit_beside_llama_2_7b_on_an_80_gb_card():
    # 80 GB less 13.5 GB of weights leaves 66.5 GB; each sequence's cache takes 2 GiB.
    assert max_batch(specs.LLAMA2_7B, {"memory": 80e9}, 4096) == 30
    assert max_batch(specs.LLAMA2_7B, {"memory": 80e9}, 512) == 247
    assert max_batch(specs.LLAMA2_7B, {"memory": 24e9}, 4096) == 4


def test_llama_2_70b_fits_on_no_single_card_of_the_lesson():
    for memory in (80e9, 24e9):
        assert max_batch(specs.LLAMA2_70B, {"memory": memory}, 1) == 0


def test_max_batch_counts_an_exact_fit_and_not_one_byte_less():
    weights = weight_bytes(specs.LLAMA2_7B["params"], 2)
    memory = weights + 7 * kv_cache_bytes(32, 32, 128, 100, 1, 2)
    assert max_batch(specs.LLAMA2_7B, {"memory": memory}, 100) == 7
    assert max_batch(specs.LLAMA2_7B, {"memory": memory - 1}, 100) == 6
    with pytest.raises(ValueError):
        max_batch(specs.LLAMA2_7B, {"memory": memory}, 0)


def test_verifying_4_drafted_tokens_costs_one_step_and_511_costs_3_35():
    assert verify_cost_ratio(specs.LLAMA2_7B, specs.A100_SXM_80GB, 4) == 1.0
    assert verify_cost_ratio(specs.LLAMA2_7B, specs.A100_SXM_80GB, 511) == pytest.approx(
        512 * 2.039 / 312, rel=1e-12
    )


def test_a_compute_bound_configuration_has_ridge_1_and_pays_for_every_position():
    slow = {"bandwidth": 1e12, "peak_flops": 2e11}
    assert ridge_batch(specs.LLAMA2_7B, slow) == 1
    assert step_time(specs.LLAMA2_7B, slow, 1, 0)[1] == "compute"
    assert verify_cost_ratio(specs.LLAMA2_7B, slow, 4) == pytest.approx(5.0, rel=1e-12)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        (weight_bytes, (-1, 2)),
        (flops_per_token, (float("nan"),)),
        (kv_cache_bytes, (32, 32, 128, -1, 1, 2)),
        (verify_cost_ratio, (specs.LLAMA2_7B, specs.A100_SXM_80GB, -1)),
        (greedy_verify, ([1, 2], [1, 2])),
    ],
    ids=["negative params", "NaN params", "negative seq_len", "negative k", "short argmax"],
)
def test_invalid_inputs_raise_value_error(call, args):
    with pytest.raises(ValueError):
        call(*args)


# ---------------------------------------------------------------------------
# Properties of the roofline
# ---------------------------------------------------------------------------

models = st.fixed_dictionaries(
    {
        "params": st.integers(10**6, 10**12),
        "layers": st.integers(1, 128),
        "kv_heads": st.sampled_from([1, 2, 4, 8, 32, 64]),
        "head_dim": st.sampled_from([64, 128, 256]),
        "bytes_per_param": st.sampled_from([0.5, 1, 2, 4]),
    }
)
hardware = st.fixed_dictionaries(
    {
        "bandwidth": st.floats(1e10, 1e13),
        "peak_flops": st.floats(1e10, 1e16),
    }
)


@given(models, hardware, st.integers(1, 4096), st.integers(0, 16384))
def test_a_step_takes_the_larger_of_its_memory_and_compute_times(model, hw, batch, seq_len):
    seconds, bound = step_time(model, hw, batch, seq_len)
    read = weight_bytes(model["params"], model["bytes_per_param"]) + kv_cache_bytes(
        model["layers"],
        model["kv_heads"],
        model["head_dim"],
        seq_len,
        batch,
        model["bytes_per_param"],
    )
    memory, compute = read / hw["bandwidth"], batch * 2 * model["params"] / hw["peak_flops"]
    assert seconds == pytest.approx(max(memory, compute), rel=1e-12)
    if abs(memory - compute) > 1e-9 * max(memory, compute):
        assert bound == ("memory" if memory > compute else "compute")


@given(models, hardware)
def test_the_ridge_batch_is_compute_bound_and_the_batch_before_it_is_not(model, hw):
    if weight_bytes(model["params"], model["bytes_per_param"]) * hw["peak_flops"] > 1e6 * (
        flops_per_token(model["params"]) * hw["bandwidth"]
    ):
        return  # ridges past a million sequences: no such batch is ever decoded
    ridge = ridge_batch(model, hw)
    assert ridge >= 1 and step_time(model, hw, ridge, 0)[1] == "compute"
    assert ridge == 1 or step_time(model, hw, ridge - 1, 0)[1] == "memory"


@given(models, hardware, st.integers(0, 2000))
def test_verification_costs_one_step_below_the_ridge_and_at_most_k_plus_1_above(model, hw, k):
    ratio = verify_cost_ratio(model, hw, k)
    assert 1.0 <= ratio <= (k + 1) * (1 + 1e-12)
    if step_time(model, hw, k + 1, 0)[1] == "memory":
        assert ratio == 1.0
    else:
        ridge = step_time(model, hw, 1, 0)[0] * hw["peak_flops"] / flops_per_token(model["params"])
        assert ratio == pytest.approx((k + 1) / max(ridge, 1.0), rel=1e-9)


@given(models, st.integers(1, 512), st.integers(0, 4096))
def test_the_intensity_is_about_the_batch_until_the_cache_holds_it_down(model, batch, seq_len):
    weights_only = batch * 2 / model["bytes_per_param"]
    assert arithmetic_intensity(model, batch, 0) == pytest.approx(weights_only, rel=1e-12)
    assert arithmetic_intensity(model, batch, seq_len) <= weights_only * (1 + 1e-12)


# ---------------------------------------------------------------------------
# The greedy check
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target_argmax", "drafted", "emitted"),
    [
        ([4, 8], [3], [4]),  # a mismatch at the first position: 1 token
        ([1, 2, 3], [1, 2], [1, 2, 3]),  # full acceptance: k + 1
        ([6], [], [6]),  # no draft: plain greedy decoding
        ([5, 7, 2, 9], [5, 7, 1], [5, 7, 2]),
        ([1, 2, 3, 4], [1, 9, 3], [1, 2]),  # the token after a mismatch is never kept
    ],
)
def test_greedy_verify_keeps_the_agreeing_prefix_and_adds_the_targets_token(
    target_argmax, drafted, emitted
):
    assert greedy_verify(target_argmax, drafted) == emitted


@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.data())
def test_greedy_verify_emits_exactly_the_targets_own_greedy_choices(target_argmax, data):
    k = len(target_argmax) - 1
    drafted = data.draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    emitted = greedy_verify(target_argmax, drafted)
    j = len(emitted) - 1
    assert 1 <= len(emitted) <= k + 1
    assert emitted == target_argmax[: j + 1]  # what plain greedy decoding writes
    assert drafted[:j] == target_argmax[:j] and (j == k or drafted[j] != target_argmax[j])


def test_greedy_verify_takes_arrays_and_leaves_its_arguments_alone():
    best, drafted = [5, 7, 2, 9], [5, 7, 1]
    assert greedy_verify(np.array(best), np.array(drafted)) == [5, 7, 2]
    assert greedy_verify(tuple(best), tuple(drafted)) == [5, 7, 2]
    assert best == [5, 7, 2, 9] and drafted == [5, 7, 1]
    assert all(type(t) is int for t in greedy_verify(np.array(best), np.array(drafted)))
