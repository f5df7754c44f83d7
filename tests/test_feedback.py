"""Feedback pages: scores and messages for the learner, never a hidden test's source.

The course built here is small but complete: an instructor notebook whose hidden test holds a
secret marker, its release, submissions (one of them the autograded notebook, which holds the
hidden test), an invalid submission with no notebook, and the grader's results JSON.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from support.gradebook import record_results

from autograder.course import UsageError
from autograder.feedback import feedback
from autograder.grading.results import SCHEMA, SubmissionResult
from autograder.render.feedback_page import render_feedback

ASSIGNMENT = "e7_2_acceptance_tests"
NOTEBOOK = "acceptance_tests"
#: Appears only inside the instructor's hidden tests: it must never reach a feedback page.
SECRET = "SECRET-HIDDEN-MARKER-7f3a9c"
#: A failure message that tries to inject markup.
HOSTILE_MESSAGE = (
    "AssertionError: accept_prob(0.8, 0.5) returned 1.6, expected 0.625 "
    '<script>alert("message")</script>; did you forget the cap at 1?'
)
LEARNER_SCRIPT = '<script>alert("learner")</script>'

# --------------------------------------------------------------------------------------------
# A small course, built cell by cell
# --------------------------------------------------------------------------------------------


def _cell(kind: str, source: str, grade_id: str | None = None, **meta) -> nbformat.NotebookNode:
    cell = new_code_cell(source) if kind == "code" else new_markdown_cell(source)
    if grade_id is not None:
        cell.metadata["nbgrader"] = {
            "grade_id": grade_id,
            "grade": meta.get("grade", False),
            "solution": meta.get("solution", False),
            "locked": meta.get("locked", False),
            "schema_version": 3,
            **({"points": meta["points"]} if "points" in meta else {}),
        }
    return cell


VISIBLE_TEST = (
    '"""Check that accept_prob reproduces the lesson\'s examples."""\n'
    "assert abs(float(accept_prob(0.5, 0.8)) - 1.0) <= 1e-9, 'accept_prob(0.5, 0.8) should be 1'\n"
)
HIDDEN_TEST_SOURCE = (
    '"""Check that accept_prob agrees with the reference on many inputs."""\n'
    "### BEGIN HIDDEN TESTS\n"
    f"assert _hidden_check(accept_prob), {SECRET!r}\n"
    "### END HIDDEN TESTS\n"
)
HIDDEN_TEST_RELEASED = '"""Check that accept_prob agrees with the reference on many inputs."""\n'
STUB = "def accept_prob(p, q):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
SOLUTION = (
    "def accept_prob(p, q):\n"
    "    ### BEGIN SOLUTION\n    return min(1.0, p / q)\n    ### END SOLUTION\n"
)


def instructor_notebook(*, release: bool) -> nbformat.NotebookNode:
    """The source notebook (``release=False``) or what learners receive (``release=True``)."""
    cells = [
        _cell("markdown", "# Acceptance tests\n\nThe acceptance rule is $\\min(1, p_i / q_i)$."),
        _cell("code", "import numpy as np"),
        _cell("markdown", "## Part 1: the rule (3 points)\n\nWrite `accept_prob`."),
        _cell("code", STUB if release else SOLUTION, "accept_prob", solution=True),
        _cell("code", VISIBLE_TEST, "test_accept_prob_examples", grade=True, locked=True, points=1),
        _cell(
            "code",
            HIDDEN_TEST_RELEASED if release else HIDDEN_TEST_SOURCE,
            "test_accept_prob_matches_reference",
            grade=True,
            locked=True,
            points=2,
        ),
        _cell("markdown", "## Part 2: check your understanding (1 point)"),
        _cell(
            "code",
            'choice = "?"' if release else 'choice = "B"',
            "check_understanding",
            solution=True,
        ),
        _cell(
            "code",
            '"""Check the choice."""\nassert choice in "AB"\n',
            "test_check_understanding",
            grade=True,
            locked=True,
            points=1,
        ),
        _cell(
            "markdown",
            "YOUR ANSWER HERE" if release else "Because p differs.",
            "why",
            solution=True,
        ),
        _cell("markdown", "## Summary\n\nWell done."),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def submission(
    answers: dict[str, str], *, autograded: bool = False, extra: dict[str, list] | None = None
) -> nbformat.NotebookNode:
    """A learner's notebook: the release with ``answers`` by grade_id.

    ``autograded`` puts the instructor's test sources back (as nbgrader's autograded notebook
    has them), with a traceback that quotes the hidden test in the outputs; ``extra`` maps a
    grade_id to cells the learner added after it.
    """
    nb = instructor_notebook(release=True)
    source = instructor_notebook(release=False)
    cells = []
    for cell, original in zip(nb.cells, source.cells, strict=True):
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
        if autograded and cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = original.source
            cell.outputs = [
                nbformat.v4.new_output(
                    "error",
                    ename="AssertionError",
                    evalue=SECRET,
                    traceback=[f"----> 3 assert _hidden_check(accept_prob), {SECRET!r}"],
                )
            ]
        cells.append(cell)
        cells.extend((extra or {}).get(gid, []))
    nb.cells = cells
    return nb


def cell_result(
    gid: str, score: float, max_score: float, status: str, message: str = "", flags=(), stop=""
):
    return {
        "grade_id": gid,
        "score": score,
        "max_score": max_score,
        "status": status,
        "message": message,
        "flags": list(flags),
        "stop": stop,
    }


def student_result(student: str, status: str, cells: list[dict], reason: str = "", flags=()):
    return {
        "schema": SCHEMA,
        "student": student,
        "assignment": ASSIGNMENT,
        "status": status,
        "reason": reason,
        "score": float(sum(c["score"] for c in cells)),
        "max_score": 4.0,
        "flags": list(flags),
        "cells": cells,
        "seconds": 2.5,
        "key": "0" * 64,
        "in_gradebook": True,
    }


def not_graded(reason: str) -> list[dict]:
    """What the grader records for each test cell of a submission that did not run."""
    return [
        cell_result(gid, 0.0, pts, "failed", f"not graded: {reason}", stop="not-graded")
        for gid, pts in [
            ("test_accept_prob_examples", 1.0),
            ("test_accept_prob_matches_reference", 2.0),
            ("test_check_understanding", 1.0),
        ]
    ]


WRONG_CODE = "def accept_prob(p, q):\n    # " + LEARNER_SCRIPT + "\n    return p / q\n"
INVALID_REASON = "not a valid Jupyter notebook: JSONDecodeError: Expecting value <b>here</b>"

RESULTS = {
    # Partly right; the hidden test fails with a message that tries to inject markup.
    "alice": student_result(
        "alice",
        "graded",
        [
            cell_result("test_accept_prob_examples", 1.0, 1.0, "passed"),
            cell_result("test_accept_prob_matches_reference", 0.0, 2.0, "failed", HOSTILE_MESSAGE),
            cell_result("test_check_understanding", 1.0, 1.0, "passed"),
        ],
    ),
    # Submitted a file that is not a notebook.
    "bob": student_result("bob", "invalid", not_graded(INVALID_REASON), reason=INVALID_REASON),
    # Full marks, with a cell of their own.
    "carol": student_result(
        "carol",
        "graded",
        [
            cell_result("test_accept_prob_examples", 1.0, 1.0, "passed"),
            cell_result("test_accept_prob_matches_reference", 2.0, 2.0, "passed"),
            cell_result("test_check_understanding", 1.0, 1.0, "passed"),
        ],
        flags=["imports specdec_reference"],
    ),
    # An infinite loop.
    "dave": student_result(
        "dave",
        "timeout",
        [
            cell_result("test_accept_prob_examples", 0.0, 1.0, "timeout", "timed out after 5 s"),
            cell_result(
                "test_accept_prob_matches_reference",
                0.0,
                2.0,
                "timeout",
                "timed out after 5 s",
                flags=["killed"],
            ),
            cell_result(
                "test_check_understanding",
                0.0,
                1.0,
                "failed",
                "NameError: name 'choice' is not defined",
            ),
        ],
        reason="the notebook ran longer than 20 s",
    ),
}


def make_course(root: Path) -> Path:
    """Write the course, its release, the submissions and the grader's results under ``root``,
    the results recorded in the course's gradebook (a copy of one course built once)."""
    global _PRISTINE
    if _PRISTINE is None:
        _PRISTINE = _build_course(Path(tempfile.mkdtemp(prefix="feedback-course-")) / "course")
    return Path(shutil.copytree(_PRISTINE, root / "course", symlinks=True))


_PRISTINE: Path | None = None


def _build_course(course: Path) -> Path:
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    (course / "release" / ASSIGNMENT).mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    nbformat.write(
        instructor_notebook(release=False), course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    )
    nbformat.write(
        instructor_notebook(release=True), course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    )

    submitted = {
        # alice's file is the autograded notebook: it holds the hidden test and its traceback.
        "alice": submission(
            {"accept_prob": WRONG_CODE, "why": "Because <em>p</em> differs."}, autograded=True
        ),
        "carol": submission(
            {
                "accept_prob": "def accept_prob(p, q):\n    return min(1, p / q)\n",
                "check_understanding": 'choice = "B"',
            },
            extra={"accept_prob": [new_code_cell(f"print('{LEARNER_SCRIPT}')  # my own check")]},
        ),
        "dave": submission(
            {"accept_prob": "def accept_prob(p, q):\n    while True:\n        pass\n"}
        ),
    }
    for student, nb in submitted.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    (course / "submitted" / "bob" / ASSIGNMENT).mkdir(parents=True)  # bob: no notebook at all

    # The autograded notebook sits where nbgrader keeps it; feedback must not use it.
    autograded = course / "autograded" / "alice" / ASSIGNMENT
    autograded.mkdir(parents=True)
    nbformat.write(submitted["alice"], autograded / f"{NOTEBOOK}.ipynb")

    results = {s: SubmissionResult.from_dict(r) for s, r in RESULTS.items()}
    record_results(course, ASSIGNMENT, NOTEBOOK, results)
    return course


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return make_course(tmp_path)


@pytest.fixture
def pages(course: Path) -> dict[str, str]:
    paths = feedback(ASSIGNMENT, course=course)
    return {p.parts[-3]: p.read_text(encoding="utf-8") for p in paths}


def text_of(html: str) -> str:
    """The page's visible text, whitespace collapsed (entities decoded)."""
    parser = _Collector()
    parser.feed(html)
    return " ".join("".join(parser.text).split())


class _Collector(HTMLParser):
    """Records the start tags, attributes and text of a page."""

    INLINE = {"span", "a", "code", "em", "strong", "small", "b", "i"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in_style = tag in {"style", "title"}
        if tag not in self.INLINE:
            self.text.append(" ")

    def handle_endtag(self, tag):
        self._in_style = False
        if tag not in self.INLINE:
            self.text.append(" ")

    def handle_data(self, data):
        if not self._in_style:
            self.text.append(data)


def assert_inert(html: str) -> None:
    """No script, no event handler, no javascript: URL, no remote resource."""
    parser = _Collector()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert tag not in {"script", "iframe", "object", "embed", "link", "base", "form"}, tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in {"src", "href"}:
                assert (
                    not (value or "").strip().lower().startswith(("javascript:", "http:", "//"))
                ), value
                if tag == "img":
                    assert (value or "").startswith("data:image/png;base64,"), value


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def test_feedback_writes_one_page_per_student_in_nbgraders_layout(course: Path):
    paths = feedback(ASSIGNMENT, course=course)

    expected = [course / "feedback" / s / ASSIGNMENT / f"{NOTEBOOK}.html" for s in sorted(RESULTS)]
    assert paths == expected
    assert all(p.is_file() for p in paths)


def test_feedback_for_one_student_writes_only_that_page(course: Path):
    paths = feedback(ASSIGNMENT, course=course, student="carol")

    assert paths == [course / "feedback" / "carol" / ASSIGNMENT / f"{NOTEBOOK}.html"]
    assert sorted(p.name for p in (course / "feedback").iterdir()) == ["carol"]


@pytest.mark.parametrize("student", ["mallory", "../alice", ""])
def test_feedback_for_an_unknown_student_is_a_usage_error(course: Path, student: str):
    with pytest.raises(UsageError, match="no result for student"):
        feedback(ASSIGNMENT, course=course, student=student)


def test_feedback_for_an_unknown_assignment_is_a_usage_error(course: Path):
    with pytest.raises(UsageError, match="unknown assignment 'e7_9'.*e7_2_acceptance_tests"):
        feedback("e7_9", course=course)


def test_feedback_before_grading_is_a_usage_error(course: Path):
    (course / "source" / "e7_3_accept_step").mkdir()
    with pytest.raises(UsageError, match="run `specdec-course grade` first"):
        feedback("e7_3_accept_step", course=course)


def test_feedback_never_shows_a_hidden_tests_source(pages: dict[str, str], course: Path):
    # The secret is in the source notebook, in alice's submitted and autograded notebooks
    # (test cell and traceback): none of it reaches any page.
    assert SECRET in (course / "submitted" / "alice" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()
    for student, html in pages.items():
        assert SECRET not in html, student
        assert "_hidden_check" not in html, student
        assert "HIDDEN TESTS" not in html, student
    # The test itself is shown as released, with its one-line description.
    assert "Check that accept_prob agrees with the reference on many inputs." in text_of(
        pages["alice"]
    )


def test_feedback_never_shows_a_solution_or_traceback(pages: dict[str, str]):
    for html in pages.values():
        assert "BEGIN SOLUTION" not in html
        assert "min(1.0, p / q)" not in html  # the instructor's solution
        assert "----&gt;" not in html and "---->" not in html  # traceback arrows


def test_feedback_shows_total_score_status_and_each_tests_result(pages: dict[str, str]):
    text = text_of(pages["alice"])

    assert "2 / 4 points" in text
    assert "Status: Graded" in text
    assert re.search(r"test_accept_prob_examples \S* ?Passed 1 / 1", text)
    assert re.search(r"test_accept_prob_matches_reference \S* ?Failed 0 / 2", text)
    assert "Total 2 / 4" in text


def test_failure_message_is_shown_with_its_markup_inert(pages: dict[str, str]):
    html = pages["alice"]

    assert_inert(html)
    assert HOSTILE_MESSAGE in text_of(html)  # all of it, as text
    assert "&lt;script&gt;alert(&#34;message&#34;)&lt;/script&gt;" in html


def test_learner_code_and_answers_are_shown_escaped_in_notebook_order(pages: dict[str, str]):
    html, text = pages["alice"], text_of(pages["alice"])

    assert_inert(html)
    assert "return p / q" in text
    assert LEARNER_SCRIPT in text and "<script" not in html.lower()
    assert "Because <em>p</em> differs." in text and "<em>p</em>" not in html
    # Order: lesson heading, the learner's function, its tests, part 2, the written answer.
    order = [
        "Part 1: the rule",
        "return p / q",
        "test_accept_prob_examples Passed",
        "test_accept_prob_matches_reference Failed",
        "Part 2: check your understanding",
        "Because <em>p</em> differs.",
        "Summary",
    ]
    notebook = text.split("Your notebook, cell by cell", 1)[1]
    positions = [notebook.replace("✓ ", "").replace("✗ ", "").find(s) for s in order]
    assert -1 not in positions, dict(zip(order, positions, strict=True))
    assert positions == sorted(positions)


def test_a_cell_the_learner_added_is_shown_after_the_cell_it_followed(pages: dict[str, str]):
    text = text_of(pages["carol"]).split("Your notebook, cell by cell", 1)[1]

    assert_inert(pages["carol"])
    added = text.find("A cell you added")
    assert text.find("return min(1, p / q)") < added < text.find("test_accept_prob_examples ✓")
    assert f"print('{LEARNER_SCRIPT}')" in text


def test_invalid_submission_without_notebook_gets_its_reason_and_scores(pages: dict[str, str]):
    html, text = pages["bob"], text_of(pages["bob"])

    assert_inert(html)
    assert "Status: Invalid submission" in text
    assert INVALID_REASON in text and "<b>here</b>" not in html
    assert "could not be read" in text
    assert "0 / 4 points" in text
    assert "test_check_understanding – Not run 0 / 1" in text  # the score table is still there
    assert "Your notebook, cell by cell" not in text


def test_timed_out_submission_shows_its_reason_and_cell_messages(pages: dict[str, str]):
    text = text_of(pages["dave"])

    assert "Status: Timed out" in text
    assert "the notebook ran longer than 20 s" in text
    assert "Timed out 0 / 1" in text
    assert "timed out after 5 s" in text
    assert "killed" not in text  # flags are for the instructor


def test_feedback_pages_are_self_contained_and_accessible(pages: dict[str, str]):
    for html in pages.values():
        assert_inert(html)
        assert '<html lang="en">' in html
        assert "<style>" in html and "Content-Security-Policy" in html
        assert "<h1>" in html and "<caption>" in html
        assert '<th scope="col">' in html and '<th scope="row">' in html


def test_feedback_falls_back_to_the_source_when_there_is_no_release(course: Path):
    for path in (course / "release" / ASSIGNMENT).iterdir():
        path.unlink()

    html = feedback(ASSIGNMENT, course=course, student="alice")[0].read_text()

    assert SECRET not in html and "min(1.0, p / q)" not in html
    assert "Check that accept_prob agrees with the reference on many inputs." in html


def test_hidden_block_left_in_a_hand_made_release_is_cut(tmp_path: Path):
    release = instructor_notebook(release=False)  # as if source/ had been copied to release/

    html = render_feedback(
        SubmissionResult.from_dict(RESULTS["alice"]),
        submitted_nb=submission({}),
        release_nb=release,
    )

    assert SECRET not in html and "hidden tests are not shown" in html


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    code=st.text(
        alphabet=st.sampled_from(list("<>&\"'/=: \nscriptimgonerrorjava$`*_[]()#")), max_size=80
    ),
    message=st.text(max_size=80),
)
def test_any_learner_text_renders_inert_and_verbatim(code: str, message: str):
    result = student_result(
        "eve", "graded", [cell_result("test_accept_prob_examples", 0.0, 1.0, "failed", message)]
    )
    added = new_markdown_cell(code)
    nb = submission({"accept_prob": code, "why": code}, extra={"why": [added]})

    html = render_feedback(
        SubmissionResult.from_dict(result),
        submitted_nb=nb,
        release_nb=instructor_notebook(release=True),
    )

    assert_inert(html)
    text = text_of(html)
    if code.strip() and "HIDDEN TESTS" not in code and "SOLUTION" not in code:
        assert " ".join(code.split()) in text


def test_an_answer_graded_as_an_answer_shows_its_score_with_the_learners_text():
    release = instructor_notebook(release=True)
    why = next(c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "why")
    why.metadata["nbgrader"].update(grade=True, points=1)
    scored = RESULTS["alice"] | {
        "cells": RESULTS["alice"]["cells"] + [cell_result("why", 0.5, 1.0, "passed")]
    }
    unscored = RESULTS["alice"]  # graded by hand later: not in the results yet

    page = render_feedback(
        SubmissionResult.from_dict(scored),
        submitted_nb=submission({"why": "Because p <> q."}),
        release_nb=release,
    )
    later = render_feedback(
        SubmissionResult.from_dict(unscored),
        submitted_nb=submission({"why": "Because p <> q."}),
        release_nb=release,
    )

    text = text_of(page).split("Your notebook, cell by cell", 1)[1]
    assert "Your answer why ◐ Partial credit 0.5 / 1 points Because p <> q." in text
    assert "YOUR ANSWER HERE" not in page
    assert "Total 2.5 / 5" in text_of(page)
    assert "Total 2 / 4" in text_of(later) and "Because p <> q." in text_of(later)


def test_a_runs_second_process_writes_the_same_pages(course: Path, pages: dict[str, str]):
    """``grade`` hands a batch of students to :class:`PageWriter`, which writes their pages
    in a second process: the same pages as ``specdec-course feedback`` writes."""
    from autograder.record.page_writer import PageWriter

    for page in (course / "feedback").glob(f"*/{ASSIGNMENT}/*.html"):
        page.unlink()
    with PageWriter(course, ASSIGNMENT) as writer:
        writer.write(sorted(pages))
    written = (course / "feedback").glob(f"*/{ASSIGNMENT}/*.html")
    assert {p.parts[-3]: p.read_text(encoding="utf-8") for p in written} == pages


def test_a_page_says_what_waits_for_a_grader_and_the_late_penalty():
    """A written answer waiting for a grader, a late penalty: the page says both."""
    from dataclasses import replace

    from autograder.grading.results import CellResult, CellStatus

    release = instructor_notebook(release=True)
    why = next(c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "why")
    why.metadata["nbgrader"].update(grade=True, points=1)
    result = SubmissionResult.from_dict(RESULTS["alice"])
    waiting = CellResult("why", 0.0, 1.0, CellStatus.BY_HAND, waiting=True)
    result = replace(result, cells=[*result.cells, waiting], score=1.5, max_score=5.0)
    result.late_penalty = 0.5

    text = text_of(
        render_feedback(
            result, submitted_nb=submission({"why": "Because p <> q."}), release_nb=release
        )
    )
    assert "1.5 / 5 points" in text and "Late penalty: −0.5 points (included in the score)" in text
    assert "1 point(s) wait for your instructor to grade them by hand" in text
    assert "why … Waiting for grading 0 / 1" in text
    assert "Total 2 / 5" in text  # the cells' own scores; the penalty comes off the total
