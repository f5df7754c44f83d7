"""Part 3: E[N], tokens per second and the speed-up, by hand (:data:`PART3`) and as a function."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from specdec_reference import testing as checks
from specdec_reference.analysis import expected_tokens, speed_estimate, speedup

#: The chapter's worked example: acceptance rate, draft length, times in seconds.
CHAPTER = {"a": 0.8, "k": 4, "t_verify": 0.012, "t_draft": 0.001, "t_target": 0.010}

#: Part 3's questions: the same model with numbers the chapter reference does not work out.
PART3 = {"a": 0.6, "k": 3, "t_verify": 0.014, "t_draft": 0.002, "t_target": 0.012}


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


def part3_numbers(numbers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Part 3's speed question: the lesson's (:data:`PART3`), or a learner's own ``numbers``
    (times in milliseconds there, in seconds here)."""
    if numbers is None:
        return dict(PART3)
    return {
        "a": numbers["a"],
        "k": numbers["k"],
        **{t: numbers[f"{t}_ms"] / 1000 for t in ("t_verify", "t_draft", "t_target")},
    }


def check_speed_answers(
    namespace: Mapping[str, Any], which: str, numbers: Mapping[str, Any] | None = None
) -> None:
    """Fail unless the answer ``which`` (``answer_e_n``, ``answer_speed`` or ``answer_speedup``)
    is Part 3's value, or follows from the learner's previous answer (no cascade)."""
    c = part3_numbers(numbers)
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
            call=f"answer_e_n (a = {c['a']}, k = {c['k']})",
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
                    f"a pass also waits for the k = {c['k']} draft steps: divide by "
                    f"t_verify + k * t_draft = {pass_time:g} s",
                ),
                "one draft step instead of k": (
                    _any_of(bases, lambda n: n / (c["t_verify"] + c["t_draft"])),
                    f"the draft runs k = {c['k']} steps",
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
                f"divide it by the baseline, 1 / t_target = {1 / c['t_target']:.1f} tokens/s",
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
