"""The bubblewrap sandbox, tested directly with nbclient on small notebooks.

Each test starts real kernels in the sandbox (markers ``sandbox`` and ``kernel``).
The layout mimics grading: a course root with ``gradebook.db``, ``source/`` and two
workers' job directories under ``.scratch/``; the kernel runs in one job's notebook
directory and must see none of the rest.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from support.course import FILES, fill, lesson_preload, new_course, released_notebook, write_nb
from traitlets.config import Config

from autograder import sandbox
from autograder.sandbox import Limits, SandboxedKernelManager, kill_leftovers, sandbox_problem

pytestmark = [pytest.mark.sandbox, pytest.mark.kernel]

SMALL = Limits(
    memory_bytes=512 * 1024**2,
    cpu_seconds=20,
    max_processes=32,
    file_size_bytes=1024**2,
    scratch_bytes=8 * 1024**2,
)


@pytest.fixture(scope="module", autouse=True)
def _needs_sandbox():
    problem = sandbox_problem()
    if problem is not None:  # test_sandbox_runs_on_this_machine fails with the reason
        pytest.skip(f"sandbox unavailable: {problem}")


@pytest.fixture(scope="module", params=["forked", "fresh"])
def warm(request):
    """How kernels start: forked from a warm parent (the default), or fresh (--no-fork).

    One holder for the module, as a worker keeps one for all its jobs.
    """
    holder = sandbox.WarmParents() if request.param == "forked" else None
    yield holder
    if holder is not None:
        holder.close()


@pytest.fixture
def course(tmp_path, warm) -> dict:
    """A fake course root with a gradebook, a source notebook and two workers' jobs."""
    root = tmp_path / "course"
    (root / "source" / "e7").mkdir(parents=True)
    (root / "source" / "e7" / "lesson.ipynb").write_text('{"solution": "SECRET"}')
    (root / "gradebook.db").write_text("GRADEBOOK")
    job = root / ".scratch" / "job-alice"
    nbdir = job / "course" / "autograded" / "alice" / "e7"
    nbdir.mkdir(parents=True)
    (nbdir / "lesson.ipynb").write_text('{"hidden": "tests"}')
    (nbdir / "data.csv").write_text("1,2,3\n")
    other = root / ".scratch" / "job-bob" / "course" / "autograded" / "bob" / "e7"
    other.mkdir(parents=True)
    (other / "lesson.ipynb").write_text('{"bob": "answers"}')
    return {"root": root, "job": job, "nbdir": nbdir, "other": other, "warm": warm}


def run(cells, course, *, limits=SMALL, timeout=10, metadata=None, **client_kw):
    """Execute ``cells`` in a sandboxed kernel; return (notebook, exception or None)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src)) for src in cells]
    for cell, meta in zip(nb.cells, metadata or [], strict=False):
        cell.metadata.update(meta)
    config = Config()
    kernels = sandbox.configure(
        config, job_dir=course["job"], limits=limits, warm=course["warm"], preload=lesson_preload()
    )
    client = NotebookClient(
        nb,
        config=config,
        kernel_manager_class=SandboxedKernelManager,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=True,
        interrupt_on_timeout=True,
        resources={"metadata": {"path": str(course["nbdir"])}},
        on_cell_execute=config.Execute.on_cell_execute,
        **client_kw,
    )
    try:
        client.execute()
        error = None
    except Exception as exc:  # the test decides whether it is expected
        error = exc
    assert_started_as_asked(kernels, course["warm"])
    return nb, error


def assert_started_as_asked(kernels, warm) -> None:
    """The kernel was forked when a warm parent was given (no silent fallback), else fresh."""
    km = kernels.active()
    assert km is not None
    assert km.kernel_start == ("forked" if warm is not None else "fresh"), km.kernel_start


def stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def errors(cell) -> list[str]:
    return [o["ename"] for o in cell.outputs if o.get("output_type") == "error"]


def alive_in_sandboxes(job: Path) -> list[int]:
    """Pids still running in this job's sandboxes."""
    return sandbox.running(job)


def test_sandbox_runs_on_this_machine():
    assert sandbox_problem() is None


def test_isolated_kernel_sees_only_its_scratch_directory(course, tmp_path):
    root, nbdir, other = course["root"], course["nbdir"], course["other"]
    os.environ["SPECDEC_TEST_SECRET"] = "grader-only"
    home_entries = [
        str(p)
        for p in Path.home().iterdir()
        if not any(
            str(Path(x).resolve()).startswith(str(p.resolve()))
            for x in (sys.prefix, sys.base_prefix)
        )
    ][:20]
    probe = f"""
        import json, os
        paths = {{
            "gradebook (relative)": "../../../../../../gradebook.db",
            "gradebook (absolute)": {str(root / "gradebook.db")!r},
            "source (relative)": "../../../../../../source/e7/lesson.ipynb",
            "source (absolute)": {str(root / "source" / "e7" / "lesson.ipynb")!r},
            "own notebook": {str(nbdir / "lesson.ipynb")!r},
            "other job": {str(other / "lesson.ipynb")!r},
        }}
        home = {home_entries!r}
        print(json.dumps({{
            "visible": [k for k, p in paths.items() if os.path.exists(p)],
            "home": [p for p in home if os.path.exists(p)],
            "data": open("data.csv").read(),
            "cwd": os.getcwd(),
            "uid": os.getuid(),
            "secret": os.environ.get("SPECDEC_TEST_SECRET"),
            "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")],
            "root": sorted(os.listdir("/")),
        }}))
    """
    try:
        nb, error = run([probe], course)
    finally:
        del os.environ["SPECDEC_TEST_SECRET"]
    assert error is None, error
    seen = json.loads(stdout(nb.cells[0]))
    assert seen["visible"] == []
    assert seen["home"] == []
    assert seen["data"] == "1,2,3\n"
    assert seen["cwd"] == str(nbdir)
    assert seen["secret"] is None
    assert seen["caps"] == ["0000000000000000"]
    if os.geteuid() == 0:
        assert seen["uid"] == sandbox.SANDBOX_UID
    assert not kill_leftovers(course["job"])


def test_writes_stay_in_the_sandbox(course):
    root, nbdir = course["root"], course["nbdir"]
    targets = {
        "course root": str(root / "MARKER"),
        "gradebook": str(root / "gradebook.db"),
        "filesystem root": "/MARKER",
        "usr": "/usr/MARKER",
        "python": os.path.join(sys.prefix, "MARKER"),
        "reference": "/opt/specdec/MARKER",
        "other job": str(course["other"] / "MARKER"),
        "data file": "data.csv",
    }
    cell = f"""
        import json
        done = {{}}
        for name, path in {targets!r}.items():
            try:
                with open(path, "a") as f:
                    f.write("pwned")
                done[name] = "written"
            except OSError as exc:
                done[name] = type(exc).__name__
        open("scratch.txt", "w").write("mine")
        done["scratch"] = open("scratch.txt").read()
        print(json.dumps(done))
    """
    nb, error = run([cell], course)
    assert error is None, error
    done = json.loads(stdout(nb.cells[0]))
    assert done.pop("scratch") == "mine"  # its working directory is writable...
    # Outside its tmpfs mounts (cwd, /tmp) every write fails.  (The test's course lives
    # under /tmp, so writing to its path inside the sandbox lands in the sandbox's /tmp.)
    for name in ("filesystem root", "usr", "python", "reference", "data file"):
        assert done[name] != "written", (name, done)
    assert not (root / "MARKER").exists()
    assert not (course["other"] / "MARKER").exists()
    assert (root / "gradebook.db").read_text() == "GRADEBOOK"
    assert (nbdir / "data.csv").read_text() == "1,2,3\n"
    assert not (nbdir / "scratch.txt").exists()  # ...but it is a tmpfs: nothing reaches the host


def test_no_network_not_even_loopback(course):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []
    server.settimeout(8)
    threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True).start()
    cell = f"""
        import socket
        results = []
        for host in ("127.0.0.1", "localhost", "pypi.org"):
            try:
                socket.create_connection((host, {port}), timeout=2).close()
                results.append("connected")
            except OSError as exc:
                results.append(type(exc).__name__)
        print(results)
    """
    try:
        nb, error = run([cell], course)
    finally:
        server.close()
    assert error is None, error
    assert "connected" not in stdout(nb.cells[0])
    assert accepted in ([], [None])


def _accept(server):
    try:
        return server.accept()[0]
    except OSError:
        return None


def test_correct_notebook_runs_with_numpy_and_matplotlib(course):
    cells = [
        "import numpy as np\nimport matplotlib.pyplot as plt",
        "rng = np.random.default_rng(0)\nx = rng.random(1000)\nprint(round(float(x.mean()), 3))",
        "plt.plot(np.sort(x))\nplt.show()",
    ]
    nb, error = run(cells, course, timeout=30)
    assert error is None, error
    assert all(not errors(c) for c in nb.cells)
    import numpy as np

    expected = round(float(np.random.default_rng(0).random(1000).mean()), 3)
    assert stdout(nb.cells[1]).strip() == str(expected)
    assert any("image/png" in o.get("data", {}) for o in nb.cells[2].outputs)
    stderr = [o for c in nb.cells for o in c.outputs if o.get("name") == "stderr"]
    assert stderr == []  # no matplotlib cache warning: it gets a writable config dir


def test_memory_bomb_raises_memory_error(course):
    cells = [
        "blob = bytearray(4 * 1024**3)",  # 4 GiB against a 512 MiB limit
        "import numpy as np\nbig = np.ones(2**30)",
        "print('still alive')",
    ]
    nb, error = run(cells, course)
    assert error is None, error
    assert errors(nb.cells[0]) == ["MemoryError"]
    assert errors(nb.cells[1]) == ["MemoryError"]
    assert stdout(nb.cells[2]).strip() == "still alive"


def test_process_count_is_capped_and_nothing_survives(course):
    cell = """
        import os, time
        started = 0
        try:
            for _ in range(200):
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
                started += 1
        except OSError as exc:
            print("stopped by", type(exc).__name__)
        print("started", started)
    """
    nb, error = run([cell], course)
    assert error is None, error
    out = stdout(nb.cells[0])
    started = int(out.split("started")[1])
    assert "stopped by BlockingIOError" in out
    assert started < SMALL.max_processes
    assert alive_in_sandboxes(course["job"]) == []
    assert kill_leftovers(course["job"]) == 0


def test_infinite_loop_is_interrupted_and_the_next_cell_runs(course):
    nb, error = run(["while True:\n    pass", "print('after')"], course, timeout=2)
    assert error is None, error
    assert "KeyboardInterrupt" in errors(nb.cells[0])
    assert stdout(nb.cells[1]).strip() == "after"


def test_loop_that_ignores_interrupts_is_killed(course):
    cell = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    start = time.monotonic()
    nb, error = run(
        [cell, "print('after')"],
        course,
        timeout=2,
        iopub_timeout=2,
        error_on_timeout={"ename": "CellTimeoutError", "evalue": "", "traceback": []},
    )
    assert time.monotonic() - start < 30  # not the 20 s of CPU time it may burn
    assert stdout(nb.cells[1]).strip() != "after"
    assert alive_in_sandboxes(course["job"]) == []


def test_cpu_time_limit_kills_a_busy_kernel(course):
    limits = Limits(**{**SMALL.__dict__, "cpu_seconds": 2})
    nb, error = run(["while True:\n    pass"], course, limits=limits, timeout=30)
    assert isinstance(error, DeadKernelError)
    assert alive_in_sandboxes(course["job"]) == []


def test_os_exit_ends_the_kernel_and_leaves_nothing(course):
    nb, error = run(["import os\nos._exit(3)", "print('after')"], course)
    assert isinstance(error, DeadKernelError)
    assert alive_in_sandboxes(course["job"]) == []


def test_file_size_and_scratch_space_are_capped(course):
    cell = """
        import errno
        out = {}
        for name, size in (("big.bin", 2 * 1024**2), ("/tmp/big.bin", 2 * 1024**2)):
            try:
                with open(name, "wb") as f:
                    f.write(b"x" * size)
                out[name] = "written"
            except OSError as exc:
                out[name] = errno.errorcode[exc.errno]
        total = 0
        try:
            for i in range(100):
                with open(f"part{i}.bin", "wb") as f:
                    f.write(b"x" * (512 * 1024))
                total += 1
        except OSError as exc:
            out["parts"] = errno.errorcode[exc.errno]
        out["total"] = total
        print(out)
    """
    nb, error = run([cell], course)
    assert error is None, error
    out = eval(stdout(nb.cells[0]))  # a dict literal printed by the kernel
    assert out["big.bin"] == "EFBIG" and out["/tmp/big.bin"] == "EFBIG"
    assert out["parts"] == "ENOSPC"
    assert out["total"] * 512 * 1024 <= SMALL.scratch_bytes


def test_kill_leftovers_kills_detached_processes(course):
    cell = """
        import subprocess
        subprocess.Popen(["sleep", "300"], start_new_session=True)
        print("spawned")
    """
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(textwrap.dedent(cell))])
    config = Config()
    kernels = sandbox.configure(
        config, job_dir=course["job"], limits=SMALL, warm=course["warm"], preload=lesson_preload()
    )
    client = NotebookClient(
        nb,
        config=config,
        kernel_manager_class=SandboxedKernelManager,
        kernel_name="python3",
        timeout=10,
        allow_errors=True,
        resources={"metadata": {"path": str(course["nbdir"])}},
    )
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        assert stdout(nb.cells[0]).strip() == "spawned"
        assert_started_as_asked(kernels, course["warm"])
        running = alive_in_sandboxes(course["job"])
        assert len(running) >= 3  # the sandbox's init, the kernel, sleep
        assert kill_leftovers(course["job"]) >= 3
        assert alive_in_sandboxes(course["job"]) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="gating the reference needs a root grader")
def test_reference_is_readable_only_while_a_test_cell_runs(course):
    test_meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}}
    cells = [
        "try:\n    import specdec_reference\n    print('imported')\nexcept ImportError:\n"
        "    print('hidden')",
        "import specdec_reference as _ref\nprint(_ref.accept_prob(0.5, 0.8))\n"
        "import os, specdec_reference.testing.guard as _g\n"  # from the bytecode compiled for it
        "print(all(os.path.isfile(m.__cached__) for m in (_ref, _g)))",
        "import os\nprint(os.access('/opt/specdec/specdec_reference', os.R_OK))",
    ]
    nb, error = run(cells, course, metadata=[{}, test_meta, {}])
    assert error is None, error
    assert stdout(nb.cells[0]).strip() == "hidden"
    assert stdout(nb.cells[1]).split() == ["0.625", "True"]
    assert stdout(nb.cells[2]).strip() == "False"


def test_interrupt_reaches_the_kernel_not_bubblewrap(course):
    nb, error = run(["import time\ntime.sleep(30)", "print('alive')"], course, timeout=2)
    assert error is None, error
    assert "KeyboardInterrupt" in errors(nb.cells[0])
    assert stdout(nb.cells[1]).strip() == "alive"


def test_kernel_processes_are_gone_after_a_normal_run(course):
    nb, error = run(["import subprocess\np = subprocess.Popen(['sleep', '300'])"], course)
    assert error is None, error
    deadline = time.monotonic() + 5
    while alive_in_sandboxes(course["job"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive_in_sandboxes(course["job"]) == []


def test_sandbox_problem_names_a_missing_bwrap(monkeypatch):
    sandbox.sandbox_problem.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    try:
        assert "bubblewrap" in sandbox_problem()
    finally:
        sandbox.sandbox_problem.cache_clear()


# ---------------------------------------------------------------------------------------
# Wherever things live: the Python installation, the course, the scratch space
# ---------------------------------------------------------------------------------------

KERNEL_FROM_ELSEWHERE = """
import sys
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient
from traitlets.config import Config

from autograder import sandbox

job = Path(sys.argv[1])
warm = sandbox.WarmParents() if sys.argv[2] == "forked" else None
nbdir = job / "notebook dir"
nbdir.mkdir(parents=True)
config = Config()
kernels = sandbox.configure(
    config, job_dir=job, limits=sandbox.Limits(), warm=warm, preload=sandbox.preload_for({"numpy"})
)
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell("import sys, numpy\\nprint(sys.prefix)")]
try:
    NotebookClient(
        nb,
        config=config,
        kernel_manager_class=sandbox.SandboxedKernelManager,
        kernel_name="python3",
        timeout=60,
        resources={"metadata": {"path": str(nbdir)}},
    ).execute()
finally:
    sandbox.kill_leftovers(job)
    if warm is not None:
        warm.close()
print("KERNEL SAYS", nb.cells[0].outputs[0]["text"].strip())
print("KERNEL STARTED", kernels.active().kernel_start)
"""


@pytest.mark.parametrize("start", ["forked", "fresh"])
def test_a_kernel_starts_from_a_virtualenv_under_tmp(start):
    """The venv reached under /tmp (a symlinked one, in a folder with a space and an ü):
    the sandbox's own /tmp must not hide the interpreter the kernel runs on."""
    place = Path(tempfile.mkdtemp(prefix="specdec venv ü-", dir="/tmp"))
    try:
        venv = place / "ven v"
        venv.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
        python = venv / "bin" / Path(sys.executable).name
        proc = subprocess.run(
            [str(python), "-c", KERNEL_FROM_ELSEWHERE, str(place / "job"), start],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        # The kernel ran on the interpreter as the grader reached it, under /tmp.
        assert f"KERNEL SAYS {venv}" in proc.stdout, proc.stdout
        assert f"KERNEL STARTED {start}\n" in proc.stdout, proc.stdout
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _under_tmp(tmp_path: Path) -> Path:
    return tmp_path / "a course ü"


def _under_home(tmp_path: Path) -> Path:
    home = Path.home() / ".cache"
    home.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="specdec-test-", dir=home)) / "course"


def _behind_symlink(tmp_path: Path) -> Path:
    real = tmp_path / "real place"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    return tmp_path / "link" / "kurs ñ"


@pytest.mark.parametrize(
    "place",
    [_under_tmp, _under_home, _behind_symlink],
    ids=["under /tmp, with a space and non-ASCII", "under the home directory", "behind a symlink"],
)
def test_grade_sandboxed_wherever_the_course_lives(place, tmp_path):
    from autograder.grade import grade

    course = new_course(place(tmp_path), {"mini": FILES / "mini_course" / "source" / "mini"})
    try:
        release_nb = released_notebook(course, "mini", "mini")
        correct = {
            "square": "def square(x):\n    return x ** 2",
            "cube": "def cube(x):\n    return x ** 3",
        }
        write_nb(course.parent / "subs" / "alice.ipynb", fill(release_nb, **correct))
        result = grade(
            "mini", submissions=course.parent / "subs", course=course, workers=1, timeout=20
        )
        alice = result.results["alice"]
        assert (alice.status, alice.score) == ("graded", 4), alice
    finally:
        if Path.home() in course.parents:
            shutil.rmtree(course.parent, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The grader's kernel client (autograder.sandbox.kernel_client)
# ---------------------------------------------------------------------------------------


def _started_kernel(course):
    """A sandboxed kernel manager with its kernel just launched (not yet ready), and a client."""
    import asyncio

    km = SandboxedKernelManager(
        kernel_name="python3", job_dir=str(course["job"]), warm=course["warm"]
    )
    loop = asyncio.new_event_loop()
    loop.run_until_complete(km.start_kernel(cwd=str(course["nbdir"]), env=dict(os.environ)))
    kc = km.client()
    kc.start_channels()
    return loop, km, kc


def _stop(loop, km, kc) -> None:
    kc.stop_channels()
    loop.run_until_complete(km.shutdown_kernel(now=True))
    loop.run_until_complete(km.cleanup_resources())
    loop.close()


def test_client_is_ready_with_iopub_connected_straight_after_launch(course):
    """Asked at once after the launch, the client waits for the kernel, then hears it on
    both channels; what the first request prints arrives under that request only."""
    from autograder.sandbox.kernel_client import SandboxedKernelClient

    loop, km, kc = _started_kernel(course)
    try:
        assert isinstance(kc, SandboxedKernelClient)
        loop.run_until_complete(kc.wait_for_ready(timeout=60))
        msg_id = kc.execute("print('first output')")
        texts, state = [], None
        while state != "idle":
            msg = loop.run_until_complete(kc.iopub_channel.get_msg(timeout=10))
            assert msg["parent_header"].get("msg_id") == msg_id, msg  # nothing left over
            if msg["msg_type"] == "stream":
                texts.append(msg["content"]["text"])
            state = msg["content"].get("execution_state", state)
        assert "".join(texts) == "first output\n"
        reply = loop.run_until_complete(kc.shell_channel.get_msg(timeout=10))
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "ok"
    finally:
        _stop(loop, km, kc)


def test_client_says_so_when_the_kernel_dies_or_does_not_answer(course):
    loop, km, kc = _started_kernel(course)
    try:
        loop.run_until_complete(kc.wait_for_ready(timeout=60))
        pid = km._kernel_pid()
        os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing
        try:
            with pytest.raises(RuntimeError, match="didn't respond in 2 seconds"):
                loop.run_until_complete(kc.wait_for_ready(timeout=2))
        finally:
            os.kill(pid, signal.SIGCONT)
        loop.run_until_complete(km.shutdown_kernel(now=True))
        with pytest.raises(RuntimeError, match="died before replying"):
            loop.run_until_complete(kc.wait_for_ready(timeout=30))
    finally:
        _stop(loop, km, kc)


def _run_cell(loop, kc, code: str) -> None:
    msg_id = kc.execute(code)
    while True:
        reply = loop.run_until_complete(kc.shell_channel.get_msg(timeout=10))
        if reply["parent_header"].get("msg_id") == msg_id:
            assert reply["content"]["status"] == "ok", reply["content"]
            return


def test_a_kernel_killed_at_once_is_not_interrupted_first(course, caplog):
    """``shutdown_kernel(now=True)`` kills without jupyter_client's SIGINT before the kill.

    A kernel that ignores SIGINT shows it: interrupting one logs that it is killed instead.
    """
    caplog.set_level(logging.WARNING)
    ignore = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"
    loop, km, kc = _started_kernel(course)  # the observation works: an interrupt is logged
    try:
        loop.run_until_complete(kc.wait_for_ready(timeout=60))
        _run_cell(loop, kc, ignore)
        loop.run_until_complete(km.interrupt_kernel())
        assert "the kernel ignores SIGINT: killing it" in caplog.text
    finally:
        _stop(loop, km, kc)
    caplog.clear()
    loop, km, kc = _started_kernel(course)
    try:
        loop.run_until_complete(kc.wait_for_ready(timeout=60))
        _run_cell(loop, kc, ignore)
        pid = km._kernel_pid()
        loop.run_until_complete(km.shutdown_kernel(now=True))
        assert "ignores SIGINT" not in caplog.text  # killed, never interrupted
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        _stop(loop, km, kc)
