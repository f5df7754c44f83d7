"""The grader's nbgrader preprocessors, one per module, in the order they run.

* :mod:`~autograder.preprocessors.insert_probes`: ``InsertProbes``, before execution;
* :mod:`~autograder.preprocessors.guarded_execute`: ``GuardedExecute``, nbgrader's
  ``Execute`` hardened for untrusted kernels;
* :mod:`~autograder.preprocessors.collect_probes`: ``CollectProbes``, after execution and
  before ``SaveAutoGrades``;
* :mod:`~autograder.preprocessors.check_cell_metadata`: ``CheckCellMetadata``, which stands
  in for nbgrader's own wherever that runs (same checks, the schema compiled once per
  notebook).
"""

from autograder.preprocessors.check_cell_metadata import CheckCellMetadata
from autograder.preprocessors.collect_probes import CollectProbes
from autograder.preprocessors.guarded_execute import GuardedExecute
from autograder.preprocessors.insert_probes import InsertProbes

__all__ = ["CheckCellMetadata", "CollectProbes", "GuardedExecute", "InsertProbes"]
