"""Regenerate the sample submissions of lesson E7.2 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_2_acceptance_tests/build_samples.py            # write
    python tests/files/e7_2_acceptance_tests/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# Solution bodies by scenario and grade_id: what a learner types in place of the stub,
# without the indentation of the cell (it is added when the body is inserted).
SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    "variant-numpy-vectorized": {
        "part1_answers": """
            import numpy as np

            answer_1 = np.float64(0.15) / np.float64(0.6)
            answer_2 = np.minimum(1, 0.3 / 0.2)
            answer_3 = np.minimum([0.6, 0.1, 0.3], [0.2, 0.5, 0.3]).sum()
            """,
        "accept_prob": """
            if not q > 0:
                raise ValueError("q must be positive")
            return np.minimum(1.0, np.divide(p, q))
            """,
        "overall_acceptance": """
            p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
            if p.shape != q.shape:
                raise ValueError(f"shapes differ: {p.shape} and {q.shape}")
            return np.minimum(p, q).sum()
            """,
        "propose_and_test": """
            token = rng.choice(len(q), p=q)
            return token, rng.random() < accept_prob(p[token], q[token])
            """,
        # Bit-identical to the loop: choice(len(q), p=q) uses one uniform and searches the
        # normalized cumulative sum of q, so the draws alternate token, test, token, test.
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("need at least one trial")
            p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
            u = np.random.default_rng(seed).random(2 * trials)
            cdf = np.cumsum(q)
            cdf /= cdf[-1]
            tokens = np.searchsorted(cdf, u[0::2], side="right")
            ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
            return np.mean(u[1::2] < np.minimum(1.0, ratio)[tokens])
            """,
        "one_pass_answers": """
            r = np.array([0.5, 0.45, 0.4, 0.1])
            ratio = np.minimum(1, np.array([0.8, 0.3, 0.2, 0.9]) / np.array([0.2, 0.5, 0.8, 0.3]))
            passed = r < ratio
            first_rejection = int(np.argmin(passed))  # passed is not all True here
            accepted_tokens = ("the", "cat", "sat", "on")[:first_rejection]
            stop_position = np.int64(first_rejection + 1)
            tokens_emitted = np.int64(first_rejection + 1)
            answer_e_n = np.sum(0.6 ** np.arange(4))
            answer_speed = answer_e_n / np.float64(0.020)
            answer_speedup = answer_speed * np.float64(0.012)
            """,
        # The closed form, with the limit at a = 1 handled separately.
        "speculative_speed": """
            e_n = np.float64(k + 1) if a == 1 else (1 - np.power(a, k + 1)) / (1 - a)
            speed = e_n / np.add(t_verify, np.multiply(k, t_draft))
            return np.array([e_n, speed, speed / (1 / t_target)])
            """,
    },
    # The natural vectorized simulation: all tokens, then all tests (the batched order).
    "variant-vectorized-batched": {
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
            rng = np.random.default_rng(seed)
            tokens = rng.choice(len(q), size=trials, p=q)
            u = rng.random(trials)
            return np.mean(u < np.minimum(1.0, p[tokens] / q[tokens]))
            """,
    },
    "variant-python-loops-and-lists": {
        "part1_answers": """
            answer_1 = 0.25
            answer_2 = 1
            answer_3 = 0.6
            """,
        "accept_prob": """
            if q <= 0 or q != q:  # q != q only for NaN
                raise ValueError("bad q")
            ratio = p / q
            if ratio >= 1:
                return 1
            return ratio
            """,
        "overall_acceptance": """
            if len(p) != len(q):
                raise ValueError("lengths differ")
            total = 0.0
            for i in range(len(p)):
                if p[i] < q[i]:
                    total += p[i]
                else:
                    total += q[i]
            return total
            """,
        "propose_and_test": """
            token = int(rng.choice(len(q), p=list(q)))
            u = float(rng.random())
            accepted = u < accept_prob(float(p[token]), float(q[token]))
            return [token, accepted]
            """,
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be positive")
            rng = np.random.default_rng(seed)
            outcomes = []
            for _ in range(trials):
                outcomes.append(propose_and_test(p, q, rng)[1])
            return outcomes.count(True) / len(outcomes)
            """,
        "check_understanding": """
            choice = "b"
            """,
        "one_pass_answers": """
            accepted_tokens = []
            for token, q_i, p_i, r_i in [("the", 0.2, 0.8, 0.5), ("cat", 0.5, 0.3, 0.45),
                                         ("sat", 0.8, 0.2, 0.4), ("on", 0.3, 0.9, 0.1)]:
                if r_i < min(1, p_i / q_i):
                    accepted_tokens.append(token)
                else:
                    break
            stop_position = len(accepted_tokens) + 1 if len(accepted_tokens) < 4 else None
            tokens_emitted = len(accepted_tokens) + 1
            answer_e_n = 2.176
            answer_speed = 108.8
            answer_speedup = 1.3056
            """,
        "speculative_speed": """
            total = 0
            term = 1
            for _ in range(k + 1):
                total += term
                term *= a
            return [total, total / (t_verify + k * t_draft), total * t_target / (t_verify + k * t_draft)]
            """,
    },
    # Correct, but numpy writes "RuntimeWarning: divide by zero" when q == 0.
    "variant-runtime-warning": {
        "accept_prob": """
            ratio = np.float64(p) / np.float64(q)
            if not q > 0:
                raise ValueError(f"q must be > 0, got {q}")
            return min(1.0, float(ratio))
            """,
    },

    # --- common mistakes -------------------------------------------------------------
    # Wrong accept_prob only: propose_and_test calls it, but its tests substitute the
    # reference, so only accept_prob's own cells lose points (no cascade).
    "mistake-raw-target-probability": {
        "accept_prob": """
            if not q > 0:
                raise ValueError("q must be > 0")
            return p
            """,
    },
    # The same mistake inside propose_and_test: empirical_acceptance keeps its points.
    "mistake-raw-target-probability-inline": {
        "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return token, bool(rng.random() < p[token])
            """,
    },
    "mistake-inverted-ratio": {
        "accept_prob": """
            if not q > 0:
                raise ValueError("q must be > 0")
            return min(1.0, q / p)
            """,
    },
    "mistake-no-cap": {
        "accept_prob": """
            if not q > 0:
                raise ValueError("q must be > 0")
            return p / q
            """,
    },
    "mistake-no-input-checks": {
        "accept_prob": """
            return min(1.0, p / q)
            """,
        "overall_acceptance": """
            return sum(min(a, b) for a, b in zip(p, q))
            """,
        "empirical_acceptance": """
            rng = np.random.default_rng(seed)
            accepted = sum(propose_and_test(p, q, rng)[1] for _ in range(trials))
            return accepted / trials
            """,
    },
    "mistake-draw-from-p": {
        "propose_and_test": """
            token = int(rng.choice(len(p), p=p))
            return token, bool(rng.random() < accept_prob(p[token], q[token]))
            """,
    },
    "mistake-count-not-fraction": {
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            rng = np.random.default_rng(seed)
            accepted = 0
            for _ in range(trials):
                accepted += propose_and_test(p, q, rng)[1]
            return accepted
            """,
    },
    "mistake-reseeded-generator": {
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            accepted = 0
            for _ in range(trials):
                rng = np.random.default_rng(seed)
                accepted += propose_and_test(p, q, rng)[1]
            return accepted / trials
            """,
    },
    "mistake-global-rng": {
        "propose_and_test": """
            token = np.random.choice(len(q), p=q)
            return token, np.random.random() < accept_prob(p[token], q[token])
            """,
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            np.random.seed(seed)
            accepted = 0
            for _ in range(trials):
                accepted += propose_and_test(p, q, np.random)[1]
            return accepted / trials
            """,
    },
    # <= keeps a token with p = 0 when u is exactly 0: only the disjoint-supports cell.
    "mistake-less-or-equal": {
        "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return token, bool(rng.random() <= accept_prob(p[token], q[token]))
            """,
    },
    # Not a simulation: the formula the function exists to check, rounded to a fraction.
    "mistake-formula-not-simulation": {
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            return round(overall_acceptance(p, q) * trials) / trials
            """,
    },
    # A coin flip with the formula's probability: seeded and random, but it checks nothing.
    "mistake-coin-flip-with-formula": {
        "empirical_acceptance": """
            if trials < 1:
                raise ValueError("trials must be at least 1")
            rng = np.random.default_rng(seed)
            return np.mean(rng.random(trials) < np.minimum(p, q).sum())
            """,
    },
    # Part 3: verification goes on after the rejection (emitted count follows from it).
    "mistake-keeps-tokens-after-rejection": {
        "one_pass_answers": """
            accepted_tokens = ["the", "cat", "on"]
            stop_position = 3
            tokens_emitted = 4
            answer_e_n = 2.176
            answer_speed = 108.8
            answer_speedup = 1.3056
            """,
    },
    # Part 3: the pass's own token from the target is left out, in answers and function.
    "mistake-forgets-target-token": {
        "one_pass_answers": """
            accepted_tokens = ["the", "cat"]
            stop_position = 3
            tokens_emitted = 2
            answer_e_n = 0.6 + 0.6**2 + 0.6**3
            answer_speed = answer_e_n / 0.020
            answer_speedup = answer_speed * 0.012
            """,
        "speculative_speed": """
            e_n = sum(a**i for i in range(1, k + 1))
            speed = e_n / (t_verify + k * t_draft)
            return e_n, speed, speed * t_target
            """,
    },
    # Part 3: E[N] = k + 1 as if every drafted token passed.
    "mistake-k-plus-one": {
        "one_pass_answers": """
            accepted_tokens = ["the", "cat"]
            stop_position = 3
            tokens_emitted = 3
            answer_e_n = 4
            answer_speed = answer_e_n / 0.020
            answer_speedup = answer_speed * 0.012
            """,
        "speculative_speed": """
            e_n = k + 1
            speed = e_n / (t_verify + k * t_draft)
            return e_n, speed, speed * t_target
            """,
    },
    # Part 3: the speed without the draft steps' time.
    "mistake-no-draft-cost": {
        "one_pass_answers": """
            accepted_tokens = ["the", "cat"]
            stop_position = 3
            tokens_emitted = 3
            answer_e_n = 2.176
            answer_speed = answer_e_n / 0.014
            answer_speedup = answer_speed * 0.012
            """,
        "speculative_speed": """
            e_n = sum(a**i for i in range(k + 1))
            speed = e_n / t_verify
            return e_n, speed, speed * t_target
            """,
    },
    # Part 3: the closed form with no case for a = 1 (ZeroDivisionError there).
    "mistake-closed-form-at-a-equal-to-one": {
        "speculative_speed": """
            e_n = (1 - a ** (k + 1)) / (1 - a)
            speed = e_n / (t_verify + k * t_draft)
            return e_n, speed, speed * t_target
            """,
    },
    "mistake-imports-reference": {
        "accept_prob": """
            from specdec_reference import accept_prob as reference_accept_prob

            return reference_accept_prob(p, q)
            """,
    },
    "mistake-by-hand-answers": {
        "part1_answers": """
            answer_1 = 0.15  # the raw target probability
            answer_2 = 1.5  # p / q without the cap
            answer_3 = 1.4  # the sum of max(p, q)
            """,
        "check_understanding": """
            choice = "A"
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
