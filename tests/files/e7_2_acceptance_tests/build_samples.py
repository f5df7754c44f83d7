"""Regenerate the sample submissions of lesson E7.2 from the release notebook.

Each scenario is a learner notebook: the release notebook with the stub of some solution
cells (``# YOUR CODE HERE`` / ``raise NotImplementedError()``) replaced by code.  The
``reference`` scenario uses the source notebook's own solutions, ``blank`` is the release
unchanged, and every other scenario starts from the reference and replaces the cells
listed below.  ``expected.json`` beside this script gives each scenario's expected score
on every test cell.

Usage (from the repository root)::

    python tests/files/e7_2_acceptance_tests/build_samples.py            # write
    python tests/files/e7_2_acceptance_tests/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests.ipynb"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

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


def reference_bodies(source: nbformat.NotebookNode) -> dict[str, str]:
    """Return each source solution cell's code between the solution markers, dedented."""
    bodies = {}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("solution") or cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
        stop = next(i for i, line in enumerate(lines) if line.strip() == END)
        bodies[meta["grade_id"]] = textwrap.dedent("\n".join(lines[start + 1 : stop]))
    return bodies


def fill(cell_source: str, body: str, grade_id: str) -> str:
    """Replace the two stub lines of a release cell by ``body``, at the stub's indentation."""
    lines = cell_source.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == STUB[0] and lines[i + 1].strip() == STUB[1]:
            indent = line[: len(line) - len(line.lstrip())]
            code = textwrap.indent(textwrap.dedent(body).strip("\n"), indent)
            return "\n".join(lines[:i] + code.splitlines() + lines[i + 2 :])
    raise SystemExit(f"no stub in the release cell {grade_id!r}")


def build(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> dict[str, str]:
    """Return {scenario: notebook JSON text}."""
    reference = reference_bodies(source)
    out = {}
    for scenario, overrides in SCENARIOS.items():
        unknown = set(overrides) - set(reference)
        if unknown:
            raise SystemExit(f"{scenario}: no solution cells {sorted(unknown)}")
        nb = nbformat.from_dict(release)
        if scenario != "blank":
            bodies = {**reference, **overrides}
            for cell in nb.cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                if cell.metadata.get("nbgrader", {}).get("solution"):
                    cell.source = fill(cell.source, bodies[grade_id], grade_id)
        text = nbformat.writes(nb)
        out[scenario] = text if text.endswith("\n") else text + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, default=ROOT / "release" / ASSIGNMENT / NOTEBOOK)
    parser.add_argument("--source", type=Path, default=ROOT / "source" / ASSIGNMENT / NOTEBOOK)
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed samples instead of writing them",
    )
    args = parser.parse_args(argv)
    for path, how in ((args.release, "specdec-course release " + ASSIGNMENT), (args.source, "")):
        if not path.is_file():
            hint = f" (generate it with `{how}`)" if how else ""
            print(f"{path} not found{hint}", file=sys.stderr)
            return 2

    samples = build(
        nbformat.read(args.release, as_version=4), nbformat.read(args.source, as_version=4)
    )
    folder = HERE / "submissions"
    if args.check:
        stale = [
            name
            for name, text in samples.items()
            if not (folder / f"{name}.ipynb").is_file()
            or (folder / f"{name}.ipynb").read_text(encoding="utf-8") != text
        ]
        extra = sorted(p.stem for p in folder.glob("*.ipynb") if p.stem not in samples)
        if stale or extra:
            print(
                f"sample submissions out of date: {', '.join(stale + extra)}; run "
                f"python {Path(__file__).relative_to(ROOT)} to regenerate them",
                file=sys.stderr,
            )
            return 1
        print(f"{len(samples)} sample submissions are up to date")
        return 0
    folder.mkdir(exist_ok=True)
    for name, text in samples.items():
        (folder / f"{name}.ipynb").write_text(text, encoding="utf-8")
    print(f"wrote {len(samples)} sample submissions to {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
