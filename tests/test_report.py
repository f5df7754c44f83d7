"""The instructor's report: one self-contained page with plots, tables and the submissions to check.

The course and results are those of ``test_feedback.py``: alice (partly right, a hostile failure
message), bob (invalid, no notebook), carol (full marks, flagged) and dave (timed out).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import nbformat
import pytest
from support.course import FILES
from test_feedback import (
    ASSIGNMENT,
    HOSTILE_MESSAGE,
    INVALID_REASON,
    NOTEBOOK,
    assert_inert,
    cell_result,
    make_course,
    student_result,
    text_of,
)

from autograder.course import UsageError
from autograder.export import export
from autograder.feedback import feedback
from autograder.grading.results import SubmissionResult
from autograder.render.page import points
from autograder.render.report_page import render_report
from autograder.report import report


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return make_course(tmp_path)


@pytest.fixture
def html(course: Path) -> str:
    return report(ASSIGNMENT, course=course).read_text(encoding="utf-8")


def as_results(results: dict[str, dict]) -> dict[str, SubmissionResult]:
    """Results as the grader records them, from their JSON form."""
    return {s: SubmissionResult.from_dict(r) for s, r in results.items()}


def section(html: str, anchor: str) -> str:
    """The visible text of one ``<h2 id=anchor>`` section."""
    part = html.split(f'<h2 id="{anchor}">', 1)[1].split("<h2 ", 1)[0]
    return text_of(part)


def test_report_is_written_under_reports(course: Path):
    path = report(ASSIGNMENT, course=course)

    assert path == course / "reports" / ASSIGNMENT / "report.html"
    assert path.is_file()


def test_report_before_grading_is_a_usage_error(course: Path):
    (course / "source" / "e7_3_accept_step").mkdir()
    with pytest.raises(UsageError, match="run `specdec-course grade` first"):
        report("e7_3_accept_step", course=course)


def test_report_embeds_its_figures_as_png_data_uris(html: str):
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', html)

    assert len(images) == 2  # score histogram, pass rates
    for data, alt in images:
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
        assert len(alt) > 40  # describes the figure
    assert_inert(html)


def test_report_summary_counts_students_statuses_and_scores(html: str):
    text = section(html, "summary")

    # Scores: alice 2, bob 0, carol 4, dave 0 (out of 4).
    assert "Students 4" in text
    assert "Mean score 1.5 / 4" in text
    assert "Median score 1 / 4" in text
    assert "Graded 2" in text and "Timed out 1" in text and "Invalid submission 1" in text
    assert "Grading failed 0" in text
    assert "Flagged 2" in text  # carol (submission flag) and dave (cell flag)


def test_report_lists_the_pass_rate_of_every_test_cell_in_notebook_order(html: str):
    rows = re.findall(
        r"<tr>\s*<th scope=\"row\"><code>(test_\w+)</code></th>(.*?)</tr>", html, re.S
    )
    table = {gid: " ".join(text_of(cells).split()) for gid, cells in rows}

    assert list(table) == [
        "test_accept_prob_examples",
        "test_accept_prob_matches_reference",
        "test_check_understanding",
    ]
    # points, passed, failed, timed out, missing, not run (bob), pass rate (of 3 that ran), mean
    assert table["test_accept_prob_examples"] == "1 2 0 1 0 1 67% (2/3) 0.67"
    assert table["test_accept_prob_matches_reference"] == "2 1 1 1 0 1 33% (1/3) 0.67"
    assert table["test_check_understanding"] == "1 2 1 0 0 1 67% (2/3) 0.67"


def test_report_groups_failure_messages_with_counts_and_cells(course: Path, tmp_path: Path):
    results = {
        s: student_result(
            s,
            "graded",
            [
                cell_result(
                    "test_accept_prob_examples",
                    0.0,
                    1.0,
                    "failed",
                    f"AssertionError: accept_prob(0.8, 0.5) returned {v}, expected 0.625",
                )
            ],
        )
        for s, v in [("ann", "1.6"), ("ben", "1.6"), ("cat", "0.5")]
    }
    results["dan"] = student_result(
        "dan",
        "graded",
        [cell_result("test_check_understanding", 0.0, 1.0, "failed", "NameError: x")],
    )

    text = section(render_report(ASSIGNMENT, as_results(results)), "messages")

    # The three accept_prob messages differ only in a number: one group, most frequent wording.
    assert text.index("3 3 AssertionError: accept_prob(0.8, 0.5) returned 1.6, expected 0.625") < (
        text.index("1 1 NameError: x")
    )
    assert "2 wordings test_accept_prob_examples (3)" in text
    assert "test_check_understanding (1)" in text


def test_report_shows_each_real_failure_message_escaped(html: str):
    text = section(html, "messages")

    assert HOSTILE_MESSAGE in text
    assert "1 2 timed out after 5 s" in text  # 1 student, 2 cells
    assert "not graded" not in text  # bob's notebook never ran: listed below, not here
    assert "<script>" not in html
    assert_inert(html)


def test_report_lists_failed_timed_out_invalid_and_flagged_submissions(html: str):
    text = section(html, "problems")

    assert "alice" not in text  # graded, no flag
    assert f"bob Invalid submission 0 / 4 {INVALID_REASON}" in text
    assert "carol Graded 4 / 4 imports specdec_reference" in text
    assert "dave Timed out 0 / 4 the notebook ran longer than 20 s" in text
    assert "test_accept_prob_matches_reference: killed" in text  # a cell's flag, with its cell
    assert "<b>here</b>" not in html


def test_report_lists_a_worker_crash_with_its_reason(tmp_path: Path):
    results = {
        "zed": student_result(
            "zed", "failed", [], reason="the worker died (signal 9)", flags=["oom"]
        )
    }

    text = section(render_report(ASSIGNMENT, as_results(results)), "problems")

    assert "zed Grading failed 0 / 4 the worker died (signal 9) oom" in text


def test_report_links_each_student_to_their_feedback_page(course: Path):
    feedback(ASSIGNMENT, course=course)

    html = report(ASSIGNMENT, course=course).read_text()

    link = f"../../feedback/alice/{ASSIGNMENT}/acceptance_tests.html"
    assert f'<a href="{link}"><code>alice</code></a>' in html
    assert (course / "reports" / ASSIGNMENT / link).resolve().is_file()


def test_report_escapes_learner_derived_student_ids_and_flags(tmp_path: Path):
    hostile = '<img src=x onerror="alert(1)">'
    results = {
        "x": student_result("x", "invalid", [], reason=hostile, flags=[hostile])
        | {"cells": [cell_result(hostile, 0.0, 1.0, "failed", hostile, flags=[hostile])]}
    }

    html = render_report(ASSIGNMENT, as_results(results))

    assert_inert(html)
    assert hostile in text_of(html)


def test_report_is_self_contained_and_accessible(html: str):
    assert_inert(html)
    assert '<html lang="en">' in html and "Content-Security-Policy" in html
    assert "<caption>" in html and '<th scope="col"' in html and '<th scope="row">' in html
    assert "http://" not in html and "https://" not in html


def test_report_of_an_empty_class_section_still_renders(tmp_path: Path):
    # One student whose results have no cells at all (an old or hand-made file).
    results = {"solo": json.loads(json.dumps(student_result("solo", "invalid", [])))}

    html = render_report(ASSIGNMENT, as_results(results))

    assert "No test cell was graded." in html
    assert html.count("data:image/png;base64,") == 1


# --------------------------------------------------------------------------------------------
# End to end: real grading of the E7.2 sample submissions
# --------------------------------------------------------------------------------------------

#: Samples whose scores the test knows: full marks, zero, and partly right.
E7_2_SAMPLES = ["reference", "blank", "mistake-no-cap"]


def hidden_lines(source: Path, release: Path) -> set[str]:
    """Lines of the source's hidden tests that appear nowhere in the release."""
    released = " ".join(c.source for c in nbformat.read(release, as_version=4).cells)
    released = " ".join(released.split())
    lines = set()
    for cell in nbformat.read(source, as_version=4).cells:
        for block in re.findall(r"BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", cell.source, re.S):
            for line in block.splitlines():
                line = " ".join(line.split())
                if len(line) > 20 and line not in released:
                    lines.add(line)
    return lines


@pytest.mark.kernel
def test_feedback_and_report_from_real_grading_of_e7_2_samples(
    lesson_course, graded_lessons, tmp_path
):
    """The feedback, report and export verbs on the run's real grading of every E7.2 sample."""
    course = lesson_course
    pages = {p.parts[-3]: p.read_text() for p in feedback(ASSIGNMENT, course=course)}
    html = report(ASSIGNMENT, course=course).read_text()
    samples = sorted(p.stem for p in (FILES / ASSIGNMENT / "submissions").glob("*.ipynb"))
    assert set(E7_2_SAMPLES) <= set(samples)

    results = graded_lessons[ASSIGNMENT]
    assert sorted(pages) == sorted(results) == samples
    # The written answer waits for a grader in every submission, the reference's included:
    # it adds its points to the maximum, and nothing to the score until a grader scores it.
    written = {c.grade_id: c.max_score for c in results["reference"].waiting}
    assert written == {"explain_exact_rule": 3}
    for result in results.values():
        assert {c.grade_id for c in result.waiting} == set(written), result.student
    assert results["reference"].score == results["reference"].max_score - 3 > 0
    assert results["blank"].score == 0
    assert 0 < results["mistake-no-cap"].score < results["mistake-no-cap"].max_score - 3
    done = export(ASSIGNMENT, to="csv", course=course, out=tmp_path / "grades.csv")
    assert sorted(line.split(":")[0] for line in done.waiting) == samples
    assert "reference: explain_exact_rule (3 pt); wrote 50 / 53, the score so far" in done.waiting

    secrets = hidden_lines(
        course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
        course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
    )
    assert secrets, "the source notebook should have hidden tests"
    for student, page in pages.items():
        assert_inert(page)
        text = text_of(page)
        assert "HIDDEN TESTS" not in page and "Traceback" not in text
        assert not [line for line in secrets if line in text], student
        result = results[student]
        assert f"{points(result.score)} / {points(result.max_score)} points" in text
        for cell in result.cells:  # each failing test's message, as the grader wrote it
            if cell.status != "passed" and cell.message:
                assert " ".join(cell.message.split()) in text, (student, cell.grade_id)

    assert_inert(html)
    assert html.count("data:image/png;base64,") == 2
    assert f"Students {len(samples)}" in section(html, "summary")
    assert f"Waiting for grading {len(samples)}" in section(html, "summary")
    waiting = section(html, "review")  # by cell, with every student it waits for
    assert f"explain_exact_rule 3 {len(samples)}" in waiting
    assert all(student in waiting for student in samples)
    cells = section(html, "cells")  # the autograded test cells; not the written answer
    for cell in results["reference"].cells:
        assert (cell.grade_id in cells) is (cell.grade_id not in written), cell.grade_id
    # NotImplementedError is what every blank cell says: the most frequent failure.
    assert "NotImplementedError" in section(html, "messages")
