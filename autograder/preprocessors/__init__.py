"""The grader's nbgrader preprocessors, one per module, in the order they run.

* :mod:`~autograder.preprocessors.variants`: ``Variants`` (``generate_assignment``) and
  ``GradedVariants`` (first in ``autograde``), the course's variant key and the student's
  id in a lesson's locked cells;
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
from autograder.preprocessors.variants import GradedVariants, Variants

__all__ = [
    "CheckCellMetadata",
    "CollectProbes",
    "GradedVariants",
    "GuardedExecute",
    "InsertProbes",
    "Variants",
]
