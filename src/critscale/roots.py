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

Method: all rows at once, safeguarded Newton iteration in :math:`u = \\log\\beta`, stopped by a
tolerance on :math:`\\beta` itself: a row is done when its bracket, or its last Newton step, is below
``BETA_RTOL`` relative to :math:`\\beta` (a small residual in :math:`p` or :math:`H` alone does not stop
it, since near a tie :math:`p_{\\max}` can be flat to 1e-14 over a factor of 5 in :math:`\\beta`).
Each row starts from an exact bracket built from its smallest positive gap :math:`\\delta` and its
range :math:`R`:
:math:`m_0 + (n-m_0)e^{-\\beta R} \\le Z(\\beta) \\le m_0 + (n-m_0)e^{-\\beta\\delta}` and
:math:`\\log m_0 \\le H(\\beta) \\le \\log m_0 + (1 + 2/e)(n-m_0)e^{-\\beta\\delta/2}`.
A Newton step that leaves the current bracket is replaced by bisection (in log beta), and after
50 iterations only bisection is used, so every row converges.

Accuracy.  The equations are evaluated without cancellation: with :math:`x_i = \\beta\\Delta_i`, the
:math:`j` positive gaps with :math:`x_i \\le 1` enter as :math:`1 + \\operatorname{expm1}(-x_i)`, and the
target is compared with the sum after the :math:`j` ones are taken out exactly:
:math:`Z - Z_0 = \\sum_{x_i \\le 1}\\operatorname{expm1}(-x_i) + \\sum_{x_i > 1}e^{-x_i} - (Z_0 - m_0 - j)`,
and :math:`H = \\log M + \\operatorname{log1p}((Z - M)/M) + \\langle x\\rangle` with :math:`M = m_0 + j`.
A near-tie then keeps full relative precision (the row ``[1, 1 - 1e-15, 0, -1]`` at ``p = 1/2``
solves to :math:`\\beta \\approx 31.10`, the high-precision answer), and the root of ``beta_at_max_weight``
is accurate to a few units of ``BETA_RTOL`` for every row.  For ``beta_at_entropy`` the accuracy is
limited by the rounding of :math:`\\log M` and of the target, about
:math:`10^{-16}\\max(1, H_0)/|dH/d\\log\\beta|` relative, which is larger only for targets within
about 1e-12 of a plateau :math:`\\log M`.  Terms are computed from :math:`x_i` (never
:math:`\\Delta_i^2` or :math:`\\beta^2`), so gaps from 1e-300 to 1e300 raise no floating-point warnings.
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


def _exp_sums(positive: np.ndarray, beta: np.ndarray) -> _Sums:
    """Cancellation-free exponential sums at ``beta`` ``(rows,)`` of sorted positive gaps ``(rows, n)``.

    ``positive`` comes from :func:`_positive_sorted`.  Whole rows are processed in blocks of bounded size.
    """
    rows, n = positive.shape
    out = [np.zeros(rows) for _ in range(6)]
    for rs in row_blocks(rows, n, per_cell=4):
        gaps, b = positive[rs], beta[rs]  # (r, n), (r,)
        with np.errstate(over="ignore"):  # beta * gap beyond 1e308 is inf; e^{-800} is already 0
            x = np.minimum(b[:, None] * gaps, _EXP_CUTOFF)  # (r, n); padding gives x = 800, weight 0
        weight = np.exp(-x)  # (r, n)
        j = np.array([np.searchsorted(row, 1.0 / bb, side="right") for row, bb in zip(gaps, b)])  # (r,)
        width = int(j.max())
        if width:
            xs = x[:, :width]  # (r, width): the near entries and a few far ones
            near = np.arange(width)[None, :] < j[:, None]  # (r, width)
            em = np.where(near, np.expm1(-xs), 0.0)  # (r, width)
            near_weight = np.where(near, weight[:, :width], 0.0)  # (r, width)
            out[0][rs] = em.sum(axis=-1)
            out[5][rs] = np.where(near, _expm1_plus_x(np.minimum(xs, 1.0)) + xs * em, 0.0).sum(axis=-1)
            out[3][rs] = (xs * near_weight).sum(axis=-1)
            out[4][rs] = (xs * xs * near_weight).sum(axis=-1)
            weight[:, :width] -= near_weight  # far weights only from here on
        out[2][rs] = j
        xw = x * weight  # (r, n) far entries
        out[1][rs] += weight.sum(axis=-1)
        far_first = xw.sum(axis=-1)
        out[5][rs] += far_first
        out[3][rs] += far_first
        out[4][rs] += (x * xw).sum(axis=-1)
    return _Sums(*out)


def _solve_decreasing(lo: np.ndarray, hi: np.ndarray,
                      value_and_slope: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
                      ) -> np.ndarray:
    """Solve ``F(beta) = 0`` per row for a non-increasing ``F``, bracketed by ``[lo, hi]`` (betas > 0).

    ``value_and_slope(rows_index, beta)`` returns ``F`` and ``dF/du`` with ``u = log beta`` for the
    selected rows.  A row stops when its bracket in ``u`` is narrower than the tolerance (``BETA_RTOL``,
    or 4 ulp of ``u`` when that is coarser), when a Newton step inside the bracket moves ``u`` by less
    than it, or when ``F`` is exactly 0.
    Returns beta per row.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        unrepresentable = ~(np.isfinite(lo) & np.isfinite(hi) & (lo > 0))
    if unrepresentable.any():
        raise ValueError(f"the root lies beyond the float64 range (gaps too small or too large) for "
                         f"{np.count_nonzero(unrepresentable)} rows")
    u_lo, u_hi = np.log(lo), np.log(hi)  # (rows,)
    u = 0.5 * (u_lo + u_hi)
    done = np.zeros(len(u), dtype=bool)
    # relative tolerance on beta = absolute tolerance on u, or the resolution of u itself if coarser
    tol = np.maximum(BETA_RTOL, 4.0 * np.finfo(np.float64).eps * np.maximum(np.abs(u_lo), np.abs(u_hi)))
    for iteration in range(_MAX_ITER):
        done |= (u_hi - u_lo) <= tol
        active = np.flatnonzero(~done)
        if active.size == 0:
            break
        value, slope = value_and_slope(active, np.exp(u[active]))
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
        # a Newton step below the tolerance means the root is within it (it may round to u itself)
        settled = exact | (np.isfinite(step) & (np.abs(step) <= tol[active]))
        u[active] = np.where(settled, np.where(exact, u[active], newton),
                             np.where(inside, newton, 0.5 * (u_lo[active] + u_hi[active])))
        done[active[settled]] = True
    else:
        raise RuntimeError("root finding did not converge in "
                           f"{_MAX_ITER} iterations for {np.count_nonzero(~done)} rows")
    # u = log beta resolves beta only to 4 ulp of |u| (1e-13 near beta = 1e300): one last Newton step
    # taken on beta itself removes that limit
    beta = np.exp(u)
    value, slope = value_and_slope(np.arange(len(u)), beta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = -value / slope
    polish = np.isfinite(step) & (np.abs(step) <= 4.0 * tol)
    return np.where(polish, beta * np.exp(np.where(polish, step, 0.0)), beta)


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
    ``(...)`` float64 betas.  Returns 0 when ``p`` equals ``1/n_valid`` (to within ``1e-12``
    relative).  Raises ``ValueError`` naming the rows where no finite ``beta >= 0`` solves the
    equation: ``p < 1/n_valid`` or ``p >= 1/multiplicity of the maximum``.
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
        wgaps = _positive_sorted(gaps[work])  # (w, n)

        def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sums = _exp_sums(wgaps[index], b)
            # Z - 1/p with the near terms' ones taken out exactly: sum(expm1) + sum(far) - (excess - j)
            value = sums.near + sums.far - (excess[index] - sums.near_count)
            return value, -sums.first  # dZ/d log beta = -sum(x e^{-x})

        beta[work] = _solve_decreasing(lo, hi, value_and_slope)
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
    ``(...)`` float64 betas.  Returns 0 when ``h`` equals ``log n_valid`` (to within ``1e-12``).
    Raises ``ValueError`` naming the rows where no finite ``beta >= 0`` solves the equation:
    ``h > log n_valid`` or ``h <= log(multiplicity of the maximum)``.
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
        wgaps = _positive_sorted(gaps[work])  # (w, n)
        wtarget = target[work]
        wm0 = m0[work]

        def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sums = _exp_sums(wgaps[index], b)
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

        beta[work] = _solve_decreasing(lo, hi, value_and_slope)
    return conv.restore(beta)
