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

Method: all rows at once, safeguarded Newton iteration in :math:`u = \\log\\beta`.  Each row starts
from an exact bracket built from its smallest positive gap :math:`\\delta` and its range :math:`R`:
:math:`m_0 + (n-m_0)e^{-\\beta R} \\le Z(\\beta) \\le m_0 + (n-m_0)e^{-\\beta\\delta}` and
:math:`\\log m_0 \\le H(\\beta) \\le \\log m_0 + (1 + 2/e)(n-m_0)e^{-\\beta\\delta/2}`.
A Newton step that leaves the current bracket is replaced by bisection (in log beta), and after
50 iterations only bisection is used, so every row converges.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._validate import as_per_row, as_scores, describe_rows
from .softmax import _gap_sums, _gaps_unsorted

__all__ = ["beta_at_max_weight", "beta_at_entropy"]

_MAX_ITER = 200
_NEWTON_ITER = 50


def _row_shape(gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-row valid count n, multiplicity m0 of the maximum, smallest positive gap, range."""
    valid = np.isfinite(gaps)  # (rows, n)
    n_valid = valid.sum(axis=-1).astype(np.float64)  # (rows,)
    m0 = (gaps == 0).sum(axis=-1).astype(np.float64)  # (rows,)
    positive = valid & (gaps > 0)  # (rows, n)
    smallest = np.where(positive, gaps, np.inf).min(axis=-1)  # (rows,); inf when all gaps are 0
    largest = np.where(valid, gaps, 0.0).max(axis=-1)  # (rows,)
    return n_valid, m0, smallest, largest


def _solve_decreasing(target: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                      value_and_slope: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
                      ) -> np.ndarray:
    """Solve ``F(beta) = target`` per row for a non-increasing ``F``, bracketed by ``[lo, hi]`` (betas > 0).

    ``value_and_slope(rows_index, beta)`` returns ``F`` and ``dF/du`` with ``u = log beta`` for the
    selected rows.  Returns beta per row.
    """
    unrepresentable = ~(np.isfinite(lo) & np.isfinite(hi) & (lo > 0))
    if unrepresentable.any():
        raise ValueError(f"the root lies beyond the float64 range (gaps too small or too large) for "
                         f"{np.count_nonzero(unrepresentable)} rows")
    u_lo, u_hi = np.log(lo), np.log(hi)  # (rows,)
    u = 0.5 * (u_lo + u_hi)
    done = np.zeros(len(u), dtype=bool)
    tol = 1e-13 * np.maximum(1.0, np.abs(target))
    for iteration in range(_MAX_ITER):
        width_ok = (u_hi - u_lo) <= 4e-16 * np.maximum(1.0, np.abs(u))
        done |= width_ok
        active = np.flatnonzero(~done)
        if active.size == 0:
            break
        value, slope = value_and_slope(active, np.exp(u[active]))
        g = value - target[active]  # decreasing in u
        converged = np.abs(g) <= tol[active]
        done[active[converged]] = True
        # shrink the bracket: g > 0 means the root lies at larger u
        above = g > 0
        u_lo[active[above]] = u[active[above]]
        u_hi[active[~above]] = u[active[~above]]
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = u[active] - g / slope
        inside = np.isfinite(newton) & (newton > u_lo[active]) & (newton < u_hi[active])
        if iteration >= _NEWTON_ITER:
            inside[:] = False
        midpoint = 0.5 * (u_lo[active] + u_hi[active])
        step = np.where(inside, newton, midpoint)
        keep = converged  # converged rows keep their current u
        u[active[~keep]] = step[~keep]
    else:
        raise RuntimeError("root finding did not converge in "
                           f"{_MAX_ITER} iterations for {np.count_nonzero(~done)} rows")
    return np.exp(u)


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
        spread = np.log((n_valid[work] - m0[work]) / (z_target[work] - m0[work]))  # (w,) > 0
        lo = spread / largest[work]
        hi = spread / smallest[work]
        target = np.log(z_target[work])
        wgaps = gaps[work]

        def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sums = _gap_sums(wgaps[index], b[:, None])
            log_z = np.log1p(sums.z_minus_one[:, 0])
            mean_gap = sums.first[:, 0] / (1.0 + sums.z_minus_one[:, 0])
            return log_z, -b * mean_gap  # d log Z / d log beta = -beta <Delta>

        beta[work] = _solve_decreasing(target, lo, hi, value_and_slope)
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
        lo = np.log(excess / (np.exp(target[work]) - m0[work])) / largest[work]
        hi = 2.0 / smallest[work] * np.log((1.0 + 2.0 / np.e) * excess / (target[work] - log_m0[work]))
        hi = np.maximum(hi, lo)
        wgaps = gaps[work]
        wtarget = target[work]

        def value_and_slope(index: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sums = _gap_sums(wgaps[index], b[:, None], second_moment=True)
            z = 1.0 + sums.z_minus_one[:, 0]
            mean_gap = sums.first[:, 0] / z
            variance = np.maximum(sums.second[:, 0] / z - mean_gap**2, 0.0)
            entropy = np.log1p(sums.z_minus_one[:, 0]) + b * mean_gap
            return entropy, -(b**2) * variance  # dH / d log beta = -beta^2 Var(Delta)

        beta[work] = _solve_decreasing(wtarget, lo, hi, value_and_slope)
    return conv.restore(beta)
