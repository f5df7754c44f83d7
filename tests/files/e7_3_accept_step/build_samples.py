"""Regenerate the sample submissions of lesson E7.3 from the release notebook.

Each scenario is a learner notebook: the release notebook with the stub of some solution
cells (``# YOUR CODE HERE`` / ``raise NotImplementedError()``) replaced by code.  The
``reference`` scenario uses the source notebook's own solutions, ``blank`` is the release
unchanged, and every other scenario starts from the reference and replaces the cells
listed below.  ``expected.json`` beside this script gives each scenario's expected score
on every test cell.

Usage (from the repository root)::

    python tests/files/e7_3_accept_step/build_samples.py            # write
    python tests/files/e7_3_accept_step/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
ASSIGNMENT = "e7_3_accept_step"
NOTEBOOK = "accept_step.ipynb"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

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
            max_tokens_k4 = 4 + 1
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
            max_tokens_k4 = np.int32(5)
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
