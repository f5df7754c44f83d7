"""Build a lesson's sample submissions from its release notebook: the engine every lesson uses.

A lesson keeps its samples in ``tests/files/<assignment>/``: ``build_samples.py`` (its
scenarios), ``submissions/<scenario>.ipynb`` (what this module writes) and
``expected.json`` (each scenario's expected score on every test cell, checked by
``tests/test_lessons.py`` through the real grader).

Each scenario is a learner notebook: the release notebook with the stub of some
solution cells (``# YOUR CODE HERE`` / ``raise NotImplementedError()``) replaced by
code.  The ``reference`` scenario uses the source notebook's own solutions, ``blank``
is the release unchanged, and every other scenario starts from the reference and
replaces the cells it lists.

API
---
``reference_bodies(source_nb) -> {grade_id: body}``
    The code between the solution markers of each solution cell, dedented.
``fill(cell_source, body, grade_id) -> str``
    A release cell with its two stub lines replaced by ``body``.
``build(release_nb, source_nb, scenarios) -> {scenario: notebook JSON text}``
    Every scenario's notebook, as written to ``submissions/``.
``main(folder, scenarios, argv=None) -> int``
    The command line of a lesson's ``build_samples.py``: write the samples, or with
    ``--check`` exit 1 if a committed sample is stale; exit 2 if the release or the
    source notebook is missing (with the command that generates the release).

A new lesson's ``build_samples.py`` holds only its scenarios and this ending (the
assignment is the folder's name, the notebook the one in ``source/<assignment>/``)::

    SCENARIOS = {"reference": {}, "blank": {}, "mistake-...": {"grade_id": "body"}}

    if __name__ == "__main__":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files
        from sample_builder import main

        sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

#: Solution bodies by scenario and grade_id: what a learner types in place of the stub,
#: without the indentation of the cell (it is added when the body is inserted).
Scenarios = Mapping[str, Mapping[str, str]]


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


#: What every sample but ``blank`` writes in a written-answer cell (graded by hand: the
#: grader leaves it waiting for a person, whatever it says), unless its scenario says.
WRITTEN_ANSWER = "A learner's written answer, for a grader to score by hand."


def written_answers(source: nbformat.NotebookNode) -> dict[str, str]:
    """``grade_id -> WRITTEN_ANSWER`` for each written-answer (Markdown solution) cell."""
    return {
        cell.metadata["nbgrader"]["grade_id"]: WRITTEN_ANSWER
        for cell in source.cells
        if cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution")
    }


def build(
    release: nbformat.NotebookNode, source: nbformat.NotebookNode, scenarios: Scenarios
) -> dict[str, str]:
    """Return {scenario: notebook JSON text}."""
    reference = reference_bodies(source)
    written = written_answers(source)
    out = {}
    for scenario, overrides in scenarios.items():
        unknown = set(overrides) - set(reference) - set(written)
        if unknown:
            raise SystemExit(f"{scenario}: no solution cells {sorted(unknown)}")
        nb = nbformat.from_dict(release)
        if scenario != "blank":
            bodies = {**reference, **overrides}
            for cell in nb.cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                if not cell.metadata.get("nbgrader", {}).get("solution"):
                    continue
                if grade_id in written:
                    cell.source = overrides.get(grade_id, written[grade_id])
                else:
                    cell.source = fill(cell.source, bodies[grade_id], grade_id)
        text = nbformat.writes(nb)
        out[scenario] = text if text.endswith("\n") else text + "\n"
    return out


def _notebook_name(assignment: str) -> str:
    """The file name of the lesson's one notebook in ``source/<assignment>/``."""
    found = sorted((ROOT / "source" / assignment).glob("*.ipynb"))
    return found[0].name if len(found) == 1 else f"{assignment}.ipynb"


def main(folder: Path, scenarios: Scenarios, argv: list[str] | None = None) -> int:
    """Write (or ``--check``) the sample submissions in ``folder``; return the exit code."""
    assignment = folder.name
    notebook = _notebook_name(assignment)
    parser = argparse.ArgumentParser(
        description=f"Regenerate the sample submissions of {assignment} from its release."
    )
    parser.add_argument("--release", type=Path, default=ROOT / "release" / assignment / notebook)
    parser.add_argument("--source", type=Path, default=ROOT / "source" / assignment / notebook)
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed samples instead of writing them",
    )
    args = parser.parse_args(argv)
    for path, how in ((args.release, "specdec-course release " + assignment), (args.source, "")):
        if not path.is_file():
            hint = f" (generate it with `{how}`)" if how else ""
            print(f"{path} not found{hint}", file=sys.stderr)
            return 2

    samples = build(
        nbformat.read(args.release, as_version=4),
        nbformat.read(args.source, as_version=4),
        scenarios,
    )
    target = folder / "submissions"
    if args.check:
        stale = [
            name
            for name, text in samples.items()
            if not (target / f"{name}.ipynb").is_file()
            or (target / f"{name}.ipynb").read_text(encoding="utf-8") != text
        ]
        extra = sorted(p.stem for p in target.glob("*.ipynb") if p.stem not in samples)
        if stale or extra:
            print(
                f"sample submissions out of date: {', '.join(stale + extra)}; run "
                f"python {(folder / 'build_samples.py').relative_to(ROOT)} to regenerate them",
                file=sys.stderr,
            )
            return 1
        print(f"{len(samples)} sample submissions are up to date")
        return 0
    target.mkdir(exist_ok=True)
    for name, text in samples.items():
        (target / f"{name}.ipynb").write_text(text, encoding="utf-8")
    print(f"wrote {len(samples)} sample submissions to {target.relative_to(ROOT)}")
    return 0
