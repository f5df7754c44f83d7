"""Who each student is and when they submitted, in nbgrader's gradebook and the results.

The gradebook's ``Student`` row gets the names, email and ``lms_user_id`` that the
download or roster gave (never blanked by a later run that knows less); the
``SubmittedAssignment`` gets the submission time, so nbgrader's own late machinery
applies: the late penalty comes from the course's ``AssignLatePenalties.plugin_class``
(nbgrader's ``LateSubmissionPlugin`` unless configured), and ``nbgrader export`` shows
the time and the penalty.
"""

from __future__ import annotations

from datetime import datetime, timezone

from autograder.collect import Submission

#: The student fields a result carries (and exports write).
IDENTITY_FIELDS = ("lms_user_id", "first_name", "last_name", "email")


def identity(sub: Submission) -> dict:
    """The result fields that say who ``sub``'s student is and when they submitted."""
    out = {name: getattr(sub, name) for name in IDENTITY_FIELDS}
    out["timestamp"] = utc(sub.timestamp).isoformat() if sub.timestamp else None
    out["late"] = sub.late
    return out


def utc(when: datetime) -> datetime:
    """``when`` as an aware UTC time (a naive time is taken to be UTC already)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def record_student(gb, assignment: str, student: str, info: dict) -> None:
    """Update the gradebook's ``Student`` row and the submission's timestamp from ``info``.

    ``gb`` is an open :class:`nbgrader.api.Gradebook`; ``info`` holds
    :func:`identity`'s fields.  Fields that ``info`` leaves empty are not touched.
    """
    fields = {k: info[k] for k in IDENTITY_FIELDS if info.get(k)}
    gb.update_or_create_student(student, **fields)
    if info.get("timestamp"):
        when = utc(datetime.fromisoformat(info["timestamp"])).replace(tzinfo=None)
        gb.update_or_create_submission(assignment, student, timestamp=when)


def assign_late_penalty(gb, config, assignment: str, notebook: str, student: str) -> bool | None:
    """Set the notebook's late penalty as nbgrader's autograde would; return whether late.

    None when lateness cannot be told (no due date or no submission time).
    """
    from nbgrader.preprocessors import AssignLatePenalties

    submission = gb.find_submission(assignment, student)
    nb = gb.find_submission_notebook(notebook, assignment, student)
    nb.late_submission_penalty = None
    if submission.timestamp is None or submission.duedate is None:
        return None
    seconds = submission.total_seconds_late
    if seconds > 0:
        assigner = AssignLatePenalties(config=config)
        assigner.init_plugin()
        penalty = assigner.plugin_inst.late_submission_penalty(student, nb.score, seconds)
        if penalty is not None:
            nb.late_submission_penalty = min(max(penalty, 0.0), nb.score)
    return seconds > 0
