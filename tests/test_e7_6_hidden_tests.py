"""Lesson E7.6: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants
below).  Which cells each sample loses is checked through the real grader by
test_lessons.py (``expected.json``).  This module declares what the lessons' contract
checks (test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``,
``GRADED_PHRASES``) and checks the lesson's own rules.  The reference's own tests are
in test_reference_serving.py.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from support.course import REPO
from support.lessons import Lesson, failing

#: Ungraded cells the test cells' visible parts rely on (models, roofline, the decoder).
LESSON = Lesson(
    "e7_6_serving",
    support_cells={"code-setup", "code-models", "code-roofline", "code-lookup-decode"},
)
SCENARIOS = LESSON.scenarios
TEST_CELLS = LESSON.test_cells
LOOKUP_CELLS = {g for g in TEST_CELLS if g.startswith("test_prompt_lookup_draft")}
VERIFY_CELLS = {g for g in TEST_CELLS if g.startswith("test_deterministic_verify")}
ROOFLINE_CELLS = {
    g
    for g in TEST_CELLS
    if g.startswith(("test_batch_step_time", "test_speculative_speedup", "test_should"))
}
CACHE_CELLS = {g for g in TEST_CELLS if g.startswith(("test_cached", "test_max_batch"))}
SCHEDULE_CELLS = {g for g in TEST_CELLS if g.startswith("test_adaptive_k")}
EXACT = "test_deterministic_verify_exact"
ACCEPT = "test_deterministic_verify_accept"


def execute(bodies=None, *, only=None, replace=None):
    return LESSON.run(bodies, only=only, replace=replace).outcomes


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


# Correct, but draws the residual token by the Gumbel-max trick (V uniforms) instead of
# rng.choice: only the seeded cell (1 point) may tell it from the reference.
VERIFY_OTHER_DRAWS = """
p = np.asarray(target_rows, dtype=float)
out = []
for i, x in enumerate(drafted):
    if rng.random() < p[i, x]:
        out.append(int(x))
        continue
    residual = p[i].copy()
    residual[x] = 0.0
    with np.errstate(divide="ignore"):
        out.append(int(np.argmax(np.log(residual) - np.log(-np.log(rng.random(len(residual)))))))
    return out
with np.errstate(divide="ignore"):
    last = np.log(p[len(drafted)])
return out + [int(np.argmax(last - np.log(-np.log(rng.random(len(last))))))]
"""

# Correct, written with the latest-first loop of a learner who then keeps the smallest
# start it saw: the earliest occurrence, found from the right.
LOOKUP_FROM_THE_RIGHT = """
tokens = [int(t) for t in context]
for n in range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1):
    best = None
    for s in range(len(tokens) - n - 1, -1, -1):
        if tokens[s : s + n] == tokens[len(tokens) - n:]:
            best = s
    if best is not None:
        return tuple(tokens[best + n : best + n + k])
return ()
"""


def test_a_verify_step_with_another_draw_method_loses_only_the_seeded_point():
    lost = failing(execute({"deterministic_verify": VERIFY_OTHER_DRAWS}, only=VERIFY_CELLS))
    assert set(lost) == {"test_deterministic_verify_seeded"}, lost
    assert "one rng.random(), accepted if below p_i(x)" in lost["test_deterministic_verify_seeded"]


def test_a_lookup_that_scans_from_the_right_and_returns_tuples_keeps_every_point():
    assert failing(execute({"prompt_lookup_draft": LOOKUP_FROM_THE_RIGHT}, only=LOOKUP_CELLS)) == {}


def test_a_broken_prompt_lookup_draft_costs_nothing_in_the_verify_cells():
    """No cascade: the exactness cell drafts with the course's prompt_lookup_draft."""
    broken = {"prompt_lookup_draft": "raise NotImplementedError()"}
    assert failing(execute(broken, only=VERIFY_CELLS)) == {}


def test_a_broken_batch_step_time_costs_nothing_in_the_speedup_should_and_cache_cells():
    variant = SCENARIOS["variant-python-loops"]
    bodies = {
        "batch_step_time": "return 1.0",
        "speculative_speedup": variant["speculative_speedup"],
        "should_speculate": variant["should_speculate"],
        "cached_step_time": variant["cached_step_time"],  # built on batch_step_time
    }
    lost = failing(execute(bodies, only=ROOFLINE_CELLS | CACHE_CELLS))
    assert set(lost) == {"test_batch_step_time_values"}, lost


#: The other graded functions each graded function may call, by its contract: its test
#: cells run with the course's version of each.
CALLEES = {
    "prompt_lookup_draft": set(),
    "deterministic_verify": set(),
    "batch_step_time": set(),
    "speculative_speedup": {"batch_step_time"},
    "should_speculate": {"batch_step_time", "speculative_speedup"},
    "cached_step_time": {"batch_step_time"},
    "max_batch_in_memory": set(),
    "adaptive_k": set(),
}


def test_every_test_cell_runs_with_the_course_s_version_of_the_callees():
    """Each graded function's cells bind the reference for every graded function it may call,
    and the reference solutions call no graded function outside that list."""
    graded = set(CALLEES)
    assert graded == {
        c.metadata["nbgrader"]["grade_id"]
        for c in LESSON.source_nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in LESSON.source_nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.metadata.get("nbgrader", {}).get("solution"):
            called = {
                n.func.id
                for n in ast.walk(ast.parse(cell.source))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            assert called & graded <= CALLEES[gid] | {gid}, gid
        if gid in TEST_CELLS:
            [tested] = [f for f in graded if gid.startswith(f"test_{f}")]
            bound = set(re.findall(r'use_reference_for_cell\(globals\(\), "(\w+)"', cell.source))
            assert CALLEES[tested] <= bound, (gid, CALLEES[tested] - bound)


def test_a_should_speculate_built_on_a_broken_speedup_costs_nothing_in_its_cell():
    """should_speculate may lean on speculative_speedup at k = 1: the cell uses the course's."""
    bodies = {
        "speculative_speedup": "return 0.0",
        "should_speculate": "return speculative_speedup(alpha, 1, c, model, hardware, batch) > 1",
    }
    lost = failing(execute(bodies, only=ROOFLINE_CELLS - {"test_batch_step_time_values"}))
    assert set(lost) == {"test_speculative_speedup_values", "test_speculative_speedup_edges"}, lost


# ---------------------------------------------------------------------------
# Each sample mistake loses its cells, and the message names it
# ---------------------------------------------------------------------------

#: {scenario: {lost cell: words its message must contain}}.
SAMPLE_MESSAGES = {
    "mistake-most-recent-occurrence": {
        "test_prompt_lookup_draft_conventions": (
            "the most recent occurrence instead of the first (earliest): among the occurrences "
            "of the longest matching n-gram take the first one, the smallest start s, which is "
            "what Hugging Face's and vLLM's code take"
        ),
    },
    "mistake-own-position-matches": {
        "test_prompt_lookup_draft_copies": "That is including the current position as a match",
        "test_prompt_lookup_draft_conventions": "including the current position as a match",
    },
    "mistake-no-overlap": {
        "test_prompt_lookup_draft_conventions": (
            "That is not letting an occurrence overlap the last n tokens"
        ),
    },
    "mistake-shortest-n-first": {
        "test_prompt_lookup_draft_conventions": "trying the shortest n-gram first",
    },
    "mistake-resample-from-p": {
        ACCEPT: "That is resampling from p instead of p with x removed",
        EXACT: "nearer to resampling from p instead of p with x removed",
        # Here the first wrong case's tokens are also one draw from the first row: both named.
        "test_deterministic_verify_seeded": "or resampling from p instead of p with x removed",
    },
    "mistake-accept-every-token": {
        ACCEPT: "That is accepting every drafted token",
        EXACT: "nearer to accepting every drafted token",
        "test_deterministic_verify_seeded": "That is accepting every drafted token",
    },
    "mistake-one-draw-from-first-row": {
        ACCEPT: "were all accepted in 0.000 of the runs, but a correct step accepts them with "
        "probability 0.600, the product of the target's p_i(x_i) (tolerance 0.064: a correct "
        "step is this far off with probability below 9e-07). That is one draw from the first "
        "row, ignoring the draft",
        "test_deterministic_verify_seeded": (
            "That is one draw from the first row, ignoring the draft"
        ),
    },
    "mistake-skip-draw-when-sure": {
        "test_deterministic_verify_seeded": "skipping rng.random() when p(x) is exactly 0 or 1",
    },
    "mistake-memory-plus-compute": {
        "test_batch_step_time_values": "the memory and compute times added",
    },
    "mistake-verification-cost-constant": {
        "test_speculative_speedup_values": "the verification cost taken as constant in batch",
    },
    "mistake-closed-form-without-alpha-one": {
        "test_speculative_speedup_edges": (
            "raised ZeroDivisionError: float division by zero, expected it to return a result. "
            "That is the closed form (1 - alpha**(k + 1)) / (1 - alpha) used at alpha = 1"
        ),
    },
    "mistake-alpha-over-c-at-any-batch": {
        "test_should_speculate_rule": "Corollary 3.9 without the batch (alpha > c)",
    },
    "mistake-cache-per-position": {
        "test_cached_step_time_values": "That is the cache read once per scored position",
    },
    "mistake-capacity-without-weights": {
        "test_max_batch_in_memory_values": "That is the weights left out",
    },
    "mistake-schedule-without-bounds": {
        "test_adaptive_k_bounds": (
            "going below k_min: the schedule is not clamped to [k_min, k_max]"
        ),
    },
}


@pytest.mark.parametrize("scenario", sorted(SAMPLE_MESSAGES))
def test_each_sample_mistake_loses_only_cells_of_the_function_it_breaks(scenario):
    """No cascade: the cells a mistake loses all test the one function it changes."""
    [changed] = SCENARIOS[scenario]
    prefix = f"test_{changed}"
    assert all(gid.startswith(prefix) for gid in LESSON.lost_cells(scenario))


# Mistakes without a sample notebook: {name: (bodies, cells to run, {lost cell: words})}.
_LOOKUP = LESSON.samples.lookup
EXTRA_MUTANTS = {
    "lookup-requires-k-tokens": (
        {
            "prompt_lookup_draft": _LOOKUP(
                starts="(s for s in range(len(tokens) - n) if s + n + k <= len(tokens))"
            )
        },
        LOOKUP_CELLS,
        {"test_prompt_lookup_draft_conventions": "requiring k tokens after the match"},
    ),
    "lookup-ignores-k": (
        {
            "prompt_lookup_draft": _LOOKUP().replace(
                "return tokens[s + n : s + n + k]", "return tokens[s + n :]"
            )
        },
        LOOKUP_CELLS,
        {
            "test_prompt_lookup_draft_copies": "That is ignoring k",
            "test_prompt_lookup_draft_conventions": "ignoring k",
        },
    ),
    # Works on the caller's list: appends its draft to it.
    "lookup-changes-the-context": (
        {
            "prompt_lookup_draft": """
            for n in range(min(max_ngram, len(context) - 1), min_ngram - 1, -1):
                tail = context[len(context) - n:]
                for s in range(len(context) - n):
                    if context[s : s + n] == tail:
                        draft = context[s + n : s + n + k]
                        context.extend(draft)
                        return draft
            return []
            """
        },
        LOOKUP_CELLS,
        {
            "test_prompt_lookup_draft_copies": "changed the context list it was given",
            "test_prompt_lookup_draft_conventions": "changed the context list it was given",
        },
    ),
    # Copies the n-gram itself along with what followed it: not a continuation.
    "lookup-copies-the-match-too": (
        {
            "prompt_lookup_draft": _LOOKUP().replace(
                "return tokens[s + n : s + n + k]", "return tokens[s : s + k]"
            )
        },
        LOOKUP_CELLS,
        {
            "test_prompt_lookup_draft_copies": "which is not the up to k = ",
            "test_prompt_lookup_draft_conventions": "returned",
        },
    ),
    # Keeps x when the uniform is above p(x): acceptance 1 - p(x).
    "verify-accepts-above-p": (
        {
            "deterministic_verify": SCENARIOS["variant-python-loops"][
                "deterministic_verify"
            ].replace("if rng.random() < row[x]:", "if rng.random() >= row[x]:")
        },
        VERIFY_CELLS,
        {
            ACCEPT: "That is accepting x when rng.random() is above p(x)",
            EXACT: "first character",
            "test_deterministic_verify_seeded": "returned",
        },
    ),
    # Skips the uniform only when p(x) = 1.
    "verify-no-draw-when-p-is-one": (
        {
            "deterministic_verify": SCENARIOS["variant-python-loops"][
                "deterministic_verify"
            ].replace("if rng.random() < row[x]:", "if row[x] == 1.0 or rng.random() < row[x]:")
        },
        {ACCEPT, "test_deterministic_verify_seeded"},  # exact: it is, and costs 4,000 decodes
        {
            "test_deterministic_verify_seeded": (
                "That is skipping rng.random() when p(x) is exactly 1"
            )
        },
    ),
    # numpy's closed form at alpha = 1: nan (0/0) with a warning, no exception.
    "speedup-numpy-closed-form": (
        {
            "speculative_speedup": """
            plain = batch_step_time(model, hardware, batch, 1)
            r = batch_step_time(model, hardware, batch, k + 1) / plain
            with np.errstate(divide="ignore", invalid="ignore"):
                tokens = (1 - np.float64(alpha) ** (k + 1)) / (1 - np.float64(alpha))
            return tokens / (k * c + r)
            """
        },
        {"test_speculative_speedup_values", "test_speculative_speedup_edges"},
        {
            "test_speculative_speedup_edges": (
                "That is the closed form (1 - alpha**(k + 1)) / (1 - alpha) used at alpha = 1"
            )
        },
    ),
    "cached-without-the-cache": (
        {"cached_step_time": "return batch_step_time(model, hardware, batch, positions)"},
        CACHE_CELLS,
        {"test_cached_step_time_values": "That is the cache left out"},
    ),
    "cached-one-request-s-cache": (
        {
            "cached_step_time": """
            read = weight_bytes(model["params"], model["bytes_per_param"])
            read += kv_cache_bytes(model, seq_len)
            compute = batch * positions * flops_per_token(model["params"]) / hardware["peak_flops"]
            return max(read / hardware["bandwidth"], compute)
            """
        },
        CACHE_CELLS,
        {"test_cached_step_time_values": "That is one request's cache, not the batch's"},
    ),
    "cached-memory-plus-compute": (
        {
            "cached_step_time": """
            read = weight_bytes(model["params"], model["bytes_per_param"])
            read += batch * kv_cache_bytes(model, seq_len)
            compute = batch * positions * flops_per_token(model["params"]) / hardware["peak_flops"]
            return read / hardware["bandwidth"] + compute
            """
        },
        CACHE_CELLS,
        {"test_cached_step_time_values": "That is the memory and compute times added"},
    ),
    "capacity-rounded-up": (
        {
            "max_batch_in_memory": """
            import math

            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            return max(0, math.ceil(room / kv_cache_bytes(model, seq_len)))
            """
        },
        CACHE_CELLS,
        {"test_max_batch_in_memory_values": "That is a partial sequence counted (rounded up)"},
    ),
    "capacity-negative-when-the-weights-do-not-fit": (
        {
            "max_batch_in_memory": """
            room = hardware["memory"] - weight_bytes(model["params"], model["bytes_per_param"])
            return int(room // kv_cache_bytes(model, seq_len))
            """
        },
        CACHE_CELLS,
        {"test_max_batch_in_memory_values": "That is a negative batch when the weights alone"},
    ),
    "batch-step-compute-for-batch-only": (
        {
            "batch_step_time": """
            memory = weight_bytes(model["params"], model["bytes_per_param"]) / hardware["bandwidth"]
            return max(memory, batch * flops_per_token(model["params"]) / hardware["peak_flops"])
            """
        },
        {"test_batch_step_time_values"},
        {"test_batch_step_time_values": "compute for batch tokens only"},
    ),
    "batch-step-weights-per-request": (
        {
            "batch_step_time": """
            read = batch * weight_bytes(model["params"], model["bytes_per_param"])
            memory = read / hardware["bandwidth"]
            compute = batch * positions * flops_per_token(model["params"]) / hardware["peak_flops"]
            return max(memory, compute)
            """
        },
        {"test_batch_step_time_values"},
        {"test_batch_step_time_values": "the weights read once per request"},
    ),
    "speedup-plain-step-at-batch-one": (
        {
            "speculative_speedup": """
            plain = batch_step_time(model, hardware, 1, 1)
            r = batch_step_time(model, hardware, batch, k + 1) / plain
            return expected_tokens(alpha, k) / (k * c + r)
            """
        },
        {"test_speculative_speedup_values"},
        {"test_speculative_speedup_values": "the pass at this batch over a plain step at batch 1"},
    ),
    "speedup-pass-cost-at-batch-one": (
        {
            "speculative_speedup": """
            r = batch_step_time(model, hardware, 1, k + 1) / batch_step_time(model, hardware, 1, 1)
            return expected_tokens(alpha, k) / (k * c + r)
            """
        },
        {"test_speculative_speedup_values"},
        {"test_speculative_speedup_values": "constant in batch (the pass's cost at batch 1)"},
    ),
    "speedup-without-the-draft-cost": (
        {
            "speculative_speedup": """
            plain = batch_step_time(model, hardware, batch, 1)
            r = batch_step_time(model, hardware, batch, k + 1) / plain
            return expected_tokens(alpha, k) / r
            """
        },
        {"test_speculative_speedup_values"},
        {"test_speculative_speedup_values": "leaving out the draft's cost"},
    ),
    "should-speculate-on-a-tie": (
        {
            "should_speculate": """
            plain = batch_step_time(model, hardware, batch, 1)
            extra = batch_step_time(model, hardware, batch, 2) / plain - 1
            return alpha >= c + extra
            """
        },
        {"test_should_speculate_rule"},
        {"test_should_speculate_rule": "returned True, expected False: speculate when alpha > c"},
    ),
    "schedule-past-k-max": (
        {"adaptive_k": "return k + 2 if accepted == k else max(k - 1, k_min)"},
        SCHEDULE_CELLS,
        {
            "test_adaptive_k_bounds": (
                "going past k_max: the schedule is not clamped to [k_min, k_max]"
            )
        },
    ),
    "schedule-adds-one": (
        {"adaptive_k": "return min(k + 1, k_max) if accepted == k else max(k - 1, k_min)"},
        SCHEDULE_CELLS,
        {
            "test_adaptive_k_values": "adding 1 after a full acceptance",
            "test_adaptive_k_bounds": "returned",
        },
    ),
    "schedule-removes-two": (
        {"adaptive_k": "return min(k + 2, k_max) if accepted == k else max(k - 2, k_min)"},
        SCHEDULE_CELLS,
        {"test_adaptive_k_values": "subtracting 2 after a rejection"},
    ),
    "schedule-grows-on-a-partial-acceptance": (
        {"adaptive_k": "return min(k + 2, k_max) if accepted > 0 else max(k - 1, k_min)"},
        SCHEDULE_CELLS,
        {
            "test_adaptive_k_values": "growing k whenever a token was accepted",
            "test_adaptive_k_bounds": "adaptive_k(0, 0, 0, 5) returned 0, expected 2",
        },
    ),
    "schedule-resets-to-k-min": (
        {"adaptive_k": "return min(k + 2, k_max) if accepted == k else k_min"},
        SCHEDULE_CELLS,
        {"test_adaptive_k_values": "resetting k to k_min after a rejection"},
    ),
}


# ---------------------------------------------------------------------------
# The statistical checks: other seeds, stated bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["mistake-resample-from-p", "mistake-accept-every-token"])
def test_the_exactness_check_fails_the_accept_step_mistakes_for_another_seed(scenario):
    """The reference passes the same check for other seeds: test_reference_serving."""
    lost = failing(execute(SCENARIOS[scenario], only={EXACT}, replace={"seed=7620": "seed=8620"}))
    assert set(lost) == {EXACT}


@pytest.mark.parametrize(
    "bodies",
    [
        SCENARIOS["mistake-one-draw-from-first-row"],
        SCENARIOS["mistake-accept-every-token"],
        EXTRA_MUTANTS["verify-accepts-above-p"][0],
    ],
    ids=["first-row", "accept-every-token", "accepts-above-p"],
)
def test_the_acceptance_check_fails_the_mutants_for_another_seed(bodies):
    """The reference passes the same check for other seeds: test_reference_serving."""
    lost = failing(execute(bodies, only={ACCEPT}, replace={"seed=7622": "seed=8622"}))
    assert set(lost) == {ACCEPT}
    assert "were all accepted in" in lost[ACCEPT]


def test_the_acceptance_cell_states_its_seed_sample_and_bound():
    cell = TEST_CELLS[ACCEPT].source
    assert "runs=2000, seed=7622" in cell and "failure_prob=9e-7" in cell
    assert "6 comparisons" in cell and "below 9e-7" in cell


def test_the_statistical_cell_states_a_false_failure_probability_below_one_in_a_million():
    cell = TEST_CELLS[EXACT].source
    assert "failure_prob=9e-7" in cell and "below 1e-6" in cell and "less than 5e-9" in cell
    assert "range(1000)" in cell and "< 0.1" in cell
    # Hoeffding for the visible check: 1000 first tokens, off by 0.1 or more.
    assert 9e-7 + 2 * np.exp(-2 * 1000 * 0.1**2) < 1e-6
    assert 2 * np.exp(-2 * 1000 * 0.1**2) < 5e-9


# ---------------------------------------------------------------------------
# The rule the lesson states is the sources' rule; docstrings; visible parts
# ---------------------------------------------------------------------------


def _text(cell_ids=None):
    return " ".join(
        " ".join(c.source.split())
        for c in LESSON.source_nb.cells
        if cell_ids is None or c.id in cell_ids
    )


def test_the_lesson_takes_the_earliest_occurrence_and_cites_the_three_sources():
    """Hugging Face's and vLLM's copy after the earliest occurrence; Saxena's scans from the
    left too, but keeps only a match with its full continuation, clear of the last n tokens."""
    part1 = _text({"md-part1"})
    for phrase in (
        "take the **first** one, the smallest $s$ (the earliest in the text)",
        "Hugging Face's `PromptLookupCandidateGenerator` does the same",
        '"the first valid candidates (left to right)"',
        "vLLM's `NgramProposer` (the earliest position of the longest match)",
        "Saxena's own `find_candidate_pred_tokens` also scans from the left, but it keeps a match",
        "`end_idx <= input_length and start_idx < input_length - ngram_size`",
        "taking the most recent occurrence instead of the first",
    ):
        assert phrase in part1, phrase
    assert "stops at the first match" not in part1  # Saxena's skips some earlier matches
    text = _text()
    assert "design choice" not in text and "This is our choice" not in text
    assert "take the **most recent**" not in text


def test_the_batch_256_prediction_is_asked_first_and_answered_with_the_reference_numbers():
    """The issue's question: at batch 256 on an A100, does k = 4 with alpha = 0.7 still pay?"""
    import specdec_reference as ref
    from specdec_reference import specs

    ids = [c.id for c in LESSON.source_nb.cells]
    assert ids.index("code-predict-pays") < ids.index("md-part3")
    assert ids.index("code-speedup-plot") < ids.index("code-answer-pays") < ids.index("md-part5")
    assert "at batch 256, does the same 4-token draft" in _text({"md-predict-pays"}).lower()
    model, gpu = dict(specs.LLAMA2_7B), dict(specs.A100_SXM_80GB)
    speedup = ref.speculative_speedup(0.7, 4, 0.05, model, gpu, 256)
    assert f"\\approx {speedup:.2f}$: **no**" in _text({"md-answer-pays"})
    stops = next(
        b for b in range(1, 257) if ref.speculative_speedup(0.7, 4, 0.05, model, gpu, b) < 1
    )
    assert (round(speedup, 3), stops) == (0.533, 79)
    answer = LESSON.source_nb.cells[ids.index("code-answer-pays")].source
    assert "with until_written():" in answer and "my_guess_still_pays" in answer


def test_the_chapter_in_one_page_comes_just_before_the_chapter_reference():
    """It names every lesson of the chapter by the title its notebook gives itself."""
    import nbformat

    ids = [c.id for c in LESSON.source_nb.cells]
    assert ids.index("md-chapter") == ids.index("chapter-reference") - 1
    page = _text({"md-chapter"})
    sources = sorted((REPO / "source").glob("e7_*/*.ipynb"))
    assert len(sources) == 6
    for path in sources:
        title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        assert title.startswith("# E7.") and title[2:] in page, (path.name, title)


def test_the_going_further_questions_and_citations_are_there():
    text = _text()
    for phrase in (
        "EAGLE (Li et al. 2024",
        "LayerSkip (Elhoushi et al. 2024",
        "Gloeckle et al. (2024",
        "Medusa (Cai et al. 2024)",
        "Chen et al. (2023",
        "Pope et al. (MLSys 2023)",
    ):
        assert phrase in text, phrase
    assert "Pope et al. 2022" not in text and "Pope et al. (2022)" not in text


def test_the_notebook_roofline_tables_are_the_reference_specs():
    from specdec_reference import specs

    ns = LESSON.run(only=set()).namespace
    from specdec_reference.specs import MEMORY_BYTES

    for mine, ref in (
        (ns["A100"], dict(specs.A100_SXM_80GB, memory=MEMORY_BYTES[specs.A100_SXM_80GB["name"]])),
        (ns["H100"], dict(specs.H100_SXM, memory=MEMORY_BYTES[specs.H100_SXM["name"]])),
        (ns["LLAMA2_7B"], specs.LLAMA2_7B),
        (ns["LLAMA2_70B"], specs.LLAMA2_70B),
    ):
        assert {key: ref[key] for key in mine} == mine


def test_the_notebook_target_is_the_reference_target():
    from specdec_reference.testing import e7_6

    ns = LESSON.run(only=set()).namespace
    target, _ = e7_6.models()
    for text in ("for i in range(n):\n    for ", "def f(x):", ""):
        context = ns["encode"](text)
        assert np.array_equal(ns["target_model"].probs(context), target.probs(context))


GRADED_PHRASES = {
    "prompt_lookup_draft": [
        "For n = max_ngram, max_ngram - 1, ..., min_ngram",
        "s + n < len(context)",
        "first (earliest) occurrence, the smallest s",
        "Hugging Face's and vLLM's",
        "Must not be modified",
        "[] when no n matches (or k == 0)",
        "300 random contexts",
        "3 points for a draft that copies what followed some earlier occurrence",
        "1 point for exactly this draft",
    ],
    "deterministic_verify": [
        "drawn from the row with the drafted token removed and renormalized",
        "the bonus token from the last row",
        "accepted with probability p_i(x)",
        "never when p_i(x) is 0 and always when it is 1 (2 points)",
        "the first 2 characters (2 points)",
        "one rng.random() per tested token (accept if below p_i(x)), then one rng.choice(V, p=...)",
        "rows with p_i(x) exactly 0 and 1",
    ],
    "batch_step_time": ["roofline", "weights", "at the same time", "relative 1e-9"],
    "speculative_speedup": [
        "accepted with probability alpha until the first rejection",
        "0 <= alpha <= 1 (both ends included)",
        "at alpha = 0 and alpha = 1 (1 point)",
        "replaced by a correct one",
    ],
    "should_speculate": [
        "exceeds 1 for some k >= 1",
        "a tie is not a speedup",
        "none within 1e-6 of a tie",
        "replaced by correct ones",
    ],
    "cached_step_time": [
        "reads once, however many positions it scores",
        "kv_cache_bytes(model, seq_len)",
        "relative 1e-9",
        "replaced by a correct one",
    ],
    "max_batch_in_memory": [
        "0 when the weights",
        "alone do not fit",
        "Graded exactly",
    ],
    "adaptive_k": [
        "+2 after a fully accepted draft, -1 after a",
        "kept between k_min and k_max",
        "between the bounds (1 point) and at both bounds (1 point)",
    ],
}

#: What the docstrings and the Parts' prose must not give away: the graded expressions.
FORMULAS = {
    "batch_step_time": ["max(", "weight_bytes / bandwidth", "batch * positions * flops"],
    "speculative_speedup": ["expected_tokens(alpha, k) / (k * c + r)", "batch_step_time(model"],
    "should_speculate": ["alpha > c +", "batch_step_time(model"],
    "cached_step_time": ["max(", "batch * kv_cache_bytes", "+ batch *"],
    "max_batch_in_memory": ["//", "floor", "memory - "],
    "adaptive_k": ["min(k + 2, k_max)", "max(k - 1, k_min)"],
}


@pytest.mark.parametrize("grade_id", sorted(FORMULAS))
def test_each_docstring_states_the_contract_not_the_formula(grade_id):
    [cell] = [
        c
        for c in LESSON.source_nb.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    ]
    docstring = ast.get_docstring(ast.parse(cell.source).body[0])
    assert [f for f in FORMULAS[grade_id] if f in docstring] == []


def test_the_prose_asks_for_the_derivations_and_does_not_give_them():
    """Parts 3 to 6 ask before the function; the rules they lead to are not printed."""
    for part in ("md-part3", "md-part4", "md-part5", "md-part6"):
        assert "Derive it first" in _text({part}), part
    prose = _text({"md-part3", "md-part4", "md-part5", "md-part6", "md-where", "md-chapter"})
    for given_away in (
        r"t(B, m) = \max",
        "speculate at batch } B \\iff",
        r"\alpha > c + d_1",
        "c + t(B, 2)/t(B, 1) - 1",
        "`min(k + 2, k_max)`",
        "r = t(B, k + 1) / t(B, 1)",
        r"\max\left(\frac{W}{\beta}",
    ):
        assert given_away not in prose, given_away
    # The claims that hold only without the cache are gone.
    text = _text()
    assert "no draft can pay" not in text and "should be switched off" not in text
    assert "helps a lightly loaded server" not in text


def test_each_visible_test_gives_one_worked_value():
    for gid, cell in TEST_CELLS.items():
        visible = cell.source.split("### END HIDDEN TESTS")[-1]
        assert visible.count("assert ") == 1, gid


def test_the_lesson_states_hugging_face_s_default_since_4_45_and_vllm_s_table():
    part6 = _text({"md-part6"})
    for phrase in (
        "It was the default until Transformers 4.45",
        'the default is `"constant"`, with up to `num_assistant_tokens = 20`',
        "`assistant_confidence_threshold = 0.4`",
        '`"heuristic"` schedule is now an opt-in',
    ):
        assert phrase in part6, phrase
    rule = _text({"md-cache-rule"})
    for phrase in (
        "up to 2x for Llama-2-7B-32K and 1.84x for Llama-3.1-8B at batch sizes 32 to 256 on "
        "8 A100s",
        '"Medium to high gain" at high QPS',
        '"medium-to-low QPS (queries per second), memory-bound workloads"',
    ):
        assert phrase in rule, phrase


def test_the_summary_states_what_the_simulation_shows_for_three_seeds():
    """Adaptive k is never faster than fixed k = 4; fixed k = 4 is the fastest at light load;
    load-aware is never slower than off; the rates from which the others are slower than off."""
    ns = LESSON.run(only=set()).namespace
    server = next(c.source for c in LESSON.source_nb.cells if c.id == "code-server")
    exec(server.split("rates = np.geomspace")[0], ns)
    rates = np.geomspace(5, 5000, 10)
    names = ("off", "fixed k = 4", "adaptive", "load-aware")
    for seed in (0, 1, 2):
        lat = {p: np.array([ns["simulate"](r, p, seed=seed)[1] for r in rates]) for p in names}
        assert np.all(lat["adaptive"] >= lat["fixed k = 4"]), seed
        assert min(names, key=lambda p: lat[p][0]) == "fixed k = 4", seed
        assert 0.105 < lat["fixed k = 4"][0] < 0.125 and 0.21 < lat["off"][0] < 0.22, seed
        assert np.all(lat["load-aware"] <= lat["off"]), seed
        first = {p: rates[np.argmax(lat[p] > lat["off"])] for p in ("fixed k = 4", "adaptive")}
        assert round(first["adaptive"]) == 232 and round(first["fixed k = 4"]) in (500, 1077), seed
    summary = _text({"md-where"})
    assert "no better than fixed $k = 4$ at any rate" in summary
    assert "from about 230 requests/s" in summary and "Seeds 0, 1 and 2 agree" in summary
