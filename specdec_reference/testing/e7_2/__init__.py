"""Hidden-test checks of lesson E7.2 (acceptance tests) that take more than a line or two.

Each ``check_*`` function is one test cell's body: the cell calls it with the notebook's
namespace (or the learner's function) and it raises an ``AssertionError`` whose message
names the call, what came back, what was expected and, when it matches one, the common
mistake.  The lesson's data (the traced draft, the chapter's timings) live here too, so the
notebook's text, its hidden tests and this project's tests use the same numbers.  The
notebook's hidden cells import this package as ``_e72``.

- :mod:`.by_hand`: Part 1 and *Check your understanding*, for the learner's own numbers
  (:func:`check_part1`, :func:`check_choice`, :func:`choice_options`);
- :mod:`.simulation`: Part 2, ``empirical_acceptance`` (:func:`check_simulates_propose_and_test`:
  the estimate follows ``propose_and_test``, or is a bit-exact simulation in a documented
  draw order; :func:`check_seeded_simulation`) and ``propose_and_test``
  (:func:`generator_with_zero_draw`, a real generator whose accept draw is exactly 0.0,
  for the strict ``<``);
- :mod:`.verification`: Part 3, one verification pass: the traced draft (:data:`DRAFT`,
  :data:`DRAFT_Q`, :data:`DRAFT_P`, :data:`DRAFT_R`, :func:`trace`) and the trace answers
  (:func:`check_accepted_tokens`, :func:`check_stop_position`,
  :func:`check_tokens_emitted`);
- :mod:`.speed`: Part 3, the speed: the chapter's worked example (:data:`CHAPTER`), the
  numbers of Part 3's questions (:data:`PART3`), the speed answers
  (:func:`check_speed_answers`) and ``speculative_speed`` (:func:`check_expected_tokens`,
  :func:`check_expected_tokens_at_a_equal_to_one`, :func:`check_tokens_per_second`,
  :func:`check_speedup`).

The comparisons use plain Python arithmetic, as the rest of :mod:`specdec_reference.testing` does.
"""

from .by_hand import check_choice, check_part1, choice_options
from .simulation import (
    check_seeded_simulation,
    check_simulates_propose_and_test,
    generator_with_zero_draw,
)
from .speed import (
    CHAPTER,
    PART3,
    check_expected_tokens,
    check_expected_tokens_at_a_equal_to_one,
    check_speed_answers,
    check_speedup,
    check_tokens_per_second,
)
from .verification import (
    DRAFT,
    DRAFT_P,
    DRAFT_Q,
    DRAFT_R,
    check_accepted_tokens,
    check_stop_position,
    check_tokens_emitted,
    trace,
)

__all__ = [
    "check_choice",
    "check_part1",
    "choice_options",
    "CHAPTER",
    "PART3",
    "DRAFT",
    "DRAFT_P",
    "DRAFT_Q",
    "DRAFT_R",
    "check_accepted_tokens",
    "check_expected_tokens",
    "check_expected_tokens_at_a_equal_to_one",
    "check_seeded_simulation",
    "check_simulates_propose_and_test",
    "check_speed_answers",
    "check_speedup",
    "check_stop_position",
    "check_tokens_emitted",
    "check_tokens_per_second",
    "generator_with_zero_draw",
    "trace",
]
