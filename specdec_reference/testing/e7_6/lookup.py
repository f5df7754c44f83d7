"""Part 1: ``prompt_lookup_draft`` against the reference, and the mistakes it is prone to."""

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
            if context[s : s + n] == tail and (not full or s + n + k <= length):
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
        "ignoring k (the whole rest of the context)": (
            _scan(ctx, len(ctx), max_ngram, min_ngram) if k else None,
            "propose at most k tokens",
        ),
    }


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
    copy = list(ctx)
    call = describe_call(
        "prompt_lookup_draft", shown if shown is not None else ctx, k, max_ngram, min_ngram
    )
    if shown is not None:
        call = call.replace(repr(shown), shown)
    got = call_or_fail(fn, copy, k, max_ngram, min_ngram, call=call)
    if copy != ctx:
        raise AssertionError(f"{call} changed the context list it was given; do not modify it.")
    got = tokens(got, call)
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
