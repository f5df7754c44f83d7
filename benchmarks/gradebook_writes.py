"""What the instructor's ``grade`` process can record per second, whatever the workers do.

Every finished submission is recorded by the one ``grade`` process: its gradebook rows
(nbgrader's ``Gradebook``), its results JSON, its autograded notebook and its feedback
page.  That serial step bounds a run however many workers grade.  This benchmark grades
one copy of lesson E7.2's reference solution, then records that result again under N
new student ids (N = 200 by default) into a sqlite gradebook and, with ``--postgres``,
into a PostgreSQL one (a real server started on 127.0.0.1 for the run, as the tests do),
and prints records per second with and without the feedback page.

    .venv/bin/python benchmarks/gradebook_writes.py [--n 200] [--postgres]

This is a benchmark, not a test: it asserts nothing.  Numbers go in the README.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests"


def new_course(root: Path, db_url: str | None) -> Path:
    root.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", root)
    if db_url:
        with open(root / "nbgrader_config.py", "a", encoding="utf-8") as fh:
            fh.write(f"\nc.CourseDirectory.db_url = {db_url!r}\n")
    shutil.copytree(REPO / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    return root


def measure(work: Path, name: str, n: int, db_url: str | None) -> tuple[list, list, int]:
    """(wall, CPU) seconds per record, and per record plus feedback page, over ``n`` students.

    The CPU time is this process's alone (a PostgreSQL server's own work is not in it).
    """
    from autograder.course import db_url as course_db_url
    from autograder.course import load_config
    from autograder.grade import grade
    from autograder.grading.gradebook import OpenGradebook
    from autograder.grading.template import template_test_cells
    from autograder.record.store import record
    from autograder.render.feedback_page import write_pages

    course = new_course(work / name, db_url)
    subs = work / f"{name}-subs"
    subs.mkdir()
    shutil.copy2(
        REPO / "tests/files" / ASSIGNMENT / "submissions/reference.ipynb", subs / "a.ipynb"
    )
    done = grade(ASSIGNMENT, submissions=subs, course=course, workers=1)
    first = done.results["a"]
    first.autograded = (course / "autograded/a" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()
    config = load_config(course)
    template = next((course / ".scratch" / "templates").iterdir())
    cells = template_test_cells(template, ASSIGNMENT, NOTEBOOK)
    results_dir = done.reports / "results"
    timings = []
    for with_page in (False, True):
        start, cpu = time.perf_counter(), time.process_time()
        with OpenGradebook(course_db_url(course, config), config) as books:  # as grade keeps it
            for i in range(n):
                result = copy.deepcopy(first)
                result.student = f"{'p' if with_page else 'r'}{i:05d}"
                record(course, config, NOTEBOOK, cells, result, results_dir, books=books)
                if with_page:
                    write_pages(course, ASSIGNMENT, student=result.student)
        timings.append(((time.perf_counter() - start) / n, (time.process_time() - cpu) / n))
    return timings[0], timings[1], len(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--postgres", action="store_true", help="also a PostgreSQL gradebook")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gradebook-") as tmp:
        work = Path(tmp)
        rows = [("sqlite", *measure(work, "sqlite", args.n, None))]
        if args.postgres:
            sys.path.insert(0, str(REPO / "tests"))
            from support.postgres_server import start_postgres

            server = start_postgres()
            try:
                url = server.create_database("gradebook")
                rows.append(("postgresql", *measure(work, "postgres", args.n, url)))
            finally:
                server.stop()
    print(f"records: {args.n} per gradebook (E7.2 reference result, {rows[0][3]} test cells)")
    for name, (plain, plain_cpu), (page, page_cpu), _ in rows:
        print(
            f"{name:10s}  record {plain * 1000:6.1f} ms ({1 / plain:5.1f}/s, CPU "
            f"{plain_cpu * 1000:5.1f} ms)   record + feedback page {page * 1000:6.1f} ms "
            f"({1 / page:5.1f}/s, CPU {page_cpu * 1000:5.1f} ms)"
        )


if __name__ == "__main__":
    main()
