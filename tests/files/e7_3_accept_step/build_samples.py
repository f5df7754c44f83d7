"""Regenerate the sample submissions of lesson E7.3 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_3_accept_step/build_samples.py            # write
    python tests/files/e7_3_accept_step/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# Solution bodies by scenario and grade_id: what a learner types in place of the stub,
# without the indentation of the cell (it is added when the body is inserted).  Each
# mistake changes one function only, so it should cost points only in that function's
# cells (the speculative_step tests substitute the reference for residual_distribution).
SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    # Python lists and floats, the division-free test r * q <= p, Horner's rule.
    "variant-division-free": {
        "part1_answers": """
            brute_force_answer = 2.0
            tokens_if_first_rejected = 1
            max_tokens = 4 + 1
            """,
        "spec_accept": """
            accepted = 0
            for p_i, q_i, r_i in zip(p, q, r):
                if r_i * q_i > p_i:  # r > p/q without dividing (q > 0)
                    break
                accepted += 1
            return accepted
            """,
        "residual_distribution": """
            excess = [max(0.0, float(a) - float(b)) for a, b in zip(p, q)]
            total = sum(excess)
            if total == 0:
                raise ValueError("no residual mass")
            return [e / total for e in excess]
            """,
        "speculative_step": """
            k = len(draft_tokens)
            vocab = len(target_probs[0])
            out = []
            for i in range(k):
                x = int(draft_tokens[i])
                if rng.random() * draft_probs[i][x] < target_probs[i][x]:
                    out.append(x)
                else:
                    residual = residual_distribution(target_probs[i], draft_probs[i])
                    out.append(int(rng.choice(vocab, p=residual)))
                    return out
            out.append(int(rng.choice(vocab, p=target_probs[k])))
            return out
            """,
        "expected_tokens": """
            total = 0.0
            for _ in range(k + 1):
                total = total * alpha + 1.0  # Horner: 1 + alpha * (1 + alpha * (...))
            return total
            """,
        "greedy_step": """
            out = []
            for i, x in enumerate(draft_tokens):
                row = list(target_probs[i])
                best = row.index(max(row))
                out.append(best)
                if best != x:
                    return out
            row = list(target_probs[len(draft_tokens)])
            out.append(row.index(max(row)))
            return out
            """,
    },
    # numpy scalars and arrays everywhere, vectorized where the protocol allows it.
    "variant-numpy-vectorized": {
        "part1_answers": """
            brute_force_answer = np.int64(2)
            tokens_if_first_rejected = np.float64(1.0)
            max_tokens = np.int32(5)
            """,
        "spec_accept": """
            p, q, r = (np.asarray(a, dtype=float) for a in (p, q, r))
            passed = r <= np.minimum(1.0, p / q)
            rejected = np.flatnonzero(~passed)
            return rejected[0] if rejected.size else passed.size
            """,
        "residual_distribution": """
            excess = np.clip(np.subtract(p, q), 0.0, None)
            if excess.sum() <= 0:
                raise ValueError("max(0, p - q) has no mass")
            return excess / excess.sum()
            """,
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            tokens = np.asarray(draft_tokens, dtype=int).reshape(-1)
            k, vocab = tokens.size, target_probs.shape[1]
            if k:
                rows = np.arange(k)
                thresholds = np.minimum(1.0, target_probs[rows, tokens] / draft_probs[rows, tokens])
            for i in range(k):
                if not rng.random() < thresholds[i]:
                    residual = residual_distribution(target_probs[i], draft_probs[i])
                    return np.append(tokens[:i], rng.choice(vocab, p=residual))
            return np.append(tokens, rng.choice(vocab, p=target_probs[k]))
            """,
        "expected_tokens": """
            return np.sum(np.float64(alpha) ** np.arange(k + 1))
            """,
        "greedy_step": """
            best = np.argmax(np.asarray(target_probs), axis=1)
            tokens = np.asarray(draft_tokens, dtype=int).reshape(-1)
            mismatches = np.flatnonzero(best[: tokens.size] != tokens)
            stop = mismatches[0] if mismatches.size else tokens.size
            return best[: stop + 1]
            """,
    },
    # Renormalizes p and q before taking the residual: the same on distributions, which is
    # all the docstring promises to pass.
    "variant-renormalized-residual": {
        "residual_distribution": """
            p = np.asarray(p, dtype=float)
            q = np.asarray(q, dtype=float)
            p, q = p / p.sum(), q / q.sum()
            excess = np.maximum(p - q, 0.0)
            if not excess.sum() > 0:
                raise ValueError("p <= q everywhere: no residual mass")
            return excess / excess.sum()
            """,
    },
    # --- correct, but another order of random draws: only the seeded point is lost ------
    # The composition the task invites: spec_accept with all k uniforms drawn up front.
    "other-draw-order-spec-accept-composition": {
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            tokens = [int(x) for x in draft_tokens]
            k, vocab = len(tokens), target_probs.shape[1]
            p = [target_probs[i, x] for i, x in enumerate(tokens)]
            q = [draft_probs[i, x] for i, x in enumerate(tokens)]
            a = spec_accept(p, q, rng.random(k))
            if a < k:
                residual = residual_distribution(target_probs[a], draft_probs[a])
                return tokens[:a] + [int(rng.choice(vocab, p=residual))]
            return tokens + [int(rng.choice(vocab, p=target_probs[k]))]
            """,
    },
    # --- common mistakes -------------------------------------------------------------
    # Counts every token that passes on its own (the problem's brute force).
    "mistake-brute-force-count": {
        "spec_accept": """
            return sum(r[i] <= min(1.0, p[i] / q[i]) for i in range(len(p)))
            """,
    },
    "mistake-raw-target-probability": {
        "spec_accept": """
            accepted = 0
            for i in range(len(p)):
                if r[i] <= p[i]:
                    accepted += 1
                else:
                    break
            return accepted
            """,
    },
    "mistake-strict-less-than": {
        "spec_accept": """
            accepted = 0
            for i in range(len(p)):
                if r[i] < min(1.0, p[i] / q[i]):
                    accepted += 1
                else:
                    break
            return accepted
            """,
    },
    # Replaces the rejected token, then goes on testing the later drafted tokens.
    "mistake-keeps-tokens-after-rejection": {
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            emitted = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    emitted.append(x)
                else:
                    residual = residual_distribution(target_probs[i], draft_probs[i])
                    emitted.append(int(rng.choice(vocab, p=residual)))
            emitted.append(int(rng.choice(vocab, p=target_probs[len(draft_tokens)])))
            return emitted
            """,
    },
    "mistake-resample-from-p": {
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            emitted = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    emitted.append(x)
                    continue
                emitted.append(int(rng.choice(vocab, p=target_probs[i])))
                return emitted
            emitted.append(int(rng.choice(vocab, p=target_probs[len(draft_tokens)])))
            return emitted
            """,
    },
    "mistake-no-bonus-token": {
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            emitted = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    emitted.append(x)
                    continue
                residual = residual_distribution(target_probs[i], draft_probs[i])
                emitted.append(int(rng.choice(vocab, p=residual)))
                return emitted
            return emitted
            """,
    },
    # The bonus token as the most likely token of the last row instead of a sample.
    "mistake-bonus-by-argmax": {
        "speculative_step": """
            target_probs = np.asarray(target_probs, dtype=float)
            draft_probs = np.asarray(draft_probs, dtype=float)
            vocab = target_probs.shape[1]
            emitted = []
            for i, x in enumerate(draft_tokens):
                x = int(x)
                if rng.random() < min(1.0, target_probs[i, x] / draft_probs[i, x]):
                    emitted.append(x)
                    continue
                residual = residual_distribution(target_probs[i], draft_probs[i])
                emitted.append(int(rng.choice(vocab, p=residual)))
                return emitted
            emitted.append(int(np.argmax(target_probs[len(draft_tokens)])))
            return emitted
            """,
    },
    # Wrong residual only: speculative_step calls it, but its tests substitute the
    # reference, so only residual_distribution's own cells lose points (no cascade).
    "mistake-residual-not-normalized": {
        "residual_distribution": """
            return np.maximum(0.0, np.subtract(p, q))
            """,
    },
    # The closed form as it stands: 0/0 at alpha = 1, cancellation just below it.
    "mistake-closed-form-at-one": {
        "expected_tokens": """
            return (1 - alpha ** (k + 1)) / (1 - alpha)
            """,
    },
    "mistake-imports-reference": {
        "spec_accept": """
            from specdec_reference import spec_accept as reference_spec_accept

            return reference_spec_accept(p, q, r)
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
