"""How many tokens a target pass yields, and what that is worth in speed.

The model: each drafted token is accepted independently with the same
probability ``alpha`` (Leviathan et al. 2023, Section 3.3).  Exact samplers use
conditional probabilities; this constant-``alpha`` model estimates their speed.
"""

import math
import operator

__all__ = [
    "expected_tokens",
    "speed_estimate",
    "speedup",
    "walltime_improvement",
    "optimal_k",
    "speculation_pays",
]


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:  # also rejects NaN
        raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")
    return alpha


def _check_k(k: int, name: str = "k") -> int:
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {k}")
    return k


def expected_tokens(alpha: float, k: int) -> float:
    """Return the expected number of tokens one target pass produces.

    Parameters
    ----------
    alpha : float
        Probability that a drafted token is accepted, in ``[0, 1]``.
    k : int
        Number of drafted tokens, ``k >= 0``.

    Returns
    -------
    float
        :math:`E[N]`, between 1 and ``k + 1``.

    Raises
    ------
    ValueError
        If ``alpha`` is outside ``[0, 1]`` or ``k < 0``.

    Notes
    -----
    The accepted prefix has length :math:`\\ge i` with probability
    :math:`\\alpha^i`, and the pass always adds one target token, so

    .. math:: E[N] = \\sum_{i=0}^{k} \\alpha^i = \\frac{1 - \\alpha^{k+1}}{1 - \\alpha}
              \\quad (\\alpha \\ne 1), \\qquad E[N] = k + 1 \\quad (\\alpha = 1).

    Near :math:`\\alpha = 1` both numerator and denominator cancel.  For
    :math:`\\alpha \\ge 1/2` the function computes :math:`d = 1 - \\alpha` (exact
    in floating point) and
    :math:`-\\operatorname{expm1}((k+1)\\operatorname{log1p}(-d)) / d`, which is
    accurate to a few ulps (``alpha = 1 - 1e-9`` keeps all its digits).  Below
    :math:`1/2` the closed form has no cancellation and is used as it is.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Equation 1).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> round(expected_tokens(0.8, 4), 12)  # 1 + 0.8 + 0.64 + 0.512 + 0.4096
    3.3616
    >>> expected_tokens(1.0, 4)
    5.0
    >>> expected_tokens(0.3, 0)
    1.0
    """
    alpha, k = _check_alpha(alpha), _check_k(k)
    if alpha == 1.0:
        return float(k + 1)  # the limit of the sum: every token accepted
    if k == 0:
        return 1.0
    if alpha < 0.5:
        return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    d = 1.0 - alpha  # exact for alpha in [1/2, 1] (Sterbenz lemma)
    # 1 - alpha**(k+1) = -expm1((k+1) * log(1 - d)), without cancellation.
    return -math.expm1((k + 1) * math.log1p(-d)) / d


def speed_estimate(alpha: float, k: int, t_verify: float, t_draft: float) -> float:
    """Return the throughput of speculative decoding, in tokens per unit time.

    Parameters
    ----------
    alpha : float
        Acceptance probability per drafted token, in ``[0, 1]``.
    k : int
        Number of drafted tokens per target pass, ``k >= 0``.
    t_verify : float
        Time of one target verification pass, ``> 0``.
    t_draft : float
        Time of one draft step, ``>= 0``, in the same unit.

    Returns
    -------
    float
        Tokens per unit of time (tokens/s when the times are in seconds).

    Raises
    ------
    ValueError
        If ``t_verify <= 0`` or ``t_draft < 0`` (or ``alpha``, ``k`` invalid).

    Notes
    -----
    .. math:: \\text{speed} = \\frac{E[N]}{t_{verify} + k\\, t_{draft}}

    with :math:`E[N]` from :func:`expected_tokens`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    The chapter's worked example, times in seconds:

    >>> round(speed_estimate(0.8, 4, t_verify=0.012, t_draft=0.001), 9)
    210.1
    """
    t_verify, t_draft = float(t_verify), float(t_draft)
    if not t_verify > 0:
        raise ValueError(f"t_verify must be > 0, got {t_verify!r}")
    if not t_draft >= 0:
        raise ValueError(f"t_draft must be >= 0, got {t_draft!r}")
    k = _check_k(k)
    return expected_tokens(alpha, k) / (t_verify + k * t_draft)


def speedup(alpha: float, k: int, t_verify: float, t_draft: float, t_target: float) -> float:
    """Return the speed-up of speculative decoding over target-only decoding.

    Parameters
    ----------
    alpha, k, t_verify, t_draft
        As in :func:`speed_estimate`.
    t_target : float
        Time per token of target-only decoding, ``> 0``, same unit.

    Returns
    -------
    float
        ``speed_estimate(alpha, k, t_verify, t_draft) / (1 / t_target)``.

    Raises
    ------
    ValueError
        If ``t_target <= 0``, or as :func:`speed_estimate`.

    Notes
    -----
    .. math:: S = \\frac{E[N]}{t_{verify} + k\\, t_{draft}} \\, t_{target}

    With :math:`t_{verify} = t_{target}` and :math:`t_{draft} = c\\, t_{target}`
    this is :func:`walltime_improvement`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192.
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    The chapter's worked example (10 ms per target-only token):

    >>> round(speedup(0.8, 4, t_verify=12, t_draft=1, t_target=10), 12)
    2.101
    """
    t_target = float(t_target)
    if not t_target > 0:
        raise ValueError(f"t_target must be > 0, got {t_target!r}")
    return speed_estimate(alpha, k, t_verify, t_draft) * t_target


def walltime_improvement(alpha: float, gamma: int, c: float) -> float:
    """Return the expected walltime improvement factor of Leviathan et al.

    Parameters
    ----------
    alpha : float
        Acceptance rate, in ``[0, 1]``.
    gamma : int
        Number of drafted tokens per target pass, ``gamma >= 0``.
    c : float
        Cost coefficient: time of one draft step over time of one target step,
        ``c >= 0``.

    Returns
    -------
    float
        The improvement factor; above 1 means speculative decoding is faster.

    Raises
    ------
    ValueError
        If ``c < 0`` (or ``alpha``, ``gamma`` invalid).

    Notes
    -----
    Theorem 3.8 of Leviathan et al. (2023):

    .. math:: \\frac{1 - \\alpha^{\\gamma+1}}{(1 - \\alpha)(\\gamma c + 1)},

    computed as ``expected_tokens(alpha, gamma) / (gamma * c + 1)``, so it is
    accurate near and at :math:`\\alpha = 1`.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Theorem 3.8).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> round(walltime_improvement(0.8, 4, 0.1), 12)  # 3.3616 / 1.4
    2.401142857143
    >>> walltime_improvement(0.5, 0, 0.3)  # no draft, no change
    1.0
    """
    c = float(c)
    if not c >= 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    gamma = _check_k(gamma, "gamma")
    return expected_tokens(alpha, gamma) / (gamma * c + 1.0)


def optimal_k(alpha: float, c: float, k_max: int = 64) -> int:
    """Return the draft length that maximizes the walltime improvement.

    Parameters
    ----------
    alpha : float
        Acceptance rate, in ``[0, 1]``.
    c : float
        Cost coefficient (draft step time over target step time), ``c >= 0``.
    k_max : int, default 64
        Largest draft length considered, ``k_max >= 0``.

    Returns
    -------
    int
        The smallest ``k`` in ``0..k_max`` that maximizes
        :func:`walltime_improvement`.  0 means drafting does not pay; ``k_max``
        means the improvement was still growing there.

    Raises
    ------
    ValueError
        If ``k_max < 0``, or as :func:`walltime_improvement`.

    Notes
    -----
    .. math:: k^* = \\operatorname{argmax}_{0 \\le k \\le k_{max}}
              \\frac{1 - \\alpha^{k+1}}{(1 - \\alpha)(k c + 1)}

    found by trying every ``k`` (Leviathan et al. 2023, Figure 3).

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Section 3.5).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> optimal_k(0.8, 0.05)
    8
    >>> optimal_k(0.2, 0.5)  # a poor, slow draft: do not speculate
    0
    """
    k_max = _check_k(k_max, "k_max")
    best_k, best = 0, walltime_improvement(alpha, 0, c)
    for k in range(1, k_max + 1):
        value = walltime_improvement(alpha, k, c)
        if value > best:  # strict: ties keep the smaller k
            best_k, best = k, value
    return best_k


def speculation_pays(alpha: float, c: float) -> bool:
    """Return whether some draft length ``k >= 1`` beats decoding with the target alone.

    Parameters
    ----------
    alpha : float
        Acceptance rate, in ``[0, 1]``.
    c : float
        Cost coefficient (draft step time over target step time), ``c >= 0``.

    Returns
    -------
    bool
        ``alpha > c``.

    Notes
    -----
    For ``k = 1`` the factor of :func:`walltime_improvement` is
    :math:`(1 + \\alpha) / (1 + c)`, above 1 exactly when :math:`\\alpha > c`.  And
    when :math:`\\alpha \\le c` no ``k`` helps: :math:`\\alpha^i \\le \\alpha` gives
    :math:`E[N] \\le 1 + k \\alpha \\le 1 + k c`, so the factor is at most 1
    (Leviathan et al. 2023, Corollary 3.9).  So :func:`optimal_k` returns 0 exactly
    when this returns False.

    References
    ----------
    .. [1] Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers
       via Speculative Decoding", ICML 2023, arXiv:2211.17192 (Corollary 3.9).
    .. [2] C. Chen et al., "Accelerating Large Language Model Decoding with
       Speculative Sampling", 2023, arXiv:2302.01318.

    Examples
    --------
    >>> speculation_pays(0.6, 0.05), speculation_pays(0.3, 0.3), speculation_pays(0.2, 0.5)
    (True, False, False)
    """
    alpha = _check_alpha(alpha)
    c = float(c)
    if not c >= 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    return alpha > c
