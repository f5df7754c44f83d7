"""Part 3: the traced draft, and which tokens one verification pass keeps, stops at, emits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specdec_reference import testing as checks
from specdec_reference.acceptance import accept_prob

#: Part 3's draft: four drafted tokens with their draft probability q_i, target
#: probability p_i and uniform draw r_i (one number per position, not distributions).
DRAFT = ("the", "cat", "sat", "on")


DRAFT_Q = (0.2, 0.5, 0.8, 0.3)


DRAFT_P = (0.8, 0.3, 0.2, 0.9)


DRAFT_R = (0.5, 0.45, 0.4, 0.1)


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


def _draft(numbers: Mapping[str, Any] | None) -> tuple[Sequence[float], ...]:
    """The traced draft's q_i, p_i and r_i: the lesson's, or a learner's own ``numbers``."""
    if numbers is None:
        return DRAFT_Q, DRAFT_P, DRAFT_R
    return numbers["trace_q"], numbers["trace_p"], numbers["trace_r"]


def _rule(numbers: Mapping[str, Any] | None = None) -> list[float]:
    draft_q, draft_p, _ = _draft(numbers)
    return [accept_prob(p, q) for p, q in zip(draft_p, draft_q, strict=True)]


def _inverted(numbers: Mapping[str, Any] | None = None) -> list[float]:
    draft_q, draft_p, _ = _draft(numbers)
    return [min(1.0, q / p) for p, q in zip(draft_p, draft_q, strict=True)]


def _accepted(numbers: Mapping[str, Any] | None = None) -> list[str]:
    return [DRAFT[i] for i in trace(_rule(numbers), _draft(numbers)[2])]


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


def check_accepted_tokens(
    namespace: Mapping[str, Any], numbers: Mapping[str, Any] | None = None
) -> None:
    """Fail unless ``accepted_tokens`` lists the drafted tokens the pass keeps, in order
    (for the lesson's draft, or the learner's own ``numbers``)."""
    value = checks.require_defined(namespace, "accepted_tokens", "the Part 3 answers cell")
    words = _tokens_of(value, "accepted_tokens")
    want = _accepted(numbers)
    if words == want:
        return
    rule = _rule(numbers)
    draft_q, draft_p, draft_r = _draft(numbers)
    mistakes = {
        "keeping the drafted tokens after the first rejection": (
            [DRAFT[i] for i in trace(rule, draft_r, stop=False)],
            "verification stops at the first rejection; a later token continues a prefix "
            "the target has cut, so it is discarded whatever its ratio",
        ),
        "accepting on the raw target probability p_i": (
            [DRAFT[i] for i in trace(draft_p, draft_r)],
            "accept when r_i < min(1, p_i / q_i), not r_i < p_i",
        ),
        "the inverted ratio q_i / p_i": (
            [DRAFT[i] for i in trace(_inverted(numbers), draft_r)],
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


def check_stop_position(
    namespace: Mapping[str, Any], numbers: Mapping[str, Any] | None = None
) -> None:
    """Fail unless ``stop_position`` is where verification stops (1-based), or consistent."""
    value = checks.require_defined(namespace, "stop_position", "the Part 3 answers cell")
    kept = len(_accepted(numbers))
    want = kept + 1 if kept < len(DRAFT) else None
    prefix = _learner_prefix(namespace)
    consistent = None if prefix is None or prefix == len(DRAFT) else prefix + 1
    if value is None:
        if want is None or prefix == len(DRAFT):
            return  # every token accepted, by the rule or by the learner's own trace
        raise AssertionError(
            f"stop_position is None (every token accepted), expected {want}: "
            f"{DRAFT[want - 1]!r} is rejected, since r = {_draft(numbers)[2][want - 1]} is not "
            f"below min(1, p / q) = {_rule(numbers)[want - 1]:.4g}."
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


def check_tokens_emitted(
    namespace: Mapping[str, Any], numbers: Mapping[str, Any] | None = None
) -> None:
    """Fail unless ``tokens_emitted`` is the accepted prefix plus the target's one token."""
    value = checks.require_defined(namespace, "tokens_emitted", "the Part 3 answers cell")
    count = checks.as_int(value, "tokens_emitted")
    kept = len(_accepted(numbers))
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
