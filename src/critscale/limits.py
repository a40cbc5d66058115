"""Limit laws of the rescaled gap process (theory.md §4.2, Theorems 6 and 7).

With :math:`\\Gamma_1 < \\Gamma_2 < \\dots` the arrival times of a rate-one Poisson process (cumulative
sums of i.i.d. Exp(1)), the rescaled gaps :math:`\\bar\\kappa_n\\Delta_{(k)}` of a row converge to

- Gumbel class (Theorem 6): :math:`\\xi_k = \\log(\\Gamma_k/\\Gamma_1)`;
- Weibull class with endpoint exponent :math:`\\alpha` (Theorem 7):
  :math:`\\xi_k = \\alpha(\\Gamma_k^{1/\\alpha} - \\Gamma_1^{1/\\alpha})`.

At :math:`\\beta = c\\bar\\kappa_n` the softmax weights then converge to :math:`e^{-c\\xi_k}/\\sum_j e^{-c\\xi_j}`.
In the Gumbel class and for :math:`c > 1` this is Poisson–Dirichlet PD(1/c, 0), whose moments are
closed-form (:func:`pd_collision`, :func:`pd_entropy`); elsewhere :func:`poisson_limit_stats`
estimates them by Monte-Carlo over truncated point processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np
from scipy import special

from ._validate import as_integer, as_K, as_number, as_real, as_scores, row_blocks, scalar_or_array
from .softmax import _gap_sums, _stats_from_sums

__all__ = [
    "pd_collision",
    "pd_entropy",
    "poisson_arrivals",
    "gumbel_gaps",
    "weibull_gaps",
    "limit_gaps",
    "kappa_limit_samples",
    "LimitStats",
    "poisson_limit_stats",
    "coupled_limit_scores",
    "expansion_parameter",
]

Domain = Union[str, float]


def _as_c(c: Any) -> np.ndarray:
    return as_real(c, "c", minimum=0, strict=True, allow_inf=True)


def pd_collision(c: Any) -> Any:
    """Limit :math:`\\mathbb E\\sum_i p_i^2 = 1 - 1/c` of PD(1/c, 0) weights (Theorem 6(b), theory.md §4.2).

    For :math:`c \\le 1` the Gumbel-class weights spread over infinitely many points and the limit
    is 0 (this function returns 0 there).  ``c`` may be an array; ``inf`` gives 1.
    """
    arr = _as_c(c)
    return scalar_or_array(np.where(arr > 1, 1.0 - 1.0 / arr, 0.0))


def pd_entropy(c: Any) -> Any:
    """Limit :math:`\\mathbb E H = \\psi(1) - \\psi(1 - 1/c)` of PD(1/c, 0) weights (Theorem 6(b), theory.md §4.2).

    For :math:`c \\le 1` the entropy diverges and this function returns ``inf``; ``c = inf`` gives 0.
    """
    arr = _as_c(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = special.digamma(1.0) - special.digamma(1.0 - 1.0 / np.where(arr > 1, arr, 2.0))
    return scalar_or_array(np.where(arr > 1, value, np.inf))


def _check_size(k: Any, size: Any) -> tuple[int, int]:
    return as_integer(k, "k", 1), as_integer(size, "size", 0)


def poisson_arrivals(k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """First ``k`` arrival times :math:`\\Gamma_1 < \\dots < \\Gamma_k` of a rate-one Poisson process, ``(size, k)``."""
    k, size = _check_size(k, size)
    return np.cumsum(rng.standard_exponential((size, k)), axis=-1)  # (size, k)


def gumbel_gaps(k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Gumbel-class limit of the rescaled sorted gaps: :math:`\\xi_j = \\log(\\Gamma_j/\\Gamma_1)`, ``(size, k)``.

    Theorem 6 (theory.md §4.2).  Column 0 is 0 (the maximum).
    """
    gamma = poisson_arrivals(k, size, rng)  # (size, k)
    return np.log(gamma / gamma[:, :1])


def weibull_gaps(alpha: float, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Weibull-class limit of the rescaled sorted gaps, ``(size, k)``:
    :math:`\\xi_j = \\alpha(\\Gamma_j^{1/\\alpha} - \\Gamma_1^{1/\\alpha})` (Theorem 7, theory.md §4.2).
    """
    alpha = as_number(alpha, "alpha", minimum=0, strict=True)
    root = poisson_arrivals(k, size, rng) ** (1.0 / alpha)  # (size, k)
    return alpha * (root - root[:, :1])


def limit_gaps(domain: Domain, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Limit gaps for ``domain = "gumbel"`` or a Weibull exponent ``alpha`` (a positive number)."""
    if isinstance(domain, str):
        if domain != "gumbel":
            raise ValueError(f"domain must be 'gumbel' or a Weibull exponent alpha > 0, got {domain!r}")
        return gumbel_gaps(k, size, rng)
    return weibull_gaps(domain, k, size, rng)


def kappa_limit_samples(size: int, k_max: int, rng: np.random.Generator, K: int = 2,
                        domain: Domain = "gumbel") -> np.ndarray:
    """Samples of the limit law of :math:`\\kappa_{n,K}/\\bar\\kappa_n`: :math:`\\sup_{k \\ge K} \\log k/\\xi_k`.

    Theorem 6(a) (Gumbel) and Theorem 7 (Weibull, ``domain = alpha``), theory.md §4.2.  The point
    process is truncated at ``k_max`` points; in the limit :math:`N(\\xi_k) = k` (no ties), so the
    supremum runs over :math:`k = K, \\dots, k_{\\max}`.  Returns ``(size,)``.  Memory is bounded by
    generating the samples in blocks (the block layout does not change the draws: each block takes
    the next rows of the same stream).
    """
    K = as_K(K)
    k_max, size = _check_size(k_max, size)
    if k_max < K:
        raise ValueError(f"k_max must be >= K, got k_max={k_max}, K={K}")
    out = np.empty(size)
    log_k = np.log(np.arange(1, k_max + 1, dtype=np.float64))  # (k_max,)
    for rs in row_blocks(size, k_max, per_cell=3):
        gaps = limit_gaps(domain, k_max, rs.stop - rs.start, rng)  # (r, k_max)
        with np.errstate(divide="ignore"):
            ratio = log_k[K - 1:] / gaps[:, K - 1:]  # (r, k_max - K + 1)
        out[rs] = ratio.max(axis=-1)
    return out


@dataclass(frozen=True)
class LimitStats:
    """Monte-Carlo moments of the limit weights :math:`p_k \\propto e^{-c\\xi_k}`, each ``(len(c),)``.

    ``*_sem`` are standard errors (sample standard deviation with ``ddof=1`` over ``sqrt(size)``).
    """

    c: np.ndarray
    collision: np.ndarray
    collision_sem: np.ndarray
    entropy: np.ndarray
    entropy_sem: np.ndarray
    max_weight: np.ndarray
    max_weight_sem: np.ndarray
    size: int
    k_max: int
    domain: Domain


def poisson_limit_stats(c: Any, domain: Domain = "gumbel", k_max: int = 2000, size: int = 400,
                        rng: np.random.Generator | None = None, seed: int = 7) -> LimitStats:
    """Monte-Carlo :math:`\\mathbb E\\sum p^2`, :math:`\\mathbb E H` and :math:`\\mathbb E p_{\\max}` of the limit weights.

    The limit of the softmax at :math:`\\beta = c\\bar\\kappa_n` (Theorems 6 and 7, theory.md §4.2):
    weights :math:`p_k \\propto e^{-c\\xi_k}` over ``k_max`` points of the limit gap process of
    ``domain`` (``"gumbel"`` or a Weibull exponent ``alpha``), averaged over ``size`` draws.

    Truncation: the neglected tail weight is :math:`\\sum_{k > k_{\\max}} e^{-c\\xi_k}`.  For Weibull
    domains it decays like :math:`e^{-c\\alpha k^{1/\\alpha}}`, negligible only once :math:`c\\alpha k_{\\max}^{1/\\alpha}`
    is large (for ``alpha = 4`` and ``k_max = 5000`` it matters below ``c`` of about 0.4, so check
    the dropped weight at small ``c`` and large ``alpha``); in the Gumbel domain
    it is :math:`\\approx \\Gamma_1^c k_{\\max}^{1-c}/(c-1)`, small only for ``c`` well above 1 (use the
    closed forms :func:`pd_collision` / :func:`pd_entropy` there).  ``rng`` defaults to
    ``numpy.random.default_rng(seed)``.
    """
    cs = np.atleast_1d(_as_c(c))
    if cs.ndim != 1 or not np.isfinite(cs).all():
        raise ValueError("c must be a finite scalar or 1-D array of values > 0")
    k_max, size = _check_size(k_max, size)
    if size < 2:
        raise ValueError(f"size must be >= 2 for a standard error, got {size}")
    rng = np.random.default_rng(seed) if rng is None else rng
    collision = np.empty((size, len(cs)))  # (size, m)
    entropy = np.empty((size, len(cs)))  # (size, m)
    max_weight = np.empty((size, len(cs)))  # (size, m)
    for rs in row_blocks(size, k_max, per_cell=len(cs) + 2):
        gaps = limit_gaps(domain, k_max, rs.stop - rs.start, rng)  # (r, k_max)
        stats = _stats_from_sums(_gap_sums(gaps, cs), cs)
        collision[rs] = stats.collision
        entropy[rs] = stats.entropy
        max_weight[rs] = stats.max_weight

    def sem(values: np.ndarray) -> np.ndarray:
        return values.std(axis=0, ddof=1) / np.sqrt(size)

    return LimitStats(c=cs, collision=collision.mean(axis=0), collision_sem=sem(collision),
                      entropy=entropy.mean(axis=0), entropy_sem=sem(entropy),
                      max_weight=max_weight.mean(axis=0), max_weight_sem=sem(max_weight),
                      size=size, k_max=k_max, domain=domain)


def coupled_limit_scores(family: Any, scores: Any, domain: Domain | None = None) -> np.ndarray:
    """The first ``n`` points of the limit process, built from the row itself (Theorems 6 and 7, item 1).

    For an i.i.d. row with survival function :math:`\\bar F`, the values :math:`U_i = \\bar F(s_i)` are
    i.i.d. uniform, and in decreasing order of the scores they are :math:`\\Gamma_k/\\Gamma_{n+1}` for
    the arrival times :math:`\\Gamma_k` of a rate-one Poisson process (the uniform-spacings representation).
    So :math:`\\Gamma'_i = nU_i` are the first ``n`` arrival times up to the common factor
    :math:`n/\\Gamma_{n+1} = 1 + O(n^{-1/2})`, and this function returns scores whose gaps are the limit gaps
    of the theorems evaluated at those arrivals:

    - ``domain = "gumbel"``: :math:`-\\log\\Gamma'_i`, whose gaps :math:`\\log(\\Gamma_k/\\Gamma_1) = \\xi_k`
      are exactly those of :func:`gumbel_gaps` (the factor cancels);
    - ``domain = alpha > 0`` (Weibull): :math:`-\\alpha\\Gamma_i'^{1/\\alpha}`, whose gaps are the
      :func:`weibull_gaps` :math:`\\eta_k` of the arrivals :math:`\\Gamma'_k`.

    The softmax of these scores at :math:`\\beta = c` is the limit softmax of the theorems restricted to
    ``n`` points, drawn from the same randomness as the row's softmax at :math:`\\beta = c\\bar\\kappa_n`:
    the difference of the two is the row's finite-size correction, without the sampling noise of the limit
    law.  For exponential scores (``ptail1``, Gumbel) and uniform scores (``unif``, ``sphere3``, Weibull
    with :math:`\\alpha = 1`) the rescaled row *is* its limit, and the difference vanishes identically.

    ``family`` is an i.i.d. :class:`~critscale.families.Family` (or its name); ``scores`` ``(..., n)``
    unmasked rows of it; ``domain`` defaults to the family's own class (``"gumbel"`` or its
    ``weibull_alpha``) and may name another, to compare a row with a neighbouring limit.  Returns float64
    ``(..., n)``.

    Test: ``tests/test_limits_rules.py::test_coupled_limit_scores`` (exact identities for exponential and
    uniform rows; for Gaussian and sphere rows :math:`\\Gamma_1/\\Gamma_2` recovered from the coupled
    gaps is uniform, which a transform by :math:`F` instead of :math:`\\bar F` or without the logarithm fails).
    """
    from .families import get

    fam = get(family)
    if not fam.iid:
        raise ValueError(f"{fam.name} is not an i.i.d. family: its rows have no coupled limit process")
    if domain is None:
        domain = "gumbel" if fam.domain == "gumbel" else fam.weibull_alpha
    if domain is None or (isinstance(domain, str) and domain != "gumbel"):
        raise ValueError(f"domain must be 'gumbel' or a Weibull exponent alpha > 0, got {domain!r} "
                         f"for family {fam.name}")
    conv = as_scores(scores)
    values = conv.values  # (rows, n)
    if not np.isfinite(values).all():
        raise ValueError("coupled_limit_scores needs unmasked rows (no -inf entries)")
    arrivals = values.shape[-1] * np.asarray(fam.sf(values), dtype=np.float64)  # (rows, n): n U_i
    if not (arrivals > 0).all():
        raise ValueError(f"{fam.name}: a score lies at or beyond the upper endpoint (survival 0)")
    if isinstance(domain, str):
        out = -np.log(arrivals)
    else:
        alpha = as_number(domain, "domain", minimum=0, strict=True)
        out = -alpha * arrivals ** (1.0 / alpha)
    return conv.restore(out, (values.shape[-1],))


def window_summaries(family: Any, n: int, c_values: Any, c_check: Any = None):
    """The Monte-Carlo statistic of the window chapters (Theorems 6 and 7): summaries at :math:`\\beta = c\\bar\\kappa_n`.

    Returns a function of a chunk of rows ``scores`` ``(rows, n)`` of ``family``, for
    :func:`critscale.montecarlo.run`, giving per row

    - ``collision`` and ``entropy``: :math:`\\sum_ip_i^2` and :math:`H` at :math:`\\beta = c\\bar\\kappa_n` for each
      ``c`` of ``c_values``, each ``(rows, len(c_values))``;
    - with ``c_check`` (a subset of ``c_values``), the finite-size corrections :math:`D_n`,
      ``d_collision`` and ``d_entropy`` ``(rows, len(c_check))``: the row's summary at
      :math:`c\\bar\\kappa_n` minus that of its coupled limit points (:func:`coupled_limit_scores`) at
      :math:`\\beta = c`, which vanish identically for a family that is its own limit.

    Test: ``tests/test_limits_rules.py::test_window_summaries`` (the summaries equal ``softmax_stats`` at
    :math:`c\\bar\\kappa_n`; :math:`D_n = 0` to rounding for uniform rows, not for Gaussian rows).
    """
    from .families import get
    from .softmax import softmax_stats

    fam = get(family)
    c_values = np.asarray(c_values, dtype=np.float64)  # (m,)
    kappa_bar = fam.kappa_bar(as_integer(n, "n", minimum=2))
    if c_check is not None:
        c_check = np.asarray(c_check, dtype=np.float64)  # (k,)
        at = np.searchsorted(c_values, c_check)  # (k,) positions of c_check in c_values
        if not np.array_equal(c_values[np.minimum(at, len(c_values) - 1)], c_check):
            raise ValueError("c_check must be a subset of c_values (sorted)")

    def statistic(scores: np.ndarray) -> dict[str, np.ndarray]:  # scores: (rows, n)
        row = softmax_stats(scores, c_values * kappa_bar)  # each (rows, m)
        out = {"collision": row.collision, "entropy": row.entropy}
        if c_check is not None:
            limit = softmax_stats(coupled_limit_scores(fam, scores), c_check)  # each (rows, k)
            out["d_collision"] = row.collision[:, at] - limit.collision  # (rows, k)
            out["d_entropy"] = row.entropy[:, at] - limit.entropy  # (rows, k)
        return out

    return statistic


def expansion_parameter(family: Any, n: Any) -> Any:
    """The small parameter of the Gumbel window's finite-size correction: :math:`\\varepsilon_n = d\\log\\bar\\kappa_n/d\\log n`.

    With :math:`\\psi = -\\log\\bar F` and :math:`h = \\psi'` the hazard, the row's rescaled heights
    :math:`\\bar\\kappa_n(s - u_n)` and the heights :math:`\\psi(s) - \\log n` of its coupled limit points
    (:func:`coupled_limit_scores`) differ at second order: :math:`\\psi(u_n + y/\\bar\\kappa_n) - \\log n =
    y + \\varepsilon_n y^2/2 + \\dots` with :math:`\\varepsilon_n = \\psi''(u_n)/\\psi'(u_n)^2 = -(1/h)'(u_n)`,
    the derivative of the auxiliary function that the von Mises condition of Theorem 6 sends to 0.  Since
    :math:`\\bar\\kappa_n = h(u_n)` and :math:`du_n/d\\log n = 1/\\bar\\kappa_n`, it equals the local exponent
    :math:`d\\log\\bar\\kappa_n/d\\log n`: :math:`(1 - 1/p)/\\log n` for ``ptail<p>`` (0 for exponential
    scores), :math:`1/\\log n` for ``logexp``, :math:`2/\\log n` for ``edge`` and
    :math:`1/(2\\log n) + O(\\log\\log n/\\log^2 n)` for Gaussian scores.  Computed by a central difference of
    :meth:`~critscale.families.Family.kappa_bar` in :math:`\\log n` (step :math:`10^{-4}`, relative error
    about :math:`10^{-8}`).  ``n`` may be an array.

    Test: ``tests/test_limits_rules.py::test_expansion_parameter`` (the closed forms above; a forward
    difference or a slope in :math:`n` instead of :math:`\\log n` fails them).
    """
    from .families import get

    fam = get(family)
    step = 1e-4
    n_arr = as_real(n, "n", minimum=fam.min_n * np.exp(step))
    upper = np.log(np.asarray(fam.kappa_bar(n_arr * np.exp(step)), dtype=np.float64))
    lower = np.log(np.asarray(fam.kappa_bar(n_arr * np.exp(-step)), dtype=np.float64))
    return scalar_or_array((upper - lower) / (2 * step))
