"""A PostgreSQL gradebook (``CourseDirectory.db_url = "postgresql://..."``), for real.

Each test gets its own database on one real server that the module starts on a free
127.0.0.1 port (``support.postgres_server``).  ``grade``, ``report``, plain ``nbgrader``
commands and the formgrader all read and write that gradebook.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.course import (
    CORRECT,
    WRONG_SQUARE,
    fill,
    released_notebook,
    sandbox_available,
    write_nb,
)
from support.postgres_server import start_postgres

from autograder.grade import grade

pytestmark = [pytest.mark.kernel, pytest.mark.postgres]
SANDBOX = sandbox_available()
CLI = [sys.executable, "-m", "autograder.cli"]


@pytest.fixture(scope="module")
def postgres():
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture
def pg_course(unreleased_mini_course, postgres) -> tuple[Path, str]:
    """The mini course with its gradebook in a fresh PostgreSQL database (no SQLite file)."""
    url = postgres.create_database(f"gradebook_{uuid.uuid4().hex[:8]}")
    with open(unreleased_mini_course / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        fh.write(f"\nc.CourseDirectory.db_url = {url!r}\n")
    return unreleased_mini_course, url


def _env() -> dict[str, str]:
    """Plain ``nbgrader`` finds its ``alembic`` helper on PATH (this environment's bin/)."""
    bindir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=os.pathsep.join([bindir, os.environ.get("PATH", "")]))


def test_a_class_graded_into_postgres_reads_back_with_nbgrader(pg_course, tmp_path):
    course, url = pg_course
    release = released_notebook(course, "mini", "mini")
    subs = tmp_path / "subs"
    write_nb(subs / "alice.ipynb", fill(release, **CORRECT))
    write_nb(subs / "bob.ipynb", fill(release, **WRONG_SQUARE))
    write_nb(subs / "carol.ipynb", release)
    result = grade("mini", submissions=subs, course=course, workers=2, timeout=10, sandbox=SANDBOX)
    assert {s: r.score for s, r in result.results.items()} == {"alice": 4, "bob": 2, "carol": 0}
    assert not (course / "gradebook.db").exists()  # nothing went to a sqlite file instead

    from nbgrader.api import Gradebook

    with Gradebook(url, "specdec-e7") as gb:
        assert {s.student.id: s.score for s in gb.find_assignment("mini").submissions} == {
            "alice": 4,
            "bob": 2,
            "carol": 0,
        }
        bob = gb.find_submission_notebook("mini", "mini", "bob")
        assert {g.name: g.auto_score for g in bob.grades}["test_square_hidden"] == 0

    # Plain nbgrader reads the same gradebook through the same nbgrader_config.py.
    exported_csv = tmp_path / "exported.csv"
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("nbgrader")), "export", "--to", str(exported_csv)],
        cwd=course,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    with open(exported_csv, newline="", encoding="utf-8") as fh:
        exported = list(csv.DictReader(fh))
    assert {r["student_id"]: float(r["score"]) for r in exported} == {
        "alice": 4.0,
        "bob": 2.0,
        "carol": 0.0,
    }

    # A changed submission is regraded; the gradebook holds each student once.
    write_nb(subs / "bob.ipynb", fill(release, **CORRECT))
    again = grade("mini", submissions=subs, course=course, workers=2, timeout=10, sandbox=SANDBOX)
    assert again.graded_now == ["bob"] and sorted(again.reused) == ["alice", "carol"]
    with Gradebook(url, "specdec-e7") as gb:
        submissions = gb.find_assignment("mini").submissions
        assert len(submissions) == 3
        assert gb.find_submission("mini", "bob").score == 4

    proc = subprocess.run(
        CLI + ["report", "mini", "--course", str(course)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert (course / "reports/mini/report.html").exists()


def test_the_formgrader_shows_grades_from_postgres(pg_course, tmp_path):
    """``specdec-course grade`` (the CLI) writes; nbgrader's formgrader API reads."""
    from support.browser import start_lab_server

    course, _ = pg_course
    release = released_notebook(course, "mini", "mini")
    subs = tmp_path / "subs"
    write_nb(subs / "alice.ipynb", fill(release, **CORRECT))
    write_nb(subs / "bob.ipynb", fill(release, **WRONG_SQUARE))
    args = ["grade", "mini", "--submissions", str(subs), "--workers", "2"]
    proc = subprocess.run(
        CLI + args + ([] if SANDBOX else ["--no-sandbox"]),
        cwd=course,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    formgrader = "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=True"
    server = start_lab_server(
        course, tmp_path / "lab", extra_args=[formgrader], python=Path(sys.executable)
    )
    try:
        rows = server.api("GET", "formgrader/api/submissions/mini")
    finally:
        server.stop()
    assert {r["student"]: r["score"] for r in rows} == {"alice": 4, "bob": 2}
    assert all(r["autograded"] for r in rows)
