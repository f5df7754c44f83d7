"""Check ``speculative_step``'s whole output by simulation, and name another draw order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import specdec_reference as ref

from ..calls import call_or_fail
from ..statistics import check_frequencies
from .values import tokens


def _accept_rates(target: np.ndarray, draft: np.ndarray) -> list[float]:
    """Return each drafted position's acceptance probability, sum(min(p_i, q_i))."""
    return [float(np.minimum(target[i], draft[i]).sum()) for i in range(len(draft))]


def prefix_length_probs(target: np.ndarray, draft: np.ndarray) -> list[float]:
    """Return P(a drafted tokens are accepted) for a = 0..k, drafts drawn from ``draft``.

    Position i is reached only if every earlier drafted token was accepted, and its
    drafted token is accepted with probability ``alpha_i = sum(min(p_i, q_i))``.

    Examples
    --------
    >>> p = np.array([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    >>> q = np.array([[1.0, 0.0], [0.5, 0.5]])
    >>> prefix_length_probs(p, q)  # alpha = 0.5, then 1
    [0.5, 0.0, 0.5]
    """
    rates = _accept_rates(target, draft)
    reach, probs = 1.0, []
    for alpha in rates:
        probs.append(reach * (1.0 - alpha))
        reach *= alpha
    return probs + [reach]


def check_step_distribution(
    speculative_step: Callable[..., Any],
    target_probs: Any,
    draft_probs: Any,
    *,
    n: int,
    draft_seed: int,
    rng_seed: int,
    failure_prob: float,
) -> None:
    """Fail unless ``speculative_step``'s whole output has the distribution of the exact sampler.

    Runs ``n`` passes on drafts drawn from ``draft_probs`` (with
    ``default_rng(draft_seed)``; the learner's ``rng`` is ``default_rng(rng_seed)``, one
    generator for all passes) and checks, for any correct sampler whatever the order of
    its draws:

    - every output: 1 to k + 1 tokens in ``0..V-1``, all but the last the drafted ones;
    - the number of accepted drafted tokens (the output's length minus 1) follows
      :func:`prefix_length_probs` (when k >= 1);
    - at every position j = 0..k, among the outputs that reach it, the token follows
      ``target_probs[j]``: the replacement after a rejection and the bonus token
      included.  Given that position j is reached, its drafted token is still a fresh
      draw from ``draft_probs[j]``, so these tokens are independent draws from
      ``target_probs[j]``.

    Each of the (k + 1) + 1 frequency checks (k + 1 when k = 0) gets an equal share of
    ``failure_prob`` (Hoeffding's inequality with a union bound, see
    :func:`~specdec_reference.testing.check_frequencies`), so a correct solution fails
    with probability below ``failure_prob``.

    Examples
    --------
    >>> def argmax_bonus(target_probs, draft_probs, draft_tokens, rng):
    ...     return [int(np.argmax(target_probs[0]))]  # k = 0: the bonus token only
    >>> check_step_distribution(argmax_bonus, [[0.5, 0.3, 0.2]], np.zeros((0, 3)), n=300,
    ...     draft_seed=1, rng_seed=2, failure_prob=1e-6)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: speculative_step(...) on 300 drafts of k = 0 tokens ... That is the argmax of target_probs[0] instead of a sample...
    """  # noqa: E501  (a doctest's expected output is one line)
    target = np.asarray(target_probs, dtype=float)
    vocab = target.shape[1]
    draft = np.asarray(draft_probs, dtype=float).reshape(-1, vocab)
    k = len(draft)
    draw = np.random.default_rng(draft_seed)  # the draft model's draws
    rng = np.random.default_rng(rng_seed)  # the generator given to speculative_step
    if k:
        drafted = np.stack([draw.choice(vocab, size=n, p=row) for row in draft], axis=1)
    else:
        drafted = np.zeros((n, 0), dtype=int)
    call = (
        f"speculative_step(target_probs, draft_probs, draft_tokens, rng) on {n} drafts of "
        f"k = {k} tokens drawn from draft_probs (target_probs = {target.tolist()}, "
        f"draft_probs = {draft.tolist() if k else f'an empty (0, {vocab}) array'})"
    )
    counts = [[0] * vocab for _ in range(k + 1)]
    accepted = [0] * (k + 1)
    for draft_tokens in drafted.tolist():
        got = tokens(
            call_or_fail(speculative_step, target, draft, draft_tokens, rng, call=call), call
        )
        sizes = f"between 1 and {k + 1} tokens" if k else "exactly 1 token (the bonus token)"
        assert 1 <= len(got) <= k + 1 and all(0 <= t < vocab for t in got), (
            f"{call}: one call returned {got} for the draft {draft_tokens}; expected {sizes} "
            f"in 0..{vocab - 1}"
        )
        changed = next((i for i in range(len(got) - 1) if got[i] != draft_tokens[i]), None)
        assert changed is None, (
            f"{call}: one call returned {got} for the draft {draft_tokens}: position {changed} "
            f"holds {got[changed]}, not the drafted {draft_tokens[changed]}, and the output goes "
            "on after it. That is keeping tokens after a rejection: stop at the first "
            "rejection, where the target's draw replaces the rejected token"
        )
        accepted[len(got) - 1] += 1
        for j, token in enumerate(got):
            counts[j][token] += 1
    checks = k + 2 if k else 1
    share = failure_prob / checks
    if k:
        always_all = [0.0] * k + [1.0]
        check_frequencies(
            accepted,
            prefix_length_probs(target, draft),
            call=call,
            failure_prob=share,
            label="accepted-prefix length",
            mistakes={
                "keeping tokens after a rejection (or never rejecting)": (
                    always_all,
                    "stop at the first rejection: the pass emits the accepted prefix and one "
                    "token of the target, so it is shorter than k + 1 whenever a drafted "
                    "token is rejected",
                ),
            },
        )
    for j in range(k + 1):
        reached = sum(counts[j])
        if reached == 0:
            continue
        p_j = target[j]
        if j < k:
            where = f"position {j} (reached by {reached} of the {n} outputs)"
            overlap = np.minimum(p_j, draft[j])
            mistakes: dict[str, Any] = {
                "resampling from p instead of the residual": (
                    (overlap + (1 - overlap.sum()) * p_j).tolist(),
                    "after a rejection draw from max(0, p - q) normalized; p itself "
                    "double-counts what acceptance already emits",
                ),
                "never rejecting (the drafted token is always kept)": (
                    draft[j].tolist(),
                    "accept with probability min(1, p/q)",
                ),
            }
        else:
            where = f"the bonus position {k} (reached by {reached} of the {n} outputs)"
            top = int(np.argmax(p_j))
            mistakes = {
                f"the argmax of target_probs[{k}] instead of a sample": (
                    [float(t == top) for t in range(vocab)],
                    f"draw the bonus token with rng.choice(V, p=target_probs[{k}]): sampling, "
                    "not the most likely token, keeps the output distributed like the target",
                ),
            }
        check_frequencies(
            counts[j],
            p_j.tolist(),
            call=f"{call}, tokens at {where}",
            failure_prob=share,
            label="token",
            mistakes=mistakes,
        )


def uniforms_first_step(
    target_probs: Any, draft_probs: Any, draft_tokens: Sequence[int], rng: np.random.Generator
) -> list[int]:
    """Return what a step emits that draws all k uniforms first, ``r = rng.random(k)``.

    That is the composition with ``spec_accept``: as correct as the docstring's order in
    distribution, but it consumes ``rng`` differently, so the seeded test can name it.

    Examples
    --------
    >>> target, draft = np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.5, 0.5]])
    >>> uniforms_first_step(target, draft, [1], np.random.default_rng(0))
    [1, 0]
    """
    target = np.asarray(target_probs, dtype=float)
    draft = np.asarray(draft_probs, dtype=float)
    drafted = [int(x) for x in draft_tokens]
    k, vocab = len(drafted), target.shape[1]
    r = rng.random(k)
    p = [target[i, x] for i, x in enumerate(drafted)]
    q = [draft[i, x] for i, x in enumerate(drafted)]
    a = ref.spec_accept(p, q, r)
    row = ref.residual_distribution(target[a], draft[a]) if a < k else target[k]
    return drafted[:a] + [int(rng.choice(vocab, p=row))]
