"""``specdec-course report``: the instructor's report, ``reports/<assignment>/report.html``.

The page itself is built by :mod:`autograder.render.report_page`.
"""

from __future__ import annotations

from pathlib import Path

from autograder.course import find_course
from autograder.render.report_page import write_report


def report(assignment: str, *, course: Path) -> Path:
    """Write ``reports/<assignment>/report.html`` and return its path.

    Parameters
    ----------
    assignment : the assignment name, e.g. ``e7_2_acceptance_tests``.
    course : the nbgrader course root.

    Raises
    ------
    UsageError
        When the assignment has no results (``grade`` has not run).
    """
    return write_report(find_course(course), assignment)
