"""A grader's review in nbgrader's gradebook reaches everything that leaves the tool, and
``grade`` never loses it: nor applies it silently to new work.

The course is ``mini`` with one written answer more (``why``, 2 points, graded by hand).
Scores and comments are written as the formgrader writes them (``support.gradebook.review``);
``test_formgrader.py`` does the same through the real formgrader in a browser.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell
from support.course import (
    CORRECT,
    MINI_SOURCE,
    WRONG_SQUARE,
    fill,
    ready_mini_course,
    released_notebook,
    sandbox_available,
    write_nb,
)
from support.gradebook import comments_of, grade_rows, review

from autograder.export import export
from autograder.grade import Harness, grade
from autograder.grading.results import CellStatus
from autograder.render.terminal import review_lines

pytestmark = pytest.mark.kernel
SANDBOX = sandbox_available()
#: The written answer's prompt, and the model answer with the graders' rubric (source only).
WHY_ANSWER = "### BEGIN SOLUTION\nSquaring keeps the sign out. RUBRIC-FOR-GRADERS\n### END SOLUTION"


def mini_with_written_answer(folder: Path) -> Path:
    """The ``mini`` source with a written answer, ``why`` (2 points), at its end."""
    nb = nbformat.read(MINI_SOURCE / "mini.ipynb", as_version=4)
    cell = new_markdown_cell(WHY_ANSWER)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "why",
        "locked": False,
        "points": 2,
        "schema_version": 3,
        "solution": True,
        "task": False,
    }
    cell.id = "why"
    nb.cells += [new_markdown_cell("Why is `square(-3)` positive?"), cell]
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "mini.ipynb")
    return folder


@pytest.fixture(scope="module")
def pristine_review_course(tmp_path_factory) -> Path:
    """The course released, its template built and its gradebook synced, once."""
    root = tmp_path_factory.mktemp("review")
    return ready_mini_course(root / "course", mini_with_written_answer(root / "source" / "mini"))


@pytest.fixture
def review_course(pristine_review_course, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(pristine_review_course, tmp_path / "course", symlinks=True))


def submissions(course: Path, folder: Path, **answers: dict[str, str]) -> Path:
    """``folder/<student>.ipynb``, the release filled with each student's answers."""
    release = released_notebook(course, "mini", "mini")
    for student, cells in answers.items():
        write_nb(folder / f"{student}.ipynb", fill(release, **cells))
    return folder


def run(course: Path, subs: Path, **options):
    return grade(
        "mini", submissions=subs, course=course, workers=2, timeout=10, sandbox=SANDBOX, **options
    )


def read_csv(path: Path) -> dict[str, dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {(r["student"], r.get("grade_id")): r for r in rows}


def test_a_review_is_kept_by_reruns_and_sent_back_for_review_by_new_work(review_course, tmp_path):
    """grade leaves the written answer waiting; a grader's scores win everywhere; an
    unchanged rerun and --force keep them; changed work keeps them, waiting for review."""
    course = review_course
    why = {"why": "Because a negative times a negative is positive."}
    subs = submissions(
        course, tmp_path / "subs", ann={**CORRECT, **why}, ben={**WRONG_SQUARE, **why}
    )
    first = run(course, subs)
    # The written answer waits for a person: not scored, not counted as a failure.
    for student in ("ann", "ben"):
        why_cell = next(c for c in first.results[student].cells if c.grade_id == "why")
        assert (why_cell.status, why_cell.waiting, why_cell.score) == (CellStatus.BY_HAND, True, 0)
    assert grade_rows(course, "mini", "mini", "ann")["why"] == (None, None, True)
    assert (first.results["ann"].score, first.results["ann"].max_score) == (4, 6)
    assert review_lines(first) == [
        "waiting for grading by hand: 2 student(s) (review them in the formgrader; the report "
        "lists the cells)"
    ]
    exported = export("mini", to="csv", course=course)
    assert [w.split(":")[0] for w in exported.waiting] == ["ann", "ben"]
    assert exported.waiting[0] == "ann: why (2 pt); wrote 4 / 6, the score so far"

    # The review: ben's failed hidden test overridden to full marks, both answers scored.
    review(
        course,
        "mini",
        "mini",
        "ben",
        scores={"test_square_hidden": 2, "why": 1.5},
        comments={"square": "abs(x) * x fails for negatives; I gave the points back."},
    )
    review(course, "mini", "mini", "ann", scores={"why": 2})

    def check_reviewed(result) -> None:
        assert {s: r.score for s, r in result.results.items()} == {"ann": 6, "ben": 5.5}
        assert not any(r.waiting for r in result.results.values())
        grades = read_csv(course / "reports/mini/grades.csv")
        assert grades[("ben", None)]["score"] == "5.5"
        cells = read_csv(course / "reports/mini/cells.csv")
        assert cells[("ben", "test_square_hidden")]["score"] == "2"
        assert cells[("ben", "test_square_hidden")]["flags"] == "scored by hand"
        assert cells[("ben", "why")]["status"] == "by-hand"
        assert comments_of(course, "mini", "mini", "ben") == {
            "square": "abs(x) * x fails for negatives; I gave the points back."
        }
        assert grade_rows(course, "mini", "mini", "ben")["test_square_hidden"] == (0, 2, False)

    again = run(course, subs)  # unchanged: nothing regraded, the review read back
    assert again.graded_now == [] and again.to_review == {}
    check_reviewed(again)
    forced = run(course, subs, force=True)  # the same work regraded: the review still stands
    assert sorted(forced.graded_now) == ["ann", "ben"] and forced.to_review == {}
    check_reviewed(forced)

    # ben sends new work: his manual scores are kept, and wait for a grader again.
    submissions(course, subs, ben={**CORRECT, "why": "Squares are never negative."})
    changed = run(course, subs)
    assert changed.graded_now == ["ben"]
    assert changed.to_review == {"ben": ["test_square_hidden", "why"]}
    assert grade_rows(course, "mini", "mini", "ben")["test_square_hidden"] == (2, 2, True)
    assert grade_rows(course, "mini", "mini", "ben")["why"] == (None, 1.5, True)
    assert grade_rows(course, "mini", "mini", "ann")["why"] == (None, 2, False)
    assert review_lines(changed)[:2] == [
        "new work over a grader's scores (kept, and waiting for review in the formgrader):",
        "  ben: test_square_hidden, why",
    ]
    assert comments_of(course, "mini", "mini", "ben") != {}
    # The results JSON holds what the grader knows, never a grader's score or comment.
    recorded = json.loads((course / "reports/mini/results/ben.json").read_text())
    assert {c["grade_id"] for c in recorded["cells"]} == {
        "test_square_small",
        "test_square_hidden",
        "test_cube",
    }
    assert "manual" not in json.dumps(recorded) and "new_work" not in recorded


def test_export_waits_for_a_gradebook_the_formgrader_keeps_locked(review_course, tmp_path, capsys):
    """A write transaction held by another program delays ``export``; it then writes the
    gradebook's grades, and nothing in the gradebook changed."""
    course = review_course
    subs = submissions(course, tmp_path / "subs", ann=CORRECT)
    run(course, subs, harness=Harness(feedback=False))
    review(course, "mini", "mini", "ann", scores={"why": 1})
    before = (course / "gradebook.db").read_bytes()
    holder = sqlite3.connect(course / "gradebook.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    released = threading.Event()

    def release_later() -> None:
        time.sleep(1.5)
        holder.execute("ROLLBACK")
        holder.close()
        released.set()

    threading.Thread(target=release_later, daemon=True).start()
    done = export("mini", to="csv", course=course)
    assert released.is_set()  # export read the gradebook only once the lock was gone
    with open(done.path, newline="", encoding="utf-8") as fh:
        row = next(csv.DictReader(fh))
    assert (row["student"], row["score"], row["review"]) == ("ann", "5", "reviewed")
    assert (course / "gradebook.db").read_bytes() == before
