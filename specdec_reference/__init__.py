"""Reference implementation of chapter E7, speculative decoding (numpy only).

The hidden tests of the course score learners against these functions.

- :mod:`~specdec_reference.acceptance`: the acceptance test itself
  (``accept_prob``, ``overall_acceptance``, ``spec_accept``, ``residual_distribution``);
- :mod:`~specdec_reference.sampling`: the random parts, each with an explicit
  ``numpy.random.Generator`` (``propose_and_test``, ``empirical_acceptance``,
  ``speculative_step``, ``greedy_step``);
- :mod:`~specdec_reference.analysis`: expected tokens per pass and speed
  (``expected_tokens``, ``speed_estimate``, ``speedup``, ``walltime_improvement``,
  ``optimal_k``).

The hidden tests' helpers are not part of it: they live in
:mod:`specdec_reference.testing`, as ``numpy.testing`` lives beside numpy.
"""

from .acceptance import accept_prob, overall_acceptance, residual_distribution, spec_accept
from .analysis import expected_tokens, optimal_k, speed_estimate, speedup, walltime_improvement
from .sampling import empirical_acceptance, greedy_step, propose_and_test, speculative_step

__all__ = [
    "accept_prob",
    "overall_acceptance",
    "spec_accept",
    "residual_distribution",
    "propose_and_test",
    "empirical_acceptance",
    "speculative_step",
    "greedy_step",
    "expected_tokens",
    "speed_estimate",
    "speedup",
    "walltime_improvement",
    "optimal_k",
]
