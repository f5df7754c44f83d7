"""Grading throughput: plain serial `nbgrader autograde` against `specdec-course grade`.

For each lesson (E7.2 and E7.3 by default), grades the same N submissions (copies of its
reference solution, N = 24 by default) three ways in one run, each in its own fresh
course: plain nbgrader, ``specdec-course grade`` (kernels forked from a warm parent) and
``specdec-course grade --no-fork`` (each kernel started fresh), each as its command in a new
process, as an instructor runs it.  It prints each one's
time, throughput against plain nbgrader and CPU per submission (the whole machine's busy
CPU during the run over N); the bare-kernel limit (N bare nbclient runs of the autograded
notebook spread over the CPUs, each paying a kernel start); the per-submission time with
one worker, forked and fresh; and where a forked submission's CPU goes (kernel start,
the cells, ``grade``'s own process, the rest of the worker).

With ``--cluster local:2`` it also grades the same N submissions on a Dask LocalCluster
(two one-thread worker processes) and prints Dask's overhead per submission against the
local pool, the cluster's start-up time, and the bytes a worker sends back per submission.
With ``--only-cluster`` it skips plain nbgrader and the one-worker run.

    .venv/bin/python benchmarks/grade_throughput.py [--n 24] [--workers 2] [--no-sandbox]
        [--lessons e7_2,e7_3] [--repeats 3] [--cluster local:2 [--only-cluster]]

With ``--repeats R`` each of the three gradings runs R times, interleaved, and the figures
are medians (each repeat's own ratio is printed too).

With ``--chapter`` it grades the whole chapter instead: every lesson's samples
(``tests/files/<lesson>/submissions``), E7.1 to E7.6 in one course as one class (each
sample a student), three ways: plain ``nbgrader autograde "*"``; ``specdec-course grade``,
one command per lesson; and ``specdec-course grade`` on the same lessons with their
demonstration marks taken out (every cell run).  It prints each one's time per lesson and
in all, the speed-ups, and every cell whose score differs between them.

    .venv/bin/python benchmarks/grade_throughput.py --chapter [--workers 2]

This is a benchmark, not a test: it asserts nothing.  Numbers go in the README.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU: dict[str, float] = {}  #: busy CPU seconds of the whole machine during each timed run


@dataclass(frozen=True)
class Lesson:
    assignment: str
    notebook: str


LESSONS = {
    "e7_2": Lesson("e7_2_acceptance_tests", "acceptance_tests"),
    "e7_3": Lesson("e7_3_accept_step", "accept_step"),
}
E7_2 = LESSONS["e7_2"]


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy so far (Linux ``/proc/stat``)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def new_course(root: Path, lesson: Lesson) -> Path:
    assignment = lesson.assignment
    root.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "source" / assignment, root / "source" / assignment)
    return root


def plain_nbgrader(work: Path, lesson: Lesson, n: int, submission: Path) -> float:
    course = new_course(work / "plain", lesson)
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(
        [nbgrader, "generate_assignment", lesson.assignment],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    for i in range(n):
        folder = course / "submitted" / f"s{i:03d}" / lesson.assignment
        folder.mkdir(parents=True)
        shutil.copy2(submission, folder / f"{lesson.notebook}.ipynb")
    start, cpu = time.perf_counter(), busy_cpu_seconds()
    subprocess.run(
        [nbgrader, "autograde", lesson.assignment],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
    )
    CPU["plain"] = busy_cpu_seconds() - cpu
    return time.perf_counter() - start


def ours(
    work: Path,
    lesson: Lesson,
    n: int,
    submission: Path,
    workers: int,
    sandbox: bool,
    name: str = "ours",
    cluster: str | None = None,
    fork: bool = True,
) -> tuple[float, list]:
    """Time ``specdec-course grade`` on ``n`` copies of ``submission``: the command itself.

    A new process each time, as an instructor runs it, so each grading pays what every run
    of the command pays (its imports, the worker pool's forkserver, the warm parents), as
    plain ``nbgrader autograde`` pays its own.  ``CPU[name]`` is the machine's busy CPU
    during the run, ``CPU[name + "_parent"]`` the command's own process.  Returns the wall
    time and each submission's grading time (its result's ``seconds``).
    """
    from autograder.grading.record import load_results
    from autograder.grading.template import build_template, sync_gradebook

    course = new_course(work / name, lesson)
    # one-off per assignment, like plain nbgrader's generate_assignment (not timed either)
    _, template_hash = build_template(course, lesson.assignment)
    sync_gradebook(course, lesson.assignment, template_hash)
    subs = work / f"{name}-subs"
    subs.mkdir()
    for i in range(n):
        shutil.copy2(submission, subs / f"s{i:03d}.ipynb")
    command = [str(Path(sys.executable).with_name("specdec-course")), "grade", lesson.assignment]
    command += ["--submissions", str(subs), "--course", str(course), "--workers", str(workers)]
    command += [] if sandbox else ["--no-sandbox"]
    command += [] if fork else ["--no-fork"]
    command += ["--cluster", cluster] if cluster else []
    # Its output goes to a file, not a pipe: the forkserver it leaves behind for a moment
    # holds its stdout, and a pipe would make this wait for that too.
    with tempfile.TemporaryFile() as log:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start, cpu = time.perf_counter(), busy_cpu_seconds()
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
        elapsed = time.perf_counter() - start
        CPU[name] = busy_cpu_seconds() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            log.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{log.read().decode(errors='replace')}")
    CPU[name + "_parent"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results = load_results(course / "reports" / lesson.assignment / "results")
    scores = {r.score for r in results.values()}
    assert len(results) == n and len(scores) == 1, "every copy must get the same score"
    if cluster:  # what each worker sent back: the result and the executed notebook
        sizes = [
            len(path.read_bytes())
            for path in [
                *course.glob("autograded/*/*/*.ipynb"),
                *(course / "reports" / lesson.assignment).glob("results/*"),
            ]
        ]
        CPU["result_bytes"] = sum(sizes) / n
    return elapsed, [r.seconds for r in results.values()]


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


def bare_nbclient(work: Path, lesson: Lesson, repeats: int) -> float:
    """Execute the autograded form of the notebook (hidden tests included) with nbclient."""
    import nbformat
    from nbclient import NotebookClient

    from autograder.grading.template import build_template

    course = new_course(work / "bare", lesson)
    template, _ = build_template(course, lesson.assignment)
    nb_path = template / "source" / lesson.assignment / f"{lesson.notebook}.ipynb"
    times = []
    for _ in range(repeats):
        nb = nbformat.read(nb_path, as_version=4)
        start = time.perf_counter()
        NotebookClient(
            nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(work)}}
        ).execute()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kernel_phases(work: Path, lesson: Lesson, repeats: int = 5) -> dict:
    """CPU seconds of a kernel's start (forked and fresh) and of its notebook's cells.

    Starts ``repeats`` sandboxed kernels each way in one warm-parent holder (as a worker
    does), measuring the whole machine's busy CPU from start to ready (all processes:
    bwrap, tether, the parent's fork, ipykernel's set-up); then executes the autograded
    notebook in a forked kernel and reads that kernel's own CPU time (the cells).
    """
    import asyncio

    import nbformat
    import psutil
    from nbclient import NotebookClient
    from traitlets.config import Config

    from autograder import sandbox
    from autograder.grading.template import build_template

    assignment = lesson.assignment
    course = new_course(work / f"phases-{assignment}", lesson)
    template, _ = build_template(course, assignment)
    job = work / f"phases-{assignment}-job"
    cwd = job / "nb"
    cwd.mkdir(parents=True)
    warm = sandbox.WarmParents()
    out: dict[str, float] = {}

    async def start_stop(holder) -> None:
        km = sandbox.SandboxedKernelManager(kernel_name="python3", job_dir=str(job), warm=holder)
        await km.start_kernel(cwd=str(cwd), env=dict(os.environ))
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        await km.cleanup_resources()

    try:
        asyncio.run(start_stop(warm))  # the warm parent's own start: once per worker
        for name, holder in (("start_forked", warm), ("start_fresh", None)):
            cpu = busy_cpu_seconds()
            for _ in range(repeats):
                asyncio.run(start_stop(holder))
            out[name] = (busy_cpu_seconds() - cpu) / repeats
        nb = nbformat.read(
            template / "source" / assignment / f"{lesson.notebook}.ipynb", as_version=4
        )
        config = Config()
        kernels = sandbox.configure(config, job_dir=job, limits=sandbox.Limits(), warm=warm)
        client = NotebookClient(
            nb,
            config=config,
            kernel_manager_class=sandbox.SandboxedKernelManager,
            kernel_name="python3",
            timeout=60,
            resources={"metadata": {"path": str(cwd)}},
            on_cell_execute=config.Execute.on_cell_execute,
        )
        with client.setup_kernel():
            kernel = psutil.Process(kernels.active()._kernel_pid())
            before = sum(kernel.cpu_times()[:2])
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
            out["cells"] = sum(kernel.cpu_times()[:2]) - before
        sandbox.kill_leftovers(job)
    finally:
        warm.close()
    return out


def bench_lesson(args, work: Path, lesson: Lesson) -> dict:
    """Every figure for one lesson: plain nbgrader, ours forked and fresh, the limits.

    The three gradings are repeated ``args.repeats`` times, interleaved (forked, fresh,
    plain, forked, ...), so that a slow minute of the machine falls on all three alike;
    each figure is the median over the repeats, and ``ratios`` keeps every repeat's own
    plain / forked ratio.
    """
    submission = REPO / "tests/files" / lesson.assignment / "submissions/reference.ipynb"
    sandbox = not args.no_sandbox
    n = args.n
    fig: dict = {"assignment": lesson.assignment}
    walls: dict[str, list[float]] = {"forked": [], "fresh": [], "plain": []}
    cpus: dict[str, list[float]] = {"forked": [], "fresh": [], "plain": []}
    parent_cpus: list[float] = []  # the grade command's own process, per submission
    for r in range(args.repeats):
        here = work / f"repeat-{r}"
        wall, _ = ours(here, lesson, n, submission, args.workers, sandbox, "forked")
        parent_cpus.append(CPU["forked_parent"] / n)
        walls["forked"].append(wall)
        walls["fresh"].append(
            ours(here, lesson, n, submission, args.workers, sandbox, "fresh", fork=False)[0]
        )
        walls["plain"].append(plain_nbgrader(here, lesson, n, submission))
        for key in cpus:
            cpus[key].append(CPU[key] / n)
    for key in walls:
        fig[key] = statistics.median(walls[key])
    fig["cpu"] = {key: statistics.median(values) for key, values in cpus.items()}
    fig["ratios"] = [p / f for p, f in zip(walls["plain"], walls["forked"], strict=True)]
    fig["walls"] = walls
    fig["parent_cpu"] = statistics.median(parent_cpus)
    fig["bare"] = bare_nbclient(work, lesson, repeats=3)
    _, fig["alone_forked"] = ours(work, lesson, 5, submission, 1, sandbox, name="alone-forked")
    _, fig["alone_fresh"] = ours(
        work, lesson, 5, submission, 1, sandbox, name="alone-fresh", fork=False
    )
    if sandbox:
        fig["phases"] = kernel_phases(work, lesson)
    return fig


def report(args, fig: dict) -> None:
    n, cores = args.n, os.cpu_count() or 1
    bare_limit = n * fig["bare"] / min(cores, args.workers)
    print(
        f"== {fig['assignment']}: {n} submissions, {args.workers} workers, "
        f"sandbox {'off' if args.no_sandbox else 'on'}, {cores} cores"
    )
    print(f"bare nbclient, one notebook (median of 3):     {fig['bare']:7.2f} s")
    spread = f"bare-kernel limit ({n} runs over {min(cores, args.workers)} CPUs):"
    print(f"{spread:47s}{bare_limit:7.2f} s")
    for label, key in (
        ("plain nbgrader autograde (serial)", "plain"),
        ("specdec-course grade (forked kernels)", "forked"),
        ("specdec-course grade --no-fork", "fresh"),
    ):
        wall = fig[key]
        print(
            f"{label + ':':46s}{wall:7.2f} s  ({n / wall * 60:6.1f} submissions/min, "
            f"{fig['plain'] / wall:5.2f}x plain, CPU {fig['cpu'][key]:.2f} s/submission)"
        )
    if len(fig["ratios"]) > 1:
        each = ", ".join(f"{r:.2f}x" for r in fig["ratios"])
        print(f"(medians of {len(fig['ratios'])} interleaved repeats; plain / forked: {each})")
        for key in ("plain", "forked", "fresh"):
            seconds = ", ".join(f"{wall:.2f}" for wall in fig["walls"][key])
            print(f"  each repeat's {key}: {seconds} s")
    for label, key in (("forked", "alone_forked"), ("fresh", "alone_fresh")):
        alone = statistics.median(fig[key])
        print(
            f"per-submission time, 1 worker, {label} (median of 5): {alone:5.2f} s "
            f"= {alone / fig['bare']:.2f}x bare nbclient"
        )
    phases = fig.get("phases")
    if phases:
        total = fig["cpu"]["forked"]
        rest = total - fig["parent_cpu"] - phases["start_forked"] - phases["cells"]
        print("where the CPU of one forked submission goes (CPU-s):")
        print(
            f"  kernel start, forked from the warm parent:  {phases['start_forked']:.2f}"
            f"   (a fresh start: {phases['start_fresh']:.2f})"
        )
        print(f"  the notebook's cells in the kernel:         {phases['cells']:.2f}")
        print(
            "  the grade command's own process (imports, intake, feedback, report): "
            f"{fig['parent_cpu']:.2f}"
        )
        print(f"  the rest: worker (nbgrader's passes, nbclient, scratch course): {rest:.2f}")
        print(f"  total (machine busy CPU / submissions):     {total:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument(
        "--lessons", default="e7_2,e7_3", help="comma-separated: e7_2, e7_3 (default both)"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="grade each way this many times, interleaved"
    )
    parser.add_argument("--cluster", help="also grade on a Dask LocalCluster: local:N")
    parser.add_argument("--only-cluster", action="store_true", help="skip plain nbgrader")
    parser.add_argument(
        "--chapter", action="store_true", help="every lesson's samples as one class (see above)"
    )
    args = parser.parse_args()
    if args.chapter:
        with tempfile.TemporaryDirectory(prefix="bench-chapter-") as tmp:
            chapter(args, Path(tmp))
        return
    if args.only_cluster and not args.cluster:
        parser.error("--only-cluster needs --cluster")
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        work = Path(tmp)
        if args.cluster:
            submission = REPO / "tests/files" / E7_2.assignment / "submissions/reference.ipynb"
            sandbox = not args.no_sandbox
            start_up = cluster_start(args.cluster)
            on_dask, dask_jobs = ours(
                work, E7_2, args.n, submission, args.workers, sandbox, "dask", args.cluster
            )
            mine, per_job = ours(work, E7_2, args.n, submission, args.workers, sandbox)
            print_cluster(args, start_up, on_dask, dask_jobs, mine, per_job)
            if args.only_cluster:
                return
        for lesson in args.lessons.split(","):
            report(args, bench_lesson(args, work / lesson, LESSONS[lesson.strip()]))


def chapter_samples() -> dict[str, list[Path]]:
    """Every lesson's samples: ``{assignment: [notebook, ...]}``, the student its stem."""
    from autograder.course import assignments

    return {
        a: sorted((REPO / "tests/files" / a / "submissions").glob("*.ipynb"))
        for a in assignments(REPO)
    }


def notebook_of(assignment: str) -> str:
    return next((REPO / "source" / assignment).glob("*.ipynb")).stem


def plain_chapter(work: Path, samples: dict[str, list[Path]]) -> tuple[float, dict]:
    """``nbgrader autograde "*"`` on every sample: (seconds, {(a, student): {cell: score}})."""
    from nbgrader.api import Gradebook

    from autograder.course import load_config

    course = work / "plain"
    course.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", course)
    for a in samples:
        shutil.copytree(REPO / "source" / a, course / "source" / a)
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = dict(cwd=course, env=env, check=True, capture_output=True)
    subprocess.run([nbgrader, "generate_assignment", "*"], **run)
    for a, paths in samples.items():
        for path in paths:
            folder = course / "submitted" / path.stem / a
            folder.mkdir(parents=True)
            shutil.copy2(path, folder / f"{notebook_of(a)}.ipynb")
    start, cpu = time.perf_counter(), busy_cpu_seconds()
    subprocess.run([nbgrader, "autograde", "*"], **run)
    elapsed = time.perf_counter() - start
    CPU["plain"] = busy_cpu_seconds() - cpu
    tests = {a: set(test_cells(course, a)) for a in samples}
    scores = {}
    load_config(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for a, paths in samples.items():
            for path in paths:
                sub = gb.find_submission_notebook(notebook_of(a), a, path.stem)
                scores[(a, path.stem)] = {
                    g.name: float(g.auto_score or 0) for g in sub.grades if g.name in tests[a]
                }
    return elapsed, scores


def test_cells(course: Path, assignment: str) -> dict[str, float]:
    from autograder.cells import is_test_cell, nbgrader_meta

    nb = json.loads(
        (course / "source" / assignment / f"{notebook_of(assignment)}.ipynb").read_text()
    )
    return {
        nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0))
        for c in nb["cells"]
        if is_test_cell(c)
    }


def ours_chapter(
    work: Path,
    samples: dict[str, list[Path]],
    workers: int,
    sandbox: bool,
    name: str,
    marked: bool = True,
) -> tuple[dict[str, float], dict]:
    """``specdec-course grade`` per lesson on every sample, in one course: ({lesson:
    seconds}, {(a, student): {cell: score}}).  ``marked=False``: the lessons' sources with
    their demonstration marks taken out, so every cell runs."""
    from lesson_cost import unmarked_source

    from autograder.grading.record import load_results
    from autograder.grading.template import build_template, sync_gradebook

    course = work / name
    course.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", course)
    times, scores = {}, {}
    for a, paths in samples.items():
        source = REPO / "source" / a if marked else unmarked_source(a, work / f"{name}-src")
        shutil.copytree(source, course / "source" / a)
        _, template_hash = build_template(course, a)  # one-off per assignment, not timed
        sync_gradebook(course, a, template_hash)
        subs = work / f"{name}-subs" / a
        subs.mkdir(parents=True)
        for path in paths:
            shutil.copy2(path, subs / path.name)
    CPU[name] = 0.0
    for a in samples:
        command = [str(Path(sys.executable).with_name("specdec-course")), "grade", a]
        command += ["--submissions", str(work / f"{name}-subs" / a), "--course", str(course)]
        command += ["--workers", str(workers)] + ([] if sandbox else ["--no-sandbox"])
        with tempfile.TemporaryFile() as log:
            start, cpu = time.perf_counter(), busy_cpu_seconds()
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
            times[a] = time.perf_counter() - start
            CPU[name] += busy_cpu_seconds() - cpu
            if done.returncode:
                log.seek(0)
                raise SystemExit(f"{' '.join(command)} failed:\n{log.read().decode()}")
        for student, result in load_results(course / "reports" / a / "results").items():
            scores[(a, student)] = {c.grade_id: c.score for c in result.cells}
    return times, scores


def differences(left: dict, right: dict) -> list[str]:
    """Every (lesson, student, cell) scored differently in ``left`` and ``right``."""
    out = []
    for key in sorted(set(left) | set(right)):
        a, b = left.get(key, {}), right.get(key, {})
        for gid in sorted(set(a) | set(b)):
            if a.get(gid) != b.get(gid):
                out.append(f"{key[0]} {key[1]} {gid}: {a.get(gid)} vs {b.get(gid)}")
    return out


def chapter(args, work: Path) -> None:
    """The whole chapter's samples as one class, three ways (see the module docstring)."""
    sys.path.insert(0, str(Path(__file__).parent))
    samples = chapter_samples()
    n = sum(len(p) for p in samples.values())
    sandbox = not args.no_sandbox
    skipping, ours_scores = ours_chapter(work, samples, args.workers, sandbox, "ours")
    every, every_scores = ours_chapter(work, samples, args.workers, sandbox, "every", marked=False)
    plain, plain_scores = plain_chapter(work, samples)
    total_skip, total_every = sum(skipping.values()), sum(every.values())
    print(
        f"== the chapter: {n} samples of {len(samples)} lessons as one class, "
        f"{args.workers} workers, sandbox {'on' if sandbox else 'off'}, {os.cpu_count()} cores"
    )
    print(
        "| lesson | samples | specdec-course grade, every cell run (s) | demonstrations "
        "skipped (s) | faster |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for a, paths in samples.items():
        print(
            f"| {a} | {len(paths)} | {every[a]:.1f} | {skipping[a]:.1f} | "
            f"{every[a] / skipping[a]:.2f}x |"
        )
    print(f"| all | {n} | {total_every:.1f} | {total_skip:.1f} | {total_every / total_skip:.2f}x |")
    print(
        f'plain nbgrader autograde "*" (serial):  {plain:7.1f} s  '
        f"CPU {CPU['plain'] / n:.2f} s a sample"
    )
    print(
        f"specdec-course grade, every cell run:   {total_every:7.1f} s  "
        f"{plain / total_every:.2f}x plain  CPU {CPU['every'] / n:.2f} s a sample"
    )
    print(
        f"specdec-course grade:                   {total_skip:7.1f} s  "
        f"{plain / total_skip:.2f}x plain  CPU {CPU['ours'] / n:.2f} s a sample"
    )
    for label, left, right in (
        ("plain nbgrader and specdec-course grade", plain_scores, ours_scores),
        ("skipping and running every cell", ours_scores, every_scores),
    ):
        diff = differences(left, right)
        print(f"cells scored differently by {label}: {len(diff) or 'none'}")
        for line in diff:
            print("  " + line)


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
