"""Helpers shared by the hidden tests of lesson E7.6, *Speculation in a serving system*.

The notebook's hidden cells import this package as ``_e76`` and call these with the
learner's function as an argument; every failure is an ``AssertionError`` whose message
names the call, what was expected and, when the wrong result matches one, the common
mistake behind it.  Expected values come from :mod:`specdec_reference.lookup` and
:mod:`specdec_reference.serving`; the target model is lesson E7.4's
(:func:`specdec_reference.testing.e7_4.models`).

- :mod:`.lookup`: Part 1, ``prompt_lookup_draft`` and its mistakes (the most recent
  occurrence instead of the first, the current position counted as a match...);
- :mod:`.verify`: Part 2, ``deterministic_verify`` draw by draw, and prompt-lookup
  decoding's output against the target's exact distribution;
- :mod:`.roofline`: Parts 3 and 4, ``batch_step_time``, ``speculative_speedup`` (the
  verification cost taken as constant in batch) and ``should_speculate``;
- :mod:`.schedule`: Part 5, ``adaptive_k`` at and between its bounds.
"""

from ..e7_4.shared import models as models  # the lesson's target (and E7.4's draft)
from .lookup import check_prompt_lookup_draft, random_contexts
from .lookup import mistakes as lookup_mistakes
from .roofline import (
    check_batch_step_time,
    check_should_speculate,
    check_speculative_speedup,
    should_cases,
    speedup_cases,
)
from .schedule import check_adaptive_k
from .verify import check_lookup_exactness, check_verify_draws

__all__ = [
    "check_adaptive_k",
    "check_batch_step_time",
    "check_lookup_exactness",
    "check_prompt_lookup_draft",
    "check_should_speculate",
    "check_speculative_speedup",
    "check_verify_draws",
    "lookup_mistakes",
    "models",
    "random_contexts",
    "should_cases",
    "speedup_cases",
]
