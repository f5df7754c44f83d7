"""Score an executed notebook: each test cell full points unless it erred; the status.

Also reads why nbgrader could not grade a notebook at all (``invalid`` or ``failed``).
"""

from __future__ import annotations

import re
from types import MappingProxyType

from nbformat import NotebookNode

from autograder.cells import KERNEL_DIED, NOT_EXECUTED, NOTEBOOK_TIMEOUT, nbgrader_meta
from autograder.grading.results import NOT_RUN_PREFIX, CellResult, CellStatus, Status, Stop
from autograder.preprocessors.guarded_execute import OUTPUT_TRUNCATED_NOTE


def score_cells(
    nb: NotebookNode, max_points: dict[str, float], cell_timeout: float | None = None
) -> list[CellResult]:
    """Score every autograded test cell of an executed notebook: full points unless it erred.

    Cells listed in ``max_points`` but absent from the notebook score zero (``missing``).
    """
    found: dict[str, CellResult] = {}
    for cell in nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid not in max_points or gid in found or cell.cell_type != "code":
            continue
        pts = max_points[gid]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        flags = []
        if any(OUTPUT_TRUNCATED_NOTE.split(":")[0] in str(o.get("text", "")) for o in cell.outputs):
            flags.append("output truncated")
        if not errors:
            found[gid] = CellResult(gid, pts, pts, CellStatus.PASSED, "", flags)
            continue
        timed_out = [e for e in errors if e.get("ename") == "CellTimeoutError"]
        err = timed_out[0] if timed_out else errors[0]
        ename, evalue = str(err.get("ename", "Error")), str(err.get("evalue", ""))
        status, stop = CellStatus.FAILED, Stop.NONE
        if ename == "CellTimeoutError":
            limit = f" ({cell_timeout:g} s)" if cell_timeout else ""
            status = CellStatus.TIMEOUT
            message = f"the cell ran longer than the time limit{limit} and was stopped"
        elif ename in STOPS:
            stop, message = STOPS[ename], evalue
        else:
            message = f"{ename}: {evalue}" if evalue else ename
            if ename == KERNEL_DIED:
                stop = Stop.KERNEL_DIED
        found[gid] = CellResult(gid, 0.0, pts, status, message, flags, stop)
    for gid, pts in max_points.items():
        found.setdefault(
            gid, CellResult(gid, 0.0, pts, CellStatus.MISSING, "this test cell was not found")
        )
    return [found[gid] for gid in max_points]


#: The errors the guarded executor writes into cells it did not run, and what they mean.
STOPS = MappingProxyType({NOT_EXECUTED: Stop.NOT_RUN, NOTEBOOK_TIMEOUT: Stop.NOTEBOOK_TIMEOUT})


def status_of(cells: list[CellResult]) -> tuple[Status, str]:
    """The submission's status, and the reason, from its scored cells."""
    stopped = [c for c in cells if c.stop in (Stop.NOT_RUN, Stop.NOTEBOOK_TIMEOUT)]
    if any(c.status is CellStatus.TIMEOUT for c in cells) or any(
        c.stop is Stop.NOTEBOOK_TIMEOUT for c in cells
    ):
        status = Status.TIMEOUT
    elif stopped:
        status = Status.FAILED
    else:
        status = Status.GRADED
    # the reason execution stopped explains more than the timeout that led to it
    reasons = [c.message for c in stopped]
    reasons += [c.message for c in cells if c.status is CellStatus.TIMEOUT]
    return status, (reasons[0].removeprefix(NOT_RUN_PREFIX) if reasons else "")


def failed_to_grade(log: str) -> tuple[Status, str]:
    """Status and reason when nbgrader could not grade a notebook, from nbgrader's log."""
    return (Status.INVALID if _looks_invalid(log) else Status.FAILED), _summarize_failure(log)


_INVALID_HINTS = (
    "NotJSONError",
    "JSONDecodeError",
    "ValidationError",
    "MissingEntry",
    "Notebook does not appear to be JSON",
    "nbformat",
    "DuplicateIds",
    "exists multiple times",
    "UnicodeDecodeError",
)


def _looks_invalid(log: str) -> bool:
    return any(h.lower() in log.lower() for h in _INVALID_HINTS)


_DUPLICATED = re.compile(r"Cell with id '([^']*)' exists multiple times")


def _summarize_failure(log: str) -> str:
    duplicated = sorted(set(_DUPLICATED.findall(log)))
    if duplicated:  # nbgrader then fails on the copy (it drops only part of its metadata)
        return (
            "the notebook holds more than one copy of the graded cell(s) "
            + ", ".join(f"'{d}'" for d in duplicated)
            + "; nbgrader cannot grade a notebook with a copied graded cell (delete the copy)"
        )
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("[ERROR]") or "Error" in ln]
    text = errors[-1] if errors else (lines[-1] if lines else "nbgrader could not grade it")
    return text.removeprefix("[ERROR] ")[:500]
