"""The acceptance test of speculative sampling, for one token and for a draft.

Everything here is deterministic: the uniform draws, when a test needs them, are
passed in.  The random parts live in :mod:`specdec_reference.sampling`.
"""

import math

import numpy as np
import numpy.typing as npt

__all__ = ["accept_prob", "overall_acceptance", "spec_accept", "residual_distribution"]


def _as_vector(x: npt.ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a 1-D float64 array, or raise ``ValueError``."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def accept_prob(p: float, q: float) -> float:
    """Return the probability of accepting a drafted token.

    Parameters
    ----------
    p : float
        Probability of the drafted token under the target model.
    q : float
        Probability of the same token under the draft model.  Must be > 0: a token
        sampled from the draft always has ``q > 0``.

    Returns
    -------
    float
        ``min(1, p / q)``, a Python float.

    Raises
    ------
    ValueError
        If ``q`` is not ``> 0`` (zero, negative or NaN).

    Notes
    -----
    The drafted token :math:`x` is kept with probability

    .. math:: \\min\\left(1, \\frac{p(x)}{q(x)}\\right),

    always when the target likes it at least as much as the draft did, and in
    proportion when the draft was over-confident.  Python's ``min(1.0, x)`` is
    used, so a NaN ratio (NaN ``p``) gives 1.0.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> accept_prob(0.5, 0.8)
    0.625
    >>> accept_prob(0.5, 0.25)
    1.0
    """
    p, q = float(p), float(q)
    if not q > 0:  # also rejects NaN, for which every comparison is False
        raise ValueError(f"draft probability q must be > 0, got {q!r}")
    return min(1.0, p / q)


def overall_acceptance(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Return the chance that a token drafted from ``q`` is accepted.

    Parameters
    ----------
    p : (V,) array_like
        Target distribution over the vocabulary.
    q : (V,) array_like
        Draft distribution over the same vocabulary.

    Returns
    -------
    float
        :math:`\\sum_i \\min(p_i, q_i)`, a Python float.

    Raises
    ------
    ValueError
        If ``p`` and ``q`` are not 1-D or differ in length.

    Notes
    -----
    Averaging the acceptance probability over what the draft proposes gives

    .. math:: \\alpha = \\sum_x q(x) \\min\\left(1, \\frac{p(x)}{q(x)}\\right)
              = \\sum_x \\min(p(x), q(x)) = 1 - \\mathrm{TV}(p, q),

    where :math:`\\mathrm{TV}(p, q) = \\frac12 \\sum_x |p(x) - q(x)|` for normalized
    ``p`` and ``q``.  The sum is taken with :func:`math.fsum`, so it is correctly
    rounded.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Definition 3.1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> overall_acceptance([0.5, 0.3, 0.2], [0.25, 0.5, 0.25])
    0.75
    """
    p, q = _as_vector(p, "p"), _as_vector(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same length, got {p.size} and {q.size}")
    return math.fsum(np.minimum(p, q).tolist())


def spec_accept(p: npt.ArrayLike, q: npt.ArrayLike, r: npt.ArrayLike) -> int:
    """Return the length of the accepted prefix of a draft.

    Parameters
    ----------
    p : (k,) array_like
        Target probability of each drafted token, in draft order.
    q : (k,) array_like
        Draft probability of each drafted token.
    r : (k,) array_like
        One uniform draw in ``[0, 1)`` per drafted token.

    Returns
    -------
    int
        The number ``a`` of leading tokens accepted, ``0 <= a <= k``.

    Raises
    ------
    ValueError
        If the three lengths differ, or if a position that the scan reaches has
        ``q[i] <= 0`` (or NaN).  Positions after the first rejection are never
        read, so their values do not matter.

    Notes
    -----
    Position :math:`i` is accepted iff

    .. math:: r_i \\le \\min\\left(1, \\frac{p_i}{q_i}\\right),

    an inclusive boundary.  Token :math:`i` continues the prefix of tokens
    :math:`0..i-1`, so only an unbroken run of acceptances from the start counts:
    the scan stops at the first rejection.  It takes :math:`O(a + 1)` time.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Algorithm 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    Token 1 is rejected, so token 2 is discarded although its ratio is 2:

    >>> spec_accept([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2])
    1
    >>> spec_accept([0.5, 0.5], [0.5, 0.5], [0.3, 0.9])
    2
    >>> spec_accept([], [], [])
    0
    """
    if not len(p) == len(q) == len(r):
        raise ValueError(
            f"p, q and r must have the same length, got {len(p)}, {len(q)} and {len(r)}"
        )
    accepted = 0
    for i in range(len(p)):
        # accept_prob raises on q[i] <= 0, but only for positions we reach.
        if float(r[i]) <= accept_prob(p[i], q[i]):
            accepted += 1
        else:
            break  # the first rejection ends the prefix; later tokens are not read
    return accepted


def residual_distribution(p: npt.ArrayLike, q: npt.ArrayLike) -> np.ndarray:
    """Return the distribution to resample from after a rejection.

    Parameters
    ----------
    p : (V,) array_like
        Target distribution at the rejected position.
    q : (V,) array_like
        Draft distribution at the same position.

    Returns
    -------
    (V,) ndarray of float64
        ``max(0, p - q)`` divided by its sum.

    Raises
    ------
    ValueError
        If ``p`` and ``q`` are not 1-D or differ in length, or if ``max(0, p - q)``
        does not have a positive sum.  That happens when ``p == q``, and also
        through rounding alone when they are nearly equal (``p = [0.3, 0.7]``,
        ``q = [0.1 + 0.2, 0.7]``).

    Notes
    -----
    .. math:: p'(x) = \\frac{\\max(0, p(x) - q(x))}{\\sum_y \\max(0, p(y) - q(y))}

    A rejection happens with probability :math:`1 - \\sum_x \\min(p, q) =
    \\sum_x \\max(0, p - q)`, so resampling from :math:`p'` adds exactly
    :math:`\\max(0, p(x) - q(x))` to the :math:`\\min(p(x), q(x))` that acceptance
    contributes: the emitted token follows :math:`p`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Theorem 3.5).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> residual_distribution([0.5, 0.3, 0.2], [0.25, 0.5, 0.25]).tolist()
    [1.0, 0.0, 0.0]
    >>> residual_distribution([0.6, 0.4, 0.0], [0.2, 0.2, 0.6]).round(12).tolist()
    [0.666666666667, 0.333333333333, 0.0]
    """
    p, q = _as_vector(p, "p"), _as_vector(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same length, got {p.size} and {q.size}")
    excess = np.maximum(p - q, 0.0)
    total = excess.sum()
    if not total > 0:  # zero (p == q, or rounding) or NaN
        raise ValueError(
            f"the residual max(0, p - q) sums to {total!r}: there is no mass to resample "
            "from (p and q are equal up to rounding)"
        )
    return excess / total
