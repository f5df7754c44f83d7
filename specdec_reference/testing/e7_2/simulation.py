"""Part 2: ``empirical_acceptance`` simulates ``propose_and_test``, in a documented draw order.

Also ``propose_and_test``'s strict ``<``: a real generator whose accept draw is exactly 0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import numpy as np

from specdec_reference import testing as checks
from specdec_reference.acceptance import overall_acceptance
from specdec_reference.sampling import empirical_acceptance, propose_and_test

# (p, q, trials, seed, accept every call whose index i satisfies i % period == 0 when
# `every` is True, or every call but those when it is False): rates 1/5 and 9/10, far
# from sum(min(p, q)) = 0.75 and 0.3.
_STAND_IN_CASES = [
    ([0.5, 0.3, 0.2], [0.25, 0.5, 0.25], 1000, 1, 5, True),
    (np.array([0.1, 0.1, 0.8]), np.array([0.6, 0.3, 0.1]), 700, 2, 10, False),
]


def _stand_in(period: int, every: bool) -> tuple[Callable[..., tuple[int, bool]], list[int]]:
    """Return a propose_and_test stand-in with a known acceptance pattern, and its counters.

    Call ``i`` (from 0) accepts when ``(i % period == 0) == every``; the token is the
    draft's most likely one.  It ignores ``rng``, so the pattern holds whatever
    generator the learner passes, and returns ``[calls, accepted]`` in its counters.
    """
    counters = [0, 0]

    def propose_and_test(p: Any, q: Any, rng: Any) -> tuple[int, bool]:
        accepted = (counters[0] % period == 0) == every
        counters[0] += 1
        counters[1] += accepted
        token = max(range(len(q)), key=lambda t: float(q[t]))
        return token, accepted

    return propose_and_test, counters


def _simulation_orders(p: Any, q: Any, trials: int, seed: int) -> dict[str, float]:
    """The two documented simulations' results: the interleaved loop and the batched order."""
    return {
        order: empirical_acceptance(p, q, trials, seed, order=order)
        for order in ("interleaved", "batched")
    }


def _matches_an_order(value: float, orders: Mapping[str, float]) -> bool:
    return any(abs(value - want) <= 1e-12 for want in orders.values())


def check_simulates_propose_and_test(namespace: MutableMapping[str, Any]) -> None:
    """Fail unless ``empirical_acceptance`` gets its outcomes by simulating.

    First ``propose_and_test`` is replaced by a stand-in that accepts a known pattern of
    calls (1 in 5, or 9 in 10), ignoring its generator: an estimate that calls it once
    per trial returns exactly that rate (or, with the counting mistake, that count), and
    one that computes ``sum(min(p, q))`` does not.  A function that never calls
    ``propose_and_test`` passes only if, with the real ``propose_and_test``, it returns
    bit for bit one of the two documented simulations (the interleaved loop, or all
    tokens with one ``rng.choice(..., size=trials)`` then ``rng.random(trials)``).
    Deterministic: a correct solution never fails.
    """
    fn = checks.require_defined(namespace, "empirical_acceptance", "the empirical_acceptance cell")
    for p, q, trials, seed, period, every in _STAND_IN_CASES:
        call = checks.describe_call("empirical_acceptance", p, q, trials, seed)
        stand_in, counters = _stand_in(period, every)
        with checks.use_reference(namespace, "propose_and_test", stand_in):
            got = checks.as_float(checks.call_or_fail(fn, p, q, trials, seed, call=call), call)
        calls, accepted = counters
        rate = accepted / calls if calls else None
        if calls == trials and (abs(got - rate) <= 1e-9 or abs(got - accepted) <= 1e-9):
            continue  # it follows propose_and_test (the count mistake is graded elsewhere)
        # It did not follow the stand-in: a bit-exact simulation in a documented order?
        orders = _simulation_orders(p, q, trials, seed)
        with checks.use_reference(namespace, "propose_and_test", propose_and_test):
            again = checks.as_float(checks.call_or_fail(fn, p, q, trials, seed, call=call), call)
        if calls == 0 and _matches_an_order(again, orders):
            continue
        share = sum((i % period == 0) == every for i in range(trials)) / trials
        pattern = f"{'1 call' if every else 'all calls but 1'} in {period}"
        formula = overall_acceptance(p, q)
        if calls == 0:
            hint = (
                " It never called propose_and_test, and with the real one its result matches "
                "neither documented draw order"
            )
            if abs(got - formula) <= checks.hoeffding_tolerance(trials, 1e-6):
                hint += (
                    f". Its result is at the formula's value sum(min(p, q)) = {formula:.4g}: "
                    "returning that value (or a coin flip with that probability) checks "
                    "nothing; simulate the draft proposing tokens and the target testing them"
                )
        else:
            hint = f" It called propose_and_test {calls} times for trials = {trials}"
        raise AssertionError(
            f"{call}, with propose_and_test replaced by one that accepts {pattern} whatever "
            f"rng is, returned {got!r}, expected {share:.4g} from calling it once per "
            f"trial.{hint}. Call propose_and_test(p, q, rng) trials times and return the "
            "fraction accepted; a vectorized simulation must instead follow one of the draw "
            f"orders in the docstring (with the real propose_and_test it returned {again!r}; "
            f"the loop gives {orders['interleaved']!r}, the batched order "
            f"{orders['batched']!r})."
        )


_SEEDED_CASES = [
    ([0.5, 0.3, 0.2], [0.25, 0.5, 0.25], 500, 1),
    ([0.5, 0.3, 0.2], [0.25, 0.5, 0.25], 37, 2),
    (np.array([0.1, 0.1, 0.8]), np.array([0.6, 0.3, 0.1]), 300, 3),
]


def check_seeded_simulation(fn: Callable[..., Any]) -> None:
    """Fail unless ``fn`` equals, for fixed seeds, one of the two documented draw orders.

    The cell binds the reference ``propose_and_test`` first, so a loop over it is judged
    by its own protocol only.  Deterministic.
    """
    for p, q, trials, seed in _SEEDED_CASES:
        call = checks.describe_call("empirical_acceptance", p, q, trials, seed)
        got = checks.as_float(checks.call_or_fail(fn, p, q, trials, seed, call=call), call)
        orders = _simulation_orders(p, q, trials, seed)
        if _matches_an_order(got, orders):
            continue
        count = " That is a count instead of a fraction: divide by trials." if got > 1 else ""
        raise AssertionError(
            f"{call} returned {got!r}, expected {orders['interleaved']!r} (one generator "
            "rng = np.random.default_rng(seed) and trials calls of propose_and_test(p, q, rng)) "
            f"or {orders['batched']!r} (the batched order: tokens = rng.choice(len(q), "
            f"size=trials, p=q), then u = rng.random(trials)).{count}"
        )


def generator_with_zero_draw(index: int = 1) -> np.random.Generator:
    """Return a real ``Generator`` whose draw number ``index`` (from 0) is exactly 0.0.

    An MT19937 generator builds each double from two 32-bit outputs as
    ``(a >> 5) * 2**26 + (b >> 6)``, scaled by ``2**-53``; the tempering of a state word
    0 outputs 0.  So zero words at positions ``2 * index`` and ``2 * index + 1`` of
    the state, read next from position 0, make that double 0.0, for
    ``rng.random()`` and for the uniform that ``rng.choice(V, p=q)`` searches with.

    Examples
    --------
    >>> rng = generator_with_zero_draw(1)
    >>> rng.random() > 0, rng.random()
    (True, 0.0)
    """
    bit_generator = np.random.MT19937(7202)
    state = bit_generator.state
    key = np.array(state["state"]["key"], dtype=np.uint32)
    key[2 * index : 2 * index + 2] = 0
    state["state"] = {"key": key, "pos": 0}
    bit_generator.state = state
    return np.random.Generator(bit_generator)
