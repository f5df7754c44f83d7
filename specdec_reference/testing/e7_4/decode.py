"""Part 3: ``speculative_decode`` pass by pass: the target's passes, stats, draft contexts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import ngram
from ... import sampling as _sampling
from ..calls import call_or_fail
from .shared import Recorder, tokens


def _decoded(
    got: Any, call: str, n: int, prompt_intact: bool
) -> tuple[list[int], list[tuple[int, ...]]]:
    """A decoder's ``(tokens, stats)`` as lists of ints, or a failure that says what is wrong."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, stats).")
    out = tokens(got[0], call)
    if not prompt_intact:
        raise AssertionError(f"{call} changed the prompt list it was given; extend a copy.")
    try:
        stats = [tuple(int(x) for x in row) for row in got[1]]
    except (TypeError, ValueError):
        raise AssertionError(
            f"{call} returned stats {got[1]!r}, expected a list of (drafted, accepted, "
            "emitted) tuples."
        ) from None
    if len(out) != n:
        raise AssertionError(f"{call} returned {len(out)} tokens, expected n = {n}.")
    return out, stats


def _pass_emitted(
    row: tuple[int, ...],
    k: int,
    out: list[int],
    produced: list[int],
    drafted: list[int],
    where: str,
) -> list[int]:
    """The tokens one pass added to ``out``, after checking its stats row against them."""
    if len(row) != 3:
        raise AssertionError(f"{where}: stats row {row}, expected (drafted, accepted, emitted).")
    d, a, e = row
    if d != k or not 0 <= a <= k or e != a + 1:
        hint = (
            " That is the draft without the bonus token: when all k are accepted the "
            "same target pass adds one more token."
            if a == k and e == k
            else ""
        )
        raise AssertionError(
            f"{where}: stats row {row}, expected (k, accepted, accepted + 1) with k = {k}.{hint}"
        )
    emitted = out[len(produced) : len(produced) + e]
    if emitted[:a] != drafted[:a][: len(emitted)]:
        raise AssertionError(
            f"{where}: the pass reports {a} accepted tokens, but the tokens it added, "
            f"{ngram.decode(emitted)!r}, do not start with the first {a} drafted ones, "
            f"{ngram.decode(drafted[:a])!r}."
        )
    return emitted


def check_stopped(produced: int, n: int, passes_after: int, where: str) -> None:
    """Fail if passes ran after a pass that brought the output to ``n`` tokens.

    Both decoders, with and without caches, loop while fewer than ``n`` tokens are
    out: a pass after that wastes a target call and adds a stats row.

    Examples
    --------
    >>> check_stopped(5, 5, 0, "decode(n=5), pass 2")
    >>> check_stopped(6, 5, 1, "decode(n=5), pass 2")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: decode(n=5), pass 2: 5 tokens were out, yet the decoder went on for 1 more
    pass. That is one pass too many: stop as soon as n tokens are out (loop while fewer than n
    are out); each extra pass wastes a target call and adds a stats row.
    """
    if produced >= n and passes_after > 0:
        more = "pass" if passes_after == 1 else "passes"
        raise AssertionError(
            f"{where}: {n} tokens were out, yet the decoder went on for {passes_after} more "
            f"{more}. That is one pass too many: stop as soon as n tokens are out (loop while "
            "fewer than n are out); each extra pass wastes a target call and adds a stats row."
        )


def check_decode_passes(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    k: int,
    temperature: float,
    seed: int,
) -> None:
    """Run ``fn`` with recording models and check every pass against the algorithm.

    Each pass must make exactly one ``target.probs_along(context, drafted)`` call with
    ``context = prompt + tokens so far`` (the rollback) and ``k`` drafted tokens; the
    draft's calls before it must be on that context, extended by the pass's drafted
    tokens only (a stale draft context is the draft-side rollback mistake); its
    tokens must be the accepted prefix of ``drafted`` and then one more token;
    ``stats`` must say ``(k, accepted, accepted + 1)``; the output must have ``n``
    tokens, and the decoder must stop once it has them.
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    rec_target = Recorder(target, log, "target")
    rec_draft = Recorder(draft_model, log, "draft")
    call = (
        f"speculative_decode(target_model, draft_model, {prompt!r}, n={n}, k={k}, "
        f"np.random.default_rng({seed}), temperature={temperature})"
    )
    given = list(context)
    got = call_or_fail(
        fn, rec_target, rec_draft, given, n, k, np.random.default_rng(seed), temperature, call=call
    )
    out, stats = _decoded(got, call, n, given == context)
    passes = [c for c in rec_target.calls if c[0] == "probs_along"]
    if any(c[0] == "probs" for c in rec_target.calls):
        raise AssertionError(
            f"{call} called target_model.probs: verify each draft with one "
            "target_model.probs_along(context, drafted) call, the one target pass."
        )
    if len(stats) != len(passes):
        raise AssertionError(
            f"{call} made {len(passes)} target passes but returned {len(stats)} stats rows: "
            "one (drafted, accepted, emitted) per pass."
        )
    draft_calls = _draft_calls_by_pass(log, len(passes))
    produced: list[int] = []
    for i, ((_, ctx, drafted), row) in enumerate(zip(passes, stats, strict=True)):
        where = f"{call}, pass {i + 1}"
        if len(row) != 3:
            raise AssertionError(
                f"{where}: stats row {row}, expected (drafted, accepted, emitted)."
            )
        if ctx != context + produced:
            extra = ngram.decode(ctx[len(context) :])
            raise AssertionError(
                f"{where}: the target was run on the context prompt + {extra!r}, but the "
                f"text so far is prompt + {ngram.decode(produced)!r}. That is the "
                "cache-rollback mistake: drafted tokens after a rejection must be discarded; "
                "the next pass starts from the emitted tokens only."
            )
        if len(drafted) != k:
            raise AssertionError(f"{where}: {len(drafted)} tokens were verified, expected k = {k}.")
        _check_draft_contexts(draft_calls[i], context, produced, drafted, where)
        produced += _pass_emitted(row, k, out, produced, drafted, where)
        check_stopped(len(produced), n, len(passes) - i - 1, where)
    if len(produced) < n:
        raise AssertionError(
            f"{call}: the passes account for {len(produced)} tokens, but {n} were returned. "
            "Did a pass emit more tokens than accepted + 1?"
        )
    if produced[:n] != out:
        raise AssertionError(f"{call}: the returned tokens are not the passes' tokens in order.")


def _draft_calls_by_pass(log: Sequence[tuple], passes: int) -> list[list[list[int]]]:
    """The contexts of the draft's calls, grouped by the target pass that followed them."""
    groups: list[list[list[int]]] = [[] for _ in range(max(passes, 1))]
    current = 0
    for who, kind, ctx, *_ in log:
        if who == "target" and kind == "probs_along":
            current += 1
        elif who == "draft" and current < len(groups):
            groups[current].append(ctx)
    return groups


def _check_draft_contexts(
    contexts: Sequence[list[int]],
    prompt: list[int],
    produced: list[int],
    drafted: list[int],
    where: str,
) -> None:
    """Fail unless the draft was run on prompt + the emitted tokens (+ drafted ones)."""
    base = prompt + produced
    if drafted and not contexts:
        raise AssertionError(
            f"{where}: {len(drafted)} tokens were drafted, but draft_model was never called "
            "in this pass: draft each pass's tokens with draft(draft_model, context, k, ...)."
        )
    for ctx in contexts:
        grown = ctx[len(base) :]
        if ctx[: len(base)] == base and grown == drafted[: len(grown)]:
            continue
        raise AssertionError(
            f"{where}: the draft was run on the context prompt + "
            f"{ngram.decode(ctx[len(prompt) :])!r}, but the text so far is prompt + "
            f"{ngram.decode(produced)!r}. That is the draft-side cache-rollback mistake: "
            "the draft must continue the emitted text, not a stale context (the prompt "
            "alone, or one that keeps rejected tokens). The output stays exact, because "
            "verify tests the q the draft sampled from, but the draft proposes for a text "
            "that was never written and far fewer tokens are accepted."
        )
    if drafted and base not in [list(c) for c in contexts]:
        raise AssertionError(
            f"{where}: no draft call was made on prompt + the tokens emitted so far "
            f"({ngram.decode(produced)!r}): the first drafted token continues the emitted text."
        )


#: The verification step the notebook gives learners (lesson E7.3's accept step).
verify = _sampling.speculative_step
