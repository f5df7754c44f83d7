"""Parts 3 and 4: both decoders at temperature 0 reproduce greedy decoding with the target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import decoding, ngram
from ..calls import call_or_fail
from .cache import CacheRecorder, _cached_call, _check_feeds
from .shared import tokens


def check_greedy_equivalence(
    fn: Callable[..., Any],
    target: Any,
    draft_model: Any,
    *,
    prompt: str,
    n: int,
    k: int,
    cached: bool = False,
) -> None:
    """Fail unless ``fn`` at temperature 0 reproduces plain greedy decoding with the target.

    With ``cached``, ``fn`` is ``speculative_decode_cached`` and gets the two models
    behind fresh :class:`~specdec_reference.kvcache.CachedModel` caches.
    """
    context = ngram.encode(prompt)
    log: list[tuple] = []
    if cached:
        call = _cached_call(prompt, n, k, 0, "rng")
        models_given = (
            CacheRecorder(target, log, "target"),
            CacheRecorder(draft_model, log, "draft"),
        )
        why = (
            "the output must be the target's greedy text; when it drifts after a rejection, "
            "the target's cache still holds the rejected drafted tokens (truncate it to "
            "len(text) - 1 after each pass)."
        )
    else:
        call = (
            f"speculative_decode(target_model, draft_model, {prompt!r}, n={n}, k={k}, rng, "
            "temperature=0)"
        )
        models_given = (target, draft_model)
        why = (
            "both models put all their mass on their argmax, so the accept step keeps a "
            "drafted token only when it is the target's argmax, and the output must be the "
            "target's greedy text."
        )
    try:
        got = call_or_fail(
            fn, *models_given, list(context), n, k, np.random.default_rng(0), 0.0, call=call
        )
    except AssertionError as exc:  # a cache left too long often ends in an IndexError
        _check_feeds(log, k, call, f" The decoder then failed: {exc}")
        raise
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise AssertionError(f"{call} returned {got!r}, expected (tokens, stats).")
    out = tokens(got[0], call)
    plain = decoding.generate(target, context, n, None, temperature=0)
    if out == plain:
        return
    first = next((i for i in range(min(len(out), n)) if out[i] != plain[i]), min(len(out), n))
    raise AssertionError(
        f"{call} gave {ngram.decode(out)!r}, plain greedy decoding with the target gives "
        f"{ngram.decode(plain)!r}: they differ from character {first}. At T = 0 {why}"
    )
