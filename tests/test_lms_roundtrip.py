"""Real classes round the loop: an LMS download through ``grade`` to ``export``, read back.

Each download is built by ``tests/support/lms.py`` from the LMS's own naming rules; the
course is the tiny ``mini`` assignment (4 points: square 1 + 2, cube 1).  The nbgrader
test drives the real ``nbgrader`` commands over a filesystem exchange in a temporary
folder: release, fetch, submit, collect, then ``grade`` in place, ``release_feedback``,
``fetch_feedback`` and ``nbgrader export``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from support.course import CORRECT, WRONG_SQUARE, fill, released_notebook, sandbox_available
from support.lms import (
    BlackboardAttempt,
    CanvasUpload,
    GradescopeSubmission,
    MoodleEntry,
    blackboard_download,
    canvas_download,
    canvas_gradebook,
    github_clone,
    gradescope_export,
    moodle_download,
    moodle_worksheet,
    write_tree,
    write_zip,
    zipped,
)

from autograder.export import export
from autograder.grade import grade
from autograder.render.gradesheets import MOODLE_HEADER

pytestmark = pytest.mark.kernel
SANDBOX = sandbox_available()
BIN = Path(sys.executable).parent


@pytest.fixture
def notebooks(mini_course):
    """(correct, wrong) submissions of ``mini`` as bytes: 4 and 2 points."""
    nb = released_notebook(mini_course, "mini", "mini")
    return tuple(nbformat.writes(fill(nb, **src)).encode() for src in (CORRECT, WRONG_SQUARE))


def run_grade(course: Path, submissions: Path | None, **options):
    return grade(
        "mini",
        submissions=submissions,
        course=course,
        workers=2,
        timeout=10,
        sandbox=SANDBOX,
        **options,
    )


def read_rows(path: Path, delimiter: str = ",") -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")), delimiter=delimiter))


def test_canvas_download_to_canvas_gradebook_import(mini_course, notebooks, tmp_path):
    good, wrong = notebooks
    download = write_zip(
        tmp_path / "submissions.zip",
        canvas_download(
            [
                # first upload wrong, re-uploaded (mini-1.ipynb) correct, both late
                CanvasUpload("Smith, John", 48213, 1177342, "mini.ipynb", wrong, late=True),
                CanvasUpload("Smith, John", 48213, 1177399, "mini.ipynb", good, late=True),
                # a notebook under another name, zipped
                CanvasUpload("Müller, Zoë", 5511, 1177002, "work.zip", zipped({"hw.ipynb": wrong})),
                CanvasUpload("Doe, Jane", 77, 0, "", text_entry=True),
            ]
        ),
    )
    roster = tmp_path / "gradebook.csv"
    roster.write_text(
        canvas_gradebook(
            [("Smith, John", 48213, "A"), ("Müller, Zoë", 5511, "A"), ("Doe, Jane", 77, "B")],
            {"Quiz 1 (800)": "10", "Mini (901)": "4"},
        ),
        encoding="utf-8",
    )
    result = run_grade(mini_course, download, roster=roster)
    assert result.layout == "canvas"
    assert sorted(result.results) == ["48213", "5511", "77"]  # one John, no text-entry student
    john, zoe, jane = (result.results[s] for s in ("48213", "5511", "77"))
    assert (john.score, john.identity.late, john.identity.last_name) == (4, True, "Smith")
    assert (zoe.score, zoe.identity.late) == (2, False)
    assert any(f.startswith("other-name:") for f in zoe.flags)
    assert (jane.status.value, jane.score) == ("missing", 0)
    assert any("_77_text.html (text entry)" in line for line in result.ignored)
    assert any("older upload" in line for line in result.ignored)
    grades = {r["student"]: r for r in read_rows(mini_course / "reports/mini/grades.csv")}
    assert grades["77"]["status"] == "missing" and grades["77"]["score"] == "0"

    # a later, partial download with the same roster: John's grade is kept, not "missing"
    later = write_zip(
        tmp_path / "later.zip",
        canvas_download(
            [CanvasUpload("Müller, Zoë", 5511, 1177002, "work.zip", zipped({"hw.ipynb": wrong}))]
        ),
    )
    again = run_grade(mini_course, later, roster=roster)
    assert again.results["48213"].score == 4 and again.results["48213"].status.value == "graded"
    assert again.graded_now == [] and again.results["77"].status.value == "missing"
    assert sorted(again.reused) == ["48213", "5511", "77"]

    before = roster.read_bytes()
    done = export("mini", to="canvas", course=mini_course, roster=roster)
    assert roster.read_bytes() == before  # the instructor's file is never written
    rows = list(csv.reader(io.StringIO(done.path.read_text(encoding="utf-8"))))
    assert rows[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "Quiz 1 (800)",
        "Mini (901)",
    ]
    assert rows[1][0].strip() == "Points Possible" and rows[1][6] == "4"
    assert {r[1]: r[6] for r in rows[2:]} == {"48213": "4", "5511": "2", "77": "0"}
    assert [r[5] for r in rows[2:]] == ["", "", ""]  # another assignment's column untouched

    plain = export("mini", to="canvas", course=mini_course, out=tmp_path / "new.csv")
    rows = list(csv.reader(io.StringIO(plain.path.read_text(encoding="utf-8"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "mini"]
    assert rows[1][:1] == ["Points Possible"]


def test_moodle_download_to_grading_worksheet(mini_course, notebooks, tmp_path):
    good, wrong = notebooks
    download = write_tree(
        tmp_path / "moodle",
        moodle_download(
            [
                MoodleEntry("Jane Doe", 5531, "mini.ipynb", good),
                MoodleEntry("Jane Doe", 5531, "onlinetext.html", b"<p>hi</p>", plugin="onlinetext"),
                MoodleEntry("Ana_María López", 77, "sub/mini.ipynb", wrong),
            ]
        ),
    )
    roster = tmp_path / "worksheet.csv"
    roster.write_text(
        moodle_worksheet(
            [
                (5531, "Jane Doe", "jane@uni.edu"),
                (77, "Ana_María López", "ana@uni.edu"),
                (78, "Al Bo", "al@uni.edu"),
            ]
        ),
        encoding="utf-8",
    )
    result = run_grade(mini_course, download, roster=roster)
    assert result.layout == "moodle"
    assert sorted(result.results) == ["5531", "77", "78"]  # online text made no student
    assert result.results["5531"].identity.email == "jane@uni.edu"
    assert result.results["77"].identity.last_name == "López"

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        ana = gb.find_student("77")
        assert (ana.first_name, ana.last_name, ana.email, ana.lms_user_id) == (
            "Ana_María",
            "López",
            "ana@uni.edu",
            "77",
        )

    now = datetime(2026, 12, 1, 10, 0)
    sheet = export("mini", to="moodle", course=mini_course, roster=roster, now=now)
    rows = {r["Identifier"]: r for r in read_rows(sheet.path)}
    assert {k: r["Grade"] for k, r in rows.items()} == {
        "Participant 5531": "4",
        "Participant 77": "2",
        "Participant 78": "0",
    }
    assert rows["Participant 78"]["Last modified (grade)"] == "2026-12-01 10:00:00"
    fresh = export("mini", to="moodle", course=mini_course, out=tmp_path / "w.csv", now=now)
    assert list(read_rows(fresh.path)[0]) == list(MOODLE_HEADER)  # test_gradesheets spells it out


def test_blackboard_gradescope_and_github_downloads(
    mini_course, pristine_mini_course, notebooks, tmp_path
):
    good, wrong = notebooks
    t0 = datetime(2026, 11, 30, 20, 0, 0)
    blackboard = write_zip(
        tmp_path / "bb.zip",
        blackboard_download(
            "Mini",
            [
                BlackboardAttempt("jdoe", t0, {"mini.ipynb": wrong}),
                BlackboardAttempt("jdoe", t0 + timedelta(hours=1), {"mini.ipynb": good}),
            ],
        ),
    )
    result = run_grade(mini_course, blackboard)
    assert result.layout == "blackboard" and list(result.results) == ["jdoe"]
    assert result.results["jdoe"].score == 4  # the newest attempt, graded once
    when = result.results["jdoe"].identity.timestamp
    assert when.isoformat() == "2026-11-30T21:00:00+00:00"
    rows = list(
        csv.reader(
            io.StringIO(export("mini", to="blackboard", course=mini_course).path.read_text())
        )
    )
    assert rows == [["Username", "mini [Total Pts: 4 Score]"], ["jdoe", "4"]]

    course2 = Path(shutil.copytree(pristine_mini_course, mini_course.parent / "course2"))
    when = datetime(2026, 11, 30, 23, 1, 2, tzinfo=timezone.utc)
    gradescope = write_zip(
        tmp_path / "gs.zip",
        gradescope_export(
            [
                GradescopeSubmission(
                    1,
                    [("Jane Doe", "jane@uni.edu", "0042"), ("Bo Li", "bo@uni.edu", "0043")],
                    when,
                    {"mini.ipynb": wrong},
                )
            ]
        ),
        wrapper="assignment_9_export",
    )
    result = run_grade(course2, gradescope)
    assert result.layout == "gradescope"
    assert {s: r.score for s, r in result.results.items()} == {"0042": 2, "0043": 2}  # the group

    course3 = Path(shutil.copytree(pristine_mini_course, mini_course.parent / "course3"))
    clone = write_tree(
        tmp_path / "mini-submissions",
        github_clone("mini", {"jane-doe": {"mini.ipynb": good}, "bo": {"mini.ipynb": wrong}}),
    )
    result = run_grade(course3, clone)
    assert result.layout == "github"
    assert {s: r.score for s, r in result.results.items()} == {"bo": 2, "jane-doe": 4}
    rows = {r["student"]: r for r in read_rows(export("mini", to="csv", course=course3).path)}
    assert rows["jane-doe"]["lms_user_id"] == "jane-doe" and rows["bo"]["score"] == "2"


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_nbgrader_submitted_graded_in_place_and_feedback_goes_back(
    mini_course, notebooks, tmp_path
):
    good, _ = notebooks
    exchange, cache, home = tmp_path / "exchange", tmp_path / "cache", tmp_path / "student"
    for folder in (exchange, cache, home):
        folder.mkdir()
    flags = [f"--Exchange.root={exchange}", f"--Exchange.cache={cache}"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def nbgrader(*args: str, cwd: Path) -> str:
        proc = subprocess.run(
            [str(BIN / "nbgrader"), *args, *flags], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    # a late submission: due in 2020; nbgrader's "zero" penalty method
    with open(mini_course / "nbgrader_config.py", "a") as fh:
        fh.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    nbgrader(
        "db", "assignment", "add", "mini", "--duedate=2020-01-01 00:00:00 UTC", cwd=mini_course
    )
    nbgrader("release_assignment", "mini", cwd=mini_course)
    nbgrader("fetch_assignment", "mini", "--course=specdec-e7", cwd=home)
    (home / "mini" / "mini.ipynb").write_bytes(good)
    nbgrader("submit", "mini", "--course=specdec-e7", cwd=home)
    nbgrader("collect", "mini", cwd=mini_course)
    (student,) = [p.name for p in (mini_course / "submitted").iterdir()]
    before = _tree_hashes(mini_course / "submitted")
    assert f"{student}/mini/submission_secret.txt" in before

    cli = [sys.executable, "-m", "autograder.cli", "grade", "mini", "--course", str(mini_course)]
    cli += ["--workers", "1", "--timeout", "10"] + ([] if SANDBOX else ["--no-sandbox"])
    proc = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "layout: nbgrader, read from the course's own submitted/ (in place)" in proc.stdout
    assert _tree_hashes(mini_course / "submitted") == before  # byte-identical, nothing added

    feedback = mini_course / "feedback" / student / "mini"
    assert sorted(p.name for p in feedback.iterdir()) == [
        "mini.html",
        "submission_secret.txt",
        "timestamp.txt",
    ]
    nbgrader("release_feedback", "mini", cwd=mini_course)
    nbgrader("fetch_feedback", "mini", "--course=specdec-e7", cwd=home)
    (fetched,) = (home / "mini" / "feedback").glob("*/mini.html")
    assert fetched.read_bytes() == (feedback / "mini.html").read_bytes()

    nbgrader("export", "--to", str(tmp_path / "nbgrader.csv"), cwd=mini_course)
    (row,) = read_rows(tmp_path / "nbgrader.csv")
    stamp = (mini_course / "submitted" / student / "mini" / "timestamp.txt").read_text()
    assert row["student_id"] == student and row["timestamp"] == stamp.removesuffix(" UTC")
    assert (row["raw_score"], row["late_submission_penalty"], row["score"]) == ("4.0", "4.0", "0.0")
    # export's score is nbgrader's: the late penalty comes off it, as in nbgrader's export.
    (ours,) = read_rows(export("mini", to="csv", course=mini_course).path)
    assert (ours["student"], ours["late"], ours["score"]) == (student, "yes", "0")
    assert ours["late_penalty"] == "4"


def test_a_download_never_overwrites_what_the_grader_did_not_write(
    mini_course, notebooks, tmp_path
):
    good, wrong = notebooks
    theirs = mini_course / "submitted" / "48213" / "mini"
    theirs.mkdir(parents=True)
    (theirs / "mini.ipynb").write_bytes(wrong)
    (theirs / "notes.txt").write_text("the instructor's own file")
    download = write_zip(
        tmp_path / "c.zip",
        canvas_download([CanvasUpload("Smith, John", 48213, 5, "mini.ipynb", good)]),
    )
    result = run_grade(mini_course, download)
    assert result.results["48213"].score == 4  # graded from the download
    assert (theirs / "mini.ipynb").read_bytes() == wrong  # but their file is left alone
    assert (theirs / "notes.txt").read_text() == "the instructor's own file"
    assert any(
        f.startswith("kept: submitted/48213/mini/mini.ipynb") for f in result.results["48213"].flags
    )
