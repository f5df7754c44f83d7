"""``specdec-course feedback``: one HTML feedback page per student, no hidden test source.

``grade`` writes the pages as it goes; this verb writes them again (all, or one
student's).  The pages are built by :mod:`autograder.render.feedback_page`.
"""

from __future__ import annotations

from pathlib import Path

from autograder.course import find_course
from autograder.render.feedback_page import write_pages


def feedback(assignment: str, *, course: Path, student: str | None = None) -> list[Path]:
    """Write one self-contained HTML page per graded student; return the paths.

    Parameters
    ----------
    assignment : the assignment name, e.g. ``e7_2_acceptance_tests``.
    course : the nbgrader course root.
    student : only this student's page(s); default every student with a result.

    Returns
    -------
    list of Path, one page per student and notebook, sorted by student.

    Raises
    ------
    UsageError
        When the assignment is unknown, has no results (``grade`` has not run), or
        ``student`` has no result.
    """
    return write_pages(find_course(course), assignment, student=student)
