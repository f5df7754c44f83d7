"""nbgrader's ``submitted/`` folder: fill it from a download without harming what is there.

A submission collected from a download is stored as nbgrader expects
(``submitted/<student>/<assignment>/<notebook>.ipynb``, with ``timestamp.txt`` when the
download dates it), so that plain nbgrader commands work on the course too.  A file
is written only where none is, or where the grader wrote it before (its hash is
recorded); nothing is ever deleted.  A course graded from its own ``submitted/`` (as
``nbgrader collect`` left it) is not written to at all.

The feedback side: ``nbgrader release_feedback`` reads ``timestamp.txt`` and
``submission_secret.txt`` from ``feedback/<student>/<assignment>/``;
:func:`copy_exchange_files` puts them there from ``submitted/``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

from autograder.files import write_atomic
from autograder.intake.collect import Submission

#: nbgrader's own timestamp format (``Exchange.timestamp_format``), in UTC.
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
#: The files nbgrader's exchange keeps beside a submission.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


def nbgrader_timestamp(when: datetime) -> str:
    """``when`` as nbgrader writes ``timestamp.txt`` (a naive time is taken as UTC).

    >>> nbgrader_timestamp(datetime(2026, 12, 1, 9, 30))
    '2026-12-01 09:30:00.000000 UTC'
    """
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime(TIMESTAMP_FORMAT)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store_submitted(
    course: Path, assignment: str, notebook: str, sub: Submission, ours: dict[str, str]
) -> list[str]:
    """Store ``sub`` in ``submitted/``; return a flag for each file left unchanged.

    ``ours`` maps file names to the hashes this grader wrote there before (known from
    the student's previous result); only such a file, or a missing one, is (re)written.
    """
    folder = course / "submitted" / sub.student / assignment
    wanted = {}
    data = sub.data  # read once: it may come from the collector's spool
    if data:
        wanted[f"{notebook}.ipynb"] = data
    if sub.identity.timestamp is not None:
        wanted["timestamp.txt"] = nbgrader_timestamp(sub.identity.timestamp).encode()
    flags = []
    for name, data in wanted.items():
        path = folder / name
        if path.exists() or path.is_symlink():
            current = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            if current == data:
                continue
            if current is None or sha256(current) != ours.get(name):
                flags.append(
                    f"kept: submitted/{sub.student}/{assignment}/{name} was not written by the "
                    "grader and differs from this submission; left unchanged"
                )
                continue
        write_atomic(path, data)
    return flags


def copy_exchange_files(course: Path, assignment: str, student: str) -> list[Path]:
    """Copy ``timestamp.txt`` and ``submission_secret.txt`` beside the student's feedback."""
    src = course / "submitted" / student / assignment
    dest = course / "feedback" / student / assignment
    copied = []
    for name in EXCHANGE_FILES:
        path = src / name
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            target = dest / name
            if not (target.is_file() and target.read_bytes() == data):
                write_atomic(target, data)
            copied.append(target)
    return copied
