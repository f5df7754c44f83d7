"""Lesson E7.1: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants
below).  Which cells each sample loses is checked through the real grader by
test_lessons.py (``expected.json``).  This module declares what the lessons' contract
checks (test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``,
``GRADED_PHRASES``) and checks the lesson's own rules.  The reference's own tests are
in test_reference_roofline.py.
"""

from __future__ import annotations

import pytest
from support.lessons import Lesson, failing

#: Ungraded cells the test cells' visible parts rely on (numpy, the model and hardware dicts).
LESSON = Lesson(
    "e7_1_why_decoding_is_slow",
    support_cells={"code-setup", "code-specs", "your_id", "your_numbers"},
)
SCENARIOS = LESSON.scenarios
EXPECTED = LESSON.expected
TEST_CELLS = LESSON.test_cells
SOLUTION_CELLS = LESSON.solution_cells


def execute(bodies=None, *, only=None):
    return LESSON.run(bodies, only=only).outcomes


lost_cells = LESSON.lost_cells


def cells(prefix: str) -> set[str]:
    return {g for g in TEST_CELLS if g.startswith(prefix)}


# ---------------------------------------------------------------------------
# Correct solutions get full marks; the samples lose what expected.json says
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"blank"}))
def test_each_sample_loses_in_process_what_expected_json_says(scenario):
    assert set(failing(execute(SCENARIOS[scenario]))) == lost_cells(scenario)


def test_expected_json_gives_every_cell_its_points_or_zero():
    for scenario, scores in EXPECTED.items():
        assert set(scores) == set(TEST_CELLS), scenario
        for gid, points in scores.items():
            assert points in (0, LESSON.points[gid]), (scenario, gid)
    assert sum(LESSON.points.values()) == 37


# ---------------------------------------------------------------------------
# Each sample mistake loses its cells, and the message names it
# ---------------------------------------------------------------------------

#: {scenario: {lost cell: words its message must contain}}.
SAMPLE_MESSAGES = {
    "mistake-bits-not-bytes": {"test_weight_bytes_values": "bits where bytes are meant"},
    "mistake-one-flop-per-param": {
        "test_flops_per_token_values": "one FLOP per parameter instead of two"
    },
    "mistake-forgets-kv-cache": {
        "test_step_time_values": "forgetting the KV cache",
        "test_step_time_bound": "comparing the weights' read time alone",
    },
    "mistake-sum-not-max": {
        "test_step_time_values": "the sum of the two times instead of their maximum"
    },
    "mistake-verify-k-plus-one-steps": {
        "test_verify_cost_ratio_memory_bound": "k + 1 full steps",
        "test_verify_cost_ratio_past_the_ridge": "k + 1 full steps",
    },
    "mistake-drops-target-token": {
        "test_greedy_verify_target_token": "dropping the target's token"
    },
    "mistake-by-hand-answers": {
        "test_part1_answers_verify_ms": "5 full steps, as if each position read the weights again",
        "test_check_understanding_choice": "that is the ridge of the weights alone",
    },
    "mistake-bound-weights-only": {
        "test_step_time_bound": "comparing the weights' read time alone with the compute time"
    },
    "mistake-tie-is-compute": {"test_step_time_bound": "a tie named 'compute'"},
    "mistake-max-batch-ignores-weights": {"test_max_batch_values": "leaving the weights out"},
}


def step_body(unit: str = "", returns: str = '"memory" if memory >= compute else "compute"') -> str:
    """A ``step_time`` body written out in full: times scaled by ``unit``, and ``returns``
    as the bound it returns beside the larger time."""
    return f"""
    read = weight_bytes(model["params"], model["bytes_per_param"]) + kv_cache_bytes(
        model["layers"], model["kv_heads"], model["head_dim"], seq_len, batch,
        model["bytes_per_param"])
    memory = read / hardware["bandwidth"]{unit}
    compute = batch * flops_per_token(model["params"]) / hardware["peak_flops"]{unit}
    return max(memory, compute), {returns}
    """


# Mistakes without a sample notebook: {name: (bodies, cells to run, {lost cell: words})}.
EXTRA_MUTANTS = {
    "kv-cache-keys-only": (
        {
            "kv_cache_bytes": "return layers * kv_heads * head_dim * seq_len * batch"
            " * bytes_per_value"
        },
        cells("test_kv_cache"),
        {"test_kv_cache_bytes_values": "the keys only"},
    ),
    # The last memory-bound batch: the while loop's condition off by one.
    "ridge-one-too-small": (
        {
            "ridge_batch": """
            batch = 1
            while step_time(model, hardware, batch + 1, 0)[1] == "memory":
                batch += 1
            return batch
            """
        },
        cells("test_ridge"),
        {"test_ridge_batch_values": "the last memory-bound batch, one too small"},
    ),
    "verify-always-free": (
        {"verify_cost_ratio": "return 1.0"},
        cells("test_verify"),
        {"test_verify_cost_ratio_past_the_ridge": "as if verification were always free"},
    ),
    "kv-cache-in-bits": (
        {
            "kv_cache_bytes": "return 16 * layers * kv_heads * head_dim * seq_len * batch"
            " * bytes_per_value"
        },
        cells("test_kv_cache"),
        {"test_kv_cache_bytes_values": "bits where bytes are meant"},
    ),
    "kv-cache-of-one-sequence": (
        {"kv_cache_bytes": "return 2 * layers * kv_heads * head_dim * seq_len * bytes_per_value"},
        cells("test_kv_cache"),
        {"test_kv_cache_bytes_values": "the batch left out"},
    ),
    "flops-of-a-training-step": (
        {"flops_per_token": "return 6 * params"},
        cells("test_flops"),
        {"test_flops_per_token_values": "a training step's"},
    ),
    # The memory and compute times, but in bits and without the factor 2 written inline.
    "step-in-bits-inline": (
        {
            "step_time": """
            read = 8 * model["params"] * model["bytes_per_param"] + kv_cache_bytes(
                model["layers"], model["kv_heads"], model["head_dim"], seq_len, batch,
                model["bytes_per_param"]) * 8
            memory = read / hardware["bandwidth"]
            compute = batch * flops_per_token(model["params"]) / hardware["peak_flops"]
            return max(memory, compute), "memory" if memory >= compute else "compute"
            """
        },
        cells("test_step_time"),
        {"test_step_time_values": "bits where bytes are meant", "test_step_time_bound": "memory"},
    ),
    "step-in-milliseconds": (
        {"step_time": step_body(unit=" * 1e3")},
        cells("test_step_time"),
        {"test_step_time_values": "milliseconds instead of seconds"},
    ),
    "step-bound-names-swapped": (
        {"step_time": step_body(returns='"compute" if memory >= compute else "memory"')},
        cells("test_step_time"),
        {"test_step_time_bound": "the bound is the larger of the two"},
    ),
    "step-bound-as-a-number": (
        {"step_time": step_body(returns="int(compute > memory)")},
        cells("test_step_time"),
        {"test_step_time_bound": "expected the string 'memory' or 'compute'"},
    ),
    "ridge-real-valued": (
        {
            "ridge_batch": """
            weights = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
            return weights / (2 * model["params"] / hardware["peak_flops"])
            """
        },
        cells("test_ridge"),
        {"test_ridge_batch_values": "the real-valued ridge"},
    ),
    "ridge-one-flop-per-param": (
        {
            "ridge_batch": """
            import math

            weights = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
            return max(1, math.floor(weights / (model["params"] / hardware["peak_flops"])) + 1)
            """
        },
        cells("test_ridge"),
        {"test_ridge_batch_values": "one FLOP per parameter instead of two"},
    ),
    "verify-k-positions": (
        {
            "verify_cost_ratio": """
            return step_time(model, hardware, max(k, 1), 0)[0] / step_time(model, hardware, 1, 0)[0]
            """
        },
        cells("test_verify"),
        {"test_verify_cost_ratio_past_the_ridge": "k positions instead of k + 1"},
    ),
    "verify-inverse-ratio": (
        {
            "verify_cost_ratio": """
            return step_time(model, hardware, 1, 0)[0] / step_time(model, hardware, k + 1, 0)[0]
            """
        },
        cells("test_verify"),
        {"test_verify_cost_ratio_past_the_ridge": "the inverse ratio"},
    ),
    "greedy-keeps-the-mismatched-token": (
        {
            "greedy_verify": """
            out = []
            for x, y in zip(drafted, target_argmax):
                out.append(int(x))
                if x != y:
                    return out
            return out + [int(target_argmax[-1])]
            """
        },
        cells("test_greedy"),
        {"test_greedy_verify_target_token": "keeping the mismatched drafted token"},
    ),
    "greedy-carries-on-after-a-mismatch": (
        {
            "greedy_verify": """
            kept = [int(x) for x, y in zip(drafted, target_argmax) if x == y]
            return kept + [int(target_argmax[len(kept)])]
            """
        },
        cells("test_greedy"),
        {
            "test_greedy_verify_accepted_prefix": "carrying on after a mismatch",
            "test_greedy_verify_target_token": "returned",
        },
    ),
    "greedy-joins-with-plus": (
        {
            "greedy_verify": LESSON.reference_bodies["greedy_verify"]
            .replace("emitted = []", "emitted = drafted[:0]")
            .replace(
                "emitted.append(int(x))",
                "emitted = emitted + drafted[len(emitted):len(emitted) + 1]",
            )
            .replace(
                "emitted.append(int(target_argmax[len(emitted)]))",
                "emitted = emitted + target_argmax[len(emitted):len(emitted) + 1]",
            )
            .replace("return emitted", "return list(emitted)")
        },
        cells("test_greedy"),
        {"test_greedy_verify_lists_or_arrays": "the docstring allows lists, tuples or 1-D arrays"},
    ),
    "greedy-appends-to-the-draft": (
        {
            "greedy_verify": """
            for i, (x, y) in enumerate(zip(drafted, target_argmax)):
                if x != y:
                    return [int(t) for t in drafted[:i]] + [int(y)]
            drafted.append(target_argmax[-1])
            return [int(t) for t in drafted]
            """
        },
        cells("test_greedy"),
        {
            "test_greedy_verify_accepted_prefix": "changed the drafted it was given",
            "test_greedy_verify_target_token": "changed the drafted it was given",
            "test_greedy_verify_lists_or_arrays": "changed the drafted it was given",
        },
    ),
    "greedy-returns-the-count": (
        {
            "greedy_verify": """
            return next((i for i, (x, y) in enumerate(zip(drafted, target_argmax)) if x != y),
                        len(drafted))
            """
        },
        cells("test_greedy"),
        {
            "test_greedy_verify_accepted_prefix": "That is a count",
            "test_greedy_verify_target_token": "That is a count",
            "test_greedy_verify_lists_or_arrays": "That is a count",
        },
    ),
    "max-batch-negative": (
        {
            "max_batch": """
            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            return int(room // kv_cache_bytes(model["layers"], model["kv_heads"],
                                              model["head_dim"], seq_len, 1,
                                              model["bytes_per_param"]))
            """
        },
        cells("test_max_batch"),
        {"test_max_batch_values": "a negative batch when the weights do not fit"},
    ),
    "max-batch-rounds-up": (
        {
            "max_batch": """
            import math

            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            cache = kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"],
                                   seq_len, 1, model["bytes_per_param"])
            return max(0, math.ceil(room / cache))
            """
        },
        cells("test_max_batch"),
        {"test_max_batch_values": "rounding up"},
    ),
    "max-batch-real-valued": (
        {
            "max_batch": """
            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            return max(0.0, room / kv_cache_bytes(model["layers"], model["kv_heads"],
                                                  model["head_dim"], seq_len, 1,
                                                  model["bytes_per_param"]))
            """
        },
        cells("test_max_batch"),
        {"test_max_batch_values": "round down"},
    ),
    "max-batch-per-token-cache": (
        {
            "max_batch": """
            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            return max(0, int(room // kv_cache_bytes(model["layers"], model["kv_heads"],
                                                     model["head_dim"], 1, 1,
                                                     model["bytes_per_param"])))
            """
        },
        cells("test_max_batch"),
        {"test_max_batch_values": "seq_len left out"},
    ),
    "part1-in-bits-and-seconds": (
        {
            "part1_answers": """
            answer_ms_per_token = 6.738e9 * 16 / 2.039e12 * 1e3
            answer_intensity = 2 * 6.738e9 / (6.738e9 * 16)
            answer_verify_ms = 6.738e9 * 2 / 2.039e12
            """
        },
        cells("test_part1"),
        {
            "test_part1_answers_ms_per_token": "bits where bytes are meant",
            "test_part1_answers_intensity": "bits where bytes are meant",
            "test_part1_answers_verify_ms": "seconds instead of milliseconds",
        },
    ),
}


# ---------------------------------------------------------------------------
# No cascade: a function's cells use the reference for the functions it calls
# ---------------------------------------------------------------------------

BROKEN_COUNTS = {
    "weight_bytes": "return 0",
    "flops_per_token": "raise NotImplementedError()",
    "kv_cache_bytes": "return -1",
}


def test_broken_counting_functions_cost_nothing_in_the_later_cells():
    later = cells("test_step_time") | cells("test_ridge") | cells("test_verify") | cells("test_max")
    assert failing(execute(BROKEN_COUNTS, only=later)) == {}


def test_a_broken_step_time_costs_nothing_in_the_ridge_and_verification_cells():
    later = cells("test_ridge") | cells("test_verify")
    assert failing(execute({"step_time": "return 1.0, 'memory'"}, only=later)) == {}


# ---------------------------------------------------------------------------
# Docstrings, visible parts, the notebook's figures
# ---------------------------------------------------------------------------

GRADED_PHRASES = {
    "weight_bytes": ["in bytes (not bits)", "relative 1e-9"],
    "flops_per_token": ["one position's pass through the weight matrices", "count as one FLOP"],
    "kv_cache_bytes": ["the keys and the values", "key-value head, position and sequence"],
    "step_time": [
        "the two overlapping",
        'a tie is "memory"',
        "with and without KV caches, and at an exact tie",
        "Graded separately",
        "replaced by correct ones",
    ],
    "ridge_batch": ["smallest batch >= 1", "1 when batch 1", "replaced by correct ones"],
    "max_batch": [
        "Only the weights and the caches are reserved",
        "fits whole or not at all",
        "0 when the weights leave no room",
        "replaced by correct ones",
    ],
    "verify_cost_ratio": [
        "in units of the time of one ordinary decoding step",
        "replaced by correct ones",
    ],
    "greedy_verify": ["drafted[:j] + [target_argmax[j]]", "1 to k + 1 tokens", "may be changed"],
}


def test_the_notebook_figures_are_the_reference_figures():
    """The dicts the learner uses hold the numbers of specdec_reference.specs, key for key."""
    from specdec_reference import specs
    from specdec_reference.testing import e7_1

    ns = LESSON.run(only=set()).namespace
    for mine, spec in [
        (ns["A100"], specs.A100_SXM_80GB),
        (ns["H100"], specs.H100_SXM),
        (ns["RTX_4090"], specs.RTX_4090),
        (ns["APPLE_M2"], specs.APPLE_M2),
    ]:
        assert mine == e7_1.capacity_dict(spec)
    for mine, spec in [(ns["LLAMA2_7B"], specs.LLAMA2_7B), (ns["LLAMA2_70B"], specs.LLAMA2_70B)]:
        assert mine == e7_1.model_dict(spec)
    assert ns["HARDWARE"] == [e7_1.capacity_dict(h) for h in specs.HARDWARE]


def test_the_lesson_cites_every_source_it_uses():
    text = " ".join(c.source for c in LESSON.source_nb.cells if c.cell_type == "markdown")
    for source in [
        "A100 Tensor Core GPU datasheet",
        "H100 Tensor Core GPU datasheet",
        "Ada GPU Architecture whitepaper",
        "Apple newsroom",
        "config.json",
        "Touvron et al. 2023",
        "Pope et al. 2022",
        "Leviathan et al. (2023",
        "Ainslie et al. 2023",
        "Kaplan et al. 2020",
        "MagicDec",
    ]:
        assert source in text, source
