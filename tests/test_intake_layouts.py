"""Each LMS layout parsed from a download built by its own naming rules (no kernels)."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.lms import (
    BlackboardAttempt,
    CanvasUpload,
    GradescopeSubmission,
    MoodleEntry,
    blackboard_download,
    canvas_download,
    canvas_gradebook,
    github_clone,
    github_grades,
    gradescope_export,
    moodle_download,
    moodle_worksheet,
    nbgrader_submitted,
    write_zip,
    zipped,
)

from autograder.intake.canvas import parse_name as parse_canvas_name
from autograder.intake.detect import parse_download, scores
from autograder.intake.reading import read_members
from autograder.intake.records import Context, Identity, Intake, Member
from autograder.intake.roster import apply_roster, parse_roster

NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
NB2 = NB.replace(b"[]", b'[{"cell_type": "markdown", "metadata": {}, "source": "v2"}]')
CTX = Context(notebook="acceptance_tests", assignment="e7_2")


def as_members(files: dict[str, bytes]) -> list[Member]:
    """The members the collector reads from a zip of ``files`` (the real reader)."""
    with tempfile.TemporaryDirectory() as tmp:
        members, _ = read_members(write_zip(Path(tmp) / "download.zip", files))
    return members


def by_id(intake: Intake) -> dict:
    return {r.student: r for r in intake.records}


def test_canvas_ids_late_resubmission_text_entry_and_anonymous():
    files = canvas_download(
        [
            CanvasUpload("Smith, John", 48213, 1177342, "acceptance_tests.ipynb", NB, late=True),
            CanvasUpload("Smith, John", 48213, 1177399, "acceptance_tests.ipynb", NB2, late=True),
            CanvasUpload("Müller, Zoë", 5511, 1177001, "notes.pdf", b"%PDF"),
            CanvasUpload("Müller, Zoë", 5511, 1177002, "my work (final).ipynb", NB),
            CanvasUpload("Doe, Jane", 77, 0, "", text_entry=True),
            CanvasUpload("", 0, 1178000, "acceptance_tests.ipynb", NB, anonymous_id="aB3dE"),
            CanvasUpload("O'Brien_1_Pat", 9, 1179000, "acceptance_tests.ipynb", NB),
        ]
    )
    assert "smithjohn_LATE_48213_1177399_acceptance_tests-1.ipynb" in files
    assert "doejane_77_text.html" in files
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "canvas"
    recs = by_id(intake)
    assert sorted(recs) == ["48213", "5511", "9", "anon_aB3dE"]  # a text entry is no student
    john = recs["48213"]
    assert john.identity.late is True and john.identity.lms_user_id == "48213"
    assert john.member.data == NB2  # the re-upload (higher attachment id) is graded, once
    assert any("older upload" in i for i in john.ignored)
    zoe = recs["5511"]
    assert zoe.member.name.endswith("_1177002_my work (final).ipynb") and zoe.identity.late is False
    assert any(f.startswith("other-name:") for f in zoe.flags)
    assert "doejane_77_text.html (text entry); 77 sent no notebook" in intake.ignored
    assert recs["anon_aB3dE"].identity.lms_user_id is None
    assert recs["9"].member is not None  # a name that contained _1_ still parses


def test_canvas_notebook_inside_an_uploaded_zip_is_found():
    files = {"leejo_12_345_work.zip": zipped({"work/acceptance_tests.ipynb": NB})}
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "canvas"
    assert by_id(intake)["12"].member.path == "leejo_12_345_work.zip/work/acceptance_tests.ipynb"
    assert by_id(intake)["12"].member.data == NB


@pytest.mark.parametrize("flat", [False, True])
def test_moodle_participants_and_onlinetext_is_not_a_student(flat):
    files = moodle_download(
        [
            MoodleEntry("Jane Doe", 5531, "acceptance_tests.ipynb", NB),
            MoodleEntry("Jane Doe", 5531, "onlinetext.html", b"<p>hi</p>", plugin="onlinetext"),
            MoodleEntry("Ana_María López", 77, "sub/acceptance_tests.ipynb", NB),
            MoodleEntry("李 雷", 78, "readme.txt", b"x"),
        ],
        flat=flat,
    )
    if flat:  # the old flat mode has no online text folder
        files = {k: v for k, v in files.items() if "onlinetext" not in k}
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "moodle"
    recs = by_id(intake)
    assert sorted(recs) == ["5531", "77"]  # 78 sent no notebook: not an invalid student
    assert (recs["5531"].identity.first_name, recs["5531"].identity.last_name) == ("Jane", "Doe")
    assert recs["5531"].member is not None
    assert recs["77"].identity.last_name == "López" and recs["77"].member is not None
    assert any(i.startswith("李 雷_78_assignsubmission_file_") for i in intake.ignored)
    if not flat:
        assert any("online text" in i for i in recs["5531"].ignored)


def test_blackboard_newest_attempt_counts_and_receipts_are_ignored():
    t0 = datetime(2026, 11, 30, 23, 0, 0)
    files = blackboard_download(
        "E7 2 Acceptance_tests",
        [
            BlackboardAttempt("jdoe", t0, {"acceptance_tests.ipynb": NB}),
            BlackboardAttempt("jdoe", t0 + timedelta(hours=2), {"acceptance_tests.ipynb": NB2}),
            BlackboardAttempt("ann_lee", t0, {"acceptance_tests.ipynb": NB}),
        ],
    )
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "blackboard"
    recs = by_id(intake)
    assert sorted(recs) == ["ann_lee", "jdoe"]
    assert recs["jdoe"].member.data == NB2
    assert recs["jdoe"].identity.timestamp == t0 + timedelta(hours=2)
    assert any("attempt receipt" in i for i in recs["jdoe"].ignored)
    assert any("older attempt" in i for i in recs["jdoe"].ignored)


def test_blackboard_localised_attempt_word():
    files = blackboard_download(
        "HW", [BlackboardAttempt("piet", datetime(2026, 1, 2), {"x.ipynb": NB})], word="poging"
    )
    assert parse_download(as_members(files), CTX).layout == "blackboard"


def test_gradescope_sid_email_and_group_submission_grades_every_member():
    when = datetime(2026, 11, 30, 23, 1, 2, tzinfo=timezone(timedelta(hours=-8)))
    files = gradescope_export(
        [
            GradescopeSubmission(
                101,
                [("Jane Doe", "jane@uni.edu", "0042"), ("Bo Li", "bo@uni.edu", "")],
                when,
                {"acceptance_tests.ipynb": NB},
            ),
            GradescopeSubmission(102, [("Ann Lee", "ann@uni.edu", "7")], when, {"a.py": b""}),
        ]
    )
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "gradescope"
    recs = by_id(intake)
    assert sorted(recs) == ["0042", "bo_uni.edu"]
    assert recs["0042"].member is recs["bo_uni.edu"].member
    assert recs["0042"].identity.email == "jane@uni.edu" and recs["0042"].identity.timestamp == when
    assert any("submission_102/a.py" in i for i in intake.ignored)
    assert any("group submission" in w for w in intake.warnings)


def test_github_usernames_from_prefix_wrapper_or_roster():
    files = github_clone("e7-2", {"jane-doe": {"acceptance_tests.ipynb": NB}, "bo": {}})
    files["e7-2-bo/acceptance_tests.ipynb"] = NB
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "github" and sorted(by_id(intake)) == ["bo", "jane-doe"]
    one = github_clone("e7-2", {"solo-user": {"acceptance_tests.ipynb": NB}})
    with tempfile.TemporaryDirectory() as tmp:
        zipped_clone = write_zip(Path(tmp) / "c.zip", one, wrapper="e7-2-submissions")
        members, wrapper = read_members(zipped_clone)
    assert wrapper == ("e7-2-submissions",)
    intake = parse_download(members, Context(wrapper=wrapper))
    assert intake.layout == "github" and sorted(by_id(intake)) == ["solo-user"]
    roster = parse_roster(github_grades("e7-2", [("solo-user", "Solo User")]))
    intake = parse_download(members, Context(repos=roster.repositories()), "github")
    assert sorted(by_id(intake)) == ["solo-user"]


def test_nbgrader_submitted_keeps_hub_usernames_exactly():
    files = nbgrader_submitted(
        "e7_2",
        "acceptance_tests",
        {
            "jane.doe@uni.edu": (NB, "2026-11-30 12:00:00.000000 UTC"),
            "Bob": (NB, "2026-12-01 08:00:00.5 UTC"),
        },
    )
    files["Bob/other_assignment/x.ipynb"] = NB
    intake = parse_download(as_members(files), CTX)
    assert intake.layout == "nbgrader"
    recs = by_id(intake)
    assert sorted(recs) == ["Bob", "jane.doe@uni.edu"]
    assert recs["Bob"].identity.timestamp.isoformat() == "2026-12-01T08:00:00.500000+00:00"
    assert recs["jane.doe@uni.edu"].ignored == []


def test_plain_names_and_unrecognised_layout_warns():
    plain = parse_download(as_members({"alice.ipynb": NB, "bob/hw.ipynb": NB}), CTX)
    assert plain.layout == "plain" and plain.warnings == []
    odd = parse_download(as_members({"alice.ipynb": NB, "notes/readme.md": b""}), CTX)
    assert odd.layout == "plain" and "not recognised" in odd.warnings[0]
    named = parse_download(as_members({"alice.ipynb": NB}), CTX, "canvas")
    assert named.layout == "plain" and "canvas" in named.warnings[0]


def test_two_names_that_fold_alike_stay_two_students():
    intake = parse_download(as_members({"Zoë.ipynb": NB, "Zoe.ipynb": NB2}), CTX)
    assert sorted(by_id(intake)) == ["Zoe", "Zoe-2"]
    assert any(f.startswith("id-collision") for f in by_id(intake)["Zoe-2"].flags)


def test_a_class_in_several_scripts_gets_readable_ids():
    """Names in Chinese, Arabic, Cyrillic and accented Latin are transliterated; two
    Chinese names that read alike (李雷, 李蕾: both Li Lei) stay two students."""
    files = {
        "李雷.ipynb": NB,
        "李蕾.ipynb": NB2,
        "王芳.ipynb": NB,
        "محمد علي.ipynb": NB,
        "Иван Петров/hw.ipynb": NB,
        "José María.ipynb": NB,
    }
    intake = parse_download(as_members(files), CTX)
    ids = by_id(intake)
    assert sorted(ids) == ["Ivan_Petrov", "Jose_Maria", "LiLei", "LiLei-2", "WangFang", "mhmd_ly"]
    collided = {i for i, r in ids.items() if any(f.startswith("id-collision") for f in r.flags)}
    assert collided == {"LiLei-2"}


def test_detection_scores_are_not_fooled_by_plain_names():
    s = scores(as_members({"alice.ipynb": NB, "bob_smith.ipynb": NB}), CTX)
    assert max(s.values()) < 0.5


def test_canvas_roster_fills_names_and_adds_missing_students():
    files = canvas_download([CanvasUpload("Smith, John", 48213, 1, "acceptance_tests.ipynb", NB)])
    intake = parse_download(as_members(files), CTX)
    roster = parse_roster(
        canvas_gradebook(
            [("Smith, John", 48213, "A"), ("Roe, Rita", 600, "A")], {"E7.2 (901)": "4"}
        )
    )
    assert roster.kind == "canvas" and [e.student for e in roster.entries] == ["48213", "600"]
    apply_roster(intake, roster)
    recs = by_id(intake)
    assert (recs["48213"].identity.first_name, recs["48213"].identity.last_name) == (
        "John",
        "Smith",
    )
    assert recs["600"].missing and recs["600"].identity.last_name == "Roe"


def test_moodle_worksheet_roster_matches_participants_by_number():
    files = moodle_download([MoodleEntry("Jane Doe", 5531, "acceptance_tests.ipynb", NB)])
    intake = parse_download(as_members(files), CTX)
    roster = parse_roster(
        moodle_worksheet([(5531, "Jane Doe", "jane@uni.edu"), (5532, "Al Bo", "al@uni.edu")])
    )
    apply_roster(intake, roster)
    recs = by_id(intake)
    assert recs["5531"].identity.email == "jane@uni.edu" and not recs["5531"].missing
    assert recs["5532"].missing and recs["5532"].identity.email == "al@uni.edu"


def test_a_roster_never_merges_two_students():
    intake = parse_download(as_members({"a.ipynb": NB, "b.ipynb": NB}), CTX)
    for rec in intake.records[:2]:
        rec.identity = Identity(email="same@uni.edu")
    roster = parse_roster("student_id,email\nx,same@uni.edu\n")
    apply_roster(intake, roster)
    assert all(any("ambiguous" in f for f in r.flags) for r in intake.records[:2])
    assert {r.student for r in intake.records} == {"a", "b"}  # x submitted: it is not missing


@pytest.mark.parametrize(
    ("member", "user", "late", "file"),
    [
        (
            "smithjohn_LATE_48213_1177_acceptance_tests-1.ipynb",
            "48213",
            "LATE_",
            "acceptance_tests-1.ipynb",
        ),
        ("_48213_1177_hw.ipynb", "48213", None, "hw.ipynb"),  # a user with an empty name
        ("obrien_jrpat_9_12_my_2_files.ipynb", "9", None, "my_2_files.ipynb"),
        ("LATE_anon_aB3dE_1177_12_x.ipynb", "anon_aB3dE", "LATE_", "12_x.ipynb"),
        ("müllerzoë_5511_1177002_my work (final).ipynb", "5511", None, "my work (final).ipynb"),
    ],
)
def test_canvas_member_names_parse_by_canvas_rules(member, user, late, file):
    fields = parse_canvas_name(member)
    assert (fields["id"], fields["late"], fields["file"]) == (user, late, file)
