"""How long a learner's Run all of each solved lesson takes, kernel start excluded.

Usage: ``.venv/bin/python benchmarks/run_all.py [--n 3] [--lessons e7_1,e7_4]``.  For each
lesson, runs its reference sample (the release with the reference solutions filled in)
top to bottom in a fresh ``python3`` kernel, N times, and prints the median and range of
the kernel's CPU time and of the wall time against the lessons' goal of 3 s.  CPU time is
what the kernel itself spent, so other processes on a busy machine do not inflate it.

This is a benchmark, not a test: it asserts nothing.  The suite checks that Run all raises
nothing (``tests/test_lessons_run.py``); the figures are in ``docs/testing.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.lessons import run_all  # noqa: E402

from autograder.course import assignments  # noqa: E402

#: Seconds a learner's Run all of a solved lesson should take after the kernel starts.
GOAL = 3.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="runs per lesson (default 3)")
    parser.add_argument("--lessons", default="", help="comma-separated prefixes, e.g. e7_1")
    args = parser.parse_args(argv)
    wanted = [p for p in args.lessons.split(",") if p]
    lessons = [a for a in assignments(REPO) if not wanted or a.startswith(tuple(wanted))]
    for lesson in lessons:
        notebook = REPO / "tests" / "files" / lesson / "submissions" / "reference.ipynb"
        runs = [run_all(notebook) for _ in range(args.n)]
        cpu = [r.cpu_seconds for r in runs]
        wall = [r.wall_seconds for r in runs]
        errors = sorted({e for r in runs for e in r.errors})
        verdict = "within" if statistics.median(cpu) < GOAL else "OVER"
        print(
            f"{lesson}: CPU median {statistics.median(cpu):.2f} s "
            f"({min(cpu):.2f}-{max(cpu):.2f}), wall median {statistics.median(wall):.2f} s "
            f"({min(wall):.2f}-{max(wall):.2f}), {args.n} runs; {verdict} the {GOAL:.0f} s goal"
            + (f"; cells that raised: {errors}" if errors else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
