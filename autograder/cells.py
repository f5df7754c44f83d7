"""Cells: what nbgrader's metadata says about one (the one test-cell check), and the
error names the grader writes into the outputs of cells it did not let run."""

from __future__ import annotations

from collections.abc import Mapping

#: Error names the grader itself writes into outputs; scoring maps them to statuses.
NOT_EXECUTED = "NotExecuted"  #: not run: execution had stopped (the kernel was gone)
NOTEBOOK_TIMEOUT = "NotebookTimeout"  #: not run: the notebook's deadline had passed
KERNEL_DIED = "KernelDied"  #: the kernel died while the cell ran
#: Every error that says a cell did not (finish to) run, rather than that its code failed.
NOT_FINISHED = (NOT_EXECUTED, NOTEBOOK_TIMEOUT, KERNEL_DIED, "CellTimeoutError")


def nbgrader_meta(cell: Mapping) -> Mapping:
    """The cell's ``nbgrader`` metadata (empty when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_test_cell(cell: Mapping) -> bool:
    """True for an autograded test cell: a graded code cell that is not a solution."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")
