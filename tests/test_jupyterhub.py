"""A class on a real JupyterHub, on 127.0.0.1, with learners in Chromium.

One hub (``jupyterhub`` with ``configurable-http-proxy``, a shared-password authenticator
and `LocalProcessSpawner`) serves three accounts: an instructor and two learners, with
nbgrader's exchange in a temporary folder.  It is set up as ``docs/jupyterhub.md`` tells
an instructor (``tests/support/hub.py``).  The loop is the course's:

1. the instructor releases E7.2 to the exchange (``nbgrader release_assignment``);
2. learner 1 logs in, fetches it in the Assignments panel, fills it in correctly,
   validates and submits;
   with a variant key in the course, learner 1's numbers are their own: the *Your
   numbers* cell shows them for the hub user, and learner 1 types answers worked by hand
   from them;
3. the instructor sets a due date in the gradebook, and learner 2 submits a version
   with a mistake after it, so that nbgrader's own submission time makes it late;
4. the instructor collects, grades in place with ``specdec-course grade`` and releases
   the feedback;
5. each learner fetches the feedback in the panel and opens it; learner 1's shows their
   own numbers beside their answers.

The instructor is the hub's administrator; their commands run on the command line, as
root, in the course folder, with this environment's ``nbgrader`` and ``specdec-course``
(the grader's sandbox mounts the interpreter it runs on, and that is this one).  The
learners are real local users, created and removed by the test (it runs as root, as CI
does).  nbgrader names a student by the OS user (``nbgrader.utils.get_username``),
and by ``JUPYTERHUB_USER`` only when that user is ``jovyan``.  One OS user per learner is
what `LocalProcessSpawner` is for: each learner's files, submissions and feedback are
theirs by the operating system's permissions, as on a real hub, whereas one shared
``jovyan`` account on one machine would let every learner read every other's home.

Screenshots go to ``reports/screenshots/hub-*.png``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import subprocess
import sys
import urllib.error
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from playwright.sync_api import Page, expect, sync_playwright
from support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    EXPECT_TIMEOUT_MS,
    NotebookPage,
    solution_sources,
)
from support.course import FILES, REPO, autograded_expectations, sandbox_available
from support.hub import HubClass, hub_class
from support.lessons import Lesson
from support.variants import e7_2_hand_worked

from autograder.export import export
from specdec_reference import variants

pytestmark = [pytest.mark.hub, pytest.mark.browser, pytest.mark.kernel]

ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests"
COURSE_ID = "specdec-e7"
#: Learner 2's mistake: one of E7.2's samples (``tests/files/.../build_samples.py``).
MISTAKE = "mistake-inverted-ratio"
#: What learner 2's feedback says about it (a failure message of the hidden tests).
MISTAKE_NAMED = "the inverted ratio q/p"
BIN = Path(sys.executable).parent
SCREENSHOTS = REPO / "reports" / "screenshots"
SPAWN_TIMEOUT_MS = 180_000  # log in, spawn the server, load JupyterLab: two busy cores
PANEL_TIMEOUT_MS = 120_000  # an exchange action of the Assignments panel
SUCCESS = "Success! Your notebook passes all the tests."
#: The course's variant key: each learner works numbers of their own.
VARIANT_KEY = "hub-term"


# --------------------------------------------------------------------------- helpers


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"hub-{name}.png"
    page.screenshot(path=str(path))
    return path


def instructor(klass: HubClass, *args: str) -> str:
    """Run one of the instructor's commands in the course folder; its output."""
    env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(klass.root)}
    proc = subprocess.run(
        list(args), cwd=klass.course, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{args}: {proc.stdout}{proc.stderr}"
    return proc.stdout + proc.stderr


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def log_in(page: Page, klass: HubClass, name: str) -> None:
    """Log in on the hub's page; wait for the learner's JupyterLab to be up."""
    page.goto(f"{klass.hub.base_url}/hub/login")
    page.locator("#username_input").fill(name)
    page.locator("#password_input").fill(klass.passwords["learner"])
    page.locator("#login_submit").click()
    page.wait_for_url(re.compile(rf"/user/{re.escape(name)}/lab"), timeout=SPAWN_TIMEOUT_MS)
    expect(page.locator("#jp-main-statusbar")).to_be_visible(timeout=SPAWN_TIMEOUT_MS)


def close_menus(page: Page) -> None:
    """Close the open menu, if any: Escape, with the keyboard's focus on the menu."""
    menus = page.locator(".lm-Menu")
    for index in range(menus.count()):
        menus.nth(index).press("Escape")
    expect(menus).to_have_count(0)


def open_menu(page: Page, menu: str) -> None:
    """Open a menu of the menu bar, with every other menu closed first."""
    for _ in range(3):
        close_menus(page)
        page.locator(".lm-MenuBar-item", has_text=menu).first.click()
        try:
            expect(page.locator(".lm-Menu")).to_have_count(1, timeout=5_000)
            return
        except AssertionError:
            continue  # the click landed while JupyterLab was still busy: again
    raise AssertionError(f"the {menu} menu did not open")


def open_assignments(page: Page) -> None:
    """Nbgrader > Assignment List: the Assignments panel, its lists loaded."""
    open_menu(page, "Nbgrader")
    page.locator('.lm-Menu-item[data-command="nbgrader:open-assignment-list"]').click()
    for name in ("released", "fetched", "submitted"):
        expect(page.locator(f"#{name}_assignments_list_loading")).to_be_hidden(
            timeout=PANEL_TIMEOUT_MS
        )


def assignment_row(page: Page, listing: str):
    """The E7.2 row of one of the panel's lists (``released``, ``fetched``, ``submitted``)."""
    return page.locator(f"#{listing}_assignments_list .list_item", has_text=ASSIGNMENT).first


def press(page: Page, listing: str, button: str, then: str) -> None:
    """Press the row's button (Fetch, Submit, Fetch Feedback); wait for the row in ``then``."""
    row = assignment_row(page, listing)
    row.locator("button", has_text=button).click()
    expect(assignment_row(page, then)).to_be_visible(timeout=PANEL_TIMEOUT_MS)


def type_answers(page: Page, server, answers: dict[str, str]) -> NotebookPage:
    """Open the fetched notebook in the loaded lab, type each answer into its cell, save."""
    nbp = NotebookPage(page, server, f"{ASSIGNMENT}/{NOTEBOOK}.ipynb", in_lab=True)
    for grade_id, text in answers.items():
        nbp.replace_cell_source(nbp.index_of(grade_id), text)
    saved = nbp.save()
    for grade_id, text in answers.items():
        (cell,) = [
            c for c in saved.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        ]
        assert cell.source == text, grade_id
    return nbp


def open_feedback(page: Page, name: str) -> str:
    """Fetch the feedback in the panel, follow "view feedback" and open the page; its text."""
    press(page, "submitted", "Fetch Feedback", "submitted")
    link = assignment_row(page, "submitted").locator("a", has_text="view feedback")
    expect(link).to_be_visible(timeout=PANEL_TIMEOUT_MS)
    screenshot(page, f"{name}-feedback-fetched")
    link.click()
    item = page.locator(".jp-DirListing-item", has_text=f"{NOTEBOOK}.html")
    expect(item).to_be_visible()
    item.dblclick()
    frame = page.frame_locator(".jp-HTMLViewer iframe").first
    body = frame.locator("body")
    expect(body).to_contain_text(ASSIGNMENT)
    screenshot(page, f"{name}-feedback-page")
    return body.inner_text()


def read_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


# --------------------------------------------------------------------------- the class


@pytest.fixture
def klass():
    """The hub, its accounts, its exchange and the course; all of it gone afterwards."""
    with hub_class(REPO, ["learner1", "learner2"], "instructor") as running:
        yield running


def test_a_class_goes_round_the_loop_on_a_real_jupyterhub(klass):
    one, two = klass.learners
    course = klass.course
    config = course / "nbgrader_config.py"
    config.write_text(
        config.read_text().replace('c.Variants.key = ""', f'c.Variants.key = "{VARIANT_KEY}"')
    )
    source = course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    correct = solution_sources(source)
    # Learner 1 works the questions by hand, from the numbers of their own id.
    own = variants.graded_numbers(ASSIGNMENT, VARIANT_KEY, one.name)
    correct.update(e7_2_hand_worked(own))
    sample = nbformat.read(FILES / ASSIGNMENT / "submissions" / f"{MISTAKE}.ipynb", as_version=4)
    buggy = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in sample.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") in correct
    }
    assert buggy.keys() == correct.keys() and buggy != correct
    points = autograded_expectations(ASSIGNMENT)
    expected = {
        one.name: sum(points["reference"].values()),
        two.name: sum(points[MISTAKE].values()),
    }
    assert expected[two.name] < expected[one.name]

    # The hub knows the three accounts; the learners' servers serve Validate and the
    # Assignments panel, not the formgrader (checked on learner 1's server below).
    users = {u["name"]: u["admin"] for u in klass.hub.api("GET", "hub/api/users")}
    assert users == {klass.instructor: True, one.name: False, two.name: False}

    # 1. The instructor releases E7.2 to the exchange.
    instructor(klass, str(BIN / "nbgrader"), "generate_assignment", ASSIGNMENT, "--force")
    instructor(klass, str(BIN / "nbgrader"), "release_assignment", ASSIGNMENT)
    assert (klass.exchange / COURSE_ID / "outbound" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").is_file()

    with sync_playwright() as playwright:
        expect.set_options(timeout=EXPECT_TIMEOUT_MS)
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            pages = {}
            for learner in (one, two):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.set_default_timeout(60_000)
                pages[learner.name] = context.new_page()

            # 2. Learner 1: log in, fetch, fill in correctly, validate, submit.
            page = pages[one.name]
            log_in(page, klass, one.name)
            server = klass.hub.server(one.name)
            assert server.api("GET", "courses")["success"]
            for endpoint in ("formgrader", "formgrader/api/assignments"):
                with pytest.raises(urllib.error.HTTPError) as off:
                    server.api("GET", endpoint)
                assert off.value.code == 404, endpoint
            # The Nbgrader menu offers a learner the Assignments panel only.
            open_menu(page, "Nbgrader")
            items = page.locator(".lm-Menu-content .lm-Menu-item:visible .lm-Menu-itemLabel")
            expect(items.first).to_be_visible()
            assert [t.strip() for t in items.all_inner_texts() if t.strip()] == ["Assignment List"]
            screenshot(page, "0-learner1-nbgrader-menu")
            close_menus(page)
            for text in ("Create Assignment", "Formgrader", "Course List", "Error"):
                expect(page.locator("body")).not_to_contain_text(text)
            open_assignments(page)
            expect(assignment_row(page, "released")).to_contain_text(COURSE_ID)
            screenshot(page, "1-learner1-released")
            press(page, "released", "Fetch", "fetched")
            screenshot(page, "2-learner1-fetched")
            # Validate asks for a response in every answer cell: the written one too.
            answer = "Acceptance emits min(p, q) and a rejection adds max(0, p - q): in all, p."
            written = dict.fromkeys(Lesson(ASSIGNMENT).written_points, answer)
            nbp = type_answers(page, server, {**correct, **written})
            # The Your numbers cell takes the hub user's id: learner 1's own numbers.
            # (its code is collapsed: run it from the id cell above, as a learner would)
            numbers = nbp.index_of("your_numbers")
            nbp.prompt(numbers - 1).click()
            page.keyboard.press("Shift+Enter")
            page.keyboard.press("Control+Enter")
            output = nbp.cell(numbers).locator(".jp-OutputArea")
            expect(output).to_contain_text(f"variant {own['variant']}, for {one.name}")
            expect(output).to_contain_text(variants.E7_2.describe(own)[0])
            output.scroll_into_view_if_needed()
            screenshot(page, "2b-learner1-own-numbers")
            nbp.save()
            dialog = nbp.validate()
            expect(dialog.locator(".validation-success")).to_contain_text(SUCCESS)
            screenshot(page, "3-learner1-validated")
            dialog.locator(".jp-Dialog-button", has_text="Ok").click()
            open_assignments(page)
            press(page, "fetched", "Submit", "submitted")
            screenshot(page, "4-learner1-submitted")

            # 3. A due date, then learner 2's buggy submission after it: late.
            due = datetime.now(timezone.utc)
            instructor(
                klass,
                str(BIN / "nbgrader"),
                "db",
                "assignment",
                "add",
                ASSIGNMENT,
                f"--duedate={due:%Y-%m-%d %H:%M:%S.%f} UTC",
            )
            page = pages[two.name]
            log_in(page, klass, two.name)
            open_assignments(page)
            press(page, "released", "Fetch", "fetched")
            type_answers(page, klass.hub.server(two.name), buggy)
            open_assignments(page)
            press(page, "fetched", "Submit", "submitted")
            screenshot(page, "5-learner2-submitted-late")

            # 4. The instructor collects, grades in place, releases the feedback.
            instructor(klass, str(BIN / "nbgrader"), "collect", ASSIGNMENT)
            submitted = course / "submitted"
            assert sorted(p.name for p in submitted.iterdir()) == sorted([one.name, two.name])
            stamps = {
                s: datetime.fromisoformat(
                    (submitted / s / ASSIGNMENT / "timestamp.txt")
                    .read_text()
                    .strip()
                    .removesuffix(" UTC")
                ).replace(tzinfo=timezone.utc)
                for s in (one.name, two.name)
            }
            assert stamps[one.name] < due < stamps[two.name], (stamps, due)
            before = tree_hashes(submitted)
            grade = [str(BIN / "specdec-course"), "grade", ASSIGNMENT, "--workers", "2"]
            out = instructor(klass, *grade, *([] if sandbox_available() else ["--no-sandbox"]))
            assert "layout: nbgrader, read from the course's own submitted/ (in place)" in out
            assert tree_hashes(submitted) == before  # byte-identical, nothing added
            rows = {
                r["student"]: r for r in read_rows(course / "reports" / ASSIGNMENT / "grades.csv")
            }
            lost = [
                (c["student"], c["grade_id"], c["status"])
                for c in read_rows(course / "reports" / ASSIGNMENT / "cells.csv")
                if float(c["score"]) < float(c["max_score"])
            ]
            assert {s: float(r["score"]) for s, r in rows.items()} == expected, lost
            # Late by nbgrader's own reckoning (the gradebook), and in the course's export.
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
                late = {s: gb.find_submission(ASSIGNMENT, s).total_seconds_late for s in rows}
            assert late[one.name] == 0 and late[two.name] > 0, late
            exported = read_rows(export(ASSIGNMENT, to="csv", course=course).path)
            assert {r["student"]: r["late"] for r in exported} == {one.name: "no", two.name: "yes"}
            instructor(klass, str(BIN / "nbgrader"), "release_feedback", ASSIGNMENT)

            # 5. Each learner fetches the feedback in the panel and opens it.
            shown = {}
            for learner in (one, two):
                page = pages[learner.name]
                open_assignments(page)
                page.locator("#refresh_assignments_list").click()  # the panel was open already
                expect(assignment_row(page, "submitted")).to_contain_text(
                    "feedback available to fetch", timeout=PANEL_TIMEOUT_MS
                )
                short = learner.name.split("-")[0]
                screenshot(page, f"{short}-feedback-available")
                shown[learner.name] = open_feedback(page, short)
                fetched = list((learner.home / ASSIGNMENT / "feedback").glob("*/*.html"))
                ours = course / "feedback" / learner.name / ASSIGNMENT / f"{NOTEBOOK}.html"
                assert [p.read_bytes() for p in fetched] == [ours.read_bytes()]
            for learner, other in ((one, two), (two, one)):
                assert learner.name in shown[learner.name]
                assert other.name not in shown[learner.name]
            assert MISTAKE_NAMED in shown[two.name]
            frame = pages[two.name].frame_locator(".jp-HTMLViewer iframe").first
            frame.get_by_text(MISTAKE_NAMED).first.scroll_into_view_if_needed()
            screenshot(pages[two.name], "learner2-feedback-names-the-mistake")
            assert MISTAKE_NAMED not in shown[one.name]
            assert "Your numbers" in shown[one.name]
            assert variants.E7_2.describe(own, "part1_answers")[0] in shown[one.name]
            # The written answer's points wait for the instructor, answered or not.
            by_hand = sum(Lesson(ASSIGNMENT).written_points.values())
            total = expected[one.name] + by_hand
            for learner in (one, two):
                score = rf"\b{expected[learner.name]:g}\s*/ {total:g} points"
                assert re.search(score, shown[learner.name]), (score, shown[learner.name][:300])
                waits = f"{by_hand:g} point(s) wait for your instructor to grade them by hand"
                assert waits in " ".join(shown[learner.name].split())

            # Learner 1 cannot reach learner 2's server, nor so their feedback.
            page = pages[one.name]
            response = page.goto(klass.hub.server(two.name).url("lab"))
            assert response is not None and response.status == 403, response
            expect(page.locator("body")).not_to_contain_text(MISTAKE_NAMED)
            screenshot(page, "learner1-denied-learner2s-server")
        finally:
            browser.close()
