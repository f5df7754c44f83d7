"""Helpers shared by the hidden tests of lesson E7.6, *Speculation in a serving system*.

The notebook's hidden cells import this package as ``_e76`` and call these with the
learner's function as an argument; every failure is an ``AssertionError`` whose message
names the call, what was expected and, when the wrong result matches one, the common
mistake behind it.  Expected values come from :mod:`specdec_reference.lookup` and
:mod:`specdec_reference.serving`; the target model is lesson E7.4's
(:func:`specdec_reference.testing.e7_4.models`).

- :mod:`.lookup`: Part 1, ``prompt_lookup_draft``: a draft copied from the context, then
  the conventions and their mistakes (the most recent occurrence instead of the first...);
- :mod:`.verify`: Part 2, ``deterministic_verify``: the acceptance rate p(x) in closed
  form, draw by draw, and prompt-lookup decoding's output against the target's exact
  distribution;
- :mod:`.roofline`: Parts 3 to 5, ``batch_step_time``, ``speculative_speedup`` (the
  verification cost taken as constant in batch, E[N]'s closed form at alpha = 1),
  ``should_speculate``, ``cached_step_time`` and ``max_batch_in_memory``;
- :mod:`.schedule`: Part 6, ``adaptive_k`` at and between its bounds.
"""

from ..e7_4.shared import models as models  # the lesson's target (and E7.4's draft)
from .lookup import (
    check_prompt_lookup_copies,
    check_prompt_lookup_draft,
    core_cases,
    random_contexts,
)
from .lookup import mistakes as lookup_mistakes
from .roofline import (
    cached_cases,
    capacity_cases,
    check_batch_step_time,
    check_cached_step_time,
    check_max_batch_in_memory,
    check_should_speculate,
    check_speculative_speedup,
    should_cases,
    speedup_cases,
    with_memory,
)
from .schedule import check_adaptive_k
from .verify import (
    ACCEPT_CASES,
    check_accept_rates,
    check_lookup_exactness,
    check_verify_draws,
    seeded_cases,
)

__all__ = [
    "ACCEPT_CASES",
    "capacity_cases",
    "cached_cases",
    "check_accept_rates",
    "check_cached_step_time",
    "check_max_batch_in_memory",
    "check_prompt_lookup_copies",
    "core_cases",
    "seeded_cases",
    "with_memory",
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
