"""Kernels forked from a warm parent (``autograder.sandbox.warm``): isolation, limits, fallback.

Jobs run in-process here (``grade_job``, as a worker runs it), with the real sandbox and
real kernels, so the worker's warm parent and spare are this process's.  Two consecutive
submissions of one worker, A then B, are the case that matters: B's kernel is forked
from the same warm parent that A's was (the test checks it is the same process), so
anything A could leave behind in that parent, B would find.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import nbformat
import numpy
import psutil
import pytest
from support.course import (
    CORRECT,
    FILES,
    MINI_SOURCE,
    fill,
    job_factory,
    ready_mini_course,
    sandbox_available,
    write_nb,
)

from autograder import cli
from autograder.grading.job import grade_job
from autograder.render.terminal import kernel_lines
from autograder.sandbox import warm

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.kernel,
    pytest.mark.skipif(not sandbox_available(), reason="needs the bubblewrap sandbox"),
]

#: A's solution cell: it changes everything a later submission might see, and leaves a
#: detached process running.  ``{token}`` makes its sleep findable on the host.
A_CELL = """
import builtins, os, random, subprocess, sys, types
import matplotlib
import numpy as np
SECRET_OF_A = 42
sys.modules["planted_by_a"] = types.ModuleType("planted_by_a")
open("left_by_a.txt", "w").write("a")
open("/tmp/left_by_a.txt", "w").write("a")
open("/dev/shm/left_by_a", "w").write("a")
os.environ["SET_BY_A"] = "1"
np.allclose = lambda *args, **kwargs: True
np.random.seed(12345)
builtins.PLANTED_BY_A = True
builtins.round = lambda *args: 0
matplotlib.rcParams["lines.linewidth"] = 17.0
subprocess.Popen(["sleep", "{token}"], start_new_session=True)
def square(x):
    return x ** 2
"""

#: B's solution cell: it reports what it sees.
B_CELL = """
import builtins, json, os, random, sys
import matplotlib
import numpy as np
def _found(top):
    hits = []
    for root, dirs, files in os.walk(top):
        hits += [os.path.join(root, f) for f in files if f.startswith("left_by_a")]
    return hits
print("B-SEES " + json.dumps({
    "globals": "SECRET_OF_A" in globals(),
    "module": "planted_by_a" in sys.modules,
    "files": _found("/tmp") + _found("/dev/shm") + _found("/run") + _found(os.getcwd()),
    "env": "SET_BY_A" in os.environ,
    "allclose": bool(np.allclose(1.0, 2.0)),
    "builtins": hasattr(builtins, "PLANTED_BY_A"),
    "round": round(2.6),
    "rc": matplotlib.rcParams["lines.linewidth"],
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "numpy_draws": np.random.random(4).tolist(),
    "random_draws": [random.random() for _ in range(4)],
}))
def square(x):
    return x ** 2
"""

#: Prints the numpy global and Python random streams (to compare two kernels).
DRAWS_CELL = """
import json, random
import numpy as np
print("DRAWS " + json.dumps([np.random.random(4).tolist(), [random.random() for _ in range(4)]]))
def square(x):
    return x ** 2
"""


@pytest.fixture(scope="module")
def pristine_library_course(tmp_path_factory) -> Path:
    """The ``mini`` course with a first cell that imports numpy and matplotlib, as every
    lesson's does: its warm parent imports them too, so what a kernel changes in them is
    what a later kernel could see if forking leaked."""
    source = tmp_path_factory.mktemp("libraries") / "mini"
    shutil.copytree(MINI_SOURCE, source)
    nb = nbformat.read(source / "mini.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import matplotlib\nimport numpy as np"))
    nbformat.write(nb, source / "mini.ipynb")
    return ready_mini_course(source.parent / "course", source)


@pytest.fixture
def library_jobs(pristine_library_course, tmp_path):
    """Jobs of that course: ``library_jobs(student, **cell_sources)``."""
    course = shutil.copytree(pristine_library_course, tmp_path / "course", symlinks=True)
    return job_factory(Path(course), tmp_path / "scratch")


def zygote(spares) -> psutil.Process:
    """The warm parent's Python (its sandbox's init is its parent)."""
    return psutil.Process(the_parent(spares).init_pid).children()[0]


def zygote_maps(spares) -> str:
    """The memory map of the warm parent's Python, less the paths of its own run folder."""
    maps = open(f"/proc/{zygote(spares).pid}/maps").read()
    return maps.replace(str(the_parent(spares).run_dir), "")


def printed(result) -> str:
    nb = nbformat.reads(result.autograded, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def line_after(text: str, prefix: str):
    line = next(line for line in text.splitlines() if line.startswith(prefix))
    return json.loads(line[len(prefix) :])


def sleeping(token: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] and process.info["cmdline"][-1] == token:
            found.append(process.pid)
    return found


def the_parent(spares) -> warm.WarmParent:
    parents = list(spares.warm._parents.values())
    assert len(parents) == 1, parents
    return parents[0]


def test_b_sees_nothing_of_a_in_the_same_warm_parent(library_jobs, spares):
    token = f"6100.{os.getpid()}"
    a = grade_job(library_jobs("alice", square=A_CELL.replace("{token}", token)), spares)
    assert a.status == "graded" and a.kernel == "forked", a
    parent = the_parent(spares)
    parent_pid = parent.init_pid
    # A's detached sleep died with A's kernel namespace when A's job ended, before B's
    # began (the reaper's exit kills it; it was never the warm parent's child).
    assert sleeping(token) == []

    b = grade_job(library_jobs("bob", square=B_CELL), spares)
    assert b.status == "graded" and b.kernel == "forked", b
    assert the_parent(spares) is parent and parent.init_pid == parent_pid  # the same parent
    seen = line_after(printed(b), "B-SEES ")
    assert seen["globals"] is False and seen["module"] is False
    assert seen["files"] == [] and seen["env"] is False
    assert seen["allclose"] is False and seen["builtins"] is False and seen["round"] == 3
    assert seen["rc"] == 1.5  # matplotlib's default
    assert seen["processes"] == [1, 2]  # its namespace's reaper and itself: nothing of A
    # A seeded numpy's global generator with 12345; B's stream is not that one.
    assert seen["numpy_draws"] != numpy.random.RandomState(12345).random(4).tolist()
    assert not [f for f in b.flags if f.startswith("tamper")], b.flags  # A's patches are gone


def test_each_forked_kernel_has_its_own_random_streams(library_jobs, spares):
    """Forked children inherit their parent's numpy state unless reseeded: they must not."""
    results = [grade_job(library_jobs(n, square=DRAWS_CELL), spares) for n in ("a", "b", "c")]
    assert [r.kernel for r in results] == ["forked"] * 3
    draws = [line_after(printed(r), "DRAWS ") for r in results]
    numpy_streams = {json.dumps(d[0]) for d in draws}
    python_streams = {json.dumps(d[1]) for d in draws}
    assert len(numpy_streams) == 3 and len(python_streams) == 3, draws


def test_memory_watch_and_leftover_kill_see_a_forked_kernels_processes(jobs, spares):
    """A forked kernel has the warm parent's environment (no job marker): the job's
    processes are found by its pid namespace.  Four 700 MiB children pass the per-process
    limit but not the 2 GiB total.  Without the watch the cell would sleep past its time
    limit and the job would end without the memory flag: how long it took proves nothing
    more, and on a busy machine it is longer."""
    forks = (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (700 * 2**20)\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "time.sleep(30)\n"
        "def square(x):\n"
        "    return x ** 2\n"
    )
    result = grade_job(jobs("hog", square=forks), spares)
    assert result.kernel == "forked"
    assert result.status == "failed" and "memory-limit" in result.flags, result
    assert "GiB limit" in result.reason


def test_a_warm_parent_that_cannot_start_falls_back_to_fresh_kernels(jobs, spares, monkeypatch):
    """No answer from the parent in time (a machine too slow, or one where it cannot run):
    the kernel starts fresh, the result says why, and the same grade comes out."""
    monkeypatch.setattr(warm, "READY_TIMEOUT", 0.0)
    result = grade_job(jobs("alice"), spares)
    assert result.status == "graded" and result.score == 4
    assert result.kernel.startswith("fresh: the warm parent could not start"), result.kernel
    again = grade_job(jobs("bob"), spares)  # remembered: not retried for every kernel
    assert again.kernel == result.kernel and again.score == 4
    lines = kernel_lines([result.kernel, again.kernel, "forked"])
    assert lines[0] == "kernels: 1 forked from a warm parent"
    assert lines[1].startswith("kernels: 2 started fresh (the warm parent could not start")


def test_the_warm_parent_never_imports_the_reference_nor_starts_threads(library_jobs, spares):
    grade_job(library_jobs("alice", **CORRECT), spares)
    python = zygote(spares)
    assert python.num_threads() == 1
    maps = zygote_maps(spares)
    assert "_multiarray_umath" in maps and "matplotlib" in maps  # the libraries: imported
    assert "specdec" not in maps
    assert "zmq" not in " ".join(p.path for p in python.open_files())


def test_a_warm_parent_imports_numpy_and_matplotlib_only_for_an_assignment_that_does(jobs, spares):
    """``mini``'s source imports neither: its parent leaves them to the kernels, and a
    submission that imports them still gets them, seeded afresh."""
    result = grade_job(jobs("alice", square=DRAWS_CELL), spares)
    assert result.status == "graded" and result.kernel == "forked" and result.score == 4, result
    maps = zygote_maps(spares)
    assert "_multiarray_umath" not in maps and "matplotlib" not in maps
    assert "zmq" in maps  # the kernel's own modules: imported
    numpy_draws, python_draws = line_after(printed(result), "DRAWS ")
    assert len(numpy_draws) == len(python_draws) == 4


def test_killing_the_warm_parent_kills_its_kernels(jobs, spares):
    """A kernel cannot outlive its parent's sandbox (nor, through the tether, its worker)."""
    grade_job(jobs("alice"), spares)
    spare = spares.spare  # forked for the next job, alive now
    assert spare is not None and spare.km.kernel_start == "forked"
    kernel = spare.km._init_pid
    assert psutil.pid_exists(kernel)
    os.kill(the_parent(spares).init_pid, signal.SIGKILL)
    deadline = time.monotonic() + 60  # ends as soon as it is gone; a busy machine is slow
    while psutil.pid_exists(kernel) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == "zombie"


def test_scores_are_the_same_forked_and_fresh(graded_lessons, graded_e7_2_fresh):
    """Every sample of E7.2, graded both ways: the same score on every cell."""
    forked = graded_lessons["e7_2_acceptance_tests"]
    fresh = graded_e7_2_fresh
    names = sorted(p.stem for p in (FILES / "e7_2_acceptance_tests/submissions").glob("*.ipynb"))
    assert sorted(forked) == sorted(fresh) == names
    assert {r.kernel for r in forked.values()} == {"forked"}
    assert {r.kernel for r in fresh.values()} == {"fresh"}

    def cells(results):
        return {
            (name, c.grade_id): (c.score, c.status) for name, r in results.items() for c in r.cells
        }

    assert cells(forked) == cells(fresh)
    assert {n: r.status for n, r in forked.items()} == {n: r.status for n, r in fresh.items()}


def test_no_fork_is_said_in_the_summary(mini_course, mini_release, tmp_path, capsys):
    write_nb(tmp_path / "subs" / "alice.ipynb", fill(mini_release, **CORRECT))
    args = ["grade", "mini", "--submissions", str(tmp_path / "subs"), "--course", str(mini_course)]
    assert cli.main(args) == 0
    first = capsys.readouterr()
    assert "kernels: 1 forked from a warm parent" in first.out, first.err
    assert cli.main([*args, "--no-fork", "--force"]) == 0
    second = capsys.readouterr()
    assert "kernels: 1 started fresh (--no-fork)" in second.out, second.err
