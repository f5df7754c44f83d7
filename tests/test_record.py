"""The record step keeps the course's gradebook open for a run, and reopens it after an error.

No kernel: the results are written by hand, and nbgrader's own ``Gradebook`` reads them back.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from nbgrader.api import Gradebook, Student

from autograder.course import db_url, load_config
from autograder.grading.gradebook import OpenGradebook
from autograder.grading.results import CellResult, CellStatus, Status, SubmissionResult
from autograder.intake.records import Identity
from autograder.record.store import record

CELLS = {"test_square_small": 1.0, "test_square_hidden": 2.0, "test_cube": 1.0}


def result(student: str, scores: dict[str, float]) -> SubmissionResult:
    cells = [
        CellResult(gid, scores[gid], pts, CellStatus.PASSED if scores[gid] else CellStatus.FAILED)
        for gid, pts in CELLS.items()
    ]
    return SubmissionResult(student, "mini", Status.GRADED, cells=cells)


def scores(course) -> dict[str, dict[str, float]]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "specdec-e7") as gb:
        return {
            s.student.id: {g.name: g.auto_score for g in s.notebooks[0].grades}
            for s in gb.find_assignment("mini").submissions
        }


def test_one_open_gradebook_records_every_result_of_a_run(mini_course):
    config = load_config(mini_course)
    results = mini_course / "reports" / "mini" / "results"
    results.mkdir(parents=True)
    want = {
        "ann": {"test_square_small": 1.0, "test_square_hidden": 2.0, "test_cube": 1.0},
        "ben": {"test_square_small": 1.0, "test_square_hidden": 0.0, "test_cube": 1.0},
        "cat": {"test_square_small": 0.0, "test_square_hidden": 0.0, "test_cube": 0.0},
    }
    with OpenGradebook(db_url(mini_course, config), config) as books:
        opened = []
        for student, cell_scores in want.items():
            done = result(student, cell_scores)
            record(mini_course, config, "mini", CELLS, done, results, books=books)
            opened.append(books.get())
            assert done.in_gradebook
        assert opened[0] is opened[1] is opened[2]  # opened once, for the whole run
    assert scores(mini_course) == want
    assert sorted(p.stem for p in results.glob("*.json")) == sorted(want)


def test_a_discarded_gradebook_is_opened_anew_and_keeps_what_was_committed(mini_course):
    config = load_config(mini_course)
    results = mini_course / "reports" / "mini" / "results"
    results.mkdir(parents=True)
    full = dict.fromkeys(CELLS, 1.0) | {"test_square_hidden": 2.0}
    with OpenGradebook(db_url(mini_course, config), config) as books:
        record(mini_course, config, "mini", CELLS, result("ann", full), results, books=books)
        first = books.get()
        first.db.add(Student(id="uncommitted"))
        first.db.flush()  # sent to the database, never committed
        books.discard()
        second = books.get()
        assert second is not first
        record(mini_course, config, "mini", CELLS, result("ben", full), results, books=books)
    assert scores(mini_course) == {"ann": full, "ben": full}
    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        assert "uncommitted" not in {s.id for s in gb.students}


def rows_of(gb, student: str) -> dict[str, list]:
    """``student``'s submission rows, by table, without their random ids."""
    submission = gb.find_submission("mini", student)
    return {
        "submission": [(submission.timestamp, submission.extension)],
        "notebooks": sorted(
            (nb.name, nb.flagged, nb.late_submission_penalty) for nb in submission.notebooks
        ),
        "grades": sorted(
            (g.cell.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
            for nb in submission.notebooks
            for g in nb.grades
        ),
        "comments": sorted(
            (c.cell.name, c.auto_comment, c.manual_comment)
            for nb in submission.notebooks
            for c in nb.comments
        ),
    }


def test_a_new_submission_has_the_rows_that_nbgrader_gives_it(mini_course):
    """The one-INSERT-a-table submission equals nbgrader's ``add_submission`` followed by
    the autograder's scores, row for row (a cell without a score keeps nbgrader's
    defaults)."""
    from datetime import datetime

    from autograder.record.gradebook_rows import AssignmentShape, add_scored_submission

    scores = {"test_square_small": 1.0, "test_cube": 0.0}  # test_square_hidden: no score
    when = datetime(2026, 3, 1, 12, 30)
    config = load_config(mini_course)
    with OpenGradebook(db_url(mini_course, config), config) as books:
        gb = books.get()
        for student in ("theirs", "ours"):
            gb.add_student(student)
        gb.add_submission("mini", "theirs", timestamp=when)
        for grade in gb.find_submission_notebook("mini", "mini", "theirs").grades:
            if grade.name in scores:
                grade.auto_score, grade.needs_manual_grade = scores[grade.name], False
        gb.db.commit()
        with books.transaction() as held:
            shape = AssignmentShape.read(held, "mini")
            add_scored_submission(held, shape, "ours", "mini", scores, when)
    with Gradebook(f"sqlite:///{mini_course / 'gradebook.db'}", "specdec-e7") as gb:
        theirs, ours = rows_of(gb, "theirs"), rows_of(gb, "ours")
        assert len(theirs["grades"]) == len(CELLS) and theirs["comments"]
        assert ours == theirs


def gradebook_rows(url: str) -> dict[str, list]:
    """Every student's row, and every submission's rows, without their random ids."""
    with Gradebook(url, "specdec-e7") as gb:
        students = sorted(
            (s.id, s.first_name, s.last_name, s.email, s.lms_user_id) for s in gb.students
        )
        submitted = sorted(s.student.id for s in gb.find_assignment("mini").submissions)
        return {"students": students, **{s: rows_of(gb, s) for s in submitted}}


@pytest.mark.parametrize("due", [None, datetime(2026, 3, 1, 12)], ids=["no-due-date", "due-date"])
def test_a_batch_read_at_once_writes_the_rows_nbgrader_writes_one_by_one(
    mini_course, tmp_path, due
):
    """A batch of a student with a submission, one with only a row, and a new one, written
    with what the gradebook holds read once (``Held``), equals nbgrader's calls one by one."""
    from autograder.record.gradebook_rows import AssignmentShape, write_batch, write_scores

    config = load_config(mini_course)
    with OpenGradebook(db_url(mini_course, config), config) as books:
        gb = books.get()
        gb.update_or_create_assignment("mini", duedate=due)
        gb.add_student("known", first_name="Kim", email="old@x.org")
        gb.db.commit()
        with books.transaction() as tx:
            write_scores(tx, config, "mini", result("old", dict.fromkeys(CELLS, 0.0)))
    theirs = tmp_path / "theirs.db"
    shutil.copy(mini_course / "gradebook.db", theirs)

    def batch() -> list[SubmissionResult]:
        done = [result(s, dict.fromkeys(CELLS, 1.0)) for s in ("old", "known", "new")]
        who = [Identity(last_name="Old"), Identity("77", email="k@x.org"), Identity("9", "Nia")]
        for one, identity in zip(done, who, strict=True):
            one.identity = replace(
                identity, timestamp=datetime(2026, 3, 1, 13, tzinfo=timezone.utc)
            )
        return done

    late = {}
    for url, at_once in ((db_url(mini_course, config), True), (f"sqlite:///{theirs}", False)):
        with OpenGradebook(url, config) as books, books.transaction() as gb:
            done = batch()
            if at_once:
                write_batch(gb, config, "mini", done)
            else:
                for one in done:
                    write_scores(gb, config, "mini", one, AssignmentShape.read(gb, "mini"))
        late[at_once] = [one.identity.late for one in done]

    ours = gradebook_rows(db_url(mini_course, config))
    assert sorted(ours) == ["known", "new", "old", "students"]
    assert ("known", "Kim", None, "k@x.org", "77") in ours["students"]
    assert ours == gradebook_rows(f"sqlite:///{theirs}")
    expected = [True] * 3 if due else [None] * 3
    assert late[True] == late[False] == expected
