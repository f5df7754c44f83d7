"""The contract every lesson's hidden tests keep, checked the same way for each lesson.

A lesson gets these checks by being a folder of ``source/`` whose hidden tests have their
module, ``tests/test_<e7_N>_hidden_tests.py``, which declares what the checks read:

* ``LESSON``: the :class:`support.lessons.Lesson`;
* ``SAMPLE_MESSAGES``: ``{mistake sample: {cell it loses: words its message says}}``,
  covering every sample mistake but the one that imports the reference;
* ``EXTRA_MUTANTS``: mistakes without a sample notebook, ``{name: (bodies, the cells to
  run or None for all, {cell it loses: words its message says})}``;
* ``GRADED_PHRASES``: ``{graded function: phrases its docstring states}``.

What the contract checks: the reference solutions and every correct variant pass every
test cell; each mistake (sample or extra) loses exactly its cells, with a message that
names it; a notebook that imports the reference loses every cell; each graded function's
docstring states what is graded and its examples hold for the reference; no visible
assert uses a name only the hidden tests import (``_e7N``, ``_checks``, ``_ref``,
``_np``); and no test cell reads a name an earlier cell swapped for the reference.

Two lessons keep a part of the contract in an older form, in their own module, listed in
:data:`OWN_FORM`: their runs are shared by a module fixture there, so running them here
again would only cost time.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import re

import pytest
from support.course import REPO
from support.lessons import failing

from autograder.course import assignments

#: The lessons, by the prefix of their assignment (``e7_1``).
PREFIXES = ["_".join(a.split("_")[:2]) for a in assignments(REPO)]
#: Each lesson's hidden-tests module.
MODULES = {p: importlib.import_module(f"test_{p}_hidden_tests") for p in PREFIXES}

#: The checks a lesson keeps in its own module, in an older form: {prefix: {check: where}}.
OWN_FORM = {
    "e7_2": {
        # Never checked for E7.2: its docstrings have no examples, and its cells read the
        # callees they swap, restored after each cell (test_the_callees_are_the_learners_...).
        "docstring examples": "none",
        "substituted names": "test_the_callees_are_the_learners_again_after_each_cell",
        "reference and variants": "test_every_correct_variant_passes_every_test_cell",
        "sample messages": "test_each_check_fails_on_its_mistake_and_names_it",
        "reference import": "test_a_learner_who_imports_the_reference_fails_every_later_test",
        "extra mutants": "test_each_check_fails_on_its_mistake_and_names_it (its MUTANTS)",
    },
    "e7_3": {
        "sample messages": "test_each_sample_mistake_loses_exactly_its_cells_with_a_message_...",
        "reference import": "the same test, on mistake-imports-reference",
    },
}


def _lessons(check: str) -> list[str]:
    return [p for p in PREFIXES if check not in OWN_FORM.get(p, {})]


def _cases(check: str, data) -> list:
    """``pytest.param(prefix, key)`` for each key of ``data(module)``, lesson by lesson."""
    return [
        pytest.param(p, key, id=f"{p}-{key}")
        for p in _lessons(check)
        for key in sorted(data(MODULES[p]))
    ]


def _lesson(prefix: str):
    return MODULES[prefix].LESSON


def _hidden_names(prefix: str) -> tuple[str, ...]:
    return ("_" + prefix.replace("_", ""), "_checks", "_ref", "_np")


def test_every_lesson_declares_its_contract():
    for prefix, module in MODULES.items():
        own = OWN_FORM.get(prefix, {})
        wanted = {
            "SAMPLE_MESSAGES": "sample messages",
            "EXTRA_MUTANTS": "extra mutants",
            "GRADED_PHRASES": "docstrings",
        }
        missing = [
            name for name, check in wanted.items() if check not in own and not hasattr(module, name)
        ]
        assert module.LESSON.assignment.startswith(prefix) and not missing, (prefix, missing)


# ---------------------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", _lessons("reference and variants"))
def test_the_reference_solutions_pass_every_test_cell(prefix):
    outcomes = _lesson(prefix).run().outcomes
    assert set(outcomes) == set(_lesson(prefix).test_cells)
    assert failing(outcomes) == {}


@pytest.mark.parametrize(
    ("prefix", "scenario"),
    _cases(
        "reference and variants",
        lambda m: [s for s in m.LESSON.scenarios if s.startswith("variant-")],
    ),
)
def test_correct_variants_pass_every_test_cell(prefix, scenario):
    lesson = _lesson(prefix)
    assert failing(lesson.run(lesson.scenarios[scenario]).outcomes) == {}


# ---------------------------------------------------------------------------------------
# Each mistake loses exactly its cells, and the message names it
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", _lessons("sample messages"))
def test_every_sample_mistake_has_its_messages(prefix):
    assert _lesson(prefix).message_coverage_problems(MODULES[prefix].SAMPLE_MESSAGES) == []


@pytest.mark.parametrize(
    ("prefix", "scenario"), _cases("sample messages", lambda m: m.SAMPLE_MESSAGES)
)
def test_each_sample_mistake_fails_its_cells_with_a_message_naming_it(prefix, scenario):
    messages = MODULES[prefix].SAMPLE_MESSAGES[scenario]
    assert _lesson(prefix).message_problems(scenario, messages) == []


@pytest.mark.parametrize("prefix", _lessons("reference import"))
def test_a_notebook_importing_the_reference_fails_every_cell(prefix):
    assert _lesson(prefix).reference_import_problems() == []


@pytest.mark.parametrize(("prefix", "name"), _cases("extra mutants", lambda m: m.EXTRA_MUTANTS))
def test_extra_mutants_lose_exactly_their_cells(prefix, name):
    bodies, only, expected = MODULES[prefix].EXTRA_MUTANTS[name]
    lost = failing(_lesson(prefix).run(bodies, only=only).outcomes)
    assert set(lost) == set(expected), lost
    for gid, words in expected.items():
        assert words in lost[gid], f"{gid}: {lost[gid]}"


# ---------------------------------------------------------------------------------------
# Docstrings and visible asserts
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prefix", "grade_id"), _cases("docstrings", lambda m: m.GRADED_PHRASES))
def test_each_docstring_states_the_graded_behaviour(prefix, grade_id):
    phrases = MODULES[prefix].GRADED_PHRASES[grade_id]
    assert _lesson(prefix).missing_docstring_phrases(grade_id, phrases) == []


@pytest.mark.parametrize("prefix", _lessons("docstring examples"))
def test_docstring_examples_hold_for_the_reference_solutions(prefix):
    """Every graded function's docstring has examples, and they hold for the reference."""
    ns = _lesson(prefix).run(only=set()).namespace
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    without = []
    for name in MODULES[prefix].GRADED_PHRASES:
        tests = doctest.DocTestFinder().find(ns[name], name, globs=dict(ns))
        if not sum(len(t.examples) for t in tests):
            without.append(name)
        for test in tests:
            runner.run(test, out=lambda _text: None)
    assert without == [] and runner.failures == 0


@pytest.mark.parametrize("prefix", PREFIXES)
def test_visible_asserts_never_depend_on_hidden_helpers(prefix):
    assert _lesson(prefix).hidden_names_in_visible_asserts(_hidden_names(prefix)) == []


@pytest.mark.parametrize("prefix", _lessons("substituted names"))
def test_the_cells_calling_reference_callees_read_no_substituted_name(prefix):
    """The grader flags a test cell that reads a name an earlier test cell rebound."""
    substituted = set()
    for gid, cell in _lesson(prefix).test_cells.items():
        names = {n.id for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Name)}
        assert not (names & substituted), f"{gid} reads {names & substituted}"
        substituted |= set(re.findall(r'use_reference_for_cell\(globals\(\), "(\w+)"', cell.source))
