"""The markers are complete: a test that starts a kernel, a browser, a Dask cluster, a
PostgreSQL server or JupyterHub without its marker fails with "mark it `<marker>`", and fails fast.

An inner pytest session (``pytester``) runs small tests with the suite's marker plugin;
each unmarked test starts the real thing in one of the ways the suite does.  That test
is marked with everything it lets the inner session start.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest
from support.markers import command_line

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

INNER = """
import subprocess, sys

import nbformat
import pytest
from support.course import CORRECT, MINI_SOURCE, fill, new_course, released_notebook, write_nb


def _kernel():
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    NotebookClient(nb, kernel_name="python3", timeout=60).execute()


def _submissions(tmp_path):
    course = new_course(tmp_path / "course", {"mini": MINI_SOURCE})
    release = released_notebook(course, "mini", "mini")
    write_nb(tmp_path / "subs" / "alice.ipynb", fill(release, **CORRECT))
    return course, tmp_path / "subs"


def test_unmarked_nbclient_kernel():
    _kernel()


def test_unmarked_grading_in_this_process(tmp_path):
    from autograder.grade import Harness, grade

    course, subs = _submissions(tmp_path)
    grade("mini", submissions=subs, course=course, workers=1, harness=Harness(feedback=False))


def test_unmarked_grading_command(tmp_path):
    course, subs = _submissions(tmp_path)
    command = [sys.executable, "-m", "autograder", "grade", "mini", "--submissions", str(subs)]
    subprocess.run(command + ["--course", str(course)], capture_output=True, timeout=300)


def test_unmarked_chromium(tmp_path):
    from playwright.sync_api import sync_playwright
    from support.browser import launch_chromium

    with sync_playwright() as playwright:
        launch_chromium(playwright, tmp_path / "profile").close()


def test_unmarked_dask_cluster():
    from distributed import LocalCluster

    LocalCluster(n_workers=1, processes=False)


def test_unmarked_postgres_server():
    from support.postgres_server import start_postgres

    start_postgres().stop()


def test_unmarked_jupyterhub():
    from pathlib import Path

    subprocess.run([str(Path(sys.executable).parent / "jupyterhub"), "--help-all"], timeout=120)


def test_unmarked_plain_process_is_fine():
    assert subprocess.run(["true"]).returncode == 0


def test_unmarked_fork_of_this_process_is_fine():
    import os
    import time

    assert subprocess.run(["true"]).returncode == 0  # the watcher runs from here on
    pid = os.fork()
    if pid == 0:  # a copy of this process, with its command line, which names a marker's word
        time.sleep(0.3)
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0


@pytest.mark.kernel
def test_marked_kernel_is_fine():
    _kernel()
"""


@pytest.mark.kernel
@pytest.mark.browser
@pytest.mark.cluster
@pytest.mark.postgres
@pytest.mark.hub
def test_a_test_that_starts_what_it_is_not_marked_for_fails_fast(pytester):
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\npytest_plugins = ['support.markers']\n"
    )
    pytester.makepyfile(test_inner=INNER)
    report = pytester.path / "report.xml"
    start = time.monotonic()
    # The -k selects every test, and puts a watched word in the inner session's command line.
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", f"--junitxml={report}", "-k", "not postgres_word"
    )
    elapsed = time.monotonic() - start
    problems = _problems(report)
    for test, marker in [
        ("test_unmarked_nbclient_kernel", "kernel"),
        ("test_unmarked_grading_in_this_process", "kernel"),
        ("test_unmarked_grading_command", "kernel"),
        ("test_unmarked_chromium", "browser"),
        ("test_unmarked_dask_cluster", "cluster"),
        ("test_unmarked_postgres_server", "postgres"),
        ("test_unmarked_jupyterhub", "hub"),
    ]:
        assert any(f"mark it `{marker}`" in text for text in problems[test]), (test, problems)
    assert problems["test_unmarked_plain_process_is_fine"] == []
    assert problems["test_unmarked_fork_of_this_process_is_fine"] == []
    assert problems["test_marked_kernel_is_fine"] == []
    # fast: each start fails at once, or its process is killed at once
    assert elapsed < 120, elapsed


def _problems(report: Path) -> dict[str, list[str]]:
    """{test name: the messages of its failures and errors} from a JUnit XML report."""
    import xml.etree.ElementTree as ET

    found: dict[str, list[str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        texts = found.setdefault(case.get("name"), [])
        for problem in [*case.iter("failure"), *case.iter("error")]:
            texts.append(f"{problem.get('message', '')} {problem.text or ''}")
    return found


def test_a_process_that_is_gone_or_a_zombie_has_no_command_line():
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert command_line(child.pid) == ""  # a zombie: psutil refuses its command line too
    with pytest.raises(psutil.ZombieProcess):
        psutil.Process(child.pid).cmdline()
    child.wait()
    assert command_line(child.pid) == ""


def test_the_checkouts_own_path_is_no_word_of_a_command(monkeypatch):
    """A clone may live in any folder: a word in its path (``dask``, ``postgres``) does not
    make every process started from it a Dask worker or a database server."""
    from support import markers

    monkeypatch.setattr(markers, "CHECKOUT", "/srv/dask-postgres-course")
    plain = "/srv/dask-postgres-course/.venv/bin/python -m ruff check autograder"
    assert markers.starts(plain, {"cluster", "postgres"}) == []
    worker = "/srv/dask-postgres-course/.venv/bin/dask worker tcp://127.0.0.1:8786"
    assert markers.starts(worker, {"cluster", "postgres"}) == ["cluster"]
