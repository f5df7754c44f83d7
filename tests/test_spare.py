"""The kernel a worker starts ahead for its next job (``autograder.grading.spare``).

Jobs run in-process here (``grade_job``, as a worker runs it), with the real sandbox and
real kernels, so the worker's spare is this process's.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient.util import run_sync
from support.course import CORRECT, fill, released_notebook, sandbox_available, write_nb

from autograder.grade import grade
from autograder.grading.job import grade_job
from autograder.grading.processes import JOB_MARKER, marked_processes

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.kernel,
    pytest.mark.skipif(not sandbox_available(), reason="needs the bubblewrap sandbox"),
]


WHERE = {"square": "import os\nprint('CWD', os.getcwd())\ndef square(x):\n    return x ** 2"}


@pytest.fixture
def adoptions(monkeypatch, spares):
    """What each job's executor got from ``spares.take`` (None: it started its own kernel)."""
    taken = []
    original = spares.take

    def recording_take(*args):
        km = original(*args)
        taken.append(km)
        return km

    monkeypatch.setattr(spares, "take", recording_take)
    return taken


def alive(km) -> bool:
    return bool(run_sync(km.is_alive)())


def test_the_next_job_runs_in_the_kernel_started_for_it(jobs, spares, adoptions):
    first = grade_job(jobs("alice"), spares)
    assert first.status == "graded" and first.score == 4
    waiting = spares.spare
    assert waiting is not None and alive(waiting.km) and not waiting.claimed
    assert waiting.job_dir.is_dir()

    second = grade_job(jobs("bob", **WHERE), spares)
    assert second.status == "graded" and second.score == 4, second
    assert adoptions == [None, waiting.km]  # alice started her own; bob got the spare
    assert not alive(waiting.km)  # shut down with bob's job
    assert second.flags == []  # nothing was left running
    # bob's code ran where a kernel started for his job would: its notebook's directory
    executed = nbformat.reads(second.autograded, as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert f"CWD {waiting.cwd}\n" in printed
    assert waiting.cwd.endswith("/autograded/student/mini")
    # and a new spare waits for the next job
    assert spares.spare is not None and spares.spare.km is not waiting.km


def test_a_spare_made_for_other_jobs_is_killed_not_used(jobs, spares, adoptions):
    grade_job(jobs("alice"), spares)
    waiting = spares.spare
    assert waiting is not None and alive(waiting.km)
    bob = jobs("bob")
    other = dataclasses.replace(
        bob, spec=dataclasses.replace(bob.spec, cell_timeout=12)
    )  # another run
    result = grade_job(other, spares)
    assert result.status == "graded" and result.score == 4
    assert adoptions == [None, None]
    assert not alive(waiting.km)
    assert not waiting.job_dir.exists()
    assert marked_processes(waiting.marker) == []
    assert result.flags == []


def test_a_claimed_spare_is_discarded_when_its_job_fails_before_running(jobs, spares, adoptions):
    grade_job(jobs("alice"), spares)
    waiting = spares.spare
    broken = nbformat.reads(jobs("bob").data.decode(), as_version=4)
    broken.cells.append(nbformat.from_dict(dict(broken.cells[2])))  # nbgrader cannot grade it
    job = dataclasses.replace(jobs("bob"), data=nbformat.writes(broken).encode())
    result = grade_job(job, spares)
    assert result.status == "invalid"
    assert adoptions == [None]  # execution never started
    assert not alive(waiting.km)
    assert marked_processes(waiting.marker) == []
    assert result.flags == []  # the spare is not reported as the learner's leftover


def test_no_kernel_outlives_a_grading_run(mini_course, tmp_path):
    release = released_notebook(mini_course, "mini", "mini")
    subs = tmp_path / "subs"
    for name in ("a", "b", "c", "d", "e"):
        write_nb(subs / f"{name}.ipynb", fill(release, **CORRECT))
    before = ours(marked_processes())  # (an earlier test's leftovers are not this run's)
    result = grade("mini", submissions=subs, course=mini_course, workers=2, timeout=10)
    assert {r.score for r in result.results.values()} == {4}
    # each worker had a spare for a sixth job that never came; both are gone
    deadline = time.monotonic() + 10
    while ours(marked_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ours(marked_processes()) - before == set()


def ours(pids: list[int]) -> set[int]:
    """The processes of this test's grading runs, or left over by any: run by this
    checkout's interpreter (on a shared machine, other checkouts' runs have job markers
    too), and not a live job of a grader running beside this one (another test process).

    A job's marker starts with its worker's pid: a leftover's worker is dead, and this
    run's workers are this process's descendants.
    """
    descendants = {p.pid for p in psutil.Process().children(recursive=True)}
    mine = set()
    for pid in pids:
        try:
            process = psutil.Process(pid)
            command = process.cmdline()
            worker = process.environ().get(JOB_MARKER, "").split("-", 1)[0]
        except psutil.Error:
            continue
        if not command or Path(command[0]).parent.parent != Path(sys.prefix):
            continue
        if not worker.isdigit() or int(worker) in descendants or not psutil.pid_exists(int(worker)):
            mine.add(pid)
    return mine
