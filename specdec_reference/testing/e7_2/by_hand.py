"""Part 1 and *Check your understanding*: the answers worked by hand, for the learner's numbers.

Each check takes the learner's own ``numbers`` (a row of
:data:`specdec_reference.variants.E7_2`, from :func:`specdec_reference.variants.graded_numbers`)
and names the mistake a wrong answer matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdec_reference import testing as checks
from specdec_reference.acceptance import accept_prob, overall_acceptance

#: Part 1's answers are graded within this (the lesson says 0.005).
TOLERANCE = 0.005 + 1e-9


def check_part1(namespace: Mapping[str, Any], which: str, numbers: Mapping[str, Any]) -> None:
    """Fail unless Part 1's ``which`` (``answer_1``, ``answer_2``, ``answer_3``) is right."""
    value = checks.require_defined(namespace, which, "the Part 1 cell")
    if which == "answer_3":
        p, q = list(numbers["p3"]), list(numbers["q3"])
        checks.check_close(
            value,
            overall_acceptance(p, q),
            call=f"answer_3 (p = {p}, q = {q})",
            verb="is",
            atol=TOLERANCE,
            rtol=0,
            mistakes={
                "the sum of max(p_i, q_i)": (
                    sum(max(a, b) for a, b in zip(p, q, strict=True)),
                    "take the smaller of the two probabilities of each token",
                ),
                "the sum of p_i * q_i": (
                    sum(a * b for a, b in zip(p, q, strict=True)),
                    "take min(p_i, q_i) for each token, not the product",
                ),
                "1 - sum(min(p_i, q_i)), the chance of a rejection": (
                    1 - overall_acceptance(p, q),
                    "the question asks for acceptance",
                ),
            },
        )
        return
    n = which.removeprefix("answer_")
    p, q = numbers[f"p{n}"], numbers[f"q{n}"]
    call = f"{which} (q = {q}, p = {p})"
    if p < q:  # the draft was over-confident: answer_1
        mistakes = {
            "the raw target probability p": (
                p,
                "the token is accepted with probability min(1, p/q), not p",
            ),
            "the inverted ratio q/p": (
                q / p,
                "divide the target's probability by the draft's, p/q",
            ),
            "the inverted ratio q/p, capped at 1": (
                1.0,
                "divide the target's probability by the draft's, p/q",
            ),
            "the draft probability q": (q, "use min(1, p/q)"),
        }
    else:  # the target likes the token at least as much: answer_2
        always = (
            "when the target likes the token at least as much as the draft, it is always accepted"
        )
        mistakes = {
            "the ratio p/q without the cap at 1": (
                p / q,
                "a probability cannot exceed 1: min(1, p/q)",
            ),
            "the raw target probability p": (p, always),
            "the inverted ratio q/p": (lambda v: abs(v - q / p) <= TOLERANCE, always),
        }
    checks.check_close(
        value, accept_prob(p, q), call=call, verb="is", atol=TOLERANCE, rtol=0, mistakes=mistakes
    )


#: What each kind of option of *Check your understanding* is, when it is wrong.
_WHY = {
    "agree": "that is accepting whenever the top choices agree, a heuristic, not the exact rule",
    "raw": "that is the raw target probability p(x), not min(1, p(x)/q(x))",
}


def choice_options(numbers: Mapping[str, Any]) -> dict[str, str]:
    """The letters of *Check your understanding* and the kind of answer each offers."""
    return dict(zip("ABC", numbers["options"].split(), strict=True))


def check_choice(namespace: Mapping[str, Any], numbers: Mapping[str, Any]) -> None:
    """Fail unless ``choice`` is the letter of min(1, p/q) among the learner's options."""
    options = choice_options(numbers)
    got = checks.chosen_letter(namespace, "".join(options))
    want = next(letter for letter, kind in options.items() if kind == "ratio")
    if got != want:
        p, q = numbers["choice_p"][0], numbers["choice_q"][0]
        raise AssertionError(
            f'choice is "{got}", expected "{want}" ({p / q:.4g}): {_WHY[options[got]]}. The '
            f"exact test keeps token 0 with probability min(1, {p} / {q}) = {p / q:.4g}: the "
            "draft over-rates it, agreement or not."
        )
