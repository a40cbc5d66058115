"""Operational critical temperatures: the beta at which a row reaches a given p_max or entropy.

Corollary 5 (theory.md §3.2) brackets these roots by the accumulation scale:
:math:`\\kappa_K(1 - \\log 2/\\log K) \\le \\beta_{1/2} \\le 2\\kappa` and
:math:`\\kappa_K(1 - H_0/\\log K) \\le \\beta(H_0) \\le \\max(4, 4.28/H_0)\\,\\kappa`.

Both targets are monotone in beta (theory.md §3.1): with :math:`n` valid entries and a maximum of
multiplicity :math:`m_0`,

- :math:`p_{\\max}(\\beta) = 1/Z(\\beta)` is non-decreasing from :math:`1/n` at :math:`\\beta = 0` to
  :math:`1/m_0` as :math:`\\beta \\to \\infty`;
- :math:`H(\\beta)` is non-increasing from :math:`\\log n` to :math:`\\log m_0`
  (:math:`dH/d\\beta = -\\beta\\operatorname{Var}_\\beta(\\Delta)`).

So a root exists exactly when the target lies in that range (the value at :math:`\\beta = 0`
included, giving 0; the limit at infinity excluded); otherwise ``ValueError`` names the rows.

All rows are solved at once by a safeguarded Newton iteration in :math:`u = \\log\\beta` (:func:`_solve`), on
equations evaluated without cancellation (:func:`_exp_sums`), to ``BETA_RTOL`` relative to :math:`\\beta`.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Any, Callable, NamedTuple

import numpy as np

from ._validate import as_per_row, as_scores, describe_rows, row_blocks
from .softmax import _gaps_unsorted

__all__ = ["beta_at_max_weight", "beta_at_entropy"]

_MAX_ITER = 300
_NEWTON_ITER = 50
BETA_RTOL = 1e-15
"""Relative tolerance on beta at which a row's iteration stops (bracket width or Newton step in log beta)."""
_EXP_CUTOFF = 800.0  # e^{-x} underflows to 0 in float64 beyond x ~ 745


def _row_shape(gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-row valid count n, multiplicity m0 of the maximum, smallest positive gap, range."""
    valid = np.isfinite(gaps)  # (rows, n)
    n_valid = valid.sum(axis=-1).astype(np.float64)  # (rows,)
    m0 = (gaps == 0).sum(axis=-1).astype(np.float64)  # (rows,)
    positive = valid & (gaps > 0)  # (rows, n)
    smallest = np.where(positive, gaps, np.inf).min(axis=-1)  # (rows,); inf when all gaps are 0
    largest = np.where(valid, gaps, 0.0).max(axis=-1)  # (rows,)
    return n_valid, m0, smallest, largest


class _Sums(NamedTuple):
    """Per-row sums over the positive valid gaps at one beta per row, with ``x = beta * gap``; all ``(rows,)``.

    Entries with ``x <= 1`` are *near* (``j`` of them), the others *far*.
    """

    near: np.ndarray  # sum of expm1(-x) over the near entries
    far: np.ndarray  # sum of e^{-x} over the far entries
    near_count: np.ndarray  # j
    first: np.ndarray  # sum of x e^{-x} over all positive gaps
    second: np.ndarray  # sum of x^2 e^{-x} over all positive gaps
    excess_first: np.ndarray  # A = sum_near [expm1(-x) + x + x expm1(-x)] + sum_far x e^{-x}


# 1/k! for k = 2..21: expm1(-x) + x = x^2 sum_k (-x)^(k-2)/k!, full precision for 0 <= x <= 1
_EXPM1_PLUS_X = 1.0 / np.array([float(np.prod(np.arange(1, k + 1))) for k in range(2, 22)])


def _expm1_plus_x(x: np.ndarray) -> np.ndarray:
    """:math:`e^{-x} - 1 + x` for ``0 <= x <= 1`` without cancellation (Taylor series, Horner)."""
    acc = np.zeros_like(x)
    for coefficient in _EXPM1_PLUS_X[::-1]:
        acc = coefficient - x * acc
    return x * x * acc


def _log1p_minus_ratio(rho: np.ndarray) -> np.ndarray:
    """:math:`\\log(1+\\rho) - \\rho/(1+\\rho)` (``rho > -1``), by its series :math:`\\sum_{k\\ge2}(-1)^k\\frac{k-1}{k}\\rho^k` near 0."""
    direct = np.log1p(rho) - rho / (1.0 + rho)
    small = np.abs(rho) <= 0.1
    acc = np.zeros_like(rho)
    for k in range(20, 1, -1):  # |rho|^20 <= 1e-20
        acc = (k - 1.0) / k - rho * acc
    return np.where(small, rho * rho * acc, direct)


_LOG_LOW: dict[float, float] = {}


def _log_split(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log m`` of positive integers as ``hi + lo``: ``hi = np.log(m)`` and its rounding error ``lo``."""
    hi = np.log(m)
    lo = np.empty_like(hi)
    for value in np.unique(m):
        if value not in _LOG_LOW:
            with localcontext() as context:
                context.prec = 40
                exact = Decimal(int(value)).ln()
                _LOG_LOW[value] = float(exact - Decimal(float(np.log(value))))
        lo[m == value] = _LOG_LOW[value]
    return hi, lo


def _positive_sorted(gaps: np.ndarray) -> np.ndarray:
    """The positive valid gaps of each row, ascending, padded with ``+inf``: ``(rows, n)``.

    Zero gaps (the maximum's entries, counted in ``m0``) and masked entries become ``+inf``, so the
    entries within ``1/beta`` of the top (the *near* ones) are a prefix of every row.
    """
    out = np.where(np.isfinite(gaps) & (gaps > 0), gaps, np.inf)  # (rows, n)
    out.sort(axis=-1)
    return out


def _exp_sums(positive: np.ndarray, beta: np.ndarray, multiplicity: np.ndarray | None = None) -> _Sums:
    """Cancellation-free exponential sums at ``beta`` ``(rows,)`` of sorted positive gaps ``(rows, n)``.

    ``positive`` comes from :func:`_positive_sorted` (or is a column subset of it, each column standing
    for ``multiplicity[c]`` entries: the coarse stage of :func:`_solve`).  Whole rows are processed in
    blocks of bounded size.

    Accuracy.  The equations are evaluated without cancellation.  With :math:`x_i = \\beta\\Delta_i`, the
    :math:`j` positive gaps with :math:`x_i \\le 1` (*near*) enter as :math:`1 + \\operatorname{expm1}(-x_i)` and
    the ones are taken out exactly: for :math:`p_{\\max} = 1/Z_0` the function is
    :math:`\\sum_{\\rm near}\\operatorname{expm1}(-x_i) + \\sum_{\\rm far}e^{-x_i} - (Z_0 - m_0 - j)`.  For the
    entropy, with :math:`M = m_0 + j` and :math:`\\rho = Z/M - 1`,
    :math:`H - \\log M = [\\log(1+\\rho) - \\rho/(1+\\rho)] + (F + A)/Z`, where :math:`F` is the far weight and
    :math:`A = \\sum_{\\rm near}[e^{-x} - 1 + x + x(e^{-x} - 1)] + \\sum_{\\rm far}x e^{-x}`; every bracket is a
    second-order quantity computed by its own series, and :math:`\\log M` carries its rounding error (from
    Python's ``decimal``).  A near-tie then keeps full relative precision: the row ``[1, 1 - 1e-15, 0, -1]``
    at ``p = 1/2`` solves to :math:`\\beta \\approx 31.10`, the 40-digit answer, and both roots agree with
    such references to about 1e-15 also for entropy targets on a plateau :math:`\\log M` and for gaps from
    1e-300 to 1e300 (``tests/test_roots.py``).  Terms are computed from :math:`x_i` (never
    :math:`\\Delta_i^2` or :math:`\\beta^2`), so such gaps raise no floating-point warnings.
    """
    rows, n = positive.shape
    out = [np.zeros(rows) for _ in range(6)]
    counts = None if multiplicity is None else np.concatenate([[0.0], np.cumsum(multiplicity)])  # (n+1,)
    for rs in row_blocks(rows, n, per_cell=4):
        gaps, b = positive[rs], beta[rs]  # (r, n), (r,)
        with np.errstate(over="ignore"):  # beta * gap beyond 1e308 is inf; e^{-800} is already 0
            x = np.minimum(b[:, None] * gaps, _EXP_CUTOFF)  # (r, n); padding gives x = 800, weight 0
        weight = np.exp(-x)  # (r, n)
        if multiplicity is not None:
            weight *= multiplicity
        j = np.array([np.searchsorted(row, 1.0 / bb, side="right") for row, bb in zip(gaps, b)])  # (r,)
        width = int(j.max())
        if width:
            xs = x[:, :width]  # (r, width): the near entries and a few far ones
            near = np.arange(width)[None, :] < j[:, None]  # (r, width)
            near_weight = np.where(near, weight[:, :width], 0.0)  # (r, width)
            em = np.where(near, np.expm1(-xs), 0.0)  # (r, width)
            excess = np.where(near, _expm1_plus_x(np.minimum(xs, 1.0)) + xs * em, 0.0)  # (r, width)
            if multiplicity is not None:
                em *= multiplicity[:width]
                excess *= multiplicity[:width]
            out[0][rs] = em.sum(axis=-1)
            out[5][rs] = excess.sum(axis=-1)
            out[3][rs] = (xs * near_weight).sum(axis=-1)
            out[4][rs] = (xs * xs * near_weight).sum(axis=-1)
            weight[:, :width] -= near_weight  # far weights only from here on
        out[2][rs] = j if counts is None else counts[j]
        xw = x * weight  # (r, n) far entries
        out[1][rs] += weight.sum(axis=-1)
        far_first = xw.sum(axis=-1)
        out[5][rs] += far_first
        out[3][rs] += far_first
        out[4][rs] += (x * xw).sum(axis=-1)
    return _Sums(*out)


ValueAndSlope = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _solve_decreasing(lo: np.ndarray, hi: np.ndarray, value_and_slope: ValueAndSlope,
                      start: np.ndarray | None = None, rtol: float = BETA_RTOL) -> np.ndarray:
    """Solve ``F(beta) = 0`` per row for a non-increasing ``F``, bracketed by ``[lo, hi]`` (betas > 0).

    ``value_and_slope(rows_index, beta)`` returns ``F`` and ``dF/du`` with ``u = log beta`` for the
    selected rows.  The iteration starts at ``start`` (betas, clipped into the bracket) or at the
    bracket's midpoint in ``u``.  A row stops when its bracket in ``u`` is narrower than the tolerance
    (``rtol``, or 4 ulp of ``u`` when that is coarser), when a Newton step moves ``u`` by less than it,
    or when ``F`` is exactly 0.  Returns beta per row.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        unrepresentable = ~(np.isfinite(lo) & np.isfinite(hi) & (lo > 0))
    if unrepresentable.any():
        raise ValueError(f"the root lies beyond the float64 range (gaps too small or too large) for "
                         f"{np.count_nonzero(unrepresentable)} rows")
    u_lo, u_hi = np.log(lo), np.log(hi)  # (rows,)
    u = 0.5 * (u_lo + u_hi) if start is None else np.clip(np.log(start), u_lo, u_hi)
    beta = np.full(len(u), np.nan)  # the answer of each row once it is done
    done = np.zeros(len(u), dtype=bool)

    def tolerance(*points: np.ndarray) -> np.ndarray:
        """Relative tolerance on beta = absolute tolerance on u, or the resolution of u if coarser."""
        return np.maximum(rtol, 4.0 * np.finfo(np.float64).eps * np.max(np.abs(points), axis=0))

    for iteration in range(_MAX_ITER):
        narrow = ~done & ((u_hi - u_lo) <= tolerance(u_lo, u_hi))
        beta[narrow] = np.exp(u[narrow])
        done |= narrow
        active = np.flatnonzero(~done)
        if active.size == 0:
            break
        at = np.exp(u[active])
        value, slope = value_and_slope(active, at)
        exact = value == 0
        above = value > 0  # F decreasing in u: the root lies at larger u
        u_lo[active[above]] = u[active[above]]
        u_hi[active[~above & ~exact]] = u[active[~above & ~exact]]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = -value / slope
        newton = u[active] + step
        inside = np.isfinite(newton) & (newton > u_lo[active]) & (newton < u_hi[active])
        if iteration >= _NEWTON_ITER:
            inside[:] = False
        # A Newton step below the tolerance means the root is within it.  It is applied to beta itself,
        # beta e^step, which keeps full precision where u = log beta cannot resolve it (|u| > 4.5).
        settled = exact | (np.isfinite(step) & (np.abs(step) <= tolerance(u[active])))
        beta[active[settled]] = at[settled] * np.exp(np.where(exact, 0.0, step)[settled])
        u[active] = np.where(inside, newton, 0.5 * (u_lo[active] + u_hi[active]))
        done[active[settled]] = True
    else:
        raise RuntimeError("root finding did not converge in "
                           f"{_MAX_ITER} iterations for {np.count_nonzero(~done)} rows")
    return beta


_COARSE_TOP = 1024  # columns kept exactly in the coarse stage
_COARSE_BINS = 1024  # groups of the remaining columns


def _coarse_columns(n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Columns of a sorted row and their multiplicities for the coarse stage, or ``None`` for short rows.

    The first ``_COARSE_TOP`` sorted positive gaps are kept; the rest are cut into ``_COARSE_BINS``
    groups of consecutive sorted gaps, each represented by its middle gap counted as often as the
    group is long (a quantile Riemann sum of the tail).
    """
    if n <= _COARSE_TOP + 2 * _COARSE_BINS:
        return None
    edges = np.linspace(_COARSE_TOP, n, _COARSE_BINS + 1).astype(np.int64)  # (bins+1,)
    edges = np.unique(edges)
    middles = (edges[:-1] + edges[1:]) // 2  # (bins,)
    columns = np.concatenate([np.arange(_COARSE_TOP), middles])
    multiplicity = np.concatenate([np.ones(_COARSE_TOP), np.diff(edges).astype(np.float64)])
    return columns, multiplicity


def _solve(lo: np.ndarray, hi: np.ndarray, positive: np.ndarray,
           make: Callable[[np.ndarray, np.ndarray | None], ValueAndSlope]) -> np.ndarray:
    """Two-stage solve: a coarse stage on a compressed copy of long rows, then the exact equation.

    ``make(positive, multiplicity)`` builds the row function for sorted positive gaps (a column subset
    with multiplicities in the coarse stage).  The coarse root (to 1e-8) only chooses the starting point;
    the answer is the root of the exact equation, to ``BETA_RTOL``.

    Method: all rows at once, safeguarded Newton iteration in :math:`u = \\log\\beta`, stopped by a
    tolerance on :math:`\\beta` itself: a row is done when its bracket, or its last Newton step, is below
    ``BETA_RTOL`` relative to :math:`\\beta` (or 4 ulp of :math:`u` where that is coarser); a small residual in
    :math:`p` or :math:`H` alone does not stop it, since near a tie :math:`p_{\\max}` can be flat to 1e-14
    over a factor of 5 in :math:`\\beta`.  The last Newton step is applied to :math:`\\beta` itself
    (:math:`\\beta e^{\\delta u}`), so the answer keeps full precision where :math:`u` cannot resolve it.
    Each row starts from an exact bracket built from its smallest positive gap :math:`\\delta` and its
    range :math:`R`:
    :math:`m_0 + (n-m_0)e^{-\\beta R} \\le Z(\\beta) \\le m_0 + (n-m_0)e^{-\\beta\\delta}` and
    :math:`\\log m_0 \\le H(\\beta) \\le \\log m_0 + (1 + 2/e)(n-m_0)e^{-\\beta\\delta/2}`.
    A Newton step that leaves the current bracket is replaced by bisection (in log beta), and after
    50 iterations only bisection is used, so every row converges.  Rows longer than 3072 are first solved
    to 1e-8 on a compressed copy (their 1024 smallest positive gaps, and 1024 quantile groups of the rest
    counted with their sizes); that root is only the starting point of the exact iteration.
    """
    coarse = _coarse_columns(positive.shape[-1])
    start = None
    if coarse is not None:
        columns, multiplicity = coarse
        start = _solve_decreasing(lo, hi, make(positive[:, columns], multiplicity), rtol=1e-8)
    return _solve_decreasing(lo, hi, make(positive, None), start=start)


def beta_at_max_weight(scores: Any, p: Any = 0.5) -> Any:
    """Inverse temperature :math:`\\beta_p` at which the maximum softmax weight equals ``p``, per row.

    Solves :math:`p_{\\max}(\\beta) = 1/Z(\\beta) = p`; :math:`\\beta_{1/2}` is the operational critical
    temperature of Corollary 5 (theory.md §3.2), bracketed by
    :math:`\\kappa_K(1-\\log 2/\\log K) \\le \\beta_{1/2} \\le 2\\kappa`.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    p:
        target in ``(0, 1]``, a scalar or one value per row (broadcastable to the batch shape).

    Returns
    -------
    ``(...)`` float64 betas, solved to ``BETA_RTOL`` relative in beta (:func:`_solve`).  Returns 0
    when ``p`` equals ``1/n_valid`` (to within ``1e-12`` relative).  Raises ``ValueError`` naming the
    rows where no finite ``beta >= 0`` solves the equation: ``p < 1/n_valid`` or
    ``p >= 1/multiplicity of the maximum``.

    Tests: ``tests/test_roots.py::test_max_weight_root_matches_brentq`` and
    ``test_roots_agree_with_mpmath_on_near_ties_and_extreme_gaps`` (a stop on the residual in ``p``
    alone gives 151.04 instead of 31.10 on ``[1, 1 - 1e-15, 0, -1]``).
    """
    conv = as_scores(scores)
    target_p = as_per_row(p, conv.batch_shape, "p", lambda a: np.isfinite(a) & (a > 0) & (a <= 1),
                          "in (0, 1]")
    gaps = _gaps_unsorted(conv.values)  # (rows, n)
    n_valid, m0, smallest, largest = _row_shape(gaps)
    z_target = 1.0 / target_p  # (rows,)
    at_zero = np.abs(z_target - n_valid) <= 1e-12 * n_valid
    solvable = at_zero | ((z_target < n_valid) & (z_target > m0))
    if not solvable.all():
        raise ValueError(
            f"no beta >= 0 gives p_max = p for rows {describe_rows(~solvable, conv.batch_shape)}: "
            "p_max rises from 1/n_valid at beta = 0 towards 1/(multiplicity of the maximum) as beta -> inf, "
            "so p must satisfy 1/n_valid <= p < 1/multiplicity")
    beta = np.zeros(len(z_target))
    work = np.flatnonzero(~at_zero)
    if work.size:
        excess = z_target[work] - m0[work]  # (w,) the target of the sum over positive gaps
        with np.errstate(divide="ignore", over="ignore"):
            spread = np.log((n_valid[work] - m0[work]) / excess)  # (w,) > 0
            lo = spread / largest[work]
            hi = spread / smallest[work]
        def make(positive: np.ndarray, multiplicity: np.ndarray | None) -> ValueAndSlope:
            def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                sums = _exp_sums(positive[index], b, multiplicity)
                # Z - 1/p with the near terms' ones taken out exactly: sum(expm1) + sum(far) - (excess - j)
                value = sums.near + sums.far - (excess[index] - sums.near_count)
                return value, -sums.first  # dZ/d log beta = -sum(x e^{-x})
            return value_and_slope

        beta[work] = _solve(lo, hi, _positive_sorted(gaps[work]), make)
    return conv.restore(beta)


def beta_at_entropy(scores: Any, h: Any) -> Any:
    """Inverse temperature :math:`\\beta(H_0)` at which the softmax entropy equals ``h`` nats, per row.

    Solves :math:`H(\\beta) = H_0`: Su-style "entropy invariance" (theory.md §2), bracketed by
    Corollary 5 (theory.md §3.2): :math:`\\kappa_K(1-H_0/\\log K) \\le \\beta(H_0) \\le
    \\max(4, 4.28/H_0)\\,\\kappa`.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    h:
        target entropy in nats, finite and ``>= 0``; a scalar or one value per row.

    Returns
    -------
    ``(...)`` float64 betas, solved to ``BETA_RTOL`` relative in beta (:func:`_solve`).  Returns 0
    when ``h`` equals ``log n_valid`` (to within ``1e-12``).  Raises ``ValueError`` naming the rows
    where no finite ``beta >= 0`` solves the equation: ``h > log n_valid`` or
    ``h <= log(multiplicity of the maximum)``.

    Tests: ``tests/test_roots.py::test_entropy_root_matches_brentq`` and
    ``test_roots_agree_with_mpmath_on_near_ties_and_extreme_gaps`` (targets on the plateau log 2 of a
    near-tied pair, where log Z + beta <Delta> evaluated directly in float64 equals log 2 exactly for
    every beta from 55 to 1e7, so a solver on it can return any of them; the answer is 1.36e7).
    """
    conv = as_scores(scores)
    target = as_per_row(h, conv.batch_shape, "h", lambda a: np.isfinite(a) & (a >= 0), "finite and >= 0")
    gaps = _gaps_unsorted(conv.values)  # (rows, n)
    n_valid, m0, smallest, largest = _row_shape(gaps)
    log_n, log_m0 = np.log(n_valid), np.log(m0)
    at_zero = np.abs(target - log_n) <= 1e-12 * np.maximum(1.0, log_n)
    solvable = at_zero | ((target < log_n) & (target > log_m0))
    if not solvable.all():
        raise ValueError(
            f"no beta >= 0 gives entropy H = h for rows {describe_rows(~solvable, conv.batch_shape)}: "
            "H falls from log(n_valid) at beta = 0 towards log(multiplicity of the maximum) as beta -> inf, "
            "so h must satisfy log(multiplicity) < h <= log(n_valid)")
    beta = np.zeros(len(target))
    work = np.flatnonzero(~at_zero)
    if work.size:
        excess = n_valid[work] - m0[work]  # (w,) > 0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            lo = np.log(excess / (np.exp(target[work]) - m0[work])) / largest[work]
            hi = 2.0 / smallest[work] * np.log((1.0 + 2.0 / np.e) * excess / (target[work] - log_m0[work]))
        hi = np.maximum(hi, lo)
        wtarget = target[work]
        wm0 = m0[work]

        def make(positive: np.ndarray, multiplicity: np.ndarray | None) -> ValueAndSlope:
            def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                sums = _exp_sums(positive[index], b, multiplicity)
                plateau = wm0[index] + sums.near_count  # M: the maximum's entries and the near ones
                rho = (sums.near + sums.far) / plateau  # Z/M - 1 > -0.64
                z = plateau * (1.0 + rho)
                # H - log M = [log1p(rho) - rho/(1 + rho)] + (far + A)/Z, every term free of cancellation
                log_hi, log_lo = _log_split(plateau)
                value = (((log_hi - wtarget[index]) + log_lo) + _log1p_minus_ratio(rho)
                         + (sums.far + sums.excess_first) / z)
                mean_x = sums.first / z  # beta <Delta>
                variance = np.maximum(sums.second / z - mean_x**2, 0.0)  # Var(beta Delta)
                return value, -variance  # dH/d log beta = -beta^2 Var(Delta)
            return value_and_slope

        beta[work] = _solve(lo, hi, _positive_sorted(gaps[work]), make)
    return conv.restore(beta)
