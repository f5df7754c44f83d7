"""Hidden-test checks of lesson E7.2 (acceptance tests) that take more than a line or two.

Each ``check_*`` function is one test cell's body: the cell calls it with the notebook's
namespace (or the learner's function) and it raises an ``AssertionError`` whose message
names the call, what came back, what was expected and, when it matches one, the common
mistake.  The lesson's data (the traced draft, the chapter's timings) live here too, so the
notebook's text, its hidden tests and this project's tests use the same numbers.

- Part 2, ``empirical_acceptance``: :func:`check_simulates_propose_and_test` (the estimate
  follows ``propose_and_test``, or is a bit-exact simulation in a documented draw order) and
  :func:`check_seeded_simulation`;
- Part 2, ``propose_and_test``: :func:`generator_with_zero_draw`, a real generator whose
  accept draw is exactly 0.0, for the strict ``<``;
- Part 3, one verification pass: the trace answers (:func:`check_accepted_tokens`,
  :func:`check_stop_position`, :func:`check_tokens_emitted`), the speed answers
  (:func:`check_speed_answers`) and ``speculative_speed`` (:func:`check_expected_tokens`,
  :func:`check_expected_tokens_at_a_equal_to_one`, :func:`check_tokens_per_second`,
  :func:`check_speedup`).

The comparisons use plain Python arithmetic, as the rest of :mod:`specdec_reference.testing` does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from specdec_reference import testing as checks
from specdec_reference.acceptance import accept_prob, overall_acceptance
from specdec_reference.analysis import expected_tokens, speed_estimate, speedup
from specdec_reference.sampling import empirical_acceptance, propose_and_test

__all__ = [
    "CHAPTER",
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

# ---------------------------------------------------------------------------
# The lesson's data
# ---------------------------------------------------------------------------

#: Part 3's draft: four drafted tokens with their draft probability q_i, target
#: probability p_i and uniform draw r_i (one number per position, not distributions).
DRAFT = ("the", "cat", "sat", "on")
DRAFT_Q = (0.2, 0.5, 0.8, 0.3)
DRAFT_P = (0.8, 0.3, 0.2, 0.9)
DRAFT_R = (0.5, 0.45, 0.4, 0.1)
#: The chapter's worked example: acceptance rate, draft length, times in seconds.
CHAPTER = {"a": 0.8, "k": 4, "t_verify": 0.012, "t_draft": 0.001, "t_target": 0.010}


def trace(thresholds: Sequence[float], r: Sequence[float], *, stop: bool = True) -> list[int]:
    """Return the positions (0-based) that a left-to-right verification keeps.

    Position ``i`` passes when ``r[i] < thresholds[i]``; with ``stop`` the scan ends at
    the first failure (the rule), without it every passing position is kept (the
    mistake of keeping tokens after a rejection).

    Examples
    --------
    >>> trace([1.0, 0.6, 0.25, 1.0], DRAFT_R)
    [0, 1]
    >>> trace([1.0, 0.6, 0.25, 1.0], DRAFT_R, stop=False)
    [0, 1, 3]
    """
    kept = []
    for i, (threshold, u) in enumerate(zip(thresholds, r, strict=True)):
        if u < threshold:
            kept.append(i)
        elif stop:
            break
    return kept


def _rule() -> list[float]:
    return [accept_prob(p, q) for p, q in zip(DRAFT_P, DRAFT_Q, strict=True)]


def _inverted() -> list[float]:
    return [min(1.0, q / p) for p, q in zip(DRAFT_P, DRAFT_Q, strict=True)]


def _accepted() -> list[str]:
    return [DRAFT[i] for i in trace(_rule(), DRAFT_R)]


# ---------------------------------------------------------------------------
# Part 2: empirical_acceptance simulates, and its draw orders
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Part 3: the trace of one verification pass
# ---------------------------------------------------------------------------


def _tokens_of(value: Any, name: str) -> list[str]:
    """Return the answer as a list of lower-case words, or fail saying what it should be."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise AssertionError(
            f"{name} is {value!r} ({type(value).__name__}), expected a list of the drafted "
            'tokens that are kept, as strings, e.g. ["the"] (or [] if none is kept).'
        )
    words = []
    for item in value:
        if not isinstance(item, str):
            raise AssertionError(
                f"{name} is {value!r}, expected the tokens themselves as strings (such as "
                f'"the"), not their positions or flags.'
            )
        words.append(item.strip().strip("\"'").lower())
    unknown = [w for w in words if w not in DRAFT]
    if unknown:
        raise AssertionError(
            f"{name} is {value!r}, but {unknown[0]!r} is not a drafted token: choose from "
            f"{list(DRAFT)}."
        )
    return words


def _learner_prefix(namespace: Mapping[str, Any]) -> int | None:
    """The length of the learner's ``accepted_tokens`` when it is a prefix of the draft."""
    try:
        words = _tokens_of(namespace.get("accepted_tokens"), "accepted_tokens")
    except AssertionError:
        return None
    return len(words) if words == list(DRAFT[: len(words)]) else None


def check_accepted_tokens(namespace: Mapping[str, Any]) -> None:
    """Fail unless ``accepted_tokens`` lists the drafted tokens the pass keeps, in order."""
    value = checks.require_defined(namespace, "accepted_tokens", "the Part 3 answers cell")
    words = _tokens_of(value, "accepted_tokens")
    want = _accepted()
    if words == want:
        return
    rule = _rule()
    mistakes = {
        "keeping the drafted tokens after the first rejection": (
            [DRAFT[i] for i in trace(rule, DRAFT_R, stop=False)],
            "verification stops at the first rejection; a later token continues a prefix "
            "the target has cut, so it is discarded whatever its ratio",
        ),
        "accepting on the raw target probability p_i": (
            [DRAFT[i] for i in trace(DRAFT_P, DRAFT_R)],
            "accept when r_i < min(1, p_i / q_i), not r_i < p_i",
        ),
        "the inverted ratio q_i / p_i": (
            [DRAFT[i] for i in trace(_inverted(), DRAFT_R)],
            "divide the target's probability by the draft's",
        ),
        "accepting every drafted token": (list(DRAFT), "compare each r_i with min(1, p_i / q_i)"),
    }
    hint = _hint(words, mistakes)
    raise AssertionError(
        f"accepted_tokens is {value!r}, expected {want}: position i is kept when "
        f"r_i < min(1, p_i / q_i), scanning from the left.{hint}"
    )


def _hint(observed: Any, mistakes: Mapping[str, tuple[Any, str]]) -> str:
    hits = [(name, advice) for name, (value, advice) in mistakes.items() if observed == value]
    if not hits:
        return ""
    return " That is " + " or ".join(f"{name} ({advice})" for name, advice in hits) + "."


def check_stop_position(namespace: Mapping[str, Any]) -> None:
    """Fail unless ``stop_position`` is where verification stops (1-based), or consistent."""
    value = checks.require_defined(namespace, "stop_position", "the Part 3 answers cell")
    kept = len(_accepted())
    want = kept + 1 if kept < len(DRAFT) else None
    prefix = _learner_prefix(namespace)
    consistent = None if prefix is None or prefix == len(DRAFT) else prefix + 1
    if value is None:
        if want is None or prefix == len(DRAFT):
            return  # every token accepted, by the rule or by the learner's own trace
        raise AssertionError(
            f"stop_position is None (every token accepted), expected {want}: "
            f"{DRAFT[want - 1]!r} is rejected, since r = {DRAFT_R[want - 1]} is not below "
            f"min(1, p / q) = {_rule()[want - 1]:.4g}."
        )
    position = checks.as_int(value, "stop_position")
    if position in (want, consistent):
        return
    hint = ""
    if want is not None and position == want - 1:
        hint = (
            " That is the 0-based index of the rejected token, or the position a raw target "
            "probability test stops at: positions count from 1 here, and the rule is "
            "r_i < min(1, p_i / q_i)."
        )
    elif position == len(DRAFT):
        hint = " That is the last position: verification stops at the first rejection."
    raise AssertionError(
        f"stop_position is {position}, expected {want}: the position (1 to 4) of the first "
        f"drafted token that is rejected.{hint}"
    )


def check_tokens_emitted(namespace: Mapping[str, Any]) -> None:
    """Fail unless ``tokens_emitted`` is the accepted prefix plus the target's one token."""
    value = checks.require_defined(namespace, "tokens_emitted", "the Part 3 answers cell")
    count = checks.as_int(value, "tokens_emitted")
    kept = len(_accepted())
    want = kept + 1
    try:
        theirs = len(_tokens_of(namespace.get("accepted_tokens"), "accepted_tokens"))
    except AssertionError:
        theirs = None
    if count == want or (theirs is not None and count == theirs + 1):
        return  # right, or right for the learner's own accepted_tokens
    mistakes = {
        kept: "forgetting the target's token: every pass also emits one token of the "
        "target's, here the one it resamples at the rejected position",
        len(DRAFT) + 1: "k + 1, which a pass emits only when all k drafted tokens pass",
        len(DRAFT): "counting all four drafted tokens: the ones after the rejection are discarded",
    }
    hint = f" That is {mistakes[count]}." if count in mistakes else ""
    raise AssertionError(
        f"tokens_emitted is {count}, expected {want}: the {kept} accepted drafted tokens and "
        f"one token from the target.{hint}"
    )


# ---------------------------------------------------------------------------
# Part 3: E[N], tokens per second and the speed-up
# ---------------------------------------------------------------------------


def _e_n_mistakes(a: float, k: int) -> dict[str, tuple[float, str]]:
    e_n = expected_tokens(a, k)
    return {
        "the accepted draft tokens alone (forgetting the target's token)": (
            e_n - 1,
            "every pass also emits one token of the target's: the i = 0 term of the sum",
        ),
        "k + 1": (
            float(k + 1),
            "that counts every drafted token as accepted, which holds only at a = 1",
        ),
        "1 / (1 - a), the limit of an endless draft": (
            1 / (1 - a) if a < 1 else None,
            "the sum stops at a**k",
        ),
        "one term too many (the sum up to a**(k + 1))": (e_n + a ** (k + 1), "stop at a**k"),
    }


def check_speed_answers(namespace: Mapping[str, Any], which: str) -> None:
    """Fail unless the answer ``which`` (``answer_e_n``, ``answer_speed`` or ``answer_speedup``)
    is the chapter's value, or follows from the learner's previous answer (no cascade)."""
    c = CHAPTER
    pass_time = c["t_verify"] + c["k"] * c["t_draft"]
    e_n = expected_tokens(c["a"], c["k"])
    value = checks.as_float(
        checks.require_defined(namespace, which, "the Part 3 answers cell"), which, verb="is"
    )

    def previous(name: str) -> float | None:
        try:
            return float(namespace[name])
        except (KeyError, TypeError, ValueError):
            return None

    if which == "answer_e_n":
        checks.check_close(
            value,
            e_n,
            call="answer_e_n (a = 0.8, k = 4)",
            verb="is",
            atol=0,
            rtol=1e-3,
            mistakes=_e_n_mistakes(c["a"], c["k"]),
        )
        return
    if which == "answer_speed":
        base = previous("answer_e_n")
        if base is not None and math.isfinite(base) and _near(value, base / pass_time):
            return
        bases = [e_n] + ([base] if base is not None and math.isfinite(base) else [])
        checks.check_close(
            value,
            speed_estimate(c["a"], c["k"], c["t_verify"], c["t_draft"]),
            call="answer_speed (tokens per second)",
            verb="is",
            atol=0,
            rtol=1e-3,
            mistakes={
                "the speed without the draft cost, E[N] / t_verify": (
                    _any_of(bases, lambda n: n / c["t_verify"]),
                    "a pass also waits for the k = 4 draft steps: divide by "
                    "t_verify + k * t_draft = 0.016 s",
                ),
                "one draft step instead of k": (
                    _any_of(bases, lambda n: n / (c["t_verify"] + c["t_draft"])),
                    "the draft runs k = 4 steps",
                ),
                "tokens per millisecond": (
                    _any_of(bases, lambda n: n / (pass_time * 1000)),
                    "give tokens per second",
                ),
                "the target-only time per token": (
                    _any_of(bases, lambda n: n / c["t_target"]),
                    "a pass takes t_verify + k * t_draft",
                ),
            },
        )
        return
    base = previous("answer_speed")
    if base is not None and math.isfinite(base) and _near(value, base * c["t_target"]):
        return
    speed = speed_estimate(c["a"], c["k"], c["t_verify"], c["t_draft"])
    bases = [speed] + ([base] if base is not None and math.isfinite(base) and base else [])
    checks.check_close(
        value,
        speedup(c["a"], c["k"], c["t_verify"], c["t_draft"], c["t_target"]),
        call="answer_speedup (speculative over target-only speed)",
        verb="is",
        atol=0,
        rtol=1e-3,
        mistakes={
            "the speed-up without the draft cost": (
                e_n / c["t_verify"] * c["t_target"],
                "a pass takes t_verify + k * t_draft",
            ),
            "the speed itself": (
                _any_of(bases, lambda n: n),
                "divide it by the baseline, 1 / t_target = 100 tokens/s",
            ),
            "the inverted ratio": (
                _any_of(bases, lambda n: 1 / (n * c["t_target"])),
                "speculative speed over target-only speed",
            ),
        },
    )


def _near(value: float, target: float) -> bool:
    """Within the answers' 0.1%."""
    return abs(value - target) <= 1e-3 * abs(target)


def _any_of(bases: Sequence[float], mistake: Callable[[float], float]) -> Callable[[float], bool]:
    """A mistake predicate: the value is the mistake applied to any of ``bases``."""
    return lambda value: any(_near(value, mistake(b)) for b in bases)


def _speed_parts(
    fn: Callable[..., Any], args: tuple, call: str, hint: str = ""
) -> tuple[float, float, float]:
    """Call ``fn(*args)`` and return its three elements as floats, or fail naming the call."""
    out = checks.call_or_fail(fn, *args, call=call, hint=hint)
    e_n, speed, ratio = checks.unpack(out, ("expected_tokens", "tokens_per_time", "speedup"), call)
    return (
        checks.as_float(e_n, call + "[0]"),
        checks.as_float(speed, call + "[1]"),
        checks.as_float(ratio, call + "[2]"),
    )


_TIMES = (0.012, 0.001, 0.010)


def _e_n_cases() -> list[tuple[float, int]]:
    rnd = random.Random(7202)
    cases = [(0.8, 4), (0.5, 3), (0.0, 5), (0.3, 0), (0.9, 10), (0.25, 1), (np.float64(0.6), 2)]
    cases += [(round(rnd.uniform(0.05, 0.95), 3), rnd.randrange(1, 13)) for _ in range(12)]
    return cases


def check_expected_tokens(fn: Callable[..., Any]) -> None:
    """Fail unless ``fn(a, k, ...)[0]`` is E[N] = 1 + a + ... + a**k, for 0 <= a < 1."""
    for a, k in _e_n_cases():
        args = (a, k, *_TIMES)
        call = checks.describe_call("speculative_speed", *args)
        got, _, _ = _speed_parts(fn, args, call)
        checks.check_close(
            got,
            expected_tokens(a, k),
            call=call + "[0], E[N],",
            atol=1e-12,
            rtol=1e-9,
            mistakes=_e_n_mistakes(float(a), k),
        )


def check_expected_tokens_at_a_equal_to_one(fn: Callable[..., Any]) -> None:
    """Fail unless ``fn(1, k, ...)[0]`` is finite and the limit of ``fn``'s own E[N] as a -> 1.

    The right value is k + 1; a function whose E[N] is wrong everywhere (k + 1 for every a,
    the target's token left out) is graded for that in :func:`check_expected_tokens`, so
    here its own limit at ``a = 1 - 1e-9`` also counts (within 1e-5, as a closed form
    loses digits there).  What this catches is the closed form's 0 / 0 at a = 1.
    """
    hint = (
        "At a = 1 the closed form (1 - a**(k + 1)) / (1 - a) is 0 / 0: every drafted token "
        "is accepted, so E[N] = k + 1 (the plain sum of a**i for i = 0..k needs no special "
        "case)."
    )
    for k in (4, 0, 7):
        args = (1.0, k, *_TIMES)
        call = checks.describe_call("speculative_speed", *args)
        got, _, _ = _speed_parts(fn, args, call, hint)
        if math.isfinite(got) and abs(got - (k + 1)) <= 1e-9:
            continue
        near_call = checks.describe_call("speculative_speed", 1 - 1e-9, k, *_TIMES)
        try:
            near, _, _ = _speed_parts(fn, (1 - 1e-9, k, *_TIMES), near_call)
        except AssertionError:
            near = math.nan
        if math.isfinite(got) and abs(got - near) <= 1e-5 * max(1.0, abs(near)):
            continue  # the limit of the learner's own formula
        raise AssertionError(f"{call}[0], E[N], returned {got!r}, expected {k + 1}. {hint}")


def _timing_cases() -> list[tuple[float, int, float, float, float]]:
    return [
        (0.8, 4, 0.012, 0.001, 0.010),
        (0.6, 2, 0.020, 0.002, 0.015),
        (0.9, 6, 30.0, 2.0, 25.0),  # milliseconds: any unit works
        (0.5, 0, 0.010, 0.005, 0.010),  # no draft: one token per pass
        (0.7, 3, 0.05, 0.01, 0.04),
    ]


def _timed_calls(
    fn: Callable[..., Any],
) -> Iterator[tuple[tuple[float, int, float, float, float], str, tuple[float, float, float]]]:
    """Yield ``(args, call, fn(*args) as three floats)`` for each timing case."""
    for args in _timing_cases():
        call = checks.describe_call("speculative_speed", *args)
        yield args, call, _speed_parts(fn, args, call)


def check_tokens_per_second(fn: Callable[..., Any]) -> None:
    """Fail unless ``fn(...)[1]`` is ``fn(...)[0] / (t_verify + k * t_draft)``.

    Judged against the learner's own E[N] (the first element), so a wrong E[N] costs
    points only in its own cells.
    """
    for (a, k, t_verify, t_draft, t_target), call, (e_n, speed, _) in _timed_calls(fn):
        if not math.isfinite(e_n):
            e_n = expected_tokens(a, k)
        checks.check_close(
            speed,
            e_n / (t_verify + k * t_draft),
            call=call + "[1], tokens per unit time,",
            atol=1e-12,
            rtol=1e-9,
            advice=f"E[N] = {e_n:.6g} (your first element) over the time of a pass, "
            "t_verify + k * t_draft",
            mistakes={
                "the speed without the draft cost, E[N] / t_verify": (
                    e_n / t_verify if k else None,
                    "the pass also waits for k draft steps",
                ),
                "one draft step instead of k": (
                    e_n / (t_verify + t_draft) if k > 1 else None,
                    "the draft runs k steps",
                ),
                "the target-only time per token instead of the pass": (
                    e_n / t_target if t_target != t_verify + k * t_draft else None,
                    "divide by t_verify + k * t_draft",
                ),
            },
        )


def check_speedup(fn: Callable[..., Any]) -> None:
    """Fail unless ``fn(...)[2]`` is ``fn(...)[1] * t_target``, against the learner's own speed."""
    for (a, k, t_verify, t_draft, t_target), call, (_, speed, ratio) in _timed_calls(fn):
        if not math.isfinite(speed):
            speed = speed_estimate(a, k, t_verify, t_draft)
        checks.check_close(
            ratio,
            speed * t_target,
            call=call + "[2], the speed-up,",
            atol=1e-12,
            rtol=1e-9,
            advice=f"the speed {speed:.6g} (your second element) over the target-only speed "
            "1 / t_target",
            mistakes={
                "the speed divided by t_target": (
                    speed / t_target,
                    "the baseline speed is 1 / t_target, so multiply",
                ),
                "the inverted ratio": (
                    1 / (speed * t_target) if speed else None,
                    "speculative speed over target-only speed",
                ),
            },
        )
