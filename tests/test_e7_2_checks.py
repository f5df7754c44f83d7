"""specdec_reference.testing, the hidden tests' helpers: fair conversions, helpful messages,
honest statistics, isolation."""

from __future__ import annotations

import functools
import math
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdec_reference import testing as checks

# ---------------------------------------------------------------------------
# Conversions accept every correct type and reject the rest
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0.5, np.float64(0.5), np.float32(0.5), np.array(0.5), Fraction(1, 2)]
)
def test_as_float_accepts_python_and_numpy_numbers(value):
    assert checks.as_float(value, "f()") == 0.5


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (None, "Did you forget return?"),
        ("0.5", "expected a number"),
        ([0.5, 0.5], "single number"),
        (np.array([0.5, 0.5]), "single number"),
    ],
)
def test_as_float_rejects_non_numbers_and_says_why(value, words):
    with pytest.raises(AssertionError, match=words):
        checks.as_float(value, "f()")


@pytest.mark.parametrize("value", [True, np.True_, 1, 1.0, np.int64(1), np.float64(1.0)])
def test_as_bool_accepts_every_kind_of_true(value):
    assert checks.as_bool(value, "f()") is True


@pytest.mark.parametrize("value", [False, np.False_, 0, 0.0, np.int64(0)])
def test_as_bool_accepts_every_kind_of_false(value):
    assert checks.as_bool(value, "f()") is False


@pytest.mark.parametrize("value", [0.5, "True", None, [True], 2])
def test_as_bool_rejects_other_values(value):
    with pytest.raises(AssertionError, match="expected True or False"):
        checks.as_bool(value, "f()")


@pytest.mark.parametrize("value", [2, np.int64(2), np.intp(2), 2.0, np.float64(2.0)])
def test_as_int_accepts_integral_values(value):
    assert checks.as_int(value, "f()") == 2


@pytest.mark.parametrize("value", [2.5, "2", None, float("nan")])
def test_as_int_rejects_other_values(value):
    with pytest.raises(AssertionError, match="f\\(\\) returned"):
        checks.as_int(value, "f()")


@pytest.mark.parametrize("value", [(1, True), [1, True], np.array([1, 0])])
def test_unpack_accepts_tuples_lists_and_arrays(value):
    assert len(checks.unpack(value, ("token", "accepted"), "f()")) == 2


@pytest.mark.parametrize("value", [1, (1, True, 0), "ab", None, {"token": 1, "accepted": 2}])
def test_unpack_rejects_other_shapes(value):
    with pytest.raises(AssertionError, match=r"expected 2 values \(token, accepted\)"):
        checks.unpack(value, ("token", "accepted"), "f()")


# ---------------------------------------------------------------------------
# Messages: the call, what came back, what was expected, the mistake
# ---------------------------------------------------------------------------

RATIO_MISTAKES = {
    "the raw target probability p": (0.5, "accept with probability min(1, p/q)"),
    "the inverted ratio q/p": (1.6, "divide p by q"),
}


@pytest.mark.parametrize(
    ("got", "named"),
    [(0.5, "the raw target probability p"), (1.6, "the inverted ratio q/p"), (0.7, None)],
)
def test_check_close_names_the_mistake_that_the_value_matches(got, named):
    with pytest.raises(AssertionError) as info:
        checks.check_close(got, 0.625, call="accept_prob(p=0.5, q=0.8)", mistakes=RATIO_MISTAKES)
    message = str(info.value)
    assert message.startswith(f"accept_prob(p=0.5, q=0.8) returned {got}, expected 0.625.")
    if named:
        assert f"That is {named}:" in message
    else:
        assert "That is" not in message


def test_check_close_names_every_mistake_that_gives_the_same_value():
    with pytest.raises(AssertionError, match="That is the raw p or the inverted ratio[.]"):
        checks.check_close(
            0.5,
            1.0,
            call="accept_prob(0.5, 0.25)",
            mistakes={"the raw p": 0.5, "the inverted ratio": 0.5},
        )


def test_check_close_accepts_numpy_types_and_uses_absolute_tolerance_at_zero():
    assert checks.check_close(np.float64(1e-12), 0.0, call="f()", atol=1e-9, rtol=0) == 1e-12
    assert checks.check_close(np.float32(0.625), 0.625, call="f()") == 0.625
    with pytest.raises(AssertionError, match="returned nan"):
        checks.check_close(float("nan"), 0.0, call="f()")


def test_check_close_says_its_advice_whatever_the_value():
    with pytest.raises(AssertionError, match="expected 0.776: create one generator"):
        checks.check_close(0.5, 0.776, call="f()", advice="create one generator")


def test_check_raises_explains_each_way_of_failing():
    def returns(p, q):
        return 1.0

    def divides(p, q):
        return p / q

    def stub(p, q):
        raise NotImplementedError()

    class Subclass(ValueError):
        pass

    def raises_subclass(p, q):
        raise Subclass("bad q")

    checks.check_raises(ValueError, raises_subclass, 0.5, 0.0)
    with pytest.raises(
        AssertionError,
        match=r"returns\(0.5, 0.0\) returned 1.0; expected it to raise ValueError \(q > 0\)",
    ):
        checks.check_raises(ValueError, returns, 0.5, 0.0, why="q > 0")
    with pytest.raises(AssertionError, match="raised ZeroDivisionError: .*; expected ValueError"):
        checks.check_raises(ValueError, divides, 0.5, 0.0)
    with pytest.raises(AssertionError, match="NotImplementedError: write the function body"):
        checks.check_raises(ValueError, stub, 0.5, 0.0)


def test_call_or_fail_turns_learner_exceptions_into_messages_with_the_call():
    def broken(p, q):
        raise KeyError("oops")

    with pytest.raises(
        AssertionError,
        match=r"broken\(\[0.5\], rng\) raised KeyError: 'oops', "
        "expected it to return a result. hint",
    ):
        checks.call_or_fail(broken, [0.5], np.random.default_rng(0), hint="hint")
    assert checks.call_or_fail(max, 1, 2) == 2


def test_describe_call_shows_arrays_as_lists_and_generators_as_rng():
    text = checks.describe_call("f", np.array([0.5, 0.5]), np.random.default_rng(1), seed=3)
    assert text == "f([0.5, 0.5], rng, seed=3)"
    assert len(checks.describe_call("f", list(range(1000)))) < 140


def test_require_defined_says_which_cell_to_run():
    assert checks.require_defined({"x": 1}, "x") == 1
    with pytest.raises(AssertionError, match="answer_1 is not defined: run the Part 1 cell"):
        checks.require_defined({}, "answer_1", "the Part 1 cell")


# ---------------------------------------------------------------------------
# Statistics: rigorous tolerances
# ---------------------------------------------------------------------------


@given(n=st.integers(1, 10**7), delta=st.floats(1e-12, 0.5))
def test_hoeffding_tolerance_solves_the_bound(n, delta):
    t = checks.hoeffding_tolerance(n, delta)
    assert math.isclose(2 * math.exp(-2 * n * t * t), delta, rel_tol=1e-9)


def test_hoeffding_tolerance_rejects_nonsense():
    with pytest.raises(ValueError):
        checks.hoeffding_tolerance(0, 1e-6)
    with pytest.raises(ValueError):
        checks.hoeffding_tolerance(10, 0.0)


def test_check_rate_fails_a_correct_sampler_less_often_than_it_promises():
    """2000 runs of n = 200 Bernoulli(0.3) draws (seed 2024), promised failure rate 0.05."""
    rng = np.random.default_rng(2024)
    failures = 0
    for _ in range(2000):
        mean = float((rng.random(200) < 0.3).mean())
        try:
            checks.check_rate(mean, 200, 0.3, call="sim", failure_prob=0.05)
        except AssertionError:
            failures += 1
    # Hoeffding is conservative: the true rate is far below 5% (about 0.2% here).
    assert failures / 2000 <= 0.05


def test_check_rate_tolerance_is_the_hoeffding_half_width():
    t = checks.hoeffding_tolerance(4000, 1e-6)
    checks.check_rate(0.75 + 0.999 * t, 4000, 0.75, call="f()")
    with pytest.raises(AssertionError, match=r"within ±0.0426 \(n = 4000"):
        checks.check_rate(0.75 + 1.001 * t, 4000, 0.75, call="f()")


def test_check_frequencies_uses_a_union_bound_over_categories():
    n, probs = 1000, [0.25, 0.5, 0.25]
    t = checks.hoeffding_tolerance(n, 1e-6 / 3)
    ok = [round(n * (0.25 + 0.99 * t)), round(n * (0.5 - 0.99 * t))]
    checks.check_frequencies([ok[0], ok[1], n - sum(ok)], probs, call="draws")
    bad = [round(n * (0.25 + 1.01 * t)), round(n * (0.5 - 1.01 * t))]
    with pytest.raises(AssertionError, match="token 0 is off by"):
        checks.check_frequencies([bad[0], bad[1], n - sum(bad)], probs, call="draws")


def test_check_frequencies_names_an_alternative_distribution_or_a_predicate():
    mistakes = {
        "drawing from p": ([0.5, 0.3, 0.2], "draw from q"),
        "a stuck generator": (lambda f: max(f) == 1.0, "use rng"),
    }
    with pytest.raises(AssertionError, match="That is drawing from p: draw from q"):
        checks.check_frequencies([500, 300, 200], [0.25, 0.5, 0.25], call="d", mistakes=mistakes)
    with pytest.raises(AssertionError, match="That is a stuck generator"):
        checks.check_frequencies([0, 1000, 0], [0.25, 0.5, 0.25], call="d", mistakes=mistakes)


def test_check_rates_by_category_skips_categories_never_drawn():
    checks.check_rates_by_category([0, 600], [0, 1000], [0.9, 0.6], call="calls")
    with pytest.raises(AssertionError, match="token 1 was accepted in 300 of its 1000"):
        checks.check_rates_by_category(
            [5, 300], [5, 1000], [1.0, 0.6], call="calls", mistakes={"raw p": ([0.5, 0.3], "")}
        )


# ---------------------------------------------------------------------------
# Isolation: no cascade, no global state, no reference
# ---------------------------------------------------------------------------


def test_use_reference_restores_the_learner_function_even_when_the_test_fails():
    ns = {"accept_prob": "learner"}
    with pytest.raises(AssertionError), checks.use_reference(ns, "accept_prob", "reference"):
        assert ns["accept_prob"] == "reference"
        raise AssertionError("a failing check")
    assert ns == {"accept_prob": "learner"}
    with checks.use_reference(ns, "propose_and_test", "reference"):
        assert ns["propose_and_test"] == "reference"
    assert "propose_and_test" not in ns


def test_use_reference_for_cell_needs_ipython():
    with pytest.raises(RuntimeError, match="needs an IPython kernel"):
        checks.use_reference_for_cell({}, "accept_prob", max)


def test_use_reference_for_cell_restores_after_the_cell_in_a_real_shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("def accept_prob(p, q):\n    return 'learner'")
        shell.user_ns["_fake_reference"] = lambda p, q: "reference"
        result = shell.run_cell(
            textwrap.dedent("""
            from specdec_reference import testing as checks
            checks.use_reference_for_cell(globals(), "accept_prob", _fake_reference)
            assert accept_prob(1, 2) == "reference"
            raise AssertionError("the visible part fails")
            """)
        )
        assert isinstance(result.error_in_exec, AssertionError)
        assert shell.user_ns["accept_prob"](1, 2) == "learner"
        assert not any(
            "restore" in getattr(f, "__name__", "") for f in shell.events.callbacks["post_run_cell"]
        )
    finally:
        InteractiveShell.clear_instance()


def test_global_random_state_preserved_detects_the_global_generator():
    with checks.global_random_state_preserved("f()"):
        np.random.default_rng(3).random(10)
    with pytest.raises(AssertionError, match="changed numpy's global random state"):
        with checks.global_random_state_preserved("f()"):
            np.random.seed(12345)


def _notebook(code: str) -> dict:
    """Run ``code`` as a notebook cell would and return its namespace."""
    ns = {"__name__": "__main__"}
    exec(textwrap.dedent(code), ns)
    return ns


USES_REFERENCE = {
    "module alias": """
        import specdec_reference as sr
        def accept_prob(p, q):
            return sr.accept_prob(p, q)
        """,
    "imported function": """
        from specdec_reference import accept_prob as ap
        def accept_prob(p, q):
            return ap(p, q)
        """,
    "import inside the function": """
        def accept_prob(p, q):
            import specdec_reference
            return specdec_reference.accept_prob(p, q)
        """,
    "default argument": """
        from specdec_reference.acceptance import accept_prob as ap
        def accept_prob(p, q, _impl=ap):
            return _impl(p, q)
        """,
    "closure": """
        def make():
            from specdec_reference import accept_prob as ap
            def accept_prob(p, q):
                return ap(p, q)
            return accept_prob
        accept_prob = make()
        """,
    "helper function": """
        import specdec_reference
        def helper(p, q):
            return specdec_reference.accept_prob(p, q)
        def accept_prob(p, q):
            return helper(p, q)
        """,
    "lambda in a comprehension": """
        import specdec_reference as sr
        def accept_prob(p, q):
            return [f(p, q) for f in [lambda a, b: sr.accept_prob(a, b)]][0]
        """,
    "partial": """
        import functools
        import specdec_reference
        accept_prob = functools.partial(specdec_reference.accept_prob)
        """,
    "plain assignment": """
        from specdec_reference import accept_prob
        """,
    "importlib": """
        import importlib
        def accept_prob(p, q):
            return importlib.import_module("specdec_reference").accept_prob(p, q)
        """,
}


@pytest.mark.parametrize("code", USES_REFERENCE.values(), ids=USES_REFERENCE.keys())
def test_assert_no_reference_catches_each_way_of_reaching_the_reference(code):
    ns = _notebook(code)
    with pytest.raises(AssertionError, match="accept_prob must be your own code"):
        checks.assert_no_reference(ns["accept_prob"], name="accept_prob")


def test_assert_no_reference_passes_own_code_beside_the_tests_own_import():
    ns = _notebook("""
        import numpy as np
        import specdec_reference as _ref  # what the hidden tests import
        def helper(p, q):
            return np.minimum(1.0, p / q)
        def accept_prob(p, q):
            return float(functools_free(helper(p, q)))
        def functools_free(x):
            return x
        """)
    checks.assert_no_reference(ns["accept_prob"])
    checks.assert_no_reference(functools.partial(ns["accept_prob"], 0.5))


def test_reference_guard_reads_the_cell_history_and_the_preloaded_flag():
    learner = "x = 1  # specdec_reference is not used here\nprint('specdec_reference_like')"
    hidden = "### BEGIN HIDDEN TESTS\nimport specdec_reference as _ref\n### END HIDDEN TESTS"
    checks.reference_guard({"_ih": ["", learner, hidden, "%time x = 1"]})
    with pytest.raises(AssertionError, match="import specdec_reference"):
        checks.reference_guard({"_ih": ["", learner, "import specdec_reference"]})
    with pytest.raises(AssertionError, match="imported before the tests ran"):
        checks.reference_guard({checks.PRELOADED_KEY: True})


def test_reference_guard_parses_each_cell_once_and_sees_a_changed_cell():
    from specdec_reference.testing import guard

    cells_tag = object()
    cells = [f"y_{i} = {i} * 2  # a source no other test has: {id(cells_tag)}" for i in range(30)]
    before = guard._reference_lines.cache_info().misses
    for end in range(1, len(cells) + 1):  # every hidden test rescans the history so far
        checks.reference_guard({"_ih": cells[:end]})
    assert guard._reference_lines.cache_info().misses - before == len(cells)  # one parse each
    # A learner re-running an edited cell adds a new source: it is parsed and caught.
    edited = cells + [cells[5] + "\nimport specdec_reference.sampling as s"]
    with pytest.raises(AssertionError, match="import specdec_reference.sampling as s"):
        checks.reference_guard({"_ih": edited})


def test_reference_guard_inspects_the_named_functions():
    ns = _notebook(USES_REFERENCE["module alias"])
    ns["_ih"] = []
    checks.reference_guard(ns, [])
    with pytest.raises(AssertionError, match="must be your own code"):
        checks.reference_guard(ns, ["accept_prob"])
    checks.reference_guard(ns, ["not_defined_yet"])
