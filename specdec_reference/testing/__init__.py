"""Helpers for the hidden tests of the chapter E7 notebooks (as numpy.testing is to numpy).

Every helper turns a failure into an ``AssertionError`` whose message alone helps a
learner: it names the call, what came back and what was expected, and, when the
wrong value matches one, the common mistake behind it.  Feedback pages show these
messages and never the hidden code, so the message is all a learner gets.

The comparisons use plain Python arithmetic (``abs(a - b) <= tol``), never numpy,
so a learner who monkeypatches numpy cannot change a verdict, and every correct
answer passes whatever its type: Python or numpy numbers, ``1`` or ``1.0``,
``bool`` or ``numpy.bool_``, lists or arrays.

One module per concern, re-exported here:

- :mod:`~specdec_reference.testing.convert`: render calls, convert learner values;
- :mod:`~specdec_reference.testing.calls`: call learner code, expect an exception;
- :mod:`~specdec_reference.testing.compare`: compare with the reference, name the mistake;
- :mod:`~specdec_reference.testing.statistics`: Hoeffding-bounded statistical checks;
- :mod:`~specdec_reference.testing.isolation`: no cascade, no global random state;
- :mod:`~specdec_reference.testing.guard`: the learner must not use the reference;
- per lesson, the helpers its hidden tests share (the subpackages
  :mod:`~specdec_reference.testing.e7_1`, :mod:`~specdec_reference.testing.e7_2`,
  :mod:`~specdec_reference.testing.e7_3`, :mod:`~specdec_reference.testing.e7_4`,
  :mod:`~specdec_reference.testing.e7_5` and :mod:`~specdec_reference.testing.e7_6`, one
  module per part of the lesson), imported by the lesson's cells and not re-exported here.

A hidden test cell starts like this (the first line records, once per kernel,
whether the learner's code had imported the reference before any test did)::

    import sys as _sys
    globals().setdefault("_specdec_preloaded", "specdec_reference" in _sys.modules)
    import specdec_reference as _ref
    from specdec_reference import testing as _checks
    _checks.reference_guard(globals(), ["accept_prob"])

and, when the function under test calls another learner function, substitutes the
reference for the callee so that one bug costs points once: for the rest of the cell,
the visible asserts after the hidden block included, with ::

    _checks.use_reference_for_cell(globals(), "accept_prob", _ref.accept_prob)

or for one block (outside a kernel too) with ::

    with _checks.use_reference(globals(), "accept_prob", _ref.accept_prob):
        ...  # test the learner's propose_and_test

Statistical checks take a fixed seed, a sample size and a false-failure probability,
and derive their tolerance from Hoeffding's inequality and a union bound, so a
correct solution fails with probability below the stated bound.
"""

from .calls import call_or_fail, check_raises
from .compare import check_close, check_equal
from .convert import (
    as_bool,
    as_float,
    as_int,
    chosen_letter,
    describe_call,
    require_defined,
    unpack,
)
from .guard import PRELOADED_KEY, REFERENCE_PACKAGE, assert_no_reference, reference_guard
from .isolation import global_random_state_preserved, use_reference, use_reference_for_cell
from .statistics import (
    check_frequencies,
    check_rate,
    check_rates_by_category,
    hoeffding_tolerance,
)

__all__ = [
    "PRELOADED_KEY",
    "REFERENCE_PACKAGE",
    "as_bool",
    "as_float",
    "as_int",
    "assert_no_reference",
    "call_or_fail",
    "check_close",
    "check_equal",
    "check_frequencies",
    "check_raises",
    "check_rate",
    "check_rates_by_category",
    "chosen_letter",
    "describe_call",
    "global_random_state_preserved",
    "hoeffding_tolerance",
    "reference_guard",
    "require_defined",
    "unpack",
    "use_reference",
    "use_reference_for_cell",
]
