"""Part 5: ``measured_alpha`` and ``tokens_per_pass`` on per-pass statistics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import decoding
from ..calls import call_or_fail
from ..compare import Mistakes, check_close


def check_stat(fn: Callable[..., Any], stats: Sequence[tuple[int, int, int]], name: str) -> None:
    """Compare ``measured_alpha`` or ``tokens_per_pass`` on ``stats`` with the reference."""
    call = f"{name}({list(stats)})"
    got = call_or_fail(fn, [tuple(s) for s in stats], call=call)
    accepted = sum(a for _, a, _ in stats)
    drafted = sum(d for d, _, _ in stats)
    passes = len(stats)
    mistakes: Mistakes
    if name == "measured_alpha":
        expected = decoding.measured_alpha(stats)
        mistakes = {
            "accepted over drafted tokens": (
                accepted / drafted if drafted else None,
                "a pass stops testing at its first rejection; the drafted tokens after it "
                "were never tested, so divide by the tested tokens (accepted, plus 1 per "
                "pass that ended in a rejection)",
            ),
            "accepted tokens per pass": (accepted / passes, "divide by tested tokens"),
        }
    else:
        expected = decoding.tokens_per_pass(stats)
        mistakes = {
            "accepted tokens per pass, without the target's own token": (
                accepted / passes,
                "every pass also emits one token of the target (resampled or bonus)",
            ),
        }
    check_close(got, expected, call=call, atol=1e-12, rtol=1e-9, mistakes=mistakes)


def random_stats(rng: np.random.Generator, passes: int, k: int, alpha: float) -> list[tuple]:
    """Return per-pass statistics of a decoder that accepts each token with ``alpha``.

    Examples
    --------
    >>> random_stats(np.random.default_rng(0), 2, 3, 1.0)
    [(3, 3, 4), (3, 3, 4)]
    """
    out = []
    for _ in range(passes):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        out.append((k, accepted, accepted + 1))
    return out
