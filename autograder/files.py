"""Write a file in the course whole or not at all, and tell a full disk from other errors.

:func:`write_atomic` writes to a temporary file next to the target, then renames it over
the target: a reader, a killed run or a full disk sees either the old file or the new
one, never half of one.  Every file the grader writes into the course (results, the
autograded notebooks, feedback pages, the CSVs, the report, release notebooks) goes
through it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

#: The errors that mean the disk (or the user's quota) is full.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) in one step; on error, leave it as it was.

    Missing parent folders are made.  The new file keeps the mode of the file it replaces
    (``0o644`` for a new one).  The
    temporary file (``.<name>.*.tmp`` in the same directory) is removed if anything fails.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_disk_full(exc: BaseException) -> bool:
    """True when ``exc`` (an ``OSError``, or sqlite's error via SQLAlchemy) means a full disk."""
    if isinstance(exc, OSError):
        return exc.errno in DISK_FULL
    return "database or disk is full" in str(exc)
