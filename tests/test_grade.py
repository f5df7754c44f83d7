"""`specdec-course grade` end to end on a throwaway course, with real nbgrader and kernels."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from support.course import (
    CORRECT,
    WRONG_SQUARE,
    fill,
    load_json,
    sandbox_available,
    write_nb,
)

from autograder import cli
from autograder.grade import Harness, grade
from autograder.grading.job import RunSpec, grade_job
from autograder.grading.pool import run_jobs

pytestmark = pytest.mark.kernel
SANDBOX = sandbox_available()
CLI = [sys.executable, "-m", "autograder"]  # the command, through its entry point
#: The engines that the tests whose subject is the engine run on: ``grade`` keyword arguments.
ENGINES = {"local-pool": {}, "dask-localcluster": {"cluster": "local:2"}}


@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.cluster] * ("cluster" in kwargs))
        for name, kwargs in ENGINES.items()
    ]
)
def engine(request) -> dict:
    """``grade`` keyword arguments for one engine: the local pool, or a Dask LocalCluster."""
    return ENGINES[request.param]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def cell_scores(course: Path, assignment: str = "mini") -> dict[tuple[str, str], float]:
    rows = read_csv(course / "reports" / assignment / "cells.csv")
    return {(r["student"], r["grade_id"]): float(r["score"]) for r in rows}


def class_submissions(release_nb) -> dict[str, object]:
    """The mini class that the tests below read: {student: notebook, or raw bytes/text}.

    Right, wrong and blank notebooks; broken ones (each affects only itself); one that
    warns and writes to stderr, one that floods its output, one with enormous stored
    outputs.
    """
    subs: dict[str, object] = {
        "alice": fill(release_nb, **CORRECT),
        "bob": fill(release_nb, **WRONG_SQUARE),
        "carol": release_nb,
        "good": fill(release_nb, **CORRECT),
        "not-json": "{this is not json",
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00",
        "exits": fill(release_nb, square="import os\nos._exit(1)"),
    }
    dup = fill(release_nb, **CORRECT)
    dup.cells.append(nbformat.from_dict(dict(dup.cells[2])))  # a duplicated test cell
    subs["duplicated-cell"] = dup
    deleted = fill(release_nb, **CORRECT)
    deleted.cells = [
        c
        for c in deleted.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") != "test_square_small"
    ]
    subs["deleted-test"] = deleted
    subs["old-format"] = nbformat.writes(nbformat.v3.convert.downgrade(fill(release_nb, **CORRECT)))
    nokernel = fill(release_nb, **CORRECT)
    nokernel.metadata = {}
    subs["no-kernelspec"] = nokernel
    noisy = (
        "import sys, warnings\n"
        "def square(x):\n"
        "    warnings.warn('a harmless warning', RuntimeWarning)\n"
        "    print('debugging', file=sys.stderr)\n"
        "    return x * x"
    )
    subs["noisy"] = fill(release_nb, square=noisy, cube=CORRECT["cube"])
    flood = (
        "def square(x):\n    for _ in range(500):\n        print('x' * 100_000)\n    return x * x"
    )
    subs["flood"] = fill(release_nb, square=flood, cube=CORRECT["cube"])
    bloated = fill(release_nb, **CORRECT)
    for cell in bloated.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 3_000_000)]
    subs["bloated"] = bloated
    return subs


@pytest.fixture(scope="module")
def mini_class(pristine_mini_course, mini_release, tmp_path_factory):
    """The class of :func:`class_submissions` graded once, on 2 workers: (course, result)."""
    root = tmp_path_factory.mktemp("mini-class")
    course = Path(shutil.copytree(pristine_mini_course, root / "course", symlinks=True))
    for student, nb in class_submissions(mini_release).items():
        write_nb(root / "subs" / f"{student}.ipynb", nb)
    result = grade("mini", submissions=root / "subs", course=course, workers=2, sandbox=SANDBOX)
    return course, result


@pytest.fixture
def release_nb(mini_release):
    return mini_release


def test_grades_a_folder_and_writes_csvs_and_gradebook(mini_class):
    mini_course, result = mini_class
    assert result.workers == 2
    scores = {s: r.score for s, r in result.results.items()}
    assert {s: scores[s] for s in ("alice", "bob", "carol")} == {"alice": 4, "bob": 2, "carol": 0}
    grades = read_csv(mini_course / "reports/mini/grades.csv")
    assert [g["student"] for g in grades] == sorted(scores)  # every student once, in order
    assert [g for g in grades if g["student"] in ("alice", "bob", "carol")] == [
        {"student": "alice", "score": "4", "max_score": "4", "status": "graded"},
        {"student": "bob", "score": "2", "max_score": "4", "status": "graded"},
        {"student": "carol", "score": "0", "max_score": "4", "status": "graded"},
    ]
    cells = read_csv(mini_course / "reports/mini/cells.csv")
    assert [list(r) for r in cells][0] == [
        "student",
        "grade_id",
        "score",
        "max_score",
        "status",
        "flags",
    ]
    bob = {r["grade_id"]: r for r in cells if r["student"] == "bob"}
    assert bob["test_square_hidden"]["status"] == "failed"
    assert bob["test_square_small"]["status"] == "passed"
    message = load_json(mini_course / "reports/mini/results/bob.json")["cells"][1]["message"]
    assert message == "AssertionError: square(-2) returned -4, expected 4"

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        assert gb.find_submission("mini", "alice").score == 4
        assert gb.find_submission("mini", "bob").score == 2
    assert (mini_course / "submitted/alice/mini/mini.ipynb").exists()
    assert (mini_course / "autograded/alice/mini/mini.ipynb").exists()


def test_nested_folders_and_zips_grade_alike(mini_course, release_nb, tmp_path):
    nested = tmp_path / "nested"
    write_nb(nested / "alice" / "whatever I called it.ipynb", fill(release_nb, **CORRECT))
    write_nb(nested / "bob" / "mini.ipynb", fill(release_nb, **WRONG_SQUARE))
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(nested / "alice" / "whatever I called it.ipynb", "download/Alice Ånberg.ipynb")
        zf.write(nested / "bob" / "mini.ipynb", "download/bob/mini.ipynb")
    first = grade("mini", submissions=nested, course=mini_course, workers=2, sandbox=SANDBOX)
    second = grade("mini", submissions=archive, course=mini_course, workers=2, sandbox=SANDBOX)
    assert first.results["alice"].score == second.results["Alice_Anberg"].score == 4
    assert first.results["bob"].score == 2
    assert second.reused == ["bob"]  # same notebook, same student: not graded twice


def test_one_broken_submission_affects_only_itself(mini_class):
    mini_course, result = mini_class
    r = result.results
    assert r["good"].score == 4 and r["good"].status == "graded"
    assert (
        r["not-json"].status == "invalid" and "not a valid Jupyter notebook" in r["not-json"].reason
    )
    assert r["binary"].status == "invalid"
    assert r["exits"].status == "failed" and r["exits"].score == 0
    assert "kernel" in r["exits"].reason
    # a deleted test cell is put back and run; duplicates do not abort anything
    assert r["deleted-test"].score == 4
    assert r["duplicated-cell"].status == "invalid"
    assert "'test_square_small'" in r["duplicated-cell"].reason
    assert "copy" in r["duplicated-cell"].reason
    assert r["old-format"].score == 4
    assert r["no-kernelspec"].score == 4
    assert len(read_csv(mini_course / "reports/mini/grades.csv")) == len(r)


def test_a_loop_times_out_and_later_cells_still_run(mini_course, release_nb, tmp_path):
    subs = tmp_path / "subs"
    write_nb(
        subs / "loops.ipynb",
        fill(
            release_nb, square="def square(x):\n    while True:\n        pass", cube=CORRECT["cube"]
        ),
    )
    result = grade(
        "mini", submissions=subs, course=mini_course, workers=1, timeout=3, sandbox=SANDBOX
    )
    r = result.results["loops"]
    assert r.status == "timeout"
    statuses = {c.grade_id: c.status for c in r.cells}
    assert statuses == {
        "test_square_small": "timeout",
        "test_square_hidden": "timeout",
        "test_cube": "passed",
    }
    assert "3 s" in r.cells[0].message


def test_a_loop_that_ignores_interrupts_is_killed(mini_course, release_nb, tmp_path):
    subs = tmp_path / "subs"
    stubborn = (
        "import signal\n"
        "def square(x):\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ipykernel resets it per cell\n"
        "    while True:\n        pass"
    )
    write_nb(subs / "stubborn.ipynb", fill(release_nb, square=stubborn, cube=CORRECT["cube"]))
    start = time.monotonic()
    result = grade(
        "mini", submissions=subs, course=mini_course, workers=1, timeout=2, sandbox=SANDBOX
    )
    elapsed = time.monotonic() - start
    r = result.results["stubborn"]
    assert r.score == 0 and r.status in ("timeout", "failed")
    assert "did not respond" in r.reason
    assert elapsed < 60  # not one timeout per remaining cell: the kernel was killed


def test_regrading_gives_the_same_scores(mini_course, release_nb, tmp_path):
    subs = tmp_path / "subs"
    write_nb(subs / "alice.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "bob.ipynb", fill(release_nb, **WRONG_SQUARE))
    once = grade("mini", submissions=subs, course=mini_course, workers=2, sandbox=SANDBOX)
    first = cell_scores(mini_course)
    again = grade(
        "mini", submissions=subs, course=mini_course, workers=2, sandbox=SANDBOX, force=True
    )
    assert sorted(again.graded_now) == ["alice", "bob"]
    messages = {s: [c.message for c in r.cells] for s, r in once.results.items()}
    assert cell_scores(mini_course) == first, messages
    assert first[("alice", "test_cube")] == 1 and first[("bob", "test_square_hidden")] == 0


def test_an_interrupted_run_finishes_on_the_next_without_double_counting(
    mini_course, release_nb, tmp_path
):
    subs = tmp_path / "subs"
    for i in range(6):
        write_nb(subs / f"s{i}.ipynb", fill(release_nb, **(CORRECT if i % 2 else WRONG_SQUARE)))
    args = (
        CLI
        + [
            "grade",
            "mini",
            "--submissions",
            str(subs),
            "--workers",
            "1",
            "--course",
            str(mini_course),
        ]
        + ([] if SANDBOX else ["--no-sandbox"])
    )
    proc = subprocess.Popen(
        args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    results = mini_course / "reports/mini/results"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(results.glob("*.json"))) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(results.glob("*.json")))
    assert 2 <= done_before < 6
    result = grade("mini", submissions=subs, course=mini_course, workers=2, sandbox=SANDBOX)
    assert len(result.reused) >= done_before - 1  # at most one was mid-write
    assert sorted(result.results) == [f"s{i}" for i in range(6)]
    assert {r.score for s, r in result.results.items()} == {2.0, 4.0}
    assert len(read_csv(mini_course / "reports/mini/grades.csv")) == 6
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        assert len(gb.find_assignment("mini").submissions) == 6


def started_before_it_runs() -> None:
    """In a Dask worker: fail unless the scheduler has heard that this job started.

    A worker that dies with the job must count against it, which only that word tells;
    a job that takes its worker down at once leaves no time to send it afterwards.
    """
    try:
        from distributed import get_worker

        worker = get_worker()
    except ValueError:  # the local pool
        return
    from distributed.utils import sync

    from autograder.grading.cluster_worker import STARTED_TOPIC

    key = worker.get_current_task()
    events = sync(worker.loop, worker.scheduler.events, topic=STARTED_TOPIC)
    if not any(msg.get("key") == key for _, msg in events):
        raise RuntimeError("the job ran before the scheduler knew that it had started")


def crash_on_mallory(job):
    """A job function whose worker process dies on one submission (as a segfault would)."""
    started_before_it_runs()
    if job.student == "mallory":
        os._exit(77)
    return grade_job(job)


def test_a_crashing_worker_fails_only_its_submission(mini_course, release_nb, tmp_path, engine):
    subs = tmp_path / "subs"
    for name in ("alice", "bob", "mallory"):
        write_nb(subs / f"{name}.ipynb", fill(release_nb, **CORRECT))
    result = grade(
        "mini",
        submissions=subs,
        course=mini_course,
        workers=2,
        sandbox=SANDBOX,
        harness=Harness(job_fn=crash_on_mallory),
        **engine,
    )
    assert result.results["mallory"].status == "failed"
    assert result.results["mallory"].reason == "the grading worker crashed on this submission"
    assert result.results["mallory"].flags == ["worker-crash"]
    assert result.results["alice"].score == result.results["bob"].score == 4


def hang_on_mallory(job):
    """A job function that never returns on one submission (stuck outside any kernel)."""
    started_before_it_runs()
    if job.student == "mallory":
        time.sleep(3600)
    return grade_job(job)


#: The hard deadline of the hung-worker test.  Every job has it, so it must leave a correct
#: submission time to be graded on a busy machine (starting a sandboxed kernel there can
#: take tens of seconds); the hung job waits it out while the other worker grades the rest.
HUNG_DEADLINE = 60


def test_a_hung_worker_is_stopped_at_the_hard_deadline(mini_course, release_nb, tmp_path, engine):
    """Past the hard deadline the job is a timeout; its worker is killed (local) or restarted
    through its nanny (Dask), and every other submission is graded."""
    subs = tmp_path / "subs"
    for name in ("alice", "bob", "carol", "mallory"):
        write_nb(subs / f"{name}.ipynb", fill(release_nb, **CORRECT))
    start = time.monotonic()
    result = grade(
        "mini",
        submissions=subs,
        course=mini_course,
        workers=2,
        sandbox=SANDBOX,
        harness=Harness(job_fn=hang_on_mallory, hard_timeout=HUNG_DEADLINE),
        **engine,
    )
    assert time.monotonic() - start < 600  # not the hour that the job would hang
    mallory = result.results["mallory"]
    assert mallory.status == "timeout" and mallory.flags == ["worker-killed"]
    assert mallory.reason == (f"grading took longer than {HUNG_DEADLINE} s; the worker was killed")
    assert {s: r.score for s, r in result.results.items() if s != "mallory"} == {
        "alice": 4,
        "bob": 4,
        "carol": 4,
    }


@pytest.mark.cluster
def test_results_do_not_depend_on_the_engine(pristine_mini_course, release_nb, tmp_path):
    """The same submissions on the local pool and on a LocalCluster: identical results."""
    subs = tmp_path / "subs"
    write_nb(subs / "alice.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "bob.ipynb", fill(release_nb, **WRONG_SQUARE))
    write_nb(subs / "carol.ipynb", release_nb)
    write_nb(subs / "exits.ipynb", fill(release_nb, square="import os\nos._exit(1)"))
    loops = "def square(x):\n    while True:\n        pass"
    write_nb(subs / "loops.ipynb", fill(release_nb, square=loops, cube=CORRECT["cube"]))
    write_nb(subs / "mallory.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "not-json.ipynb", "{nope")
    outcomes = {}
    for name, engine in ENGINES.items():
        course = Path(shutil.copytree(pristine_mini_course, tmp_path / name, symlinks=True))
        result = grade(
            "mini",
            submissions=subs,
            course=course,
            workers=2,
            timeout=3,
            sandbox=SANDBOX,
            harness=Harness(job_fn=crash_on_mallory),
            **engine,
        )
        outcomes[name] = {
            s: (r.status, r.score, r.max_score, r.reason, r.flags, r.cells)
            for s, r in result.results.items()
        }
        assert len(outcomes[name]) == 7
    assert outcomes["local-pool"] == outcomes["dask-localcluster"]


def test_run_jobs_yields_every_job_once_when_workers_crash():
    spec = RunSpec("a", "nb", Path("/nonexistent"), Path("/tmp"))
    jobs = [spec.job(student, b"") for student in [f"s{i}" for i in range(5)] + ["mallory"]]
    seen = [job.student for job, _ in run_jobs(jobs, workers=2, hard_timeout=60, fn=_crash_or_echo)]
    assert sorted(seen) == sorted(j.student for j in jobs)


def test_a_local_worker_has_what_it_inherited_frozen_out_of_the_collector():
    """nbgrader and the rest, imported by the forkserver, live as long as the worker: its
    garbage collector skips them (``gc.freeze``), and walks only what the jobs make."""
    jobs = [RunSpec("a", "nb", Path("/nonexistent"), Path("/tmp")).job("s0", b"")]
    [(_, state)] = list(run_jobs(jobs, workers=1, hard_timeout=60, fn=_collector_state))
    assert state["nbgrader_imported"]
    # frozen: what the worker inherited; tracked: what it made since (this test module's
    # imports included, pytest among them); without the freeze, nothing is frozen
    assert state["frozen"] > state["tracked"] > 0, state


def _collector_state(job):
    import gc

    return {
        "frozen": gc.get_freeze_count(),
        "tracked": len(gc.get_objects()),
        "nbgrader_imported": "nbgrader.api" in sys.modules,
    }


def _crash_or_echo(job):
    if job.student == "mallory":
        os._exit(3)
    return {"student": job.student, "cells": []}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grade", "nope", "--submissions", "{subs}"], "unknown assignment"),
        (["grade", "mini", "--submissions", "{tmp}/missing"], "does not exist"),
        (["grade", "mini", "--submissions", "{empty}"], "no submissions"),
        (["release", "nope"], "unknown assignment"),
    ],
)
def test_instructor_errors_exit_2_with_a_clear_message(
    mini_course, tmp_path, capsys, args, message
):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "a.ipynb").write_text("{}")
    (tmp_path / "empty").mkdir()
    args = [a.format(subs=tmp_path / "subs", tmp=tmp_path, empty=tmp_path / "empty") for a in args]
    code = cli.main(args + ["--course", str(mini_course)])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert message in stderr


def test_not_a_course_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = cli.main(["grade", "mini", "--submissions", str(tmp_path)])
    assert code == 2 and "not an nbgrader course" in capsys.readouterr().err


def test_cli_grade_prints_a_summary_and_exits_0(mini_course, release_nb, tmp_path, capsys):
    subs = tmp_path / "subs"
    write_nb(subs / "alice.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "broken.ipynb", "nope")
    args = ["grade", "mini", "--submissions", str(subs), "--course", str(mini_course)]
    code = cli.main(args + ([] if SANDBOX else ["--no-sandbox"]))
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "alice" in out.out and "4/4" in out.out and "invalid" in out.out
    # plain progress lines when not on a terminal; "broken" is not a notebook, which a
    # worker found, so it counts too
    lines = sorted(line.split("] ")[1].split(" (")[0] for line in out.err.splitlines())
    assert lines == ["graded alice", "graded broken"], out.err
    assert "[2/2] graded" in out.err


def test_warnings_and_stderr_do_not_cost_points(mini_class):
    """Plain nbgrader fails any test cell that writes to stderr; only errors fail here."""
    mini_course, result = mini_class
    assert result.results["noisy"].score == 4
    executed = nbformat.read(mini_course / "autograded/noisy/mini/mini.ipynb", as_version=4)
    texts = [o.get("text", "") for c in executed.cells for o in c.get("outputs", [])]
    assert any("RuntimeWarning: a harmless warning" in t for t in texts)


def test_flooded_output_is_truncated_and_flagged(mini_class):
    """A cell printing ~50 MB keeps at most the budget; the notebook stays small."""
    mini_course, result = mini_class
    r = result.results["flood"]
    assert r.score == 4
    assert any("output truncated" in c.flags for c in r.cells)
    autograded = mini_course / "autograded/flood/mini/mini.ipynb"
    assert autograded.stat().st_size < 2_000_000


def test_stored_enormous_outputs_are_cleared_before_grading(mini_class):
    mini_course, result = mini_class
    assert result.results["bloated"].score == 4
    autograded = mini_course / "autograded/bloated/mini/mini.ipynb"
    assert autograded.stat().st_size < 100_000


def test_a_hostile_zip_writes_nothing_outside_the_course(mini_course, release_nb, tmp_path):
    good = nbformat.writes(fill(release_nb, **CORRECT))
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice.ipynb", good)
        zf.writestr("../../escaped.ipynb", good)
        zf.writestr("/tmp/specdec-absolute.ipynb", good)
        zf.writestr("mallory/../../../up.ipynb", good)
    outside = {p for p in tmp_path.rglob("*") if mini_course not in p.parents}
    result = grade("mini", submissions=archive, course=mini_course, workers=2, sandbox=SANDBOX)
    assert {p for p in tmp_path.rglob("*") if mini_course not in p.parents} == outside
    assert not Path("/tmp/specdec-absolute.ipynb").exists()
    assert result.results["alice"].score == 4
    unsafe = [r for r in result.results.values() if r.status == "invalid"]
    assert unsafe and all("unsafe path" in r.reason for r in unsafe)


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh"])
def test_memory_is_limited_for_all_processes_together(mini_course, release_nb, tmp_path, fork):
    """Four children of 700 MiB each pass the per-process limit but not the 2 GiB total.

    Both ways a kernel starts: a forked kernel's processes carry no job marker, so the
    watch finds them by their pid namespace.  Bounded: even if the limit failed, the test
    uses 2.8 GiB for at most 30 s.
    """
    forks = (
        "import os, time\n"
        "def square(x):\n"
        "    for _ in range(4):\n"
        "        if os.fork() == 0:\n"
        "            block = b'x' * (700 * 2**20)  # written, so resident\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    time.sleep(30)\n"
        "    return x * x"
    )
    subs = tmp_path / "subs"
    write_nb(subs / "forks.ipynb", fill(release_nb, square=forks, cube=CORRECT["cube"]))
    start = time.monotonic()
    result = grade(
        "mini",
        submissions=subs,
        course=mini_course,
        workers=1,
        timeout=60,
        sandbox=SANDBOX,
        fork=fork,
    )
    r = result.results["forks"]
    if SANDBOX:
        assert r.kernel == ("forked" if fork else "fresh")
    assert time.monotonic() - start < 60
    assert r.status == "failed" and "memory-limit" in r.flags
    assert "GiB limit" in r.reason and r.score == 0
