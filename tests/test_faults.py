"""No fault of the machine leaves a process running or loses a grade.

* a grader killed outright (SIGKILL of its whole process group, or of the process that
  started a sandbox) leaves nothing running, at whatever moment it dies, and the next
  run finishes the batch;
* a gradebook that another program keeps locked costs no grade;
* a full disk stops the run with the reason, and corrupts nothing.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from nbgrader.api import Gradebook
from support.course import (
    CORRECT,
    FILES,
    WRONG_SQUARE,
    fill,
    new_course,
    released_notebook,
    sandbox_available,
    write_nb,
)

from autograder.grade import Harness, grade
from autograder.grading.gradebook import RecordError
from autograder.grading.processes import JOB_MARKER, kill_orphans
from autograder.record.page_writer import PageWriter
from autograder.record.store import load_results, write_csvs
from autograder.render.feedback_page import write_pages
from autograder.sandbox import Limits, tether
from autograder.sandbox.launch import Launch

pytestmark = pytest.mark.kernel
SANDBOX = sandbox_available()
CLI = [sys.executable, "-m", "autograder"]  # the command, through its entry point


def sandboxed(test):
    """Mark a test that needs the grading sandbox (it may skip only with the opt-out)."""
    skip = pytest.mark.skipif(not SANDBOX, reason="the grading sandbox cannot run here")
    return pytest.mark.sandbox(skip(test))


def wait_for(condition, timeout: float, interval: float = 0.05):
    """Poll ``condition()`` until it returns something truthy (returned) or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def belonging_to(needles: list[str], workers: set[int] = frozenset()) -> list[str]:
    """Processes whose command line names one of ``needles``, or marked by one of ``workers``."""
    found = []
    for process in psutil.process_iter():
        try:
            cmdline = " ".join(process.cmdline())
            marker = process.environ().get(JOB_MARKER, "")
        except psutil.Error:  # gone, or a zombie (which runs nothing)
            continue
        worker = marker.split("-", 1)[0]
        if any(n in cmdline for n in needles) or (worker.isdigit() and int(worker) in workers):
            found.append(f"{process.pid} {cmdline[:160]}")
    return found


def sleeping(needles: list[str]) -> list[str]:
    """The ``sleep`` processes among :func:`belonging_to` ``needles``."""
    return [line for line in belonging_to(needles) if line.split()[1] == "sleep"]


def kill_all(needles: list[str]) -> None:
    """Teardown: SIGKILL whatever a failed test left running."""
    for line in belonging_to(needles):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------
# A killed grader leaves nothing running
# ---------------------------------------------------------------------------------------

#: A process that starts sandboxes on request, each from a forked child of its own, which
#: the test then kills (forked, so that each start costs no imports).
STARTER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from pathlib import Path
    from autograder.sandbox import Limits
    from autograder.sandbox.launch import Launch

    for line in sys.stdin:
        token, base = line.split()
        child = os.fork()
        if child:
            os.waitpid(child, 0)  # the test kills it
            continue
        (Path(base) / "cwd").mkdir(parents=True)
        launch = Launch(
            run_dir=Path(base) / "run", cwd=Path(base) / "cwd", limits=Limits(),
            command=["sh", "-c", f"sleep 600 & env -i sleep {token} & exec sleep 601"],
            env={"SPECDEC_GRADE_JOB": f"0-{token}"},
        )
        subprocess.Popen(launch.argv, pass_fds=launch.pass_fds, cwd="/",
                         env=launch.outer_env, start_new_session=True)
        print(os.getpid(), flush=True)
        time.sleep(600)
    """
)


@pytest.fixture(scope="module")
def starter():
    proc = subprocess.Popen(
        [sys.executable, "-c", STARTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    yield proc
    proc.kill()
    proc.wait()


@sandboxed
@pytest.mark.parametrize("delay", [0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.3])
def test_a_sandbox_dies_with_the_process_that_started_it_at_any_moment(delay, starter, tmp_path):
    """SIGKILL the starter ``delay`` s after it spawned a sandbox: nothing of it is left.

    bubblewrap's ``--die-with-parent`` alone leaves the sandbox running when the starter
    dies in its first ~10 ms (seen at 0, 2 and 10 ms on the development machine).
    """
    token = f"6000.{os.getpid()}{int(delay * 1000):04d}"  # a sleep time no one else uses
    starter.stdin.write(f"{token} {tmp_path / 's'}\n")
    starter.stdin.flush()
    pid = int(starter.stdout.readline())
    try:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not belonging_to([token, str(tmp_path)]), timeout=60)
        assert belonging_to([token, str(tmp_path)]) == []
    finally:
        kill_all([token, str(tmp_path)])


def test_the_tether_starts_nothing_when_its_worker_is_already_gone(tmp_path):
    """The worker died before the tether armed its signal: the command never runs."""
    flag = tmp_path / "ran"
    orphaned = tether.command(1)  # not our parent: as if the worker had died, init adopted us
    proc = subprocess.run([*orphaned, "touch", str(flag)], capture_output=True, text=True)
    assert proc.returncode == tether.ORPHANED, proc.stderr
    assert not flag.exists()


@sandboxed
def test_the_start_of_grade_kills_what_dead_workers_left(tmp_path):
    """Orphans that no tether covers (an unsandboxed kernel's child, an untethered
    sandbox) are killed by the sweep; a live worker's processes are not touched.

    Every ``grade`` sweeps the whole machine, including the other test processes' runs,
    so the stand-in worker stays alive (its jobs out of every sweep's reach) until the
    orphans run, and dies just before this test's own sweep.
    """
    token = f"6001.{os.getpid()}"
    worker = subprocess.Popen(["sleep", f"{token}0"])  # the worker that will die
    plain = subprocess.Popen(
        ["sleep", f"{token}1"], env={**os.environ, JOB_MARKER: f"{worker.pid}-job-plain"}
    )
    alive = subprocess.Popen(
        ["sleep", f"{token}2"], env={**os.environ, JOB_MARKER: f"{os.getpid()}-job-alive"}
    )
    # A sandbox whose tether was killed outright with its worker before bubblewrap armed
    # --die-with-parent (started here without either): its learner child has cleared its
    # environment, so only its sandbox betrays it.
    (tmp_path / "cwd").mkdir()
    launch = Launch(
        run_dir=tmp_path / "run",
        cwd=tmp_path / "cwd",
        limits=Limits(),
        command=["sh", "-c", f"env -i sleep {token}3 & exec sleep {token}4"],
        env={JOB_MARKER: f"{worker.pid}-job-sandboxed"},
    )
    argv = launch.argv[len(tether.command(os.getpid())) :]
    argv.remove("--die-with-parent")
    untethered = subprocess.Popen(
        argv, pass_fds=launch.pass_fds, cwd="/", env=launch.outer_env, start_new_session=True
    )
    launch.close_child_ends()
    orphans = [f"{token}1", f"{token}3", f"{token}4"]
    try:
        assert wait_for(lambda: len(sleeping(orphans)) == 3, 60), belonging_to([token])
        worker.kill()
        worker.wait()
        # Not its count: another test's ``grade`` may sweep these orphans first.
        kill_orphans()
        assert wait_for(lambda: not belonging_to(orphans), 20), belonging_to(orphans)
        assert alive.poll() is None
        assert wait_for(lambda: untethered.poll() is not None, 20)
    finally:
        for proc in (worker, plain, alive, untethered):
            proc.kill()
            proc.wait()
        kill_all([token])
        launch.close()


SLEEPER = "import subprocess, time\nsubprocess.Popen(['sleep', '{token}'])\ntime.sleep(600)\n"


@sandboxed
def test_a_grader_killed_at_any_moment_leaves_nothing_and_the_next_run_finishes(
    mini_course, tmp_path
):
    """SIGKILL the whole ``grade`` process group while a kernel starts, mid-cell and while
    a spare kernel starts: within seconds nothing of it runs; then one more run records
    every submission exactly once."""
    release_nb = released_notebook(mini_course, "mini", "mini")
    token = f"6002.{os.getpid()}"
    subs = tmp_path / "subs"
    sleeper = {**CORRECT, "square": SLEEPER.format(token=token) + CORRECT["square"]}
    write_nb(subs / "s0.ipynb", fill(release_nb, **sleeper))  # times out: 0 for square
    write_nb(subs / "s1.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "s2.ipynb", fill(release_nb, **CORRECT))
    scratch = tmp_path / "scratch"  # the run's TMPDIR: every sandbox's paths are under it
    scratch.mkdir()
    args = CLI + ["grade", "mini", "--submissions", str(subs), "--course", str(mini_course)]
    args += ["--workers", "1", "--timeout", "3"]

    moments = {  # (extra arguments, the moment): forked kernels (the default), then fresh
        "the warm parent starts": ([], lambda run: bool(run.tethers)),
        "a forked kernel's cell runs": ([], lambda run: bool(belonging_to([f"sleep {token}"]))),
        "a spare kernel is forked": ([], lambda run: run.sandboxes() >= 2),
        "a fresh kernel starts": (["--no-fork"], lambda run: bool(run.tethers)),
        "a fresh spare kernel starts": (["--no-fork"], lambda run: len(run.tethers) >= 2),
    }
    for moment, (extra, reached) in moments.items():
        run = KilledRun(args + extra, scratch)
        left = run.kill_when(reached, needles=[str(scratch), token])
        assert left == [], f"killed while {moment}, still running: {left}"

    result = grade("mini", submissions=subs, course=mini_course, workers=2, timeout=3)
    assert sorted(result.graded_now + result.reused) == ["s0", "s1", "s2"]
    assert {s: r.score for s, r in result.results.items()} == {"s0": 1, "s1": 4, "s2": 4}
    grades = (mini_course / "reports/mini/grades.csv").read_text().splitlines()
    assert sorted(line.split(",")[0] for line in grades[1:]) == ["s0", "s1", "s2"]
    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        assert sorted(s.student.id for s in gb.find_assignment("mini").submissions) == [
            "s0",
            "s1",
            "s2",
        ]


class KilledRun:
    """A ``grade`` run in its own process group, SIGKILLed as a whole at a chosen moment."""

    def __init__(self, args: list[str], scratch) -> None:
        self.args, self.scratch = args, scratch
        self.group: set[int] = set()  #: every pid seen in its process group
        #: every sandbox launch seen: one per fresh kernel, one per warm parent
        self.tethers: set[int] = set()

    def sandboxes(self) -> int:
        """Kernel sandboxes started so far (each kernel records its pid namespace)."""
        return sum(
            len(path.read_text().splitlines()) for path in self.scratch.rglob(".sandbox/sandboxes")
        )

    def kill_when(self, reached, needles: list[str]) -> list[str]:
        """SIGKILL the group once ``reached(self)``; return what runs of it 20 s later."""
        fd, name = tempfile.mkstemp(prefix="grade-", suffix=".err", dir=self.scratch.parent)
        errors = Path(name)
        with os.fdopen(fd, "wb") as stderr:  # what it says, should it end before the moment
            proc = subprocess.Popen(
                self.args,
                env={**os.environ, "TMPDIR": str(self.scratch)},  # all its scratch paths below
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        try:

            def at_moment() -> bool:
                self.group |= {p.pid for p in psutil.process_iter() if _pgid(p.pid) == proc.pid}
                self.tethers |= {
                    int(line.split()[0])
                    for line in belonging_to([str(self.scratch)])
                    if "tether.py" in line
                }
                return reached(self) or proc.poll() is not None

            assert wait_for(at_moment, timeout=240, interval=0.01)
            assert proc.poll() is None, (
                f"grade finished (exit {proc.returncode}) before the moment came; it said:\n"
                + errors.read_text(errors="replace")[-4000:]
            )
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            wait_for(lambda: not belonging_to(needles, self.group), timeout=60)
            return belonging_to(needles, self.group)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            kill_all(needles)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# ---------------------------------------------------------------------------------------
# A busy gradebook costs no grade
# ---------------------------------------------------------------------------------------

#: Another program (as the formgrader would) holding a write transaction on the gradebook
#: until it reads a line.
HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE student SET first_name = first_name")
    print("locked", flush=True)
    sys.stdin.readline()
    db.execute("COMMIT")
    print("released", flush=True)
    """
)


class GradebookHolder:
    """Holds a write transaction on ``gradebook.db`` from another process."""

    def __init__(self, course) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(course / "gradebook.db")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline().strip() == "released"
            self.proc.wait()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def gradebook_scores(course) -> dict[str, float]:
    """Each student's total in the course gradebook, read back with nbgrader."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "specdec-e7") as gb:
        return {sub.student.id: float(sub.score) for sub in gb.find_assignment("mini").submissions}


def csv_scores(course) -> dict[str, float]:
    rows = (course / "reports/mini/grades.csv").read_text().splitlines()[1:]
    return {row.split(",")[0]: float(row.split(",")[1]) for row in rows}


@pytest.fixture
def three_subs(mini_course, tmp_path):
    release_nb = released_notebook(mini_course, "mini", "mini")
    subs = tmp_path / "subs"
    write_nb(subs / "s0.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "s1.ipynb", fill(release_nb, square=WRONG_SQUARE["square"]))  # cube blank
    write_nb(subs / "s2.ipynb", fill(release_nb, **CORRECT))
    return subs


EXPECTED = {"s0": 4.0, "s1": 1.0, "s2": 4.0}


def test_grade_waits_for_a_locked_gradebook_and_records_everything(mini_course, three_subs):
    """The gradebook is locked after the first result: grade says so, waits, then every
    result reaches the gradebook and the CSVs."""
    holder: list[GradebookHolder] = []
    notes: list[str] = []

    def progress(student, n, total, workers):
        if n == 1:  # mid-run: lock it before the next result is recorded
            holder.append(GradebookHolder(mini_course))

    def notify(message):
        notes.append(message)
        holder[0].release()  # the other program is done after grade's first wait

    try:
        result = grade(
            "mini",
            submissions=three_subs,
            course=mini_course,
            workers=2,
            sandbox=SANDBOX,
            progress=progress,
            harness=Harness(notify=notify),
        )
    finally:
        for h in holder:
            h.close()
    assert notes and "gradebook is locked" in notes[0] and "retrying" in notes[0]
    assert sorted(result.graded_now) == ["s0", "s1", "s2"]
    assert gradebook_scores(mini_course) == EXPECTED
    assert csv_scores(mini_course) == EXPECTED


def test_a_gradebook_locked_too_long_stops_the_run_and_loses_nothing(mini_course, three_subs):
    """Past the limit, grade stops with a clear message; the result it could not put in
    the gradebook is kept, and the next run records it without regrading it."""
    holder: list[GradebookHolder] = []
    recorded: list[str] = []

    def progress(student, n, total, workers):
        recorded.append(student)
        if n == 1:
            holder.append(GradebookHolder(mini_course))

    try:
        with pytest.raises(RecordError, match="stayed locked by another program"):
            grade(
                "mini",
                submissions=three_subs,
                course=mini_course,
                workers=1,
                sandbox=SANDBOX,
                progress=progress,
                harness=Harness(notify=lambda message: None),
                gradebook_wait=1,
            )
        results = mini_course / "reports/mini/results"
        kept = {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")}
        first, stuck = recorded[0], (set(kept) - set(recorded)).pop()
        assert kept[first]["in_gradebook"] is True
        assert kept[stuck]["in_gradebook"] is False and kept[stuck]["score"] == EXPECTED[stuck]
        holder[0].release()
    finally:
        for h in holder:
            h.close()

    again = grade("mini", submissions=three_subs, course=mini_course, workers=1, sandbox=SANDBOX)
    assert stuck in again.reused and stuck not in again.graded_now
    assert gradebook_scores(mini_course) == EXPECTED
    assert csv_scores(mini_course) == EXPECTED


def test_a_grader_killed_between_a_batch_and_its_commit_loses_nothing(
    mini_course, three_subs, tmp_path
):
    """SIGKILL ``grade`` once it has staged a batch (autograded notebooks, results JSON)
    and waits to commit it (the gradebook locked by another program): the batch stays
    pending, not in the gradebook, and the next run commits it without grading it again."""
    first = tmp_path / "first"  # s0 alone: the gradebook knows the assignment, s0 is kept
    first.mkdir()
    (first / "s0.ipynb").write_bytes((three_subs / "s0.ipynb").read_bytes())
    grade("mini", submissions=first, course=mini_course, workers=1, sandbox=SANDBOX)
    results = mini_course / "reports/mini/results"
    args = CLI + ["grade", "mini", "--submissions", str(three_subs), "--course", str(mini_course)]
    args += ["--workers", "2", "--gradebook-wait", "600"]
    holder = GradebookHolder(mini_course)
    try:
        said = tmp_path / "grade.err"
        with open(said, "w") as err:
            proc = subprocess.Popen(args, start_new_session=True, stdout=err, stderr=err)
        try:
            waiting = wait_for(lambda: "gradebook is locked" in said.read_text(), timeout=120)
            assert waiting, said.read_text()
            staged = {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")}
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        holder.release()
    finally:
        holder.close()
    batch = sorted(set(staged) - {"s0"})
    assert batch, staged
    for student in batch:
        assert staged[student]["in_gradebook"] is False
        assert staged[student]["score"] == EXPECTED[student]
        assert (mini_course / "autograded" / student / "mini/mini.ipynb").is_file()
    assert gradebook_scores(mini_course) == {"s0": 4.0}  # the batch's commit never happened

    again = grade("mini", submissions=three_subs, course=mini_course, workers=2, sandbox=SANDBOX)
    assert set(batch) <= set(again.reused) and not set(batch) & set(again.graded_now)
    assert sorted(again.reused + again.graded_now) == ["s0", "s1", "s2"]
    assert gradebook_scores(mini_course) == EXPECTED
    assert csv_scores(mini_course) == EXPECTED
    assert all(r.in_gradebook for r in load_results(results).values())
    pages = sorted(p.parts[-3] for p in (mini_course / "feedback").glob("*/mini/mini.html"))
    assert pages == ["s0", "s1", "s2"]  # the batch's pages too, written once it is committed


# ---------------------------------------------------------------------------------------
# A full disk is reported, not corrupted
# ---------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 32 MiB tmpfs (the grader runs as root here), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "--lazy", str(mount)], check=False)


def fill_disk(mount) -> Path:
    """Write a ballast file until the disk is full; return it."""
    ballast = mount / "ballast"
    with open(ballast, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return ballast


def half_written(course) -> list[str]:
    """Temporary files left behind, and results or pages that are not complete."""
    bad = [str(p) for p in course.rglob("*.tmp")]
    for path in course.glob("reports/*/results/*.json"):
        try:
            json.loads(path.read_text())
        except ValueError:
            bad.append(str(path))
    bad += [str(p) for p in course.glob("feedback/**/*.html") if "</html>" not in p.read_text()]
    return bad


def test_a_full_disk_stops_grade_with_the_reason_and_a_rerun_finishes(small_disk, tmp_path):
    """The disk fills up mid-run: grade stops with the reason, what was recorded (and the
    CSVs and pages of the run before) stays whole, and a rerun with space finishes."""
    course = new_course(small_disk / "course", {"mini": FILES / "mini_course/source/mini"})
    release_nb = released_notebook(course, "mini", "mini")
    subs = tmp_path / "subs"
    write_nb(subs / "s0.ipynb", fill(release_nb, **CORRECT))
    grade("mini", submissions=subs, course=course, workers=2, sandbox=SANDBOX)
    reports = course / "reports/mini"
    csv_before = (reports / "grades.csv").read_text()
    write_nb(subs / "s1.ipynb", fill(release_nb, **CORRECT))
    write_nb(subs / "s2.ipynb", fill(release_nb, **CORRECT))
    ballast: list[Path] = []

    def progress(student, n, total, workers):
        if n == 1:  # one more result recorded, then the disk is full
            ballast.append(fill_disk(small_disk))

    with pytest.raises(RecordError, match="disk is full") as stopped:
        grade(
            "mini", submissions=subs, course=course, workers=1, sandbox=SANDBOX, progress=progress
        )
    assert "No space left on device" in str(stopped.value)
    recorded = sorted(p.stem for p in (reports / "results").glob("*.json"))
    assert len(recorded) == 2, recorded  # s0, and the one recorded before the disk filled
    assert gradebook_scores(course) == dict.fromkeys(recorded, 4.0)
    assert (reports / "grades.csv").read_text() == csv_before
    assert half_written(course) == []

    # Neither the CSVs nor a feedback page can be rewritten now; the old ones stay whole.
    page = course / "feedback" / recorded[1] / "mini" / "mini.html"
    page_before = page.read_text()
    for write in (
        lambda: write_csvs(reports, load_results(reports / "results")),
        lambda: write_pages(course, "mini", student=recorded[1]),
    ):
        with pytest.raises(OSError) as full:
            write()
        assert full.value.errno == errno.ENOSPC
    # A batch of pages, written in the run's second process, stops the run the same way.
    with pytest.raises(RecordError, match="disk is full"):
        with PageWriter(course, "mini") as writer:
            writer.write(recorded)
    assert (reports / "grades.csv").read_text() == csv_before
    assert page.read_text() == page_before
    assert half_written(course) == []

    ballast[0].unlink()
    again = grade("mini", submissions=subs, course=course, workers=2, sandbox=SANDBOX)
    assert sorted(again.reused) == recorded and len(again.graded_now) == 1
    assert gradebook_scores(course) == {"s0": 4.0, "s1": 4.0, "s2": 4.0}
    assert csv_scores(course) == {"s0": 4.0, "s1": 4.0, "s2": 4.0}
    assert half_written(course) == []
