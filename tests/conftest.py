"""Shared fixtures: throwaway courses built from the repository's real configuration."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
FILES = Path(__file__).resolve().parent / "files"

#: The one way to let tests skip: set to 1 on a machine that cannot run unprivileged user
#: namespaces, and the tests marked ``sandbox`` may skip there (the summary says how
#: many).  Any other skip, and any skip without it, fails the run.  CI never sets it.
WITHOUT_SANDBOX_ENV = "SPECDEC_TEST_WITHOUT_SANDBOX"


def _skips(config) -> tuple[list, list]:
    """(skips the opt-out allows, skips that fail the run) among this session's reports."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    opted_out = os.environ.get(WITHOUT_SANDBOX_ENV) == "1"
    allowed = [r for r in reports if opted_out and "sandbox" in getattr(r, "keywords", {})]
    return allowed, [r for r in reports if r not in allowed]


def pytest_sessionfinish(session, exitstatus):
    """A test that skipped did not run: a run with an unexpected skip fails."""
    if exitstatus == pytest.ExitCode.OK and _skips(session.config)[1]:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    allowed, refused = _skips(config)
    if allowed:
        terminalreporter.write_line(
            f"NOT TESTED: {len(allowed)} sandbox test(s) skipped because "
            f"{WITHOUT_SANDBOX_ENV}=1 (this machine cannot run the grading sandbox)",
            yellow=True,
            bold=True,
        )
    if refused:
        terminalreporter.write_line(
            f"FAILED: {len(refused)} test(s) skipped; a skipped test did not run, so the run "
            f"fails (only sandbox tests may skip, with {WITHOUT_SANDBOX_ENV}=1):",
            red=True,
            bold=True,
        )
        for report in refused:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            terminalreporter.write_line(f"  {report.nodeid}: {reason}", red=True)


def sandbox_available() -> bool:
    """True when the bubblewrap sandbox can run here (always, after `make test`'s setup)."""
    try:
        from autograder.sandbox import sandbox_problem
    except ImportError:
        return False
    return sandbox_problem() is None


def new_course(root: Path, assignments: dict[str, Path]) -> Path:
    """A course at ``root`` with the repo's nbgrader_config.py and the given source folders."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for name, folder in assignments.items():
        shutil.copytree(folder, root / "source" / name)
    return root


@pytest.fixture
def mini_course(tmp_path) -> Path:
    """A course holding the tiny `mini` assignment (no numpy: fast kernels)."""
    return new_course(tmp_path / "course", {"mini": FILES / "mini_course" / "source" / "mini"})


def released_notebook(course: Path, assignment: str, notebook: str) -> nbformat.NotebookNode:
    """Generate the release of ``assignment`` in ``course`` (no self-check) and read it."""
    from autograder.release import release

    release(assignment, course=course, check=False)
    return nbformat.read(course / "release" / assignment / f"{notebook}.ipynb", as_version=4)


def fill(nb: nbformat.NotebookNode, **sources: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` with the cells whose grade_id is a keyword replaced by its source."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in sources:
            cell.source = sources[gid]
    return out


def write_nb(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(nb, (str, bytes)):
        path.write_bytes(nb if isinstance(nb, bytes) else nb.encode())
    else:
        nbformat.write(nb, path)
    return path


def load_json(path: Path):
    return json.loads(Path(path).read_text())


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def end_session(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Stop a process started with ``start_new_session``: SIGTERM, then kill its session.

    What it started (kernels, worker processes) is in the same session and goes with it.
    """
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


#: Right answers for the ``mini`` assignment's two solution cells.
CORRECT = {"square": "def square(x):\n    return x ** 2", "cube": "def cube(x):\n    return x ** 3"}


@pytest.fixture
def spares():
    """This test's worker: the holder of its spare kernel and warm parents, emptied after."""
    from autograder.grading.spare import SpareKernels

    holder = SpareKernels()
    yield holder
    holder.discard()
    holder.warm.close()


@pytest.fixture
def jobs(mini_course, tmp_path):
    """A factory of sandboxed jobs for the mini course: ``jobs(student, **cell_sources)``."""
    from autograder import sandbox
    from autograder.grading.job import Job
    from autograder.grading.template import build_template

    template, _ = build_template(mini_course, "mini")
    release = released_notebook(mini_course, "mini", "mini")
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def make(student: str, **sources: str) -> Job:
        nb = fill(release, **{**CORRECT, **sources})
        return Job(
            assignment="mini",
            student=student,
            notebook="mini",
            data=nbformat.writes(nb).encode(),
            template=template,
            scratch_root=scratch,
            cell_timeout=10,
            sandbox=True,
            limits=sandbox.Limits(),
        )

    return make
