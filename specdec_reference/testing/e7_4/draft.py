"""Part 2: ``draft``'s rows and tokens, their distribution, and ``k = 0``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding, ngram
from ..calls import call_or_fail
from .distribution import check_distribution
from .shared import _max_gap, _rows, tokens


def check_draft_rows(
    fn: Callable[..., Any],
    model: Any,
    context: Sequence[int],
    k: int,
    temperature: float,
    seed: int,
) -> list[int]:
    """Run ``fn(model, context, k, rng, temperature)`` and check what it returned.

    The tokens must be ``k`` in-vocabulary ints; row ``i`` must be the tempered draft
    distribution after ``context + tokens[:i]`` (the distribution token ``i`` was
    drawn from); ``context`` must come back unchanged.  Returns the tokens.
    """
    given = list(context)
    call = (
        f"draft(draft_model, {ngram.decode(given)!r} (as tokens), {k}, "
        f"np.random.default_rng({seed}), temperature={temperature})"
    )
    got = call_or_fail(fn, model, given, k, np.random.default_rng(seed), temperature, call=call)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, rows).")
    drafted = tokens(got[0], call)
    if given != list(context):
        raise AssertionError(
            f"{call} changed the context list it was given (it now ends "
            f"{ngram.decode(given[-12:])!r}): that is the cache-rollback mistake in the "
            "making, the caller's text now holds drafted tokens. Extend a copy instead."
        )
    if len(drafted) != k or not all(0 <= t < model.vocab_size for t in drafted):
        raise AssertionError(f"{call} returned tokens {drafted}, expected {k} tokens in 0..95.")
    rows = _rows(got[1], (k, model.vocab_size), call)
    for i in range(k):
        raw = model.probs(given + drafted[:i])
        expected = decoding.with_temperature(raw, temperature)
        if _max_gap(rows[i], expected) <= 1e-9:
            continue
        if temperature != 1 and _max_gap(rows[i], raw) <= 1e-9:
            raise AssertionError(
                f"{call}: row {i} is the draft's distribution at temperature 1, but the "
                f"tokens must be drawn at temperature {temperature}. That is reporting q at "
                "T = 1 while sampling at T: return the tempered row you sampled from, or "
                "the accept step tests the wrong q and the output is no longer exact."
            )
        if (
            i
            and _max_gap(rows[i], decoding.with_temperature(model.probs(given), temperature)) < 1e-9
        ):
            raise AssertionError(
                f"{call}: row {i} is the distribution after the context alone. Token {i} "
                "continues the tokens drafted before it: extend the context with each one."
            )
        raise AssertionError(
            f"{call}: row {i} is not with_temperature(draft_model.probs(context + "
            f"tokens[:{i}]), temperature), the distribution token {i} was drawn from "
            f"(largest difference {_max_gap(rows[i], expected):.3g})."
        )
    return drafted


def check_draft_follows_q(
    fn: Callable[..., Any],
    model: Any,
    *,
    prompt: str,
    temperature: float,
    draws: int,
    seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``fn``'s one-token drafts after ``prompt`` follow the tempered draft.

    ``draws`` calls ``fn(model, prompt, 1, rng, temperature)`` share one
    ``np.random.default_rng(seed)``; :func:`check_distribution` compares the drafted
    tokens with ``with_temperature(model.probs(prompt), temperature)``.
    """
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    call = f"{draws} calls of draft(draft_model, {prompt!r}, 1, rng, temperature={temperature})"
    counts: dict[str, int] = {}
    for _ in range(draws):
        got = call_or_fail(fn, model, list(context), 1, rng, temperature, call=call)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call}: a call returned {got!r}, expected (tokens, rows).")
        drafted = tokens(got[0], call)
        if len(drafted) != 1:
            raise AssertionError(f"{call}: a call returned tokens {drafted}, expected one.")
        counts[ngram.ALPHABET[drafted[0]]] = counts.get(ngram.ALPHABET[drafted[0]], 0) + 1
    raw = model.probs(context)
    by_char = {
        "target": decoding.with_temperature(raw, temperature),
        "sampling at temperature 1": raw,
    }
    dists = {
        name: {ngram.ALPHABET[i]: float(v) for i, v in enumerate(d)} for name, d in by_char.items()
    }
    check_distribution(
        counts,
        dists["target"],
        call=call,
        failure_prob=failure_prob,
        label="drafted token",
        mistakes={
            "sampling at temperature 1": (
                dists["sampling at temperature 1"],
                "draw each token from with_temperature(q, temperature)",
            )
        },
    )


def check_draft_empty(fn: Callable[..., Any], model: Any) -> None:
    """Fail unless ``fn(model, context, 0, rng, T)`` returns no tokens and no rows, drawing nothing.

    The rows may be a ``(0, V)`` array or anything else with no element (an empty list).
    """
    V = model.vocab_size
    for text, temperature in (("def ", 1.0), ("x", 0.5), ("\n", 0.0)):
        context = ngram.encode(text)
        rng = np.random.default_rng(7406)
        before = rng.bit_generator.state
        call = f"draft(draft_model, {text!r} (as tokens), 0, rng, temperature={temperature})"
        got = call_or_fail(
            fn,
            model,
            list(context),
            0,
            rng,
            temperature,
            call=call,
            hint="With k = 0 the loop runs no time: build the (0, V) rows without "
            "np.stack([]) (np.array(rows).reshape(k, V), or np.empty((0, V))).",
        )
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{call} returned {got!r}, expected ([], rows of shape (0, {V})).")
        drafted = tokens(got[0], call)
        if drafted:
            raise AssertionError(f"{call} returned tokens {drafted}, expected none.")
        try:
            shape = np.shape(got[1])
        except ValueError:  # a ragged list
            shape = None
        if shape is None or 0 not in shape or (len(shape) == 2 and shape != (0, V)):
            raise AssertionError(
                f"{call} returned rows of shape {shape}, expected (0, {V}): no rows (an empty "
                f"list also does), one per drafted token."
            )
        if rng.bit_generator.state != before:
            raise AssertionError(f"{call} drew from rng, but k = 0 tokens need no draw.")
