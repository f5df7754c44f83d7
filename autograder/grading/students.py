"""Who each student is and when they submitted, in the results and nbgrader's gradebook.

The gradebook's ``Student`` row gets the names, email and ``lms_user_id`` that the
download or roster gave (never blanked by a later run that knows less); the
``SubmittedAssignment`` gets the submission time, so nbgrader's own late machinery
applies: the late penalty comes from the course's ``AssignLatePenalties.plugin_class``
(nbgrader's ``LateSubmissionPlugin`` unless configured), and ``nbgrader export`` shows
the time and the penalty.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from nbgrader.preprocessors import AssignLatePenalties

from autograder.grading.results import SubmissionResult
from autograder.intake.collect import Submission


def identified(result: SubmissionResult, sub: Submission) -> SubmissionResult:
    """``result``, saying who ``sub``'s student is and when they submitted.

    What the submission does not know keeps the result's value.  ``result`` is not
    changed: the result returned is a copy, equal to it when there was nothing to tell.
    """
    told = sub.identity
    if told.timestamp is not None:
        told = replace(told, timestamp=utc(told.timestamp))
    return replace(result, identity=told.merged(result.identity))


def utc(when: datetime) -> datetime:
    """``when`` as an aware UTC time (a naive time is taken to be UTC already)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def record_student(gb, result: SubmissionResult) -> None:
    """Update the gradebook's ``Student`` row, and the submission's time, from ``result``.

    ``gb`` is an open :class:`nbgrader.api.Gradebook`.  Empty fields are not written.
    """
    gb.update_or_create_student(result.student, **result.identity.known())
    when = submission_time(result)
    if when is not None:
        gb.update_or_create_submission(result.assignment, result.student, timestamp=when)


def submission_time(result: SubmissionResult) -> datetime | None:
    """When ``result``'s student submitted, as the gradebook stores it (naive UTC), or None."""
    when = result.identity.timestamp
    return None if when is None else utc(when).replace(tzinfo=None)


def assign_late_penalty(gb, config, notebook: str, result: SubmissionResult) -> bool | None:
    """Set the notebook's late penalty as nbgrader's autograde does; return whether late.

    None when lateness cannot be told (no due date or no submission time).
    """
    submission = gb.find_submission(result.assignment, result.student)
    nb = gb.find_submission_notebook(notebook, result.assignment, result.student)
    nb.late_submission_penalty = None
    if submission.timestamp is None or submission.duedate is None:
        return None
    seconds = submission.total_seconds_late
    if seconds > 0:
        assigner = AssignLatePenalties(config=config)
        assigner.init_plugin()
        penalty = assigner.plugin_inst.late_submission_penalty(result.student, nb.score, seconds)
        if penalty is not None:
            nb.late_submission_penalty = min(max(penalty, 0.0), nb.score)
    return seconds > 0
