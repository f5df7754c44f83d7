"""Who a student is: one `Identity`, held whole from the download to the results file.

How two identities merge (the download's first claim, the roster over the download, the
submission over an earlier result); that a results file as the grader writes it reads
back the same and is written back byte for byte; the gradebook row and the CSV export it
gives; and that a file of another schema, or of none, is not read.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grading.results import (
    SCHEMA,
    CellStatus,
    Status,
    Stop,
    SubmissionResult,
)
from autograder.grading.students import identified, record_student
from autograder.intake.collect import Submission, collect_class
from autograder.intake.records import Claim, Identity, Member, assemble
from autograder.intake.roster import apply_roster, parse_roster
from autograder.record.store import load_result
from autograder.render.gradesheets import csv_sheet

NB = nbformat.writes(new_notebook(cells=[new_code_cell("x = 1", id="c0")])).encode()

#: ``results/5531.json`` exactly as the grader writes it.
TODAYS_FILE = """{
  "schema": 1,
  "student": "5531",
  "assignment": "mini",
  "status": "graded",
  "reason": "",
  "score": 1.0,
  "max_score": 2.0,
  "flags": [
    "late-ish"
  ],
  "cells": [
    {
      "grade_id": "test_square_small",
      "score": 1.0,
      "max_score": 1.0,
      "status": "passed",
      "message": "",
      "flags": [],
      "stop": ""
    },
    {
      "grade_id": "test_cube",
      "score": 0.0,
      "max_score": 1.0,
      "status": "failed",
      "message": "not run: the kernel died",
      "flags": [],
      "stop": "not-run"
    }
  ],
  "seconds": 2.5,
  "key": "ab:cd:10:1",
  "lms_user_id": "5531",
  "first_name": "Jane",
  "last_name": "L\\u00f3pez",
  "email": "jane@uni.edu",
  "timestamp": "2026-11-30T23:01:02+00:00",
  "late": true,
  "in_gradebook": true,
  "kernel": "forked"
}"""
JANE = Identity("5531", "Jane", "López", "jane@uni.edu")


# ---------------------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------------------


def test_merged_keeps_what_it_knows_and_fills_the_rest_from_the_other():
    mine = Identity("5531", None, "Doe", "")
    theirs = Identity("9", "Jane", "Roe", "jane@uni.edu")

    assert mine.merged(theirs) == Identity("5531", "Jane", "Doe", "jane@uni.edu")
    assert theirs.merged(mine) == theirs
    assert Identity(email="").merged(Identity()) == Identity()  # empty is not known
    assert Identity().known() == {} and JANE.known()["last_name"] == "López"


def test_a_downloads_claims_give_each_field_from_the_first_claim_that_knows_it():
    member = Member(("jane", "hw.ipynb"), NB)
    claims = [
        Claim("jane", member, base="hw.ipynb", identity=Identity("5531", email="")),
        Claim("jane", member, base="hw.ipynb", identity=Identity("77", "Jane", None, "j@u.edu")),
        Claim("jane", member, base="hw.ipynb", identity=Identity(None, "Janet", "Doe")),
    ]

    (record,) = assemble("plain", claims, "hw").records

    assert record.identity == Identity("5531", "Jane", "Doe", "j@u.edu")


def test_a_records_time_and_late_mark_are_the_graded_notebooks_not_the_first_claims():
    old, new, note = (
        Member(("jane", "hw.ipynb"), NB),
        Member(("jane", "hw-2.ipynb"), NB + b" "),
        Member(("jane", "notes.txt"), b"x"),
    )
    t0 = datetime(2026, 11, 30, 9, tzinfo=timezone.utc)
    claims = [  # the receipt comes first and is the newest: it dates nothing
        Claim("jane", note, identity=Identity("5531", timestamp=t0 + timedelta(days=1))),
        Claim("jane", old, "hw.ipynb", (1,), Identity(timestamp=t0, late=False)),
        Claim("jane", new, "hw.ipynb", (2,), Identity(timestamp=t0 + timedelta(hours=1))),
    ]

    (graded,) = assemble("plain", claims, "hw").records
    (unsent,) = assemble("plain", claims[:1], "hw").records

    assert graded.member is new and graded.identity == Identity(
        "5531", timestamp=t0 + timedelta(hours=1), late=None
    )
    assert unsent.member is None and unsent.identity == Identity("5531")


def test_the_roster_wins_over_the_download_where_it_knows_a_field(tmp_path):
    (tmp_path / "jdoe.ipynb").write_bytes(NB)
    roster = parse_roster(
        "student_id,first_name,last_name,email\n"
        "jdoe,Jane,,jane@uni.edu\n"  # no last name: the download's stays
        "rroe,Rita,Roe,rita@uni.edu\n"
    )
    members = [Member(("jdoe.ipynb",), NB)]
    intake = assemble(
        "plain",
        [Claim("jdoe", members[0], base="jdoe.ipynb", identity=Identity("old-id", "J", "Doe"))],
        None,
    )

    apply_roster(intake, roster)

    records = {r.student: r for r in intake.records}
    assert records["jdoe"].identity == Identity("jdoe", "Jane", "Doe", "jane@uni.edu")
    assert records["rroe"].missing and records["rroe"].identity == Identity(
        "rroe", "Rita", "Roe", "rita@uni.edu"
    )
    subs = {s.student: s for s in collect_class(tmp_path, roster=roster).submissions}
    assert subs["rroe"].identity == records["rroe"].identity  # held whole by the submission


def test_a_result_says_who_the_submission_says_and_keeps_what_it_does_not_know():
    when = datetime(2026, 12, 1, 9, 30, tzinfo=timezone(timedelta(hours=1)))
    sub = Submission("5531", "5531.ipynb", NB, identity=Identity("5531", "Jane", timestamp=when))
    earlier = datetime(2026, 11, 1, tzinfo=timezone.utc)
    result = SubmissionResult(
        "5531", "mini", identity=Identity("5531", "J", "López", timestamp=earlier, late=True)
    )

    now = identified(result, sub)

    in_utc = datetime(2026, 12, 1, 8, 30, tzinfo=timezone.utc)
    assert now.identity == Identity("5531", "Jane", "López", timestamp=in_utc, late=True)
    assert now.identity.timestamp.utcoffset() == timedelta(0)  # one time zone, UTC
    assert result.identity == Identity("5531", "J", "López", timestamp=earlier, late=True)
    assert identified(now, sub) == now  # nothing more to tell: an equal result


# ---------------------------------------------------------------------------------------
# The results file
# ---------------------------------------------------------------------------------------


def test_a_results_file_reads_back_the_same():
    result = SubmissionResult.from_json(TODAYS_FILE)

    assert replace(result.identity, timestamp=None, late=None) == JANE  # and when, below
    assert (result.identity.timestamp, result.identity.late, result.in_gradebook) == (
        datetime(2026, 11, 30, 23, 1, 2, tzinfo=timezone.utc),
        True,
        True,
    )
    assert (result.kernel, result.key, result.flags) == ("forked", "ab:cd:10:1", ["late-ish"])
    assert [(c.grade_id, c.status, c.stop) for c in result.cells] == [
        ("test_square_small", CellStatus.PASSED, Stop.NONE),
        ("test_cube", CellStatus.FAILED, Stop.NOT_RUN),
    ]
    # Written back byte for byte, its identity at the top level, with its schema first.
    assert result.to_json() == TODAYS_FILE
    assert SubmissionResult.from_json(result.to_json()) == result


def test_a_result_nobody_is_known_for_writes_no_identity_fields():
    data = SubmissionResult("anon", "mini", Status.INVALID, "unreadable").to_dict()

    assert not {"lms_user_id", "first_name", "last_name", "email"} & set(data)
    assert list(data)[:2] == ["schema", "student"] and data["schema"] == SCHEMA == 1


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own session's
def test_the_gradebook_row_and_the_csv_export_of_a_results_file_are_as_before(tmp_path):
    from nbgrader.api import Gradebook

    result = SubmissionResult.from_json(TODAYS_FILE)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment("mini")
        record_student(gb, result)
        # a later run that knows less blanks nothing
        record_student(gb, SubmissionResult("5531", "mini"))
        student = gb.find_student("5531")
        row = (student.lms_user_id, student.first_name, student.last_name, student.email)
        stamp = gb.find_submission("mini", "5531").timestamp

    assert row == ("5531", "Jane", "López", "jane@uni.edu")
    assert stamp == datetime(2026, 11, 30, 23, 1, 2)
    assert csv_sheet([result]).rows == [
        [
            "5531",
            "Jane",
            "López",
            "jane@uni.edu",
            "5531",
            "1",
            "2",
            "graded",
            "2026-11-30T23:01:02+00:00",
            "yes",
            "late-ish",
            "0",  # the late penalty: none in a gradebook-less sheet
            "",  # no review
        ]
    ]


@pytest.mark.parametrize("schema", [0, 2, "1", None, 1.5, True, "missing"])
def test_a_file_of_another_schema_is_not_a_result(tmp_path, schema):
    path = tmp_path / "5531.json"
    data = {**json.loads(TODAYS_FILE), "schema": schema}
    if schema == "missing":
        del data["schema"]
    path.write_text(json.dumps(data))

    assert load_result(path) is None  # graded again, as an unreadable file is


@pytest.mark.parametrize("text", ["[]", '"5531"', "{", ""])
def test_a_file_that_is_no_results_document_is_not_a_result(tmp_path, text):
    path = tmp_path / "5531.json"
    path.write_text(text)

    assert load_result(path) is None
    assert load_result(Path(tmp_path / "nobody.json")) is None
