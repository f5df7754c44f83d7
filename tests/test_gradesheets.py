"""Grade sheets follow the LMS importers' rules (pure: rows in, CSV text out)."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import pytest
from support.lms import canvas_gradebook, moodle_worksheet

from autograder.grading.results import Status, SubmissionResult
from autograder.intake.records import Identity
from autograder.intake.roster import parse_roster
from autograder.render.gradesheets import (
    CANVAS_HEADER,
    blackboard_sheet,
    canvas_sheet,
    csv_sheet,
    moodle_sheet,
)


def row(
    student, score, status="graded", lms_user_id=None, first=None, last=None, email=None, **more
):
    """A recorded result of ``mini`` (4 points) as export reads it."""
    return SubmissionResult(
        student,
        "mini",
        Status(status),
        score=score,
        max_score=4,
        identity=Identity(lms_user_id, first, last, email, late=more.pop("late", None)),
        **more,
    )


ROWS = [
    row("48213", 3.5, "graded", "48213", "John", "Smith", late=True),
    row("600", 0, "missing", "600", "Rita", "Roe"),
    row("anon_x", 4, "graded", None),
]


def table(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


def test_canvas_sheet_header_points_row_and_rows_keyed_by_user_id():
    sheet = canvas_sheet(ROWS, "E7.2 Acceptance tests")
    rows = table(sheet.text())
    assert rows[0] == [*CANVAS_HEADER, "E7.2 Acceptance tests"]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "4"
    assert {r[1]: r[5] for r in rows[2:]} == {"48213": "3.5", "600": "0"}
    assert rows[2][0] == "Roe, Rita"
    assert sheet.skipped == ["anon_x (no Canvas user id)"]


def test_canvas_sheet_fills_only_its_column_of_the_instructors_gradebook():
    text = canvas_gradebook(
        [("Smith, John", 48213, "A"), ("Roe, Rita", 600, "B"), ("Other, Ann", 7, "B")],
        {"Quiz 1 (800)": "10", "E7.2 Acceptance tests (901)": "4", "Current Score": ""},
    )
    text = text.replace("login7,B,,,", "login7,B,9,,")  # a grade already there stays
    roster = parse_roster(text)
    rows = table(canvas_sheet(ROWS, "E7.2 Acceptance tests", roster).text())
    before = table(text)
    assert rows[0] == before[0]  # every column kept, in order; the id-bearing title reused
    assert len(rows) == len(before)
    col = 6
    assert rows[1][col] == "4"
    assert {r[1]: r[col] for r in rows[2:]} == {"48213": "3.5", "600": "0", "7": ""}
    for new, old in zip(rows, before, strict=True):  # nothing else changed
        assert new[:col] + new[col + 1 :] == old[:col] + old[col + 1 :]


def test_canvas_sheet_adds_a_new_column_for_an_unknown_title():
    roster = parse_roster(canvas_gradebook([("Smith, John", 48213, "A")], {"Quiz 1 (800)": "10"}))
    rows = table(canvas_sheet(ROWS, "New one", roster).text())
    assert rows[0][-1] == "New one" and rows[2][-1] == "3.5"


def test_moodle_worksheet_columns_and_participant_identifiers():
    now = datetime(2026, 12, 1, 9, 30)
    sheet = moodle_sheet(
        [row("5531", 2, "graded", "5531", "Jane", "Doe", email="jane@uni.edu")], now
    )
    rows = table(sheet.text())
    assert rows[0] == [
        "Identifier",
        "Full name",
        "Email address",
        "Grade",
        "Maximum grade",
        "Last modified (grade)",
        "Feedback comments",
    ]
    assert rows[1][:6] == [
        "Participant 5531",
        "Jane Doe",
        "jane@uni.edu",
        "2",
        "4",
        "2026-12-01 09:30:00",
    ]


def test_moodle_worksheet_roster_keeps_its_columns():
    text = moodle_worksheet([(5531, "Jane Doe", "jane@uni.edu"), (5532, "Al Bo", "al@uni.edu")])
    roster = parse_roster(text)
    sheet = moodle_sheet([row("5531", 2, "graded", "5531")], datetime(2026, 1, 1), roster)
    rows = table(sheet.text())
    assert rows[0] == table(text)[0]
    grade = rows[0].index("Grade")
    assert [r[grade] for r in rows[1:]] == ["2", ""]


def test_blackboard_sheet_username_and_column():
    rows = table(blackboard_sheet([row("jdoe", 3, "graded", "jdoe")], "E7.2").text())
    assert rows == [["Username", "E7.2 [Total Pts: 4 Score]"], ["jdoe", "3"]]


def test_blackboard_roster_column_id_is_kept():
    text = (
        "Last Name\tFirst Name\tUsername\tStudent ID\tE7.2 [Total Pts: 4 Score] |1234\n"
        "Doe\tJane\tjdoe\t1\t\nLee\tAnn\talee\t2\t1\n"
    )
    roster = parse_roster(text)
    sheet = blackboard_sheet([row("jdoe", 3, "graded", "jdoe")], "E7.2", roster)
    rows = table(sheet.text(), "\t")
    assert rows[0][-1] == "E7.2 [Total Pts: 4 Score] |1234"
    assert [r[-1] for r in rows[1:]] == ["3", "1"]


def test_csv_sheet_has_names_ids_timestamp_and_lateness():
    rows = table(csv_sheet(ROWS).text())
    assert rows[0][:5] == ["student", "first_name", "last_name", "email", "lms_user_id"]
    got = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert got["48213"]["late"] == "yes" and got["600"]["status"] == "missing"


@pytest.mark.parametrize("writer", [canvas_sheet, blackboard_sheet])
def test_a_roster_of_another_lms_is_refused(writer):
    roster = parse_roster(moodle_worksheet([(1, "A B", "a@b")]))
    with pytest.raises(ValueError):
        writer(ROWS, "x", roster)


def test_the_moodle_comment_and_the_csv_say_how_a_grade_was_reached():
    """Autograded, reviewed by hand, waiting for a grader, late: the final grades say so."""
    from autograder.grading.results import CellResult, CellStatus

    def graded(student, *cells, **more):
        return row(
            student, sum(c.score for c in cells), "graded", student, cells=list(cells), **more
        )

    auto = CellResult("test_a", 3.0, 3.0, CellStatus.PASSED)
    rows = [
        graded("1", auto),
        graded("2", CellResult("test_a", 3.0, 3.0, CellStatus.FAILED, manual=True)),
        graded("3", auto, CellResult("why", 0.0, 2.0, CellStatus.BY_HAND, waiting=True)),
        graded("4", auto, late_penalty=1.0),
    ]
    rows[3].score = 2.0  # nbgrader's score: the cells' sum less the penalty
    sheet = moodle_sheet(rows, datetime(2026, 3, 1, 12, 0))
    comments = {line[0]: line[-1] for line in sheet.rows}
    assert comments == {
        "Participant 1": "Autograded: 3 / 4.",
        "Participant 2": "Reviewed by the instructor: 3 / 4.",
        "Participant 3": "Graded so far: 3 / 4; 2 point(s) wait for grading by hand.",
        "Participant 4": "Autograded: 2 / 4. Late penalty: 1.",
    }
    got = {r["student"]: r for r in csv.DictReader(io.StringIO(csv_sheet(rows).text()))}
    assert [(got[s]["review"], got[s]["late_penalty"]) for s in "1234"] == [
        ("", "0"),
        ("reviewed", "0"),
        ("waiting: why", "0"),
        ("", "1"),
    ]


def test_every_export_format_an_lms_declares_has_its_sheet():
    """``export --to`` offers the LMSs that declare an import file, and plain CSV; each
    has its sheet."""
    from autograder.intake.detect import EXPORT_FORMATS, LAYOUTS
    from autograder.render.gradesheets import SHEETS

    declared = [layout.name for layout in LAYOUTS if layout.export]
    assert EXPORT_FORMATS == (*declared, "csv") and set(declared) == {
        "canvas",
        "moodle",
        "blackboard",
    }
    assert set(SHEETS) == set(EXPORT_FORMATS)
