"""``CollectProbes``: read the monitor's report and the sandbox's evidence; write the flags.

Runs right after ``Execute``: removes the grader's cells, joins the report with the
evidence the sandbox received on a pipe learner code cannot take back, writes the result
to the notebook's metadata, and fails every test cell when the flags forfeit the score.
"""

from __future__ import annotations

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from autograder.cells import is_test_cell
from autograder.integrity.evidence import collect
from autograder.integrity.flags import METADATA_KEY, PROBE_KEY, describe, forfeits
from autograder.integrity.static_scan import static_flags


class CollectProbes(NbGraderPreprocessor):
    """Read the monitor's report and the sandbox's evidence; remove the grader cells.

    When the flags show tampering (:func:`forfeits`), every test cell gets an
    ``IntegrityError`` output first, so it scores zero in the gradebook, the CSVs and the
    feedback alike, with the reason.  ``c.CollectProbes.forfeit = False`` only flags.
    """

    before_execute = False
    forfeit = Bool(
        True, help="Score every test cell zero when tampering is detected (else only flag)."
    ).tag(config=True)

    def preprocess(self, nb, resources):
        nonce = resources.get(METADATA_KEY, {}).get("nonce")
        setup = [c for c in nb.cells if c.get("metadata", {}).get(PROBE_KEY) == "setup"]
        report = [c for c in nb.cells if c.get("metadata", {}).get(PROBE_KEY) == "report"]
        nb.cells = [c for c in nb.cells if PROBE_KEY not in c.get("metadata", {})]
        # The job's sandboxed kernels (see autograder.sandbox.configure); None unsandboxed.
        kernels = self.config.SandboxedKernelManager.get("kernels")
        path = resources.get("metadata", {}).get("path") or ""
        evidence = kernels.evidence_for(path) if kernels is not None and path else None
        result = collect(
            nb, setup[0] if setup else None, report[0] if report else None, nonce, evidence
        )
        static = static_flags(nb)
        result["static_flags"] = static
        flags = sorted(set(result["flags"]) | set(static))
        if self.forfeit and forfeits(flags):
            reasons = "; ".join(f"{f}: {describe(f)}" for f in flags if forfeits([f]))
            for cell in nb.cells:
                if is_test_cell(cell):
                    cell.outputs.insert(
                        0,
                        new_output(
                            "error",
                            ename="IntegrityError",
                            evalue=f"not scored: the grader detected an attempt to change how "
                            f"it grades ({reasons})",
                            traceback=[f"IntegrityError: not scored ({reasons})"],
                        ),
                    )
            result["forfeited"] = True
        nb.metadata[METADATA_KEY] = result
        return nb, resources
