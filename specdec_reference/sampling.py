"""Random parts of speculative decoding: proposing, testing and emitting tokens.

Every function takes an explicit :class:`numpy.random.Generator` (or a seed) and
documents exactly which draws it makes, in which order, so that two correct
implementations given the same generator produce the same tokens.
"""

import operator

import numpy as np
import numpy.typing as npt

from .acceptance import accept_prob, residual_distribution

__all__ = [
    "propose_and_test",
    "empirical_acceptance",
    "speculative_step",
    "greedy_step",
]

# Trials handled per block by the vectorized path: bounds memory (2 doubles and
# one index per trial) without changing any result.
_BLOCK = 1 << 18


def propose_and_test(
    p: npt.ArrayLike, q: npt.ArrayLike, rng: np.random.Generator
) -> tuple[int, bool]:
    """Draft one token from ``q`` and run the acceptance test on it.

    Parameters
    ----------
    p : (V,) array_like
        Target distribution.
    q : (V,) array_like
        Draft distribution; must be a valid ``p`` for :meth:`Generator.choice`.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    token : int
        The drafted token, ``rng.choice(len(q), p=q)``.
    accepted : bool
        ``rng.random() < accept_prob(p[token], q[token])``.

    Raises
    ------
    ValueError
        If ``p`` and ``q`` differ in length (before any draw), or if ``q`` is not
        a probability vector (raised by ``rng.choice``).

    Notes
    -----
    Exactly two draws, in this order: one ``rng.choice(len(q), p=q)``, then one
    ``rng.random()``.  Since the draw is uniform on :math:`[0, 1)`, the token is
    accepted with probability :math:`\\min(1, p(x)/q(x))`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> propose_and_test([0.5, 0.3, 0.2], [0.25, 0.5, 0.25], rng)
    (1, True)
    >>> propose_and_test([0.0, 1.0], [1.0, 0.0], rng)  # the target never emits 0
    (0, False)
    """
    if len(p) != len(q):
        raise ValueError(f"p and q must have the same length, got {len(p)} and {len(q)}")
    token = int(rng.choice(len(q), p=q))
    accepted = rng.random() < accept_prob(p[token], q[token])
    return token, bool(accepted)


def empirical_acceptance(
    p: npt.ArrayLike,
    q: npt.ArrayLike,
    trials: int,
    seed: int | np.random.SeedSequence | np.random.Generator | None,
    *,
    vectorized: bool = True,
    order: str = "interleaved",
) -> float:
    """Estimate the acceptance rate by simulating ``trials`` drafted tokens.

    Parameters
    ----------
    p : (V,) array_like
        Target distribution.
    q : (V,) array_like
        Draft distribution.
    trials : int
        Number of simulated tokens, at least 1.
    seed : int, SeedSequence, Generator or None
        Passed to :func:`numpy.random.default_rng`.  A Generator is used (and
        advanced) in place.
    vectorized : bool, default True
        Use the array implementation.  ``False`` runs the literal loop over
        :func:`propose_and_test`.  Both give bit-identical results for every
        input and seed, and leave a passed Generator in the same state.
    order : {"interleaved", "batched"}, default "interleaved"
        The draw order.  ``"interleaved"`` is the definition below (choice,
        accept, choice, accept...).  ``"batched"`` draws every token first with
        one ``rng.choice(len(q), size=trials, p=q)``, then every accept draw with
        one ``rng.random(trials)``: the order of a vectorized simulation that
        does not call :func:`propose_and_test`.  ``vectorized`` applies only to
        the interleaved order.

    Returns
    -------
    float
        The fraction of the ``trials`` tokens that were accepted.

    Raises
    ------
    ValueError
        If ``trials < 1``, on invalid ``p``/``q`` (see :func:`propose_and_test`),
        or on an unknown ``order``.
    TypeError
        If ``trials`` is not an integer.

    Notes
    -----
    The estimate converges to :math:`\\sum_x \\min(p(x), q(x))`.

    The definition is ``rng = np.random.default_rng(seed)`` followed by ``trials``
    calls of ``propose_and_test(p, q, rng)``.  The vectorized path reproduces it
    draw for draw.  ``Generator.choice(V, p=q)`` converts ``q`` to float64,
    validates it, computes ``cdf = q.cumsum(); cdf /= cdf[-1]``, draws one
    ``random()`` and returns ``cdf.searchsorted(u, side="right")``.  So the stream
    alternates choice, accept, choice, accept, and ``rng.random(2 * n)`` split into
    even and odd entries yields the same tokens and the same accept draws.  The
    first trial goes through :func:`propose_and_test` itself, so that invalid
    inputs raise exactly the loop's errors; the others are drawn in blocks.  The
    thresholds are computed as ``accept_prob`` does (float64 ``p / q``, then
    ``min(1.0, ratio)`` with Python's NaN behaviour).

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> p, q = [0.5, 0.3, 0.2], [0.25, 0.5, 0.25]
    >>> empirical_acceptance(p, q, 1000, seed=0)
    0.776
    >>> empirical_acceptance(p, q, 1000, seed=0, vectorized=False)
    0.776
    >>> empirical_acceptance(p, q, 1000, seed=0, order="batched")
    0.757
    """
    trials = operator.index(trials)
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if order not in ("interleaved", "batched"):
        raise ValueError(f'order must be "interleaved" or "batched", got {order!r}')
    rng = np.random.default_rng(seed)
    if order == "batched":
        if len(p) != len(q):
            raise ValueError(f"p and q must have the same length, got {len(p)} and {len(q)}")
        tokens = rng.choice(len(q), size=trials, p=q)  # every drafted token first
        u = rng.random(trials)  # then every accept draw
        threshold = _thresholds(p, q)
        return int(np.count_nonzero(u < threshold[tokens])) / trials
    if not vectorized:
        accepted = 0
        for _ in range(trials):
            _, ok = propose_and_test(p, q, rng)
            accepted += ok
        return accepted / trials

    # Trial 1 through the loop's own code: numpy validates q, and we get its errors.
    _, first = propose_and_test(p, q, rng)
    accepted = int(first)

    # Exactly what Generator.choice computes from q.
    cdf = np.ascontiguousarray(q, dtype=np.float64).cumsum()
    cdf /= cdf[-1]
    threshold = _thresholds(p, q)

    remaining = trials - 1
    while remaining > 0:
        n = min(remaining, _BLOCK)
        u = rng.random(2 * n)
        tokens = cdf.searchsorted(u[0::2], side="right")  # even draws: the choices
        accepted += int(np.count_nonzero(u[1::2] < threshold[tokens]))  # odd: the tests
        remaining -= n
    return accepted / trials


def _thresholds(p: npt.ArrayLike, q: npt.ArrayLike) -> np.ndarray:
    """Return each token's acceptance probability, computed exactly as ``accept_prob`` does.

    ``p / q`` in float64, then Python's ``min(1.0, ratio)``, which keeps the ratio
    only when ``ratio < 1.0`` (NaN gives 1).  Tokens with ``q == 0`` are never drawn
    (their step of the cumulative sum is flat); they get 0.
    """
    q64 = np.ascontiguousarray(q, dtype=np.float64)
    p64 = np.ascontiguousarray(p, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # Python's p / q gives inf, nan silently
        ratio = np.divide(p64, q64, out=np.zeros_like(p64), where=q64 > 0)
    return np.where(ratio < 1.0, ratio, 1.0)


def _as_tokens(draft_tokens: npt.ArrayLike) -> list[int]:
    """Return the drafted tokens as a list of Python ints, or raise ``ValueError``."""
    arr = np.asarray(draft_tokens)
    if arr.ndim != 1:
        raise ValueError(f"draft_tokens must be 1-D, got shape {arr.shape}")
    return [operator.index(t) for t in arr.tolist()]


def _check_step_shapes(
    target: np.ndarray, k: int, draft: np.ndarray | None, tokens: list[int]
) -> None:
    """Raise ``ValueError`` unless target is (k+1, V), draft (k, V), tokens in range."""
    if target.ndim != 2 or target.shape[0] < 1:
        raise ValueError(f"target_probs must have shape (k + 1, V), got {target.shape}")
    if target.shape[0] != k + 1:
        raise ValueError(
            f"target_probs must have k + 1 = {k + 1} rows for {k} drafted tokens, "
            f"got {target.shape[0]}"
        )
    vocab = target.shape[1]
    if draft is not None and draft.shape != (k, vocab):
        raise ValueError(f"draft_probs must have shape (k, V) = {(k, vocab)}, got {draft.shape}")
    for i, t in enumerate(tokens):
        if not 0 <= t < vocab:
            raise ValueError(f"draft_tokens[{i}] = {t} is outside the vocabulary 0..{vocab - 1}")


def speculative_step(
    target_probs: npt.ArrayLike,
    draft_probs: npt.ArrayLike,
    draft_tokens: npt.ArrayLike,
    rng: np.random.Generator,
) -> list[int]:
    """Verify a draft with one target pass and return the emitted tokens.

    Parameters
    ----------
    target_probs : (k + 1, V) array_like
        Row ``i`` is the target distribution at draft position ``i``; the last
        row is the distribution after the whole draft (for the bonus token).
    draft_probs : (k, V) array_like
        Row ``i`` is the draft distribution from which ``draft_tokens[i]`` was drawn.
    draft_tokens : (k,) array_like of int
        The drafted tokens, ``0 <= token < V``.  ``k = 0`` is allowed.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    list of int
        Between 1 and ``k + 1`` tokens: the accepted prefix of the draft followed
        by one token from the target side (a resampled or a bonus token).

    Raises
    ------
    ValueError
        If the shapes disagree (``target_probs`` must have ``k + 1`` rows,
        ``draft_probs`` ``k`` rows, both ``V`` columns), a token is outside
        ``0..V-1``, a tested token has draft probability ``<= 0``, or a residual
        has no mass.

    Notes
    -----
    Random-number protocol, in this order:

    1. for each drafted token ``x_i`` (``i = 0, 1, ...``) one ``rng.random()``;
       the token is accepted iff that draw is ``<`` ``accept_prob(target_probs[i,
       x_i], draft_probs[i, x_i])``, exactly as in :func:`propose_and_test`;
    2. at the first rejection, one ``rng.choice(V, p=residual_distribution(
       target_probs[i], draft_probs[i]))``; that token is emitted and the step
       stops (later positions are not read);
    3. if all ``k`` are accepted, one ``rng.choice(V, p=target_probs[k])``, the
       bonus token.

    The strict ``<`` is that of :func:`propose_and_test`; :func:`spec_accept`, which
    is given its draws, uses ``<=``.  For a uniform draw both accept with
    probability exactly ``accept_prob``.

    Each emitted token is distributed as the target: acceptance emits :math:`x`
    with probability :math:`\\min(p(x), q(x))` and the residual adds
    :math:`\\max(0, p(x) - q(x))`.  The number of tokens emitted is at least 1 and
    at most :math:`k + 1`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318 (Algorithm 2).

    Examples
    --------
    A draft that agrees with the target is always accepted, plus a bonus token:

    >>> rng = np.random.default_rng(1)
    >>> target = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    >>> speculative_step(target, [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]], [1, 2], rng)
    [1, 2, 0]

    A drafted token the target never emits is always rejected and replaced:

    >>> speculative_step(target, [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], [0, 2], rng)
    [1]
    """
    target = np.asarray(target_probs, dtype=np.float64)
    tokens = _as_tokens(draft_tokens)
    k = len(tokens)
    draft = np.asarray(draft_probs, dtype=np.float64)
    if k == 0 and draft.size == 0 and target.ndim == 2:
        draft = draft.reshape(0, target.shape[1])  # an empty draft, given as []
    _check_step_shapes(target, k, draft, tokens)
    vocab = target.shape[1]

    emitted: list[int] = []
    for i, x in enumerate(tokens):
        # One uniform per drafted token, compared as in propose_and_test.
        if rng.random() < accept_prob(target[i, x], draft[i, x]):
            emitted.append(x)
            continue
        # First rejection: replace the token by a draw from the residual, and stop.
        residual = residual_distribution(target[i], draft[i])
        emitted.append(int(rng.choice(vocab, p=residual)))
        return emitted
    # Every drafted token passed: the target pass also gives one bonus token.
    emitted.append(int(rng.choice(vocab, p=target[k])))
    return emitted


def greedy_step(target_probs: npt.ArrayLike, draft_tokens: npt.ArrayLike) -> list[int]:
    """Verify a draft under greedy (temperature 0) decoding.

    Parameters
    ----------
    target_probs : (k + 1, V) array_like
        Target scores (probabilities or logits) at each draft position and after
        the draft.
    draft_tokens : (k,) array_like of int
        The drafted tokens, ``0 <= token < V``.

    Returns
    -------
    list of int
        The drafted tokens up to the first one that is not the target's argmax,
        followed by the target's argmax at that position (or at row ``k`` when
        every drafted token matches).  Between 1 and ``k + 1`` tokens.

    Raises
    ------
    ValueError
        If ``target_probs`` does not have ``k + 1`` rows or a token is outside
        ``0..V-1``.

    Notes
    -----
    With temperature 0 the target puts all its mass on
    :math:`y_i = \\operatorname{argmax}_x p_i(x)` (the first maximum on ties, as
    :func:`numpy.argmax`), so :math:`\\min(1, p_i(x_i)/q_i(x_i))` is 1 when
    :math:`x_i = y_i` and 0 otherwise, and the residual at a mismatch is the point
    mass on :math:`y_i`.  The output is token for token what plain greedy decoding
    with the target produces.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> target = [[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]
    >>> greedy_step(target, [1, 0])  # both match: bonus argmax of the last row
    [1, 0, 2]
    >>> greedy_step(target, [1, 2])  # second mismatches: the target's 0 replaces it
    [1, 0]
    >>> greedy_step([[0.4, 0.4, 0.2]], [])  # tie: the first maximum
    [0]
    """
    target = np.asarray(target_probs, dtype=np.float64)
    tokens = _as_tokens(draft_tokens)
    k = len(tokens)
    _check_step_shapes(target, k, None, tokens)

    emitted: list[int] = []
    for i, x in enumerate(tokens):
        best = int(np.argmax(target[i]))  # first maximum on ties
        emitted.append(best)  # equal to x when accepted, the correction otherwise
        if x != best:
            return emitted
    emitted.append(int(np.argmax(target[k])))  # bonus token
    return emitted
