"""What one lesson costs to grade, and what it costs the kernel tier of ``make test``.

Usage: ``.venv/bin/python benchmarks/lesson_cost.py [--lessons e7_5,e7_6] [--both]``.
For each lesson, in a fresh course holding that lesson alone, it times the two gradings
the suite's session fixtures do for every lesson (``tests/conftest.py``):

* ``release``: the release generated, without the self-check, as the ``releases`` fixture
  does (the lesson's ``reference`` and ``blank`` samples prove full marks and zero);
* ``samples``: every sample in ``tests/files/<lesson>/submissions`` graded with 2 workers,
  forked, feedback pages written, as the ``graded_lessons`` fixture does.

With ``--both`` it grades the samples a second time in a course whose source has its
demonstration marks taken out (every cell run, as a lesson without marks is graded), prints
both times and their ratio, and checks that every sample scores the same in every cell.

A lesson's other costs are single tests, which ``--durations`` shows: its browser test
(``tests/test_browser.py``), its Run all (``tests/test_lessons_run.py``, timed by
``benchmarks/run_all.py``) and its in-process hidden-test tests (the fast tier).

This is a benchmark, not a test: it asserts nothing.  The suite's figures are in
``docs/testing.md``, the ``--both`` table in ``docs/performance.md``.
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


def unmarked_source(lesson: str, scratch: Path) -> Path:
    """A copy of ``lesson``'s source folder with every demonstration mark taken out."""
    import nbformat

    from autograder.demonstrations import DEMO_TAG

    folder = scratch / "unmarked" / lesson
    folder.mkdir(parents=True)
    for path in (REPO / "source" / lesson).glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            tags = cell.metadata.get("tags")
            if tags and DEMO_TAG in tags:
                cell.metadata["tags"] = [t for t in tags if t != DEMO_TAG]
        nbformat.write(nb, folder / path.name)
    return folder


def cost(lesson: str, scratch: Path, source: Path | None = None) -> tuple[float, float, dict]:
    """(seconds to release, seconds to grade the samples, {student: {cell: score}})."""
    from autograder.grade import grade
    from autograder.release import release

    course = new_course(scratch / "course", {lesson: source or REPO / "source" / lesson})
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
    scores = {s: {c.grade_id: c.score for c in r.cells} for s, r in graded.results.items()}
    return released, time.perf_counter() - started, scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="", help="comma-separated prefixes, e.g. e7_5")
    parser.add_argument(
        "--both", action="store_true", help="also grade with the demonstration marks taken out"
    )
    args = parser.parse_args(argv)
    wanted = [p for p in args.lessons.split(",") if p]
    rows = []
    for lesson in [a for a in assignments(REPO) if not wanted or a.startswith(tuple(wanted))]:
        with tempfile.TemporaryDirectory(prefix="lesson-cost-") as scratch:
            released, graded, scores = cost(lesson, Path(scratch) / "marked")
            n = len(scores)
            print(
                f"{lesson}: release {released:.1f} s; {n} samples graded "
                f"in {graded:.1f} s ({graded / n:.2f} s each); {released + graded:.1f} s in all",
                flush=True,
            )
            if args.both:
                source = unmarked_source(lesson, Path(scratch))
                _, every, every_scores = cost(lesson, Path(scratch) / "unmarked-course", source)
                differ = sorted(
                    f"{s} {gid}"
                    for s, cells in scores.items()
                    for gid, score in cells.items()
                    if every_scores.get(s, {}).get(gid) != score
                )
                print(
                    f"{lesson}: every cell run: {every:.1f} s ({every / n:.2f} s each); "
                    f"demonstrations skipped: {graded:.1f} s ({graded / n:.2f} s each), "
                    f"{every / graded:.2f}x faster; cells scored differently: "
                    f"{', '.join(differ) or 'none'}",
                    flush=True,
                )
                rows.append((lesson, n, every, graded))
    if rows:
        print(
            "\n| lesson | samples | every cell run (s a sample) | demonstrations skipped "
            "(s a sample) | faster |"
        )
        print("| --- | ---: | ---: | ---: | ---: |")
        for lesson, n, every, graded in rows:
            print(
                f"| {lesson} | {n} | {every / n:.2f} | {graded / n:.2f} | {every / graded:.2f}x |"
            )
        n = sum(r[1] for r in rows)
        every, graded = sum(r[2] for r in rows), sum(r[3] for r in rows)
        print(f"| all | {n} | {every / n:.2f} | {graded / n:.2f} | {every / graded:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
