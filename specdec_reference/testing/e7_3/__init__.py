"""Helpers shared by the hidden tests of lesson E7.3, *The accept step*.

The notebook's hidden cells import this package as ``_e73`` and call these with the
learner's function as an argument, for instance
``_e73.check_spec_accept(spec_accept, p, q, r)``; every failure is an
``AssertionError`` whose message names the call, the expected value and, when the
wrong value matches one, the common mistake behind it.

- :mod:`.by_hand`: Part 1, worked by hand, for the learner's own numbers
  (``check_part1``, ``brute_force_count``);
- :mod:`.accept`: ``spec_accept`` against the reference, its mistakes, clear drafts;
- :mod:`.values`: a learner's vectors and token lists, random probability rows;
- :mod:`.step`: ``speculative_step``'s whole output by simulation, other draw orders;
- :mod:`.greedy`: ``greedy_step``'s mistakes and speculative greedy decoding.
"""

from .accept import check_spec_accept, clear_token, prefix, spec_accept_mistakes
from .by_hand import brute_force_count, check_part1
from .greedy import greedy_mistakes, plain_greedy, speculative_greedy
from .step import check_step_distribution, prefix_length_probs, uniforms_first_step
from .values import check_vector, floats, rows, tokens

__all__ = [
    "brute_force_count",
    "check_part1",
    "check_spec_accept",
    "check_step_distribution",
    "check_vector",
    "clear_token",
    "floats",
    "greedy_mistakes",
    "plain_greedy",
    "prefix",
    "prefix_length_probs",
    "rows",
    "spec_accept_mistakes",
    "speculative_greedy",
    "tokens",
    "uniforms_first_step",
]
