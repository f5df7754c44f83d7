"""Who each student is and when they submitted, in the results and nbgrader's gradebook.

The gradebook's ``Student`` row gets the names, email and ``lms_user_id`` that the
download or roster gave (never blanked by a later run that knows less); the
``SubmittedAssignment`` gets the submission time, so nbgrader's own late machinery
applies: the late penalty comes from the course's ``AssignLatePenalties.plugin_class``
(nbgrader's ``LateSubmissionPlugin`` unless configured), and ``nbgrader export`` shows
the time and the penalty.
"""

from __future__ import annotations

from datetime import datetime, timezone

from nbgrader.preprocessors import AssignLatePenalties

from autograder.grading.results import SubmissionResult
from autograder.intake.collect import Submission

#: The fields of nbgrader's ``Student`` row that a download or roster can fill.
STUDENT_FIELDS = ("lms_user_id", "first_name", "last_name", "email")


def identify(result: SubmissionResult, sub: Submission) -> bool:
    """Copy who ``sub``'s student is (and when they submitted) into ``result``.

    Fields the submission does not know keep the result's value.  Returns True when
    anything changed.
    """
    known = {name: getattr(sub, name) for name in STUDENT_FIELDS}
    known["timestamp"] = utc(sub.timestamp).isoformat() if sub.timestamp else None
    known["late"] = sub.late
    changed = False
    for name, value in known.items():
        if value is not None and getattr(result, name) != value:
            setattr(result, name, value)
            changed = True
    return changed


def utc(when: datetime) -> datetime:
    """``when`` as an aware UTC time (a naive time is taken to be UTC already)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def record_student(gb, result: SubmissionResult) -> None:
    """Update the gradebook's ``Student`` row, and the submission's time, from ``result``.

    ``gb`` is an open :class:`nbgrader.api.Gradebook`.  Empty fields are not written.
    """
    fields = {k: getattr(result, k) for k in STUDENT_FIELDS if getattr(result, k)}
    gb.update_or_create_student(result.student, **fields)
    if result.timestamp:
        when = utc(datetime.fromisoformat(result.timestamp)).replace(tzinfo=None)
        gb.update_or_create_submission(result.assignment, result.student, timestamp=when)


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
