"""Is a submission a notebook nbgrader can read?  Its bytes, normalised, or why not."""

from __future__ import annotations

import nbformat


def readable_notebook(data: bytes) -> tuple[bytes | None, str | None]:
    """``data`` as nbformat-4 JSON bytes and None, or None and why it cannot be graded."""
    try:
        text = data.decode("utf-8-sig")
        nb = nbformat.reads(text, as_version=4)
    except UnicodeDecodeError:
        return None, "the file is not UTF-8 text (not a notebook)"
    except Exception as exc:
        return None, f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
    if not isinstance(nb.get("cells"), list):
        return None, "not a valid Jupyter notebook: it has no list of cells"
    try:  # nbformat.writes would validate again, only to log what reads has logged
        return nbformat.v4.writes_json(nb).encode("utf-8"), None
    except Exception as exc:
        return None, f"not a valid Jupyter notebook: {type(exc).__name__}: {str(exc)[:200]}"
