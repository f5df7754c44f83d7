"""Tamper detection: flags for submissions that try to fool the grader.

Learner code and the tests run in the same Python process, so no defence inside the
kernel can be complete.  The grader therefore combines:

* :mod:`~autograder.integrity.static_scan`: a scan of the submitted notebook's
  learner-editable cells for code that has no business in a solution;
* :mod:`~autograder.integrity.monitor`: run inside the kernel, before any learner code,
  by the grader's first cell (``autograder.preprocessors.insert_probes``); it snapshots
  what the tests rely on and installs an audit hook;
* :mod:`~autograder.integrity.evidence`: the monitor's report, joined with the evidence
  the sandbox received through a pipe learner code cannot take back, turned into flags
  (by ``autograder.preprocessors.collect_probes``);
* :mod:`~autograder.integrity.flags`: the vocabulary of flags and what each one costs.
"""

from autograder.integrity.flags import (
    METADATA_KEY,
    PROBE_KEY,
    REASONS,
    cell_flags,
    describe,
    forfeits,
    runtime_flags,
)
from autograder.integrity.static_scan import static_flags

__all__ = [
    "METADATA_KEY",
    "PROBE_KEY",
    "REASONS",
    "cell_flags",
    "describe",
    "forfeits",
    "runtime_flags",
    "static_flags",
]
