"""nbgrader's ``Execute`` preprocessor, hardened for untrusted notebooks.

Plain nbgrader trusts the kernel: a submission that floods output can exhaust the
grader's memory, a loop that ignores interrupts makes every later cell wait out its
timeout, and a kernel that exits early (``os._exit``) aborts the notebook.  Worse, a
test cell that never ran has no error output, which nbgrader scores as a pass.

``GuardedExecute`` keeps nbgrader's behaviour for well-behaved notebooks and adds:

* a byte budget for the outputs of each cell (the rest is dropped and noted);
* after a cell times out, a liveness check: a kernel that does not answer within
  ``recovery_timeout`` seconds is killed;
* a wall-clock deadline for the whole notebook;
* when the kernel is gone (killed, crashed, exited), every cell not yet run gets an
  error output, so it scores zero instead of passing silently;
* the cells it skips are the grader's to name (``skip_cells``: the grade ids of the
  source's demonstrations, :mod:`autograder.demonstrations`); nbclient's own skip, by a
  tag in the submission's metadata, is ignored.
"""

from __future__ import annotations

import os
import time
from typing import Protocol, runtime_checkable

from jupyter_client.manager import AsyncKernelManager, KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Float, Instance, Integer, List, Unicode

from autograder.cells import KERNEL_DIED, NOT_EXECUTED, NOTEBOOK_TIMEOUT, nbgrader_meta
from autograder.demonstrations import SKIPPED_NOTE

OUTPUT_TRUNCATED_NOTE = "[output truncated by the grader: this cell printed more than {} bytes]"


@runtime_checkable
class KernelSource(Protocol):
    """Where a kernel started ahead of time comes from (``autograder.grading.spare``)."""

    def take(
        self, client: NotebookClient, kernel_name: str, cwd: str | None, env: dict[str, str]
    ) -> KernelManager | None:
        """The started kernel manager if it is the one ``client`` would start now, else None."""


class GuardedExecute(Execute):
    """Execute a notebook for grading, surviving hostile or broken kernels."""

    max_output_bytes = Integer(
        200_000, help="Bytes of output kept per cell; the rest is dropped."
    ).tag(config=True)
    notebook_timeout = Float(
        300.0, help="Wall-clock seconds for the whole notebook, kernel start included."
    ).tag(config=True)
    spares = Instance(
        KernelSource,
        allow_none=True,
        help="Kernels started ahead (autograder.grading.spare.SpareKernels): one is adopted "
        "when it is exactly the kernel this executor would start.",
    ).tag(config=True)
    skip_cells = List(
        Unicode(),
        help="grade_ids of the cells not to run (the source's demonstrations); their "
        "outputs are replaced by a note.",
    ).tag(config=True)
    recovery_timeout = Float(
        10.0, help="Seconds a kernel has to answer after a cell timed out before it is killed."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", AsyncKernelManager)
        super().__init__(*args, **kwargs)
        self._stop_reason: str | None = None
        self._stop_error = NOT_EXECUTED
        self._deadline = 0.0
        self._spent: dict[int, int] = {}
        self.truncated_cells: set[int] = set()

    # -- whole notebook ---------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        self._stop_reason = None
        self._stop_error = NOT_EXECUTED
        self._deadline = time.monotonic() + self.notebook_timeout
        self._spent = {}
        self.truncated_cells = set()
        adopted = km is None and self._adopt_spare(nb, resources)
        if adopted:
            km = adopted
        try:
            return super().preprocess(nb, resources, km=km)
        except DeadKernelError as exc:  # raised while starting or shutting down
            self._stop(f"the kernel died ({exc})")
            for cell in nb.cells:
                if cell.cell_type == "code" and not cell.get("execution_count"):
                    self._mark_not_executed(cell)
            return nb, resources
        finally:
            if adopted and self.km is not None:  # nbclient cleans up only kernels it started
                run_sync(self._async_cleanup_kernel)()

    def _adopt_spare(self, nb: NotebookNode, resources: dict | None) -> KernelManager | None:
        """The kernel the worker started ahead for this notebook, if it is exactly the one
        this executor would start (see ``autograder.grading.spare``); else None."""
        if self.spares is None:
            return None
        name = self.kernel_name or nb.metadata.get("kernelspec", {}).get("name")
        path = (resources or {}).get("metadata", {}).get("path") or None
        return self.spares.take(self, name, path, dict(os.environ))

    # -- one cell -----------------------------------------------------------------------
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if nbgrader_meta(cell).get("grade_id") in self.skip_cells:
            cell.outputs = [new_output("stream", name="stdout", text=SKIPPED_NOTE)]
            return cell, resources
        if self._stop_reason is None and time.monotonic() > self._deadline:
            self._stop(
                f"the notebook ran longer than {self.notebook_timeout:g} s", NOTEBOOK_TIMEOUT
            )
            self._kill_kernel()
        if self._stop_reason is not None:
            self._mark_not_executed(cell)
            return cell, resources
        tags = cell.metadata.get("tags")
        if tags and self.skip_cells_with_tag in tags:  # the submission's tag decides nothing
            cell.metadata["tags"] = [t for t in tags if t != self.skip_cells_with_tag]
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except CellTimeoutError:
            # the reply came (an interrupt) but the kernel never went idle, or no reply at all
            cell.outputs.append(self._error("CellTimeoutError", f"cell {index} did not finish"))
        except DeadKernelError:
            self._stop(f"the kernel died while running cell {index}")
            cell.outputs.append(
                self._error(
                    KERNEL_DIED,
                    "the kernel stopped while this cell ran "
                    "(it exited, crashed, or ran out of memory)",
                )
            )
            return cell, resources
        finally:
            if tags is not None:
                cell.metadata["tags"] = tags
        if any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            if not self._kernel_answers():
                self._stop(f"cell {index} timed out and the kernel did not respond to an interrupt")
                self._kill_kernel()
        return cell, resources

    # -- output budget --------------------------------------------------------------------
    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = (
            len(str(content.get("text", "")))
            + sum(len(str(v)) for v in content.get("data", {}).values())
            + sum(len(str(line)) for line in content.get("traceback", []))
        )
        spent = self._spent.get(cell_index, 0) + size
        self._spent[cell_index] = spent
        is_error = msg.get("msg_type") == "error"
        if spent > self.max_output_bytes and not is_error:
            if cell_index not in self.truncated_cells:
                self.truncated_cells.add(cell_index)
                outs.append(
                    new_output(
                        "stream",
                        name="stdout",
                        text=OUTPUT_TRUNCATED_NOTE.format(self.max_output_bytes) + "\n",
                    )
                )
            return None
        return super().output(outs, msg, display_id, cell_index)

    # -- helpers ------------------------------------------------------------------------------
    def _stop(self, reason: str, error: str = NOT_EXECUTED) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
            self._stop_error = error
            self.log.warning("Stopping execution: %s", reason)

    def _kernel_answers(self) -> bool:
        """True when the kernel replies to a kernel_info request within recovery_timeout."""
        try:
            msg_id = self.kc.kernel_info()
            deadline = time.monotonic() + self.recovery_timeout
            while time.monotonic() < deadline:
                reply = run_sync(self.kc.shell_channel.get_msg)(timeout=0.2)
                if reply.get("parent_header", {}).get("msg_id") == msg_id:
                    return True
        except Exception:
            return False
        return False

    def _kill_kernel(self) -> None:
        try:
            if self.km is not None:
                run_sync(self.km.shutdown_kernel)(now=True)
        except Exception as exc:  # already dead
            self.log.debug("kill kernel: %s", exc)

    def _mark_not_executed(self, cell: NotebookNode) -> None:
        cell.outputs = [self._error(self._stop_error, f"not run: {self._stop_reason}")]

    @staticmethod
    def _error(ename: str, evalue: str) -> NotebookNode:
        return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
