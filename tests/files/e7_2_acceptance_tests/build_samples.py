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

            answer_1 = np.float64(0.5) / np.float64(0.8)
            answer_2 = np.minimum(1, 0.5 / 0.25)
            answer_3 = np.minimum([0.5, 0.3, 0.2], [0.25, 0.5, 0.25]).sum()
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
    },
    "variant-python-loops-and-lists": {
        "part1_answers": """
            answer_1 = 0.625
            answer_2 = 1
            answer_3 = 0.75
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
    "variant-less-or-equal": {
        "propose_and_test": """
            token = int(rng.choice(len(q), p=q))
            return token, bool(rng.random() <= accept_prob(p[token], q[token]))
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
    "mistake-imports-reference": {
        "accept_prob": """
            from specdec_reference import accept_prob as reference_accept_prob

            return reference_accept_prob(p, q)
            """,
    },
    "mistake-by-hand-answers": {
        "part1_answers": """
            answer_1 = 0.5  # the raw target probability
            answer_2 = 2.0  # p / q without the cap
            answer_3 = 1.25  # the sum of max(p, q)
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
