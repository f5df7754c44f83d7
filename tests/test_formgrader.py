"""A review in nbgrader's real formgrader, in Chromium, reaches the learner and the LMS.

``specdec-course grade`` grades two ``mini`` submissions (with a written answer, ``why``);
nbgrader's formgrader, served on 127.0.0.1 as an instructor starts it, opens ben's
submission; the instructor scores the written answer with a comment and overrides a
failed autograded cell, as they would, in the page.  Then ``export``, ``grades.csv``,
the report and the feedback page all say what the gradebook says.  This also proves that
the rows ``grade`` writes in one INSERT a table are rows the formgrader reads and edits.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright
from support.browser import launch_chromium, start_lab_server
from support.course import CORRECT, WRONG_SQUARE
from support.gradebook import comments_of, grade_rows
from test_feedback import text_of
from test_review import pristine_review_course, run, submissions  # noqa: F401
from test_review import review_course as review_course  # noqa: F401

pytestmark = [pytest.mark.kernel, pytest.mark.browser]
CLI = [sys.executable, "-m", "autograder.cli"]
FORMGRADER = "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=True"
COMMENT = "Right idea; say why the sign of x does not matter."


def cli(course: Path, *args: str) -> str:
    proc = subprocess.run(CLI + [*args, "--course", str(course)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_review_in_the_formgrader_reaches_export_grades_report_and_feedback(
    review_course, tmp_path
):
    course = review_course
    why = {"why": "Because a negative times a negative is positive."}
    subs = submissions(
        course, tmp_path / "subs", ann={**CORRECT, **why}, ben={**WRONG_SQUARE, **why}
    )
    run(course, subs)  # ben: 2 of 4 autograded points; both written answers wait
    shots = tmp_path / "screenshots"

    server = start_lab_server(
        course, tmp_path / "formgrader", extra_args=[FORMGRADER], python=Path(sys.executable)
    )
    try:
        notebooks = server.api("GET", "formgrader/api/submitted_notebooks/mini/mini")
        ben = next(nb["id"] for nb in notebooks if nb["student"] == "ben")
        with sync_playwright() as playwright:
            context = launch_chromium(playwright, tmp_path / "profile")
            # The instructor's login, for the page's own API calls too.
            context.set_extra_http_headers({"Authorization": f"token {server.token}"})
            try:
                page = context.new_page()
                page.goto(server.url(f"formgrader/submissions/{ben}/"))
                score = page.locator("input.score#why")
                # The page has loaded the gradebook's grades: the autograded score shows.
                expect(page.locator("input.score#test_square_small")).to_have_attribute(
                    "placeholder", "1"
                )
                page.screenshot(path=shots / "formgrader-before.png", full_page=True)

                def saved(what: str, action) -> None:
                    """Do ``action`` and wait until the formgrader has saved ``what``."""
                    with page.expect_response(
                        lambda r: (
                            f"/formgrader/api/{what}/" in r.url
                            and r.request.method == "PUT"
                            and r.ok
                        )
                    ):
                        action()

                saved("grade", lambda: (score.fill("1.5"), score.press("Tab")))
                comment = page.locator("textarea.comment#why-comment")
                saved("comment", lambda: (comment.fill(COMMENT), comment.press("Tab")))
                override = page.locator("input.score#test_square_hidden")
                saved("grade", lambda: (override.fill("2"), override.press("Tab")))
                page.screenshot(path=shots / "formgrader-after.png", full_page=True)
            finally:
                context.close()
        # The formgrader itself reads back what it saved.
        rows = server.api("GET", "formgrader/api/submissions/mini")
        assert {r["student"]: r["score"] for r in rows} == {"ann": 4, "ben": 5.5}
    finally:
        server.stop()

    assert grade_rows(course, "mini", "mini", "ben") == {
        "test_square_small": (1, None, False),
        "test_square_hidden": (0, 2, False),
        "test_cube": (1, None, False),
        "why": (None, 1.5, False),
    }
    assert comments_of(course, "mini", "mini", "ben") == {"why": COMMENT}

    # export names ann, whose written answer still waits, and says what it wrote for her.
    out = cli(course, "export", "mini", "--to", "csv")
    assert "waiting for grading by hand: ann: why (2 pt); wrote 4 / 6, the score so far" in out
    with open(course / "reports/mini/csv-grades.csv", newline="", encoding="utf-8") as fh:
        exported = {r["student"]: r for r in csv.DictReader(fh)}
    assert (exported["ben"]["score"], exported["ben"]["review"]) == ("5.5", "reviewed")
    assert (exported["ann"]["score"], exported["ann"]["review"]) == ("4", "waiting: why")

    # An unchanged rerun keeps the review and writes grades.csv from it.
    again = run(course, subs)
    assert again.graded_now == [] and again.to_review == {}
    with open(course / "reports/mini/grades.csv", newline="", encoding="utf-8") as fh:
        grades = {r["student"]: r["score"] for r in csv.DictReader(fh)}
    assert grades == {"ann": "4", "ben": "5.5"}

    cli(course, "report", "mini")
    report = text_of((course / "reports/mini/report.html").read_text(encoding="utf-8"))
    assert "Scored by hand 1 Waiting for grading 1" in report
    assert "Cell Points Waiting Students why 2 1 ann Distribution of total scores" in report
    assert re.search(
        r"ann Graded 4 / 6 [\d.]+ 0 waiting: why ben Graded 5.5 / 6 [\d.]+ 0 scored by hand", report
    )

    cli(course, "feedback", "mini", "--student", "ben")
    html = (course / "feedback/ben/mini/mini.html").read_text(encoding="utf-8")
    text = text_of(html)
    assert "5.5 / 6 points" in text
    assert "test_square_hidden ✎ Scored by hand (autograder: Failed) 2 / 2" in text
    assert "why ✎ Scored by hand 1.5 / 2" in text
    assert f"Your instructor’s comment {COMMENT}" in text
    assert "RUBRIC-FOR-GRADERS" not in html

    with sync_playwright() as playwright:
        context = launch_chromium(playwright, tmp_path / "profile-feedback")
        try:
            page = context.new_page()
            page.goto((course / "feedback/ben/mini/mini.html").as_uri())
            expect(page.get_by_text("Your instructor’s comment")).to_be_visible()
            page.screenshot(path=shots / "feedback.png", full_page=True)
        finally:
            context.close()
