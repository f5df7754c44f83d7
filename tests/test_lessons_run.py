"""Every lesson's reference, run as it is: Run all in a kernel, and plain nbgrader.

These tests read none of the suite's graded lessons, so they run apart from
``tests/test_lessons.py`` (another xdist worker can take them while that unit grades).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.course import REPO, new_course
from support.lessons import Lesson, run_all

from autograder.course import assignments

LESSONS = assignments(REPO)


def notebook_name(assignment: str) -> str:
    [path] = sorted((REPO / "source" / assignment).glob("*.ipynb"))
    return path.stem


@pytest.mark.kernel
@pytest.mark.parametrize("assignment", LESSONS)
def test_run_all_on_the_solved_notebook_raises_nothing(assignment):
    """The learner's view (release plus reference solutions), run top to bottom in a kernel.

    Every figure it shows has a title and axis labels.

    How long it takes is measured by ``benchmarks/run_all.py``, not asserted here: a
    timing depends on the machine (figures in ``docs/testing.md``).
    """
    timed = run_all(REPO / "tests" / "files" / assignment / "submissions" / "reference.ipynb")
    assert not timed.errors, f"cells that raised: {timed.errors}"
    assert not timed.unlabelled, f"figures without a title or an axis label: {timed.unlabelled}"


@pytest.mark.kernel
def test_plain_nbgrader_commands_work_on_the_course(tmp_path):
    """`nbgrader generate_assignment` and `nbgrader autograde`, as they are, give every
    lesson's reference full marks on every autograded cell, and leave its written answers
    to a grader.  One course holds every lesson, and each command takes them all at once
    with nbgrader's own ``*`` pattern, as an instructor may type it."""
    course = new_course(tmp_path / "plain", {a: REPO / "source" / a for a in LESSONS})
    nbgrader = [str(Path(sys.executable).with_name("nbgrader"))]
    run = dict(cwd=course, capture_output=True, text=True, timeout=900)
    proc = subprocess.run(nbgrader + ["generate_assignment", "*"], **run)
    assert proc.returncode == 0, proc.stderr
    for assignment in LESSONS:
        released = course / "release" / assignment / f"{notebook_name(assignment)}.ipynb"
        assert released.is_file(), f"{assignment}: generate_assignment released nothing"
        target = course / "submitted" / "ref" / assignment / released.name
        target.parent.mkdir(parents=True)
        shutil.copy2(REPO / "tests/files" / assignment / "submissions/reference.ipynb", target)
    proc = subprocess.run(nbgrader + ["autograde", "*"], **run)
    assert proc.returncode == 0, proc.stderr
    from nbgrader.api import Gradebook

    written = {a: Lesson(a).written_points for a in LESSONS}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {a: gb.find_submission(a, "ref") for a in LESSONS}
        assert all(s.max_score > 0 for s in scores.values())
        grades = {
            (a, g.name): g for a, s in scores.items() for nb in s.notebooks for g in nb.grades
        }
        short = {
            k: (g.score, g.max_score)
            for k, g in grades.items()
            if k[1] not in written[k[0]] and g.score != g.max_score
        }
        by_hand = {
            k: (g.auto_score, g.needs_manual_grade, g.max_score)
            for k, g in grades.items()
            if k[1] in written[k[0]]
        }
    assert not short, f"cells short of full marks under plain nbgrader: {short}"
    assert by_hand == {
        (a, gid): (None, True, points) for a in LESSONS for gid, points in written[a].items()
    }
