"""How fast the instructor's ``grade`` process takes in a class when the workers cost nothing.

On a cluster, workers grade in parallel, but one ``grade`` process collects the class
and records every result: the gradebook rows, the results JSON, the autograded notebook
and the feedback page.  This benchmark grades N copies of lesson E7.2's reference
solution with a job function that returns a full-marks result at once (the submitted
notebook standing in for the executed one), so what it times is that one process:

* **collect**: reading the class folder (``autograder.intake.collect.collect_class``);
* **run**: the whole ``grade`` call (collect, plan, ``submitted/``, recording, feedback
  pages, the CSVs), and the rate N / run;
* **peak memory**: the peak resident set of the process that ran ``grade``.

Each configuration runs in a process of its own, so its peak is its own.  With
``--postgres`` the gradebook is also a PostgreSQL one, on a server started on 127.0.0.1
for the run, as the tests start theirs.

    .venv/bin/python benchmarks/record_rate.py [--n 1000 10000] [--postgres]

This is a benchmark, not a test: it asserts nothing.  The figures are in
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests"
REFERENCE = REPO / "tests/files" / ASSIGNMENT / "submissions/reference.ipynb"


def full_marks(job, test_cells: dict[str, float]):
    """A worker's job that grades nothing: every test cell (``grade_id -> points``, read
    once by the parent) passed, at once."""
    from autograder.grading.results import CellResult, CellStatus, Status, SubmissionResult

    cells = [
        CellResult(gid, points, points, CellStatus.PASSED) for gid, points in test_cells.items()
    ]
    return SubmissionResult(
        job.student, job.spec.assignment, Status.GRADED, cells=cells, autograded=job.data.decode()
    )


def one_run(work: Path, n: int, db_url: str | None) -> dict:
    """Grade ``n`` copies in a new course under ``work``; the figures of the run."""
    from gradebook_writes import new_course  # the same course: E7.2, this gradebook

    from autograder.grade import Harness, grade
    from autograder.grading.template import template_test_cells
    from autograder.intake.collect import collect_class
    from autograder.release import release

    course = new_course(work / "course", db_url)
    release(ASSIGNMENT, course=course, check=False)
    subs = work / "class"
    subs.mkdir()
    data = REFERENCE.read_bytes()
    for i in range(n):
        (subs / f"s{i:05d}.ipynb").write_bytes(data)
    start = time.perf_counter()
    collected = collect_class(subs, notebook=NOTEBOOK, assignment=ASSIGNMENT)
    collect = time.perf_counter() - start
    assert len(collected.submissions) == n
    del collected
    # the test cells, read from the source (the template copies it) and not built here:
    # the run builds its template, as a first run does
    test_cells = template_test_cells(course, ASSIGNMENT, NOTEBOOK)
    job_fn = functools.partial(full_marks, test_cells=test_cells)
    start = time.perf_counter()
    result = grade(ASSIGNMENT, submissions=subs, course=course, harness=Harness(job_fn=job_fn))
    run = time.perf_counter() - start
    assert len(result.graded_now) == n and all(r.score == 50 for r in result.results.values())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"n": n, "collect": collect, "run": run, "rate": n / run, "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000])
    parser.add_argument("--postgres", action="store_true", help="also a PostgreSQL gradebook")
    parser.add_argument("--child", nargs=2, metavar=("N", "DB_URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one configuration, in this process of its own
        n, url = int(args.child[0]), args.child[1]
        with tempfile.TemporaryDirectory(prefix="bench-record-") as tmp:
            print(json.dumps(one_run(Path(tmp), n, url or None)))
        return
    server = None
    if args.postgres:
        sys.path.insert(0, str(REPO / "tests"))
        from support.postgres_server import start_postgres

        server = start_postgres()
    try:
        for n in args.n:
            for name in ["sqlite", "postgresql"] if server else ["sqlite"]:
                url = server.create_database(f"record_{n}") if name == "postgresql" else ""
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(n), url],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = json.loads(out.stdout.strip().splitlines()[-1])
                print(
                    f"{name:10s} N = {n:6,d}: collect {row['collect']:6.1f} s, grade "
                    f"{row['run']:7.1f} s ({row['rate']:5.1f} submissions/s), peak memory "
                    f"{row['peak_mib']:5.0f} MiB",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
