"""Part 1, worked by hand, for the learner's own numbers (a row of
:data:`specdec_reference.variants.E7_3`, from :func:`specdec_reference.variants.graded_numbers`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdec_reference import testing as checks

from .accept import prefix


def _passes(p: float, q: float, r: float) -> bool:
    """The lesson's test of one drafted token: ``r <= min(1, p / q)``."""
    return r <= min(1.0, p / q)


def brute_force_count(numbers: Mapping[str, Any]) -> int:
    """How many drafted tokens of the learner's example pass their own test."""
    return sum(map(_passes, numbers["p"], numbers["q"], numbers["r"]))


def check_part1(namespace: Mapping[str, Any], which: str, numbers: Mapping[str, Any]) -> None:
    """Fail unless Part 1's ``which`` (``brute_force_answer``, ``tokens_if_first_rejected``,
    ``max_tokens``) is right for the learner's numbers, naming the mistake it matches."""
    value = checks.require_defined(namespace, which, "the Part 1 cell")
    p, q, r = numbers["p"], numbers["q"], numbers["r"]
    if which == "brute_force_answer":
        kept = prefix(p, q, r, _passes)
        want = brute_force_count(numbers)
        mistakes = {
            "the length of the accepted prefix, what spec_accept returns": (
                kept,
                f"the brute-force count also counts the tokens after token {kept}, the first "
                "rejected one, that pass their own test",
            ),
            "the number of drafted tokens": (
                len(p),
                f"token {kept} fails its own test: r = {r[kept]} > min(1, {p[kept]} / "
                f"{q[kept]}) = {min(1.0, p[kept] / q[kept]):.4g}",
            ),
        }
    elif which == "tokens_if_first_rejected":
        want = 1
        mistakes = {
            "the number of drafted tokens kept (spec_accept returns 0)": (
                0,
                "the target pass still emits one token, the one it draws for the rejected position",
            ),
        }
    else:
        k = numbers["k"]
        want = k + 1
        mistakes = {
            "k, which forgets the bonus token": (
                k,
                f"when all {k} drafted tokens are accepted, the same target pass has also "
                "computed the distribution of the next position and draws one more token",
            ),
        }
    checks.check_close(value, want, call=which, verb="is", atol=1e-9, rtol=0, mistakes=mistakes)
