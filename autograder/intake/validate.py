"""Is a collected submission a notebook nbgrader can read?  Its bytes, normalised, or why not."""

from __future__ import annotations

import nbformat

from autograder.intake.collect import Submission


def readable_notebook(sub: Submission) -> bytes | None:
    """The submission as nbformat-4 JSON bytes, or None (with ``sub.problem`` set)."""
    if sub.problem or sub.data is None:
        return None
    try:
        text = sub.data.decode("utf-8-sig")
        nb = nbformat.reads(text, as_version=4)
    except UnicodeDecodeError:
        sub.problem = "the file is not UTF-8 text (not a notebook)"
        return None
    except Exception as exc:
        sub.problem = f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
        return None
    if not isinstance(nb.get("cells"), list):
        sub.problem = "not a valid Jupyter notebook: it has no list of cells"
        return None
    try:
        return nbformat.writes(nb).encode("utf-8")
    except Exception as exc:
        sub.problem = f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
        return None
