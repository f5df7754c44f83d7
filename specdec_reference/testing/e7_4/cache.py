"""Part 4: ``speculative_decode_cached``: both key-value caches after every pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import kvcache, ngram
from ..calls import call_or_fail
from .decode import _decoded, _pass_emitted, check_stopped
from .shared import _ints


class CacheRecorder(kvcache.CachedModel):
    """A :class:`~specdec_reference.kvcache.CachedModel` that logs each ``forward`` call.

    ``log`` (shared by the two models) gets ``(name, cache tokens before the call, fed
    tokens)``.

    Examples
    --------
    >>> from specdec_reference.testing.e7_4 import models
    >>> target, _ = models()
    >>> log = []
    >>> rec = CacheRecorder(target, log, "target")
    >>> rec.forward([1, 2]).shape, log
    ((2, 96), [('target', [], [1, 2])])
    """

    def __init__(self, model: Any, log: list[tuple], name: str) -> None:
        super().__init__(model)
        self._log, self._name = log, name

    def forward(self, tokens: Sequence[int]) -> np.ndarray:
        fed = _ints(tokens) if len(tokens) else []
        self._log.append((self._name, list(self.cache.tokens), fed))
        return super().forward(fed)


def _cached_call(prompt: str, n: int, k: int, temperature: float, rng: str) -> str:
    return (
        f"speculative_decode_cached(CachedModel(target_model), CachedModel(draft_model), "
        f"{prompt!r}, n={n}, k={k}, {rng}, temperature={temperature})"
    )


def _check_cache_after(
    name: str,
    cache: list[int],
    text: list[int],
    prompt: list[int],
    where: str,
    length: int | None = None,
) -> None:
    """Fail unless the cache after a pass is what the rollback leaves (see kvcache).

    ``text`` is the text as far as it is known; ``length`` its true length when the
    last pass emitted more tokens than the decoder returned.
    """
    want = (len(text) if length is None else length) - 1
    shown = ngram.decode(cache[len(prompt) :]) if cache[: len(prompt)] == prompt else None
    known = min(len(cache), len(text))
    if cache[:known] != text[:known] or len(cache) > want:
        held = f"prompt + {shown!r}" if shown is not None else repr(ngram.decode(cache))
        if name == "target":
            why = (
                "it goes on scoring a context that was never emitted, so the next pass "
                "verifies against the wrong text and the output is no longer the target's"
            )
        else:
            why = (
                "it drafts continuations of a text that was never emitted (still exact, "
                "since verify tests the q it sampled from, but fewer tokens are accepted)"
            )
        raise AssertionError(
            f"{where}: the {name}'s cache holds {len(cache)} entries, {held}, but the text "
            f"is prompt + {ngram.decode(text[len(prompt) :])!r}. That is the cache-rollback "
            f"mistake: after each pass truncate the {name}'s cache to len(text) - 1 = {want}, "
            f"or {why}."
        )
    low = want if name == "target" else want - 1
    if len(cache) < low:
        raise AssertionError(
            f"{where}: the {name}'s cache holds {len(cache)} entries, but after this pass it "
            f"should keep {want} (every emitted token but the last"
            + (", or one fewer for the draft" if name == "draft" else "")
            + "): it was cut back further than the rollback needs, so those positions are "
            "computed again."
        )


def _check_feeds(log: Sequence[tuple], k: int, call: str, then: str) -> None:
    """Fail if a forward call was fed too little: the symptom of a cache left too long.

    A correct pass feeds the target the last emitted token and the ``k`` drafted ones,
    and the draft at least the last emitted token, so fewer means the cache already
    held positions past the emitted text.
    """
    passes = 0
    for who, cache, fed in log:
        passes += who == "target"
        if who == "target" and len(fed) < k + 1:
            raise AssertionError(
                f"{call}, pass {passes}: the target's cache held {len(cache)} entries and it "
                f"was fed only {len(fed)} tokens, fewer than the last emitted token and the "
                f"k = {k} drafted ones: its cache still holds drafted tokens from an earlier "
                "pass. That is the cache-rollback mistake: after each pass truncate both caches "
                "to len(text) - 1, or the target scores a context that was never emitted." + then
            )
        if who == "draft" and not fed:
            raise AssertionError(
                f"{call}, pass {passes + 1}: the draft was fed nothing, its cache of "
                f"{len(cache)} entries already reaching past the emitted text. That is the "
                "cache-rollback mistake: after each pass truncate the draft's cache too, to "
                "len(text) - 1." + then
            )


def check_cached_decode(
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
    """Run ``fn`` with two recording cached models; check both caches after every pass.

    Each pass must feed the target once, with the tokens its cache lacks, the last
    emitted token and ``k`` drafted ones; after each pass (seen before the next pass's
    first call, and at the end) the target's cache must be the text less its last
    token and the draft's the same or one entry shorter; the draft must only be fed
    the emitted text and the pass's drafted tokens; ``stats`` and the tokens must
    agree with the passes, and the decoder must stop as soon as ``n`` tokens are out
    (:func:`~.decode.check_stopped`, shared with :func:`check_decode_passes`).
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    rec_target = CacheRecorder(target, log, "target")
    rec_draft = CacheRecorder(draft_model, log, "draft")
    call = _cached_call(prompt, n, k, temperature, f"np.random.default_rng({seed})")
    given = list(context)
    try:
        got = call_or_fail(
            fn,
            rec_target,
            rec_draft,
            given,
            n,
            k,
            np.random.default_rng(seed),
            temperature,
            call=call,
        )
    except AssertionError as exc:  # a cache left too long often ends in an IndexError
        _check_feeds(log, k, call, f" The decoder then failed: {exc}")
        raise
    _check_feeds(log, k, call, "")
    out, stats = _decoded(got, call, n, given == context)
    passes = [i for i, entry in enumerate(log) if entry[0] == "target"]
    if len(stats) != len(passes):
        raise AssertionError(
            f"{call} fed the target {len(passes)} times but returned {len(stats)} stats rows: "
            "one target.forward call per pass, and one (drafted, accepted, emitted) row."
        )
    produced: list[int] = []
    for i, (at, row) in enumerate(zip(passes, stats, strict=True)):
        where = f"{call}, pass {i + 1}"
        text = context + produced
        start = passes[i - 1] + 1 if i else 0
        firsts: dict[str, list[int]] = {}
        for who, cache, _ in log[start : at + 1]:
            firsts.setdefault(who, cache)
        if i:  # the caches as the previous pass left them
            for name in ("target", "draft"):
                if name in firsts:
                    _check_cache_after(name, firsts[name], text, context, f"{call}, after pass {i}")
        _, before, fed = log[at]
        scored = before + fed
        drafted = scored[len(text) :]
        if len(before) > len(text) - 1 or scored[: len(text)] != text or len(drafted) != k:
            raise AssertionError(
                f"{where}: the target's cache held {len(before)} entries and was fed "
                f"{ngram.decode(fed)!r}, so it scored prompt + "
                f"{ngram.decode(scored[len(context) :])!r}; the pass must score prompt + "
                f"{ngram.decode(produced)!r} and then the {k} drafted tokens: feed the tokens "
                "its cache lacks (the last emitted one) followed by the draft, in one call."
            )
        for who, cache, fed_draft in log[start:at]:
            seen = cache + fed_draft
            grown = seen[len(text) :]
            if who == "draft" and (
                seen[: len(text)] != text[: len(seen)] or grown != drafted[: len(grown)]
            ):
                raise AssertionError(
                    f"{where}: the draft was fed {ngram.decode(fed_draft)!r} after a cache of "
                    f"{len(cache)} entries, so it scored prompt + "
                    f"{ngram.decode(seen[len(context) :])!r}, which is neither the text so far "
                    f"(prompt + {ngram.decode(produced)!r}) nor its continuation by this pass's "
                    "drafted tokens: truncate the draft's cache too, and feed it what it lacks."
                )
        produced += _pass_emitted(row, k, out, produced, drafted, where)
        check_stopped(len(produced), n, len(passes) - i - 1, where)
    if len(produced) < n or produced[:n] != out:
        raise AssertionError(f"{call}: the returned tokens are not the passes' tokens in order.")
    length = len(context) + sum(e for _, _, e in stats)  # the last pass may emit past n
    for name, model in (("target", rec_target), ("draft", rec_draft)):
        _check_cache_after(
            name,
            model.cache.tokens,
            context + produced,
            context,
            f"{call}, after the last pass",
            length,
        )
