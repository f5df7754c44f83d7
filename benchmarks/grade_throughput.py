"""Grading throughput: plain serial `nbgrader autograde` against `specdec-course grade`.

Grades the same N submissions (copies of lesson E7.2's reference solution, N = 24 by
default) both ways, in one run, each in its own fresh course, and prints both times and
the ratio.  It also executes the same notebook once with a bare nbclient, the floor that
any grader pays per submission, and compares the grader's per-submission time with it:
once with one worker (nothing else running, like the bare run) and once in the parallel run.

With ``--cluster local:2`` it also grades the same N submissions on a Dask LocalCluster
(two one-thread worker processes) and prints Dask's overhead per submission against the
local pool, the cluster's start-up time, and the bytes a worker sends back per submission.
With ``--only-cluster`` it skips plain nbgrader and the one-worker run.

    .venv/bin/python benchmarks/grade_throughput.py [--n 24] [--workers 2] [--no-sandbox]
        [--cluster local:2 [--only-cluster]]

This is a benchmark, not a test: it asserts nothing.  Numbers go in the README.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU: dict[str, float] = {}  #: busy CPU seconds of the whole machine during each timed run
ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests"


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy so far (Linux ``/proc/stat``)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def new_course(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "source" / ASSIGNMENT, root / "source" / ASSIGNMENT)
    return root


def plain_nbgrader(work: Path, n: int, submission: Path) -> float:
    course = new_course(work / "plain")
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(
        [nbgrader, "generate_assignment", ASSIGNMENT],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    for i in range(n):
        folder = course / "submitted" / f"s{i:03d}" / ASSIGNMENT
        folder.mkdir(parents=True)
        shutil.copy2(submission, folder / f"{NOTEBOOK}.ipynb")
    start, cpu = time.perf_counter(), busy_cpu_seconds()
    subprocess.run(
        [nbgrader, "autograde", ASSIGNMENT], cwd=course, env=env, check=True, capture_output=True
    )
    CPU["plain"] = busy_cpu_seconds() - cpu
    return time.perf_counter() - start


def ours(
    work: Path,
    n: int,
    submission: Path,
    workers: int,
    sandbox: bool,
    name: str = "ours",
    cluster: str | None = None,
) -> tuple[float, list]:
    from autograder.grade import grade
    from autograder.grading.template import build_template, sync_gradebook

    course = new_course(work / name)
    # one-off per assignment, like plain nbgrader's generate_assignment (not timed either)
    _, template_hash = build_template(course, ASSIGNMENT)
    sync_gradebook(course, ASSIGNMENT, template_hash)
    subs = work / f"{name}-subs"
    subs.mkdir()
    for i in range(n):
        shutil.copy2(submission, subs / f"s{i:03d}.ipynb")
    start, cpu = time.perf_counter(), busy_cpu_seconds()
    result = grade(
        ASSIGNMENT,
        submissions=subs,
        course=course,
        workers=workers,
        sandbox=sandbox,
        cluster=cluster,
    )
    elapsed = time.perf_counter() - start
    CPU[name] = busy_cpu_seconds() - cpu
    scores = {r.score for r in result.results.values()}
    assert len(result.results) == n and len(scores) == 1, "every copy must get the same score"
    if cluster:  # what each worker sent back: the result and the executed notebook
        sizes = [
            len(path.read_bytes())
            for path in [*course.glob("autograded/*/*/*.ipynb"), *result.reports.glob("results/*")]
        ]
        CPU["result_bytes"] = sum(sizes) / n
    return elapsed, [r.seconds for r in result.results.values()]


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) that process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_start(spec: str, idle: float = 20.0) -> float:
    """Seconds to start and connect to the LocalCluster ``spec``.

    Then, for ``idle`` seconds with no job, the CPU that each worker process and this
    process (client and scheduler) use: Dask's own cost while a job runs.
    """
    from autograder.grading.cluster_pool import DaskEngine

    start = time.perf_counter()
    with DaskEngine.connect(cluster=spec) as engine:
        up = time.perf_counter() - start
        pids = list(engine.client.run(os.getpid).values())
        time.sleep(2)  # past the start-up
        before, mine, t0 = [process_cpu(p) for p in pids], time.process_time(), time.perf_counter()
        time.sleep(idle)
        elapsed = time.perf_counter() - t0
        workers = [(process_cpu(p) - b) / elapsed for p, b in zip(pids, before, strict=True)]
        CPU["idle_workers"] = statistics.mean(workers)
        CPU["idle_parent"] = (time.process_time() - mine) / elapsed
    return up


def bare_nbclient(work: Path, repeats: int) -> float:
    """Execute the autograded form of the notebook (hidden tests included) with nbclient."""
    import nbformat
    from nbclient import NotebookClient

    from autograder.grading.template import build_template

    course = new_course(work / "bare")
    template, _ = build_template(course, ASSIGNMENT)
    nb_path = template / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    times = []
    for _ in range(repeats):
        nb = nbformat.read(nb_path, as_version=4)
        start = time.perf_counter()
        NotebookClient(
            nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(work)}}
        ).execute()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--cluster", help="also grade on a Dask LocalCluster: local:N")
    parser.add_argument("--only-cluster", action="store_true", help="skip plain nbgrader")
    args = parser.parse_args()
    if args.only_cluster and not args.cluster:
        parser.error("--only-cluster needs --cluster")
    submission = REPO / "tests/files" / ASSIGNMENT / "submissions/reference.ipynb"
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        work = Path(tmp)
        sandbox = not args.no_sandbox
        if args.cluster:
            start_up = cluster_start(args.cluster)
            on_dask, dask_jobs = ours(
                work, args.n, submission, args.workers, sandbox, "dask", args.cluster
            )
        mine, per_job = ours(work, args.n, submission, args.workers, sandbox)
        if args.cluster:
            print_cluster(args, start_up, on_dask, dask_jobs, mine, per_job)
        if args.only_cluster:
            return
        bare = bare_nbclient(work, repeats=3)
        plain = plain_nbgrader(work, args.n, submission)
        # one submission at a time, as bare nbclient ran: a worker's latency per submission
        _, alone = ours(work, 5, submission, 1, sandbox, name="alone")
    per_sub = statistics.median(per_job)
    per_sub_alone = statistics.median(alone)
    print(
        f"submissions: {args.n}   workers: {args.workers}   "
        f"sandbox: {'off' if args.no_sandbox else 'on'}   cores: {os.cpu_count()}"
    )
    print(f"bare nbclient, one notebook (median of 3):  {bare:7.2f} s")
    print(
        f"plain nbgrader autograde (serial):          {plain:7.2f} s  "
        f"({args.n / plain * 60:6.1f} submissions/min)"
    )
    print(
        f"specdec-course grade:                       {mine:7.2f} s  "
        f"({args.n / mine * 60:6.1f} submissions/min)"
    )
    print(f"throughput ratio (ours / plain):            {plain / mine:7.2f}x")
    print(
        f"CPU per submission (all processes):         plain {CPU['plain'] / args.n:.2f} s, "
        f"ours {CPU['ours'] / args.n:.2f} s  (cores busy: plain {CPU['plain'] / plain:.2f}, "
        f"ours {CPU['ours'] / mine:.2f} of {os.cpu_count()})"
    )
    print(
        f"per-submission time, 1 worker (median of 5):{per_sub_alone:7.2f} s  "
        f"= {per_sub_alone / bare:.2f}x bare nbclient"
    )
    print(
        f"per-submission time, {args.workers} workers busy (median): {per_sub:5.2f} s  "
        f"= {per_sub / bare:.2f}x bare nbclient (they share the cores)"
    )


def print_cluster(args, start_up: float, on_dask: float, dask_jobs, local: float, local_jobs):
    """Dask's LocalCluster against the local pool, on the same submissions."""
    n = args.n
    print(f"submissions: {n}   local pool: {args.workers} workers   Dask: {args.cluster}")
    print(f"local pool:                   {local:7.2f} s  ({n / local * 60:6.1f}/min)")
    print(
        f"Dask {args.cluster}:               {on_dask:7.2f} s  ({n / on_dask * 60:6.1f}/min)"
        f", of which cluster start-up {start_up:.2f} s (measured alone)"
    )
    print(
        f"overhead per submission:      {(on_dask - local) / n:+.3f} s wall (start-up "
        f"included), {(on_dask - start_up - local) / n:+.3f} s without it"
    )
    print(
        f"CPU per submission:           local {CPU['ours'] / n:.2f} s, "
        f"Dask {CPU['dask'] / n:.2f} s (start-up included)"
    )
    print(
        f"worker time per submission (median): local {statistics.median(local_jobs):.2f} s, "
        f"Dask {statistics.median(dask_jobs):.2f} s"
    )
    print(f"bytes back per submission:    {CPU['result_bytes'] / 1024:.1f} KiB")
    print(
        f"Dask's own CPU, no job running: {CPU['idle_workers'] * 100:.1f}% of a core per worker, "
        f"{CPU['idle_parent'] * 100:.1f}% for the client and scheduler (this process)"
    )


if __name__ == "__main__":
    main()
