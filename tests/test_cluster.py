"""Grading on Dask: workers started as separate commands, the preload's checks, TLS.

The grading tests that also run on a ``LocalCluster`` are in ``test_grade.py``
(parametrised over the engines); these start ``dask scheduler`` and ``dask worker``
themselves, on 127.0.0.1, or hold the executor's own ``LocalCluster`` where Dask's
timing is the subject.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pytest
from distributed import get_worker
from support.course import (
    CORRECT,
    REPO,
    WRONG_SQUARE,
    fill,
    load_json,
    released_notebook,
    sandbox_available,
    write_nb,
)
from support.dask_cluster import (
    DEATHS_FILE,
    RERUN_SECONDS,
    crash_some,
    environment,
    lose_result_once,
    make_certificates,
    start_scheduler,
    start_worker,
    wait_for_workers,
)

from autograder.course import UsageError
from autograder.grade import Harness, grade
from autograder.grading import cluster_worker
from autograder.grading.cluster_executor import NoWorkers
from autograder.grading.cluster_pool import DaskEngine
from autograder.grading.pool import run_jobs

pytestmark = [pytest.mark.kernel, pytest.mark.cluster]
SANDBOX = sandbox_available()
CLI = [sys.executable, "-m", "autograder.cli"]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (
            [],
            {"PATH": str(Path(sys.executable).parent)},  # no bubblewrap on this PATH
            "the grading sandbox cannot run here: bubblewrap is not installed",
        ),
        (["--nthreads", "2"], {}, "the worker has 2 threads; start it with --nthreads 1"),
    ],
    ids=["without-sandbox", "two-threads"],
)
def test_a_worker_that_cannot_grade_refuses_to_start(tmp_path, args, env, reason):
    scheduler, address = start_scheduler(tmp_path)
    worker = None
    try:
        worker = start_worker(address, tmp_path, "unfit", args=args, env=environment(**env))
        assert worker.process.wait(timeout=120) != 0
        assert f"this worker refuses to start: {reason}" in worker.log_text()
        assert "Registered to" not in worker.log_text()  # it never joined the scheduler
    finally:
        if worker is not None:
            worker.stop()
        scheduler.stop()


def _submissions(tmp_path: Path, course: Path, n: int) -> Path:
    release = released_notebook(course, "mini", "mini")
    subs = tmp_path / "subs"
    for i in range(n):
        write_nb(subs / f"s{i}.ipynb", fill(release, **(CORRECT if i % 2 else WRONG_SQUARE)))
    return subs


def test_separately_started_workers_grade_and_a_killed_one_costs_only_its_job(
    mini_course, tmp_path
):
    """``dask scheduler`` and two ``dask worker`` commands; one worker is killed mid-run."""
    n = 8
    subs = _submissions(tmp_path, mini_course, n)
    scheduler, address = start_scheduler(tmp_path)
    workers = [start_worker(address, tmp_path, f"w{i}") for i in range(2)]
    grading = None
    try:
        args = ["grade", "mini", "--submissions", str(subs), "--scheduler", address]
        grading = subprocess.Popen(
            CLI + args + ([] if SANDBOX else ["--no-sandbox"]),
            cwd=mini_course,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        results = mini_course / "reports/mini/results"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(results.glob("*.json"))) < 2:
            assert grading.poll() is None, grading.communicate()
            time.sleep(0.2)  # polling the results folder that grade writes
        assert len(list(results.glob("*.json"))) < n  # the run is still going
        os.killpg(workers[0].process.pid, signal.SIGKILL)  # nanny, worker and all
        out, err = grading.communicate(timeout=600)
        assert grading.returncode == 0, err
    finally:
        if grading is not None and grading.poll() is None:
            grading.kill()
        for worker in workers:
            worker.stop()
        scheduler.stop()
    assert f"graded on: {address}" in out
    assert "(2 workers)" in err  # the progress lines count the workers
    rows = read_csv(mini_course / "reports/mini/grades.csv")
    assert len(rows) == n
    failed = [r for r in rows if r["status"] != "graded"]
    assert len(failed) <= 1  # at most the killed worker's job (Dask re-runs it elsewhere)
    for row in rows:
        if row not in failed:
            assert float(row["score"]) == (4 if int(row["student"][1:]) % 2 else 2)
    for row in failed:
        result = load_json(results / f"{row['student']}.json")
        assert (result["status"], result["reason"]) == (
            "failed",
            "the grading worker crashed on this submission",
        )
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        assert len(gb.find_assignment("mini").submissions) == n  # each student once


def _grade_with_crashes(course: Path, tmp_path: Path, students: dict, settings: dict):
    """Grade ``students`` (name -> answers) with :func:`crash_some` on ``dask scheduler``
    with ``settings`` and two workers; return the run's result and the deaths noted.
    """
    release = released_notebook(course, "mini", "mini")
    subs = tmp_path / "subs"
    for name, answers in students.items():
        write_nb(subs / f"{name}.ipynb", fill(release, **answers))
    deaths = tmp_path / "deaths.txt"
    # The scheduler and the workers unpickle the job function: they import it from tests/.
    path = {"PYTHONPATH": str(REPO / "tests")}
    scheduler, address = start_scheduler(tmp_path, settings={**settings, **path})
    env = environment(**path, **{DEATHS_FILE: str(deaths)})
    workers = [start_worker(address, tmp_path, f"w{i}", env=env) for i in range(2)]
    try:
        result = grade(
            "mini",
            submissions=subs,
            course=course,
            scheduler=address,
            sandbox=SANDBOX,
            harness=Harness(job_fn=crash_some),
        )
    finally:
        for worker in workers:
            worker.stop()
        scheduler.stop()
    outcomes = {s: (r.status.value, r.score, r.reason) for s, r in result.results.items()}
    assert deaths.exists(), outcomes
    return result, outcomes, sorted(deaths.read_text().split())


@pytest.mark.parametrize(
    ("settings", "adapted"),
    [
        ({}, ["allowed-failures=3", "worker-saturation=1.1"]),
        (
            {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"},
            ["allowed-failures=0", "worker-saturation=1.1"],
        ),
    ],
    ids=["dask-defaults", "no-retries"],
)
def test_a_scheduler_with_its_own_settings_blames_a_submission_at_its_second_dead_worker(
    mini_course, tmp_path, settings, adapted
):
    """``dask scheduler`` as Dask documents it (or with no retries at all).

    A worker that dies once under a job (``victim``) costs that job nothing; a submission
    whose job kills every worker it runs on (``mallory``) is failed after exactly two.
    """
    students = {"alice": CORRECT, "bob": WRONG_SQUARE, "victim": CORRECT, "mallory": CORRECT}
    result, outcomes, deaths = _grade_with_crashes(mini_course, tmp_path, students, settings)
    assert deaths == ["mallory", "mallory", "victim"]
    assert outcomes == {
        "alice": ("graded", 4, ""),
        "bob": ("graded", 2, ""),
        "victim": ("graded", 4, ""),
        "mallory": ("failed", 0, "the grading worker crashed on this submission"),
    }
    notes = [w for w in result.warnings if "Dask scheduler has" in w]
    assert len(notes) == len(adapted), result.warnings
    for note, setting in zip(notes, adapted, strict=True):
        assert setting in note, notes


def test_a_blamed_job_that_the_scheduler_runs_again_is_stopped_at_once(mini_course, tmp_path):
    """A scheduler that retries on its own (Dask's defaults) hands ``mallory``'s job to the
    idle worker at its second death, before grade's cancel reaches it; that worker is
    ended at once, so the job never takes down a third worker.
    """
    students = {"alice": CORRECT, "mallory": CORRECT}
    _, outcomes, deaths = _grade_with_crashes(mini_course, tmp_path, students, {})
    assert outcomes == {
        "alice": ("graded", 4, ""),
        "mallory": ("failed", 0, "the grading worker crashed on this submission"),
    }
    assert deaths == ["mallory", "mallory"]


def test_grading_over_tls_on_a_local_cluster(mini_course, tmp_path):
    """Certificates from the README's openssl commands; every connection is TLS."""
    certs = make_certificates(tmp_path / "certs")
    subs = _submissions(tmp_path, mini_course, 2)
    result = grade(
        "mini",
        submissions=subs,
        course=mini_course,
        sandbox=SANDBOX,
        cluster="local:2",
        security=certs,
    )
    assert result.engine.startswith("LocalCluster at tls://127.0.0.1:")
    assert {s: r.score for s, r in result.results.items()} == {"s0": 2, "s1": 4}


def test_a_tls_scheduler_needs_the_security_option(mini_course, tmp_path):
    subs = _submissions(tmp_path, mini_course, 1)
    with pytest.raises(UsageError, match="a tls:// address needs --security"):
        grade("mini", submissions=subs, course=mini_course, scheduler="tls://127.0.0.1:1")


def test_a_worker_with_other_grader_code_is_turned_away(mini_course, tmp_path):
    """One worker imports a changed copy of the grader: grade names it, it closes, and the
    other worker grades everything."""
    changed = tmp_path / "changed"
    shutil.copytree(REPO / "autograder", changed / "autograder")
    with open(changed / "autograder" / "course.py", "a", encoding="utf-8") as fh:
        fh.write("\n# a local edit on one worker\n")
    subs = _submissions(tmp_path, mini_course, 3)
    scheduler, address = start_scheduler(tmp_path)
    good = start_worker(address, tmp_path, "good")
    other = start_worker(address, tmp_path, "other", env=environment(PYTHONPATH=str(changed)))
    grading = None
    try:
        # Both joined before grade starts, so the changed one is always there to be turned away.
        wait_for_workers(address, 2)
        args = ["grade", "mini", "--submissions", str(subs), "--scheduler", address]
        grading = subprocess.run(
            CLI + args + ([] if SANDBOX else ["--no-sandbox"]),
            cwd=mini_course,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert grading.returncode == 0, grading.stderr
        assert "autograder code" in grading.stderr and "will not grade" in grading.stderr
        assert other.process.wait(timeout=120) is not None  # it closed itself
        assert "does not grade as the instructor does: autograder code" in other.log_text()
        assert good.process.poll() is None
    finally:
        for worker in (good, other):
            worker.stop()
        scheduler.stop()
    rows = read_csv(mini_course / "reports/mini/grades.csv")
    assert [(r["student"], r["status"], r["score"]) for r in rows] == [
        ("s0", "graded", "2"),
        ("s1", "graded", "4"),
        ("s2", "graded", "2"),
    ]


def test_a_result_lost_with_its_worker_before_it_is_read_is_computed_again(jobs, tmp_path):
    """A worker can die holding a finished job's result before the run has read it: the
    job after it crashed, say, while the run was still reading other results.  The
    scheduler then computes the job again, and the run waits for that result instead of
    taking the lost one for an empty one.
    """
    notes = tmp_path / "runs.txt"
    with DaskEngine.connect(cluster="local:2") as engine:
        client = engine.client
        # Hold the thread in which Dask hands each finished task to the run, as a run
        # reading a slow result would, until the result is lost.
        gate = hold_callbacks(client)
        executor = engine.executor()
        try:
            out = executor.submit(partial(lose_result_once, notes), jobs("s0"))
            _wait_for(lambda: "lost" in _grading_states(client), notes, 60 + RERUN_SECONDS)
            gate.set()
            assert out.result(timeout=120) == "s0"
        finally:
            gate.set()
            executor.shutdown()
    assert notes.read_text().split() == ["ran", "died", "ran"]


def hold_callbacks(client) -> threading.Event:
    """Hold the one thread in which the client runs its futures' done-callbacks (so every
    finished job stays unread) until the returned event is set."""
    gate = threading.Event()
    held = client.submit(int, 1, pure=False)
    held.add_done_callback(lambda _: gate.wait(120))
    held.result()
    return gate


def note_and_crash_once(notes: Path, job) -> str:
    """A job function for workers: note the student (one line a run) and return the name;
    ``mallory``'s first run takes its worker down instead, as a crashing submission does.
    """
    with open(notes, "a") as fh:
        fh.write(f"{job.student}\n")
    if job.student == "mallory" and notes.read_text().split().count("mallory") == 1:
        os._exit(77)
    return job.student


def test_a_job_that_crashes_its_worker_cannot_take_a_finished_result_with_it(jobs, tmp_path):
    """One worker finishes ``alice``'s job; before the run reads that result, it is given
    ``mallory``'s, which takes it down.  ``mallory``'s job waits until ``alice``'s result
    has been read, so ``alice`` runs once, and the crash costs ``mallory`` alone (its
    second run, on the restarted worker, returns).
    """
    notes = tmp_path / "runs.txt"
    job_fn = partial(note_and_crash_once, notes)
    with DaskEngine.connect(cluster="local:1") as engine:
        client = engine.client
        # As a run busy elsewhere would: ``alice``'s result stays unread on the worker.
        gate = hold_callbacks(client)
        executor = engine.executor()
        try:
            alice = executor.submit(job_fn, jobs("alice"))
            _wait_for(lambda: _grading_states(client) == ["finished"], notes)
            mallory = executor.submit(job_fn, jobs("mallory"))
            # Until ``mallory``'s job either waits on the worker for ``alice``'s result to
            # be read, or has taken the worker down with that result.
            _wait_for(
                lambda: (
                    client.get_events(cluster_worker.WAITING_TOPIC)
                    or "lost" in _grading_states(client)
                ),
                notes,
            )
            gate.set()
            assert alice.result(timeout=120) == "alice"
            assert mallory.result(timeout=120) == "mallory"
        finally:
            gate.set()
            executor.shutdown()
    assert notes.read_text().split() == ["alice", "mallory", "mallory"]


def close_worker_and_nanny(job) -> str:
    """A job function for workers: close this worker and its nanny, as a worker turned
    away closes (so none is started again), and never return."""
    worker = get_worker()
    worker.loop.add_callback(worker.close, nanny=True, executor_wait=False, reason="test")
    time.sleep(600)
    return job.student


def test_a_run_whose_cluster_has_no_worker_left_stops_and_says_so(jobs):
    """The cluster's one worker closes, nanny and all, while it runs a job: the run stops
    once the cluster has had no worker for the engine's wait, with what to do, instead
    of running its jobs into their deadlines and then waiting for ever."""
    with DaskEngine.connect(cluster="local:1") as engine:
        engine.worker_wait = 5
        with pytest.raises(NoWorkers, match=r"has had no worker for 5 s; start workers"):
            for _ in run_jobs(
                [jobs("s0"), jobs("s1")],
                workers=1,
                hard_timeout=600,
                executor_factory=engine.executor,
                fn=close_worker_and_nanny,
            ):
                pass
        assert engine.workers() == 0


def _grading_states(client) -> list[str]:
    """The status of each grading job's Dask future that the client holds."""
    return [state.status for key, state in list(client.futures.items()) if "grade_job" in str(key)]


def _wait_for(condition, notes: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, notes.read_text() if notes.exists() else ""
        time.sleep(0.05)  # polling the client's view of the cluster
