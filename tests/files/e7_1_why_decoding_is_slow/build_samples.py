"""Regenerate the sample submissions of lesson E7.1 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_1_why_decoding_is_slow/build_samples.py          # write
    python tests/files/e7_1_why_decoding_is_slow/build_samples.py --check  # exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# A step_time written out in full, with the two lines that the mistakes below change.
_STEP = """
weights = weight_bytes(model["params"], model["bytes_per_param"])
cache = kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"], seq_len, batch,
                       model["bytes_per_param"])
memory = READ / hardware["bandwidth"]
compute = batch * flops_per_token(model["params"]) / hardware["peak_flops"]
return COMBINE, "memory" if memory >= compute else "compute"
"""


def _step(read: str = "(weights + cache)", combine: str = "max(memory, compute)") -> str:
    return _STEP.replace("READ", read).replace("COMBINE", combine)


SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    # Plain Python: explicit loops, a ridge from the closed form, a while loop for the
    # greedy prefix, the Part 1 numbers typed as decimals.
    "variant-python-loops": {
        "part1_answers": """
            answer_ms_per_token = 6.61
            answer_intensity = 1
            answer_verify_ms = 6.6
            """,
        "weight_bytes": """
            total = 0.0
            total += params
            return total * bytes_per_param
            """,
        "flops_per_token": """
            multiply, add = params, params
            return multiply + add
            """,
        "kv_cache_bytes": """
            size = 1
            for factor in (2, layers, kv_heads, head_dim, seq_len, batch, bytes_per_value):
                size *= factor
            return size
            """,
        "step_time": _step(),
        "ridge_batch": """
            import math

            weights = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
            per_sequence = 2 * model["params"] / hardware["peak_flops"]
            return max(1, math.floor(weights / per_sequence) + 1)
            """,
        "max_batch": """
            weights = weight_bytes(model["params"], model["bytes_per_param"])
            batch = 0
            while weights + kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"],
                                           seq_len, batch + 1,
                                           model["bytes_per_param"]) <= hardware["memory"]:
                batch += 1
            return batch
            """,
        "verify_cost_ratio": """
            one, _ = step_time(model, hardware, 1, 0)
            many, _ = step_time(model, hardware, k + 1, 0)
            return many / one
            """,
        "greedy_verify": """
            out = []
            i = 0
            while i < len(drafted) and drafted[i] == target_argmax[i]:
                out.append(drafted[i])
                i += 1
            out.append(target_argmax[i])
            return out
            """,
        "check_understanding": 'choice = "b"',
    },
    # numpy everywhere: numpy scalars, a vectorized ridge search, array outputs.
    "variant-numpy-arrays": {
        "weight_bytes": "return np.float64(params) * np.float64(bytes_per_param)",
        "flops_per_token": "return np.multiply(2.0, params)",
        "kv_cache_bytes": """
            return np.prod(np.array([2, layers, kv_heads, head_dim, seq_len, batch,
                                     bytes_per_value], dtype=np.float64))
            """,
        "step_time": """
            read = np.float64(weight_bytes(model["params"], model["bytes_per_param"]))
            read += kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"],
                                   seq_len, batch, model["bytes_per_param"])
            times = np.array([read / hardware["bandwidth"],
                              batch * flops_per_token(model["params"]) / hardware["peak_flops"]])
            return times.max(), ("memory", "compute")[int(np.argmax(times))]
            """,
        "ridge_batch": """
            batches = np.arange(1, 100_000)
            memory = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
            compute = batches * flops_per_token(model["params"]) / hardware["peak_flops"]
            return np.int64(batches[np.argmax(compute > memory)])
            """,
        "max_batch": """
            room = np.float64(hardware["memory"]) - weight_bytes(model["params"],
                                                                 model["bytes_per_param"])
            cache = kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"],
                                   seq_len, 1, model["bytes_per_param"])
            return np.int64(np.clip(np.floor(room / cache), 0, None))
            """,
        "verify_cost_ratio": """
            times = np.array([step_time(model, hardware, b, 0)[0] for b in (k + 1, 1)])
            return np.float64(times[0] / times[1])
            """,
        "greedy_verify": """
            best = np.asarray(target_argmax)
            draft = np.asarray(drafted)
            mismatch = np.flatnonzero(draft != best[: len(draft)])
            j = int(mismatch[0]) if mismatch.size else len(draft)
            return np.concatenate([draft[:j], best[j : j + 1]]).astype(np.int64)
            """,
    },
    # --- common mistakes -------------------------------------------------------------
    "mistake-bits-not-bytes": {
        "weight_bytes": "return params * bytes_per_param * 8",
    },
    "mistake-one-flop-per-param": {
        "flops_per_token": "return params",
    },
    "mistake-forgets-kv-cache": {
        "step_time": _step(read="weights"),
    },
    "mistake-sum-not-max": {
        "step_time": _step(combine="memory + compute"),
    },
    # The bound from the weights' read time alone: right at seq_len 0, wrong with caches.
    "mistake-bound-weights-only": {
        "step_time": _step().replace(
            '"memory" if memory >= compute',
            '"memory" if weights / hardware["bandwidth"] >= compute',
        ),
    },
    # A tie named "compute" (> where the contract says >=).
    "mistake-tie-is-compute": {
        "step_time": _step().replace("memory >= compute", "memory > compute"),
    },
    "mistake-max-batch-ignores-weights": {
        "max_batch": """
            cache = kv_cache_bytes(model["layers"], model["kv_heads"], model["head_dim"],
                                   seq_len, 1, model["bytes_per_param"])
            return int(hardware["memory"] // cache)
            """,
    },
    "mistake-verify-k-plus-one-steps": {
        "verify_cost_ratio": "return float(k + 1)",
    },
    "mistake-drops-target-token": {
        "greedy_verify": """
            emitted = []
            for x, y in zip(drafted, target_argmax):
                if x != y:
                    break
                emitted.append(int(x))
            return emitted
            """,
    },
    # Five positions charged five full steps; the weights' ridge, caches forgotten.
    "mistake-by-hand-answers": {
        "part1_answers": """
            answer_ms_per_token = 6.738e9 * 2 / 2.039e12 * 1e3
            answer_intensity = 1.0
            answer_verify_ms = 5 * answer_ms_per_token
            """,
        "check_understanding": 'choice = "A"',
    },
    "mistake-imports-reference": {
        "part1_answers": """
            from specdec_reference import specs, step_time

            answer_ms_per_token = step_time(specs.LLAMA2_7B, specs.A100_SXM_80GB, 1, 0)[0] * 1e3
            answer_intensity = 1.0
            answer_verify_ms = step_time(specs.LLAMA2_7B, specs.A100_SXM_80GB, 5, 0)[0] * 1e3
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
