"""Helpers shared by the hidden tests of lesson E7.1, *Why decoding is slow*.

The notebook's hidden cells import this package as ``_e71`` and call these with the
learner's function as an argument, for instance ``_e71.check_step_seconds(step_time,
model, hardware, 1, 0)``; every failure is an ``AssertionError`` whose message names the
call, what was expected and, when the wrong result matches one, the common mistake
behind it.  Expected values come from :mod:`specdec_reference.roofline` and
:mod:`specdec_reference.greedy`; the learner's functions get fresh plain dicts, so
nothing they do to their arguments reaches the reference's figures.

- :mod:`.by_hand`: Part 1 and *Check your understanding*, worked by hand, for the
  learner's own numbers (``check_part1``, ``check_choice``);
- :mod:`.shared`: the lesson's model and hardware dicts, from the tables and at random;
- :mod:`.sizes`: Parts 2 and 3, ``weight_bytes``, ``flops_per_token`` and
  ``kv_cache_bytes``;
- :mod:`.step`: Part 4, ``step_time``'s time and bound;
- :mod:`.ridge`: Part 5, ``ridge_batch`` and ``verify_cost_ratio``;
- :mod:`.memory`: Part 5, ``max_batch`` and the hardware its cases use;
- :mod:`.greedy`: Part 6, ``greedy_verify``.
"""

from .by_hand import check_choice, check_part1, choice_kinds, part1_answers
from .greedy import check_greedy_prefix, check_greedy_tokens, check_greedy_types, greedy_case
from .memory import (
    MEMORY_BYTES,
    capacity_dict,
    check_max_batch,
    exact_fit,
    memory_for,
    room_over_cache,
    weight_bytes_of,
)
from .ridge import check_ridge_batch, check_verify_cost_ratio, ridge
from .shared import (
    HARDWARE_KEYS,
    MODEL_KEYS,
    hardware_dict,
    model_dict,
    random_hardware,
    random_model,
    random_pairs,
    real_pairs,
)
from .sizes import check_flops_per_token, check_kv_cache_bytes, check_weight_bytes
from .step import check_step_bound, check_step_seconds

__all__ = [
    "check_part1",
    "check_choice",
    "choice_kinds",
    "part1_answers",
    "MODEL_KEYS",
    "HARDWARE_KEYS",
    "model_dict",
    "hardware_dict",
    "real_pairs",
    "random_model",
    "random_hardware",
    "random_pairs",
    "check_weight_bytes",
    "check_flops_per_token",
    "check_kv_cache_bytes",
    "check_step_seconds",
    "check_step_bound",
    "ridge",
    "check_ridge_batch",
    "check_verify_cost_ratio",
    "MEMORY_BYTES",
    "capacity_dict",
    "exact_fit",
    "weight_bytes_of",
    "room_over_cache",
    "memory_for",
    "check_max_batch",
    "greedy_case",
    "check_greedy_prefix",
    "check_greedy_tokens",
    "check_greedy_types",
]
