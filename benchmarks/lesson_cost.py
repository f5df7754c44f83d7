"""What one lesson costs the kernel tier of ``make test``: its release and its samples.

Usage: ``.venv/bin/python benchmarks/lesson_cost.py [--lessons e7_5,e7_6]``.  For each
lesson, in a fresh course holding that lesson alone, it times the two gradings the
suite's session fixtures do for every lesson (``tests/conftest.py``):

* ``release``: the release generated, without the self-check, as the ``releases`` fixture
  does (the lesson's ``reference`` and ``blank`` samples prove full marks and zero);
* ``samples``: every sample in ``tests/files/<lesson>/submissions`` graded with 2 workers,
  forked, feedback pages written, as the ``graded_lessons`` fixture does.

A lesson's other costs are single tests, which ``--durations`` shows: its browser test
(``tests/test_browser.py``), its Run all (``tests/test_lessons_run.py``, timed by
``benchmarks/run_all.py``) and its in-process hidden-test tests (the fast tier).

This is a benchmark, not a test: it asserts nothing.  The figures are in
``docs/testing.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.course import new_course, sandbox_available  # noqa: E402

from autograder.course import assignments  # noqa: E402


def cost(lesson: str, scratch: Path) -> tuple[float, float, int]:
    """(seconds to release, seconds to grade the samples, samples)."""
    from autograder.grade import grade
    from autograder.release import release

    course = new_course(scratch / "course", {lesson: REPO / "source" / lesson})
    started = time.perf_counter()
    release(course=course, all=True, check=False)
    released = time.perf_counter() - started
    started = time.perf_counter()
    graded = grade(
        lesson,
        submissions=REPO / "tests" / "files" / lesson / "submissions",
        course=course,
        workers=2,
        sandbox=sandbox_available(),
    )
    return released, time.perf_counter() - started, len(graded.results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="", help="comma-separated prefixes, e.g. e7_5")
    args = parser.parse_args(argv)
    wanted = [p for p in args.lessons.split(",") if p]
    for lesson in [a for a in assignments(REPO) if not wanted or a.startswith(tuple(wanted))]:
        with tempfile.TemporaryDirectory(prefix="lesson-cost-") as scratch:
            released, graded, n = cost(lesson, Path(scratch))
        print(
            f"{lesson}: release {released:.1f} s; {n} samples graded "
            f"in {graded:.1f} s ({graded / n:.2f} s each); {released + graded:.1f} s in all",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
