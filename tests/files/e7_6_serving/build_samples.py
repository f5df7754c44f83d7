"""Regenerate the sample submissions of lesson E7.6 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_6_serving/build_samples.py            # write
    python tests/files/e7_6_serving/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# prompt_lookup_draft as the docstring says, with the lines that the mistakes below change:
# the n-gram lengths tried, and the starts searched for each.
_LOOKUP = """
tokens = list(context)
if k == 0:
    return []
for n in SIZES:
    if n > len(tokens):
        continue
    tail = tokens[len(tokens) - n:]
    for s in STARTS:
        if tokens[s : s + n] == tail:
            return tokens[s + n : s + n + k]
return []
"""
_SIZES = "range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1)"
_STARTS = "range(len(tokens) - n)"


def lookup(sizes: str = _SIZES, starts: str = _STARTS) -> str:
    """The learner's prompt lookup with these n-gram lengths and starts."""
    return _LOOKUP.replace("SIZES", sizes).replace("STARTS", starts)


SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    # Plain Python: while loops and element-by-element comparisons, lists for the rows,
    # the roofline's arithmetic by hand, the schedule as an if/else chain.
    "variant-python-loops": {
        "prompt_lookup_draft": """
            if k == 0:
                return []
            length = len(context)
            n = min(max_ngram, length - 1)
            while n >= min_ngram:
                s = 0
                while s + n < length:
                    match = True
                    for j in range(n):
                        if context[s + j] != context[length - n + j]:
                            match = False
                            break
                    if match:
                        return [context[i] for i in range(s + n, min(s + n + k, length))]
                    s += 1
                n -= 1
            return []
            """,
        "deterministic_verify": """
            out = []
            for i in range(len(drafted)):
                x = drafted[i]
                row = [float(v) for v in target_rows[i]]
                if rng.random() < row[x]:
                    out.append(x)
                    continue
                row[x] = 0.0
                total = sum(row)
                out.append(int(rng.choice(len(row), p=[v / total for v in row])))
                return out
            last = [float(v) for v in target_rows[len(drafted)]]
            out.append(int(rng.choice(len(last), p=last)))
            return out
            """,
        "batch_step_time": """
            read = model["params"] * model["bytes_per_param"] / hardware["bandwidth"]
            work = 2 * model["params"] * batch * positions / hardware["peak_flops"]
            if read >= work:
                return read
            return work
            """,
        "speculative_speedup": """
            plain = batch_step_time(model, hardware, batch, 1)
            whole_pass = batch_step_time(model, hardware, batch, k + 1)
            gain = 0.0
            for i in range(k + 1):
                gain += alpha**i
            return gain / (k * c + whole_pass / plain)
            """,
        # Searches the draft lengths instead of deriving the rule: the docstring's contract.
        "should_speculate": """
            for k in range(1, 65):
                if speculative_speedup(alpha, k, c, model, hardware, batch) > 1:
                    return True
            return False
            """,
        # Part 3's pass, then the caches' read on top of the weights'.
        "cached_step_time": """
            with_cache = (weight_bytes(model["params"], model["bytes_per_param"])
                          + batch * kv_cache_bytes(model, seq_len)) / hardware["bandwidth"]
            return max(batch_step_time(model, hardware, batch, positions), with_cache)
            """,
        "max_batch_in_memory": """
            import math

            left = hardware["memory"] - model["params"] * model["bytes_per_param"]
            per_sequence = kv_cache_bytes(model, seq_len)
            if left < per_sequence:
                return 0
            return math.floor(left / per_sequence)
            """,
        "adaptive_k": """
            if accepted == k:
                nxt = k + 2
                if nxt > k_max:
                    nxt = k_max
            else:
                nxt = k - 1
                if nxt < k_min:
                    nxt = k_min
            return nxt
            """,
    },
    # numpy everywhere: windows compared at once, arrays returned, numpy scalars as results.
    "variant-numpy-vectorised": {
        "prompt_lookup_draft": """
            tokens = np.asarray(context, dtype=np.int64)
            if k == 0 or tokens.size < 2:
                return []
            for n in range(min(max_ngram, tokens.size - 1), min_ngram - 1, -1):
                # Windows of tokens[:-1]: every start s with s + n < len(context).
                windows = np.lib.stride_tricks.sliding_window_view(tokens[:-1], n)
                starts = np.flatnonzero((windows == tokens[-n:]).all(axis=1))
                if starts.size:
                    s = int(starts[0])
                    return tokens[s + n : s + n + k].tolist()
            return []
            """,
        "deterministic_verify": """
            p = np.asarray(target_rows, dtype=np.float64)
            x = np.asarray(drafted, dtype=np.int64)
            vocab = p.shape[1]
            for i in range(x.size):
                if rng.random() >= p[i, x[i]]:
                    residual = np.where(np.arange(vocab) == x[i], 0.0, p[i])
                    return np.append(x[:i], rng.choice(vocab, p=residual / residual.sum())).tolist()
            return np.append(x, rng.choice(vocab, p=p[x.size])).tolist()
            """,
        "batch_step_time": """
            read = np.float64(weight_bytes(model["params"], model["bytes_per_param"]))
            work = np.float64(batch) * positions * flops_per_token(model["params"])
            return np.maximum(read / hardware["bandwidth"], work / hardware["peak_flops"])
            """,
        "speculative_speedup": """
            r = np.divide(batch_step_time(model, hardware, batch, k + 1),
                          batch_step_time(model, hardware, batch, 1))
            return np.sum(np.float64(alpha) ** np.arange(k + 1)) / (k * c + r)
            """,
        "should_speculate": """
            times = np.array([batch_step_time(model, hardware, batch, m) for m in (1, 2)])
            return np.greater(alpha, c + times[1] / times[0] - 1)
            """,
        "adaptive_k": """
            return np.clip(np.int64(k + 2 if accepted == k else k - 1), k_min, k_max)
            """,
        "cached_step_time": """
            read = np.float64(weight_bytes(model["params"], model["bytes_per_param"]))
            read += np.float64(batch) * kv_cache_bytes(model, seq_len)
            work = np.float64(batch) * positions * flops_per_token(model["params"])
            return np.maximum(read / hardware["bandwidth"], work / hardware["peak_flops"])
            """,
        "max_batch_in_memory": """
            weights = weight_bytes(model["params"], model["bytes_per_param"])
            room = np.float64(hardware["memory"]) - weights
            whole = np.floor_divide(room, kv_cache_bytes(model, seq_len)).astype(np.int64)
            return np.maximum(np.int64(0), whole)
            """,
    },
    # --- common mistakes -------------------------------------------------------------
    # Searches from the end: the most recent occurrence.
    "mistake-most-recent-occurrence": {
        "prompt_lookup_draft": lookup(starts="range(len(tokens) - n - 1, -1, -1)"),
    },
    # The last n tokens are a candidate too: when nothing earlier matches for the longest
    # n they match themselves, and the draft comes back empty instead of trying n - 1.
    "mistake-own-position-matches": {
        "prompt_lookup_draft": lookup(
            sizes="range(max_ngram, min_ngram - 1, -1)", starts="range(len(tokens) - n + 1)"
        ),
    },
    # Saxena's condition: an occurrence must end before the last n tokens begin.
    "mistake-no-overlap": {
        "prompt_lookup_draft": lookup(starts="range(len(tokens) - 2 * n + 1)"),
    },
    "mistake-shortest-n-first": {
        "prompt_lookup_draft": lookup(
            sizes="range(min_ngram, min(max_ngram, len(tokens) - 1) + 1)"
        ),
    },
    # After a rejection draws from the target's row itself, the drafted token included.
    "mistake-resample-from-p": {
        "deterministic_verify": """
            out = []
            for i, x in enumerate(drafted):
                p = np.asarray(target_rows[i], dtype=float)
                if rng.random() < p[x]:
                    out.append(int(x))
                    continue
                return out + [int(rng.choice(p.size, p=p))]
            last = np.asarray(target_rows[len(drafted)], dtype=float)
            return out + [int(rng.choice(last.size, p=last))]
            """,
    },
    # Copies the draft and adds a bonus token: no test at all.
    "mistake-accept-every-token": {
        "deterministic_verify": """
            last = np.asarray(target_rows[len(drafted)], dtype=float)
            return [int(x) for x in drafted] + [int(rng.choice(last.size, p=last))]
            """,
    },
    # Follows the target exactly, but verifies nothing: one token a pass.
    "mistake-one-draw-from-first-row": {
        "deterministic_verify": """
            first = np.asarray(target_rows[0], dtype=float)
            return [int(rng.choice(first.size, p=first))]
            """,
    },
    # Exact, but draws no uniform when p(x) is 0 or 1: the draws after it shift.
    "mistake-skip-draw-when-sure": {
        "deterministic_verify": """
            out = []
            for i, x in enumerate(drafted):
                p = np.asarray(target_rows[i], dtype=float)
                if p[x] == 1.0 or (p[x] > 0.0 and rng.random() < p[x]):
                    out.append(int(x))
                    continue
                residual = p.copy()
                residual[x] = 0.0
                return out + [int(rng.choice(p.size, p=residual / residual.sum()))]
            last = np.asarray(target_rows[len(drafted)], dtype=float)
            return out + [int(rng.choice(last.size, p=last))]
            """,
    },
    "mistake-memory-plus-compute": {
        "batch_step_time": """
            memory = weight_bytes(model["params"], model["bytes_per_param"]) / hardware["bandwidth"]
            compute = batch * positions * flops_per_token(model["params"]) / hardware["peak_flops"]
            return memory + compute
            """,
    },
    # Theorem 3.8 as it is: the pass costs one plain step at every batch.
    "mistake-verification-cost-constant": {
        "speculative_speedup": """
            return expected_tokens(alpha, k) / (k * c + 1)
            """,
    },
    # E[N] in closed form: 0/0 at alpha = 1.
    "mistake-closed-form-without-alpha-one": {
        "speculative_speedup": """
            plain = batch_step_time(model, hardware, batch, 1)
            r = batch_step_time(model, hardware, batch, k + 1) / plain
            return (1 - alpha ** (k + 1)) / (1 - alpha) / (k * c + r)
            """,
    },
    # Corollary 3.9 at every batch.
    "mistake-alpha-over-c-at-any-batch": {
        "should_speculate": """
            return alpha > c
            """,
    },
    # Every scored position reads the cache again.
    "mistake-cache-per-position": {
        "cached_step_time": """
            read = (weight_bytes(model["params"], model["bytes_per_param"])
                    + batch * positions * kv_cache_bytes(model, seq_len))
            compute = batch * positions * flops_per_token(model["params"]) / hardware["peak_flops"]
            return max(read / hardware["bandwidth"], compute)
            """,
    },
    # All of memory for the caches, none for the weights.
    "mistake-capacity-without-weights": {
        "max_batch_in_memory": """
            return int(hardware["memory"] // kv_cache_bytes(model, seq_len))
            """,
    },
    "mistake-schedule-without-bounds": {
        "adaptive_k": """
            return k + 2 if accepted == k else k - 1
            """,
    },
    "mistake-imports-reference": {
        "prompt_lookup_draft": """
            from specdec_reference import prompt_lookup_draft as reference

            return reference(context, k, max_ngram, min_ngram)
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
