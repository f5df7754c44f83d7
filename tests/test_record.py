"""The record step keeps the course's gradebook open for a run, and reopens it after an error.

No kernel: the results are written by hand, and nbgrader's own ``Gradebook`` reads them back.
"""

from __future__ import annotations

from nbgrader.api import Gradebook, Student

from autograder.course import db_url, load_config
from autograder.grading.record import OpenGradebook, record
from autograder.grading.results import CellResult, CellStatus, Status, SubmissionResult

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
