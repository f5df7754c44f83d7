"""Part 1: ``prompt_lookup_draft``: a draft copied from the context, then the conventions.

:func:`check_prompt_lookup_copies` grades the core idea, any draft that copies what
followed an earlier occurrence of the context's last ``n`` tokens; it runs on
:func:`core_cases`, the cases on which every tie convention finds a draft exactly when
the reference does.  :func:`check_prompt_lookup_draft` grades the conventions: longest
``n`` first, the earliest occurrence, overlap with the last ``n`` tokens allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import lookup as _lookup
from ..calls import call_or_fail
from ..convert import describe_call
from ..e7_4.shared import tokens


def _scan(
    context: list[int],
    k: int,
    max_ngram: int,
    min_ngram: int,
    *,
    latest: bool = False,
    own: bool = False,
    longest_first: bool = True,
    full: bool = False,
    clear: bool = False,
) -> list[int]:
    """A prompt-lookup variant: the reference (earliest occurrence) when nothing is set."""
    length = len(context)
    sizes = range(min(max_ngram, length - (0 if own else 1)), min_ngram - 1, -1)
    if not longest_first:
        sizes = reversed(list(sizes))
    for n in sizes:
        tail = context[length - n :]
        last = length - n if own else length - n - 1  # own: the tail itself is a candidate
        starts = range(last, -1, -1) if latest else range(0, last + 1)
        for s in starts:
            fits = (not full or s + n + k <= length) and (not clear or s + 2 * n <= length)
            if context[s : s + n] == tail and fits:
                return context[s + n : s + n + k]
    return []


def mistakes(context: Sequence[int], k: int, max_ngram: int, min_ngram: int) -> dict[str, Any]:
    """The drafts of the usual mistakes on this input, by name, with advice.

    Examples
    --------
    >>> found = mistakes([1, 2, 9, 1, 2, 7, 1, 2], 2, 2, 1)
    >>> found["the most recent occurrence instead of the first (earliest)"][0]
    [7, 1]
    """
    ctx = [int(t) for t in context]
    args = (ctx, k, max_ngram, min_ngram)
    return {
        "the most recent occurrence instead of the first (earliest)": (
            _scan(*args, latest=True),
            "among the occurrences of the longest matching n-gram take the first one, the "
            "smallest start s, which is what Hugging Face's and vLLM's code take (and "
            "Saxena's)",
        ),
        "including the current position as a match": (
            _scan(*args, own=True),
            "the context's own last n tokens always match themselves and have nothing after "
            "them: search only the starts s with s + n < len(context)",
        ),
        "trying the shortest n-gram first": (
            _scan(*args, longest_first=False),
            "try n = max_ngram first and go down to min_ngram: a longer match predicts better",
        ),
        "requiring k tokens after the match": (
            _scan(*args, full=True),
            "when fewer than k tokens follow the match, propose the ones there are",
        ),
        "not letting an occurrence overlap the last n tokens": (
            _scan(*args, clear=True),
            "an occurrence may overlap the last n tokens ([1, 1, 1, 1] with n = 3 matches "
            "at s = 0): it needs only a token after it, s + n < len(context)",
        ),
        "ignoring k (the whole rest of the context)": (
            _scan(ctx, len(ctx), max_ngram, min_ngram) if k else None,
            "propose at most k tokens",
        ),
    }


#: The tie conventions: each gives a correct draft, but not the graded one.
CONVENTIONS = {
    "latest": {"latest": True},
    "shortest first": {"longest_first": False},
    "full continuation": {"full": True},
    "no overlap": {"clear": True},
}


def _called(
    fn: Callable[..., Any], ctx: list[int], k: int, max_ngram: int, min_ngram: int, call: str
) -> list[int]:
    copy = list(ctx)
    got = call_or_fail(fn, copy, k, max_ngram, min_ngram, call=call)
    if copy != ctx:
        raise AssertionError(f"{call} changed the context list it was given; do not modify it.")
    return tokens(got, call)


def _drafts(ctx: list[int], k: int, max_ngram: int, min_ngram: int) -> dict[tuple, tuple]:
    """Every correct draft ``{tokens: (n, s)}``: what followed an earlier occurrence."""
    found: dict[tuple, tuple] = {}
    for n in range(min_ngram, min(max_ngram, len(ctx) - 1) + 1):
        for s in range(len(ctx) - n):
            if ctx[s : s + n] == ctx[len(ctx) - n :]:
                found.setdefault(tuple(ctx[s + n : s + n + k]), (n, s))
    return found


def check_prompt_lookup_copies(
    fn: Callable[..., Any], context: Sequence[int], k: int, max_ngram: int, min_ngram: int
) -> None:
    """Fail unless ``fn`` drafts what followed an earlier occurrence of the last n tokens.

    Any occurrence and any ``n`` from ``min_ngram`` to ``max_ngram`` is accepted (the
    conventions are :func:`check_prompt_lookup_draft`'s); ``[]`` only when none exists
    or ``k == 0``.

    Examples
    --------
    >>> check_prompt_lookup_copies(lambda c, k, a, b: [7, 1], [1, 2, 9, 1, 2, 7, 1, 2], 2, 2, 1)
    >>> check_prompt_lookup_copies(lambda c, k, a, b: [], [1, 2, 3, 2], 2, 2, 1)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: prompt_lookup_draft([1, 2, 3, 2], 2, 2, 1) returned [], but ... That is \
including the current position as a match: ...
    """
    ctx = [int(t) for t in context]
    call = describe_call("prompt_lookup_draft", ctx, k, max_ngram, min_ngram)
    got = _called(fn, ctx, k, max_ngram, min_ngram, call)
    drafts = _drafts(ctx, k, max_ngram, min_ngram) if k else {}
    if (tuple(got) in drafts) or (not got and not drafts):
        return
    hits = [
        f" That is {name}: {why}."
        for name, (value, why) in mistakes(ctx, k, max_ngram, min_ngram).items()
        if value is not None and value == got and tuple(value) not in drafts
    ]
    if not drafts:
        what = (
            f"returned {got}, expected []: k is 0"
            if k == 0
            else f"returned {got}, expected []: no earlier occurrence of the last n tokens "
            f"(n = {min_ngram}..{max_ngram}) has a token after it, so there is nothing to copy"
        )
    elif not got:
        (n, s) = min(drafts.values())
        what = (
            f"returned [], but the last {n} token(s) {ctx[len(ctx) - n :]} occur earlier, at "
            f"s = {s}, followed by {ctx[s + n : s + n + k]}: a draft copies up to k tokens that "
            "followed an earlier occurrence"
        )
    else:
        what = (
            f"returned {got}, which is not the up to k = {k} tokens that followed any earlier "
            f"occurrence of the context's last n tokens (n = {min_ngram}..{max_ngram}); "
            f"one correct draft is {list(min(drafts, key=lambda d: drafts[d]))}"
        )
    raise AssertionError(f"{call} {what}.{hits[0] if hits else ''}")


def core_cases(cases: Sequence[tuple]) -> list[tuple]:
    """The cases on which every tie convention drafts exactly when the reference does.

    On them a correct drafter with other conventions has a draft whenever the graded
    one has, so :func:`check_prompt_lookup_copies` grades only the copying.

    Examples
    --------
    >>> core_cases([([1, 1, 1], 2, 2, 2), ([1, 2, 1], 2, 2, 1)])
    [([1, 2, 1], 2, 2, 1)]
    """
    out = []
    for context, k, max_ngram, min_ngram in cases:
        ctx = [int(t) for t in context]
        has = bool(_lookup.prompt_lookup_draft(ctx, k, max_ngram, min_ngram))
        if all(
            bool(_scan(ctx, k, max_ngram, min_ngram, **flags)) == has
            for flags in CONVENTIONS.values()
        ):
            out.append((context, k, max_ngram, min_ngram))
    return out


def check_prompt_lookup_draft(
    fn: Callable[..., Any],
    context: Sequence[int],
    k: int,
    max_ngram: int,
    min_ngram: int,
    *,
    shown: str | None = None,
) -> None:
    """Compare ``fn(context, k, max_ngram, min_ngram)`` with the reference; name the mistake.

    ``shown`` replaces the context in the message (a text, say).

    Examples
    --------
    >>> check_prompt_lookup_draft(lambda c, k, a, b: [], [1, 2, 3, 2], 2, 2, 1)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: prompt_lookup_draft([1, 2, 3, 2], 2, 2, 1) returned [], expected [3, 2]. \
That is including the current position as a match: ...
    """
    ctx = [int(t) for t in context]
    call = describe_call(
        "prompt_lookup_draft", shown if shown is not None else ctx, k, max_ngram, min_ngram
    )
    if shown is not None:
        call = call.replace(repr(shown), shown)
    got = _called(fn, ctx, k, max_ngram, min_ngram, call)
    expected = _lookup.prompt_lookup_draft(ctx, k, max_ngram, min_ngram)
    if got == expected:
        return
    hits = [
        (name, why)
        for name, (value, why) in mistakes(ctx, k, max_ngram, min_ngram).items()
        if value is not None and value == got and value != expected
    ]
    hint = ""
    if len(hits) == 1:
        hint = f" That is {hits[0][0]}: {hits[0][1]}."
    elif hits:  # two mistakes give the same draft here: name both
        hint = " That is " + " or ".join(f"{name} ({why})" for name, why in hits) + "."
    if not hits and not expected:
        hint = " No earlier occurrence of any of the last n tokens has a token after it."
    raise AssertionError(f"{call} returned {got}, expected {expected}.{hint}")


def random_contexts(seed: int, count: int) -> list[tuple[list[int], int, int, int]]:
    """``count`` random ``(context, k, max_ngram, min_ngram)`` over small alphabets.

    Small alphabets repeat n-grams often, so most cases match somewhere, many in more
    than one place; a few contexts have a single token or none repeated.

    Examples
    --------
    >>> len(random_contexts(0, 5))
    5
    """
    gen = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        alphabet = int(gen.integers(2, 6))
        length = int(gen.integers(1, 30))
        context = gen.integers(0, alphabet, size=length).tolist()
        min_ngram = int(gen.integers(1, 3))
        max_ngram = min_ngram + int(gen.integers(0, 4))
        cases.append((context, int(gen.integers(0, 9)), max_ngram, min_ngram))
    return cases
