"""The contract every lesson's hidden tests keep, checked the same way for each lesson.

A lesson gets these checks by being a folder of ``source/`` whose hidden tests have their
module, ``tests/test_<e7_N>_hidden_tests.py``, which declares what the checks read:

* ``LESSON``: the :class:`support.lessons.Lesson`;
* ``SAMPLE_MESSAGES``: ``{mistake sample: {cell it loses: words its message says}}``,
  covering every sample mistake but the one that imports the reference;
* ``EXTRA_MUTANTS``: learner code without a sample notebook, ``{name: (bodies, the cells
  to run or None for all, {cell it loses: words its message says})}``; a correct one
  loses no cell (``{}``);
* ``GRADED_PHRASES``: ``{graded function: phrases its docstring states}``;
* ``MESSAGE_FORM`` (if the lesson's messages share one): ``{what every message of a
  mistake has: regular expression it matches}``.

What the contract checks: the reference solutions and every correct variant pass every
test cell, and afterwards every graded function is the learner's own again (a callee the
tests swapped for the reference is given back); each mistake (sample or extra) loses
exactly its cells, with a message that names it; every test cell is lost by some mistake;
a notebook that imports the reference loses every test cell after its import; each graded
function's docstring states what is graded; docstring examples, which a lesson gives for
every graded function or for none, hold for the reference; no visible assert uses a name
only the hidden tests import (``_e7N``, ``_checks``, ``_ref``, ``_np``); and no test cell
reads a name an earlier test cell swapped for the reference.
"""

from __future__ import annotations

import importlib
import re

import pytest
from support.course import REPO
from support.lessons import failing

from autograder.course import assignments
from autograder.integrity.monitor import _names as names_read

#: The lessons, by the prefix of their assignment (``e7_1``).
PREFIXES = ["_".join(a.split("_")[:2]) for a in assignments(REPO)]
#: Each lesson's hidden-tests module.
MODULES = {p: importlib.import_module(f"test_{p}_hidden_tests") for p in PREFIXES}


def _cases(data) -> list:
    """``pytest.param(prefix, key)`` for each key of ``data(module)``, lesson by lesson."""
    return [
        pytest.param(p, key, id=f"{p}-{key}") for p in PREFIXES for key in sorted(data(MODULES[p]))
    ]


def _lesson(prefix: str):
    return MODULES[prefix].LESSON


def _message_form(prefix: str) -> dict[str, str]:
    return getattr(MODULES[prefix], "MESSAGE_FORM", {})


def _hidden_names(prefix: str) -> tuple[str, ...]:
    return ("_" + prefix.replace("_", ""), "_checks", "_ref", "_np")


def _lost_cells(module) -> set[str]:
    """The test cells that some sample mistake or extra mutant of ``module`` loses."""
    lost = {gid for cells in module.SAMPLE_MESSAGES.values() for gid in cells}
    return lost | {gid for _, _, cells in module.EXTRA_MUTANTS.values() for gid in cells}


def _example_counts(prefix: str) -> dict[str, int]:
    return _lesson(prefix).docstring_example_counts(MODULES[prefix].GRADED_PHRASES)


def test_every_lesson_declares_its_contract():
    wanted = ("LESSON", "SAMPLE_MESSAGES", "EXTRA_MUTANTS", "GRADED_PHRASES")
    for prefix, module in MODULES.items():
        missing = [name for name in wanted if not hasattr(module, name)]
        assert not missing and module.LESSON.assignment.startswith(prefix), (prefix, missing)


# ---------------------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_reference_solutions_pass_every_test_cell_and_keep_their_functions(prefix):
    """Every test cell passes, and a callee a cell swapped for the reference is the
    learner's own again after the cell (as ``use_reference_for_cell`` promises)."""
    run = _lesson(prefix).run()
    assert set(run.outcomes) == set(_lesson(prefix).test_cells)
    assert failing(run.outcomes) == {}
    swapped = {
        name: run.namespace[name].__module__
        for name in MODULES[prefix].GRADED_PHRASES
        if run.namespace[name].__module__ != "__main__"
    }
    assert swapped == {}, "these graded functions are not the learner's after the run"


@pytest.mark.parametrize(
    ("prefix", "scenario"),
    _cases(lambda m: [s for s in m.LESSON.scenarios if s.startswith("variant-")]),
)
def test_correct_variants_pass_every_test_cell(prefix, scenario):
    lesson = _lesson(prefix)
    assert failing(lesson.run(lesson.scenarios[scenario]).outcomes) == {}


# ---------------------------------------------------------------------------------------
# Each mistake loses exactly its cells, and the message names it
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_sample_mistake_has_its_messages(prefix):
    assert _lesson(prefix).message_coverage_problems(MODULES[prefix].SAMPLE_MESSAGES) == []


@pytest.mark.parametrize(("prefix", "scenario"), _cases(lambda m: m.SAMPLE_MESSAGES))
def test_each_sample_mistake_fails_its_cells_with_a_message_naming_it(prefix, scenario):
    lesson = _lesson(prefix)
    messages = MODULES[prefix].SAMPLE_MESSAGES[scenario]
    problems = lesson.loss_problems(
        lesson.scenarios[scenario], messages, form=_message_form(prefix)
    )
    assert problems == []


@pytest.mark.parametrize(("prefix", "name"), _cases(lambda m: m.EXTRA_MUTANTS))
def test_extra_mutants_lose_exactly_their_cells(prefix, name):
    lesson = _lesson(prefix)
    bodies, only, messages = MODULES[prefix].EXTRA_MUTANTS[name]
    cells = set(lesson.test_cells) if only is None else only
    assert lesson.loss_problems(bodies, messages, only=cells, form=_message_form(prefix)) == []


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_test_cell_is_lost_by_some_mistake(prefix):
    """A test cell that no mistake fails is not shown to catch anything."""
    assert sorted(set(_lesson(prefix).test_cells) - _lost_cells(MODULES[prefix])) == []


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_notebook_importing_the_reference_fails_every_later_cell(prefix):
    assert _lesson(prefix).reference_import_problems() == []


# ---------------------------------------------------------------------------------------
# Docstrings and visible asserts
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prefix", "grade_id"), _cases(lambda m: m.GRADED_PHRASES))
def test_each_docstring_states_the_graded_behaviour(prefix, grade_id):
    phrases = MODULES[prefix].GRADED_PHRASES[grade_id]
    assert _lesson(prefix).missing_docstring_phrases(grade_id, phrases) == []


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_lesson_gives_docstring_examples_for_every_graded_function_or_for_none(prefix):
    counts = _example_counts(prefix)
    without = sorted(name for name, count in counts.items() if not count)
    assert without in ([], sorted(counts)), f"examples for some graded functions only: {counts}"


@pytest.mark.parametrize("prefix", [p for p in PREFIXES if any(_example_counts(p).values())])
def test_docstring_examples_hold_for_the_reference_solutions(prefix):
    examples, failures = _lesson(prefix).docstring_examples(MODULES[prefix].GRADED_PHRASES)
    assert examples == sum(_example_counts(prefix).values()) and failures == 0


@pytest.mark.parametrize("prefix", PREFIXES)
def test_visible_asserts_never_depend_on_hidden_helpers(prefix):
    assert _lesson(prefix).hidden_names_in_visible_asserts(_hidden_names(prefix)) == []


@pytest.mark.parametrize("prefix", PREFIXES)
def test_no_test_cell_reads_a_name_an_earlier_one_swapped_for_the_reference(prefix):
    """The grader flags a test cell that reads (uses without binding it itself, as its
    integrity monitor counts) a name an earlier test cell bound to something else: a
    callee swapped for the reference is one, until its cell ends."""
    substituted = set()
    for gid, cell in _lesson(prefix).test_cells.items():
        reads = set(names_read(cell.source))
        assert not (reads & substituted), f"{gid} reads {reads & substituted}"
        substituted |= set(re.findall(r'use_reference_for_cell\(globals\(\), "(\w+)"', cell.source))
