"""Finite-size extrapolation: Monte-Carlo means at several lengths, fitted to n -> infinity (chapters 06-08).

Each window chapter derives how its means approach their limit,

.. math::

    y(n) = a + \\sum_k b_k\\,t_k(n) + (\\text{higher order}),

with correction terms :math:`t_k` such as :math:`1/\\log n` and :math:`1/\\log^2 n` (the Gumbel window),
:math:`n^{-1/\\alpha}` (the Weibull window) or :math:`\\log\\log n/\\log n` and :math:`1/\\log n` (the midpoint
of the planted step).  :func:`extrapolate` fits that model by weighted least squares to means measured at
several lengths with their standard errors; the intercept :math:`a` is the extrapolated limit, and its
standard error lets a test compare it with the theorem's limit and with neighbouring ones.

Several series that share one limit (the families of one class) are fitted together: one intercept, each
series (``groups``) its own corrections, and optionally corrections whose coefficient theory says is the
same for every series (``shared``; in the Gumbel window the first-order coefficient is universal).

Standard errors.  The covariance of the weighted fit is :math:`(X^\\top WX)^{-1}` with
:math:`W = \\mathrm{diag}(1/\\mathrm{se}^2)`.  When the residuals exceed their standard errors
(:math:`\\chi^2/\\mathrm{dof} > 1`, the sign of higher-order terms the model leaves out) the standard
errors are multiplied by the Birge ratio :math:`\\sqrt{\\chi^2/\\mathrm{dof}}`: a model that fits worse
than the noise widens the interval, never narrows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["Extrapolation", "extrapolate"]


@dataclass(frozen=True)
class Extrapolation:
    """Result of :func:`extrapolate`.

    Attributes
    ----------
    intercept:
        the fitted limit :math:`a`.
    se:
        its standard error, Birge-scaled (see the module docstring).
    chi2, dof:
        the weighted residual sum of squares and its degrees of freedom (points minus parameters).
    birge:
        :math:`\\max(1, \\sqrt{\\chi^2/\\mathrm{dof}})` (1 when ``dof = 0``).
    coefficients:
        ``{group: (k,) array}`` of the correction coefficients :math:`b_k` of each series.
    shared:
        ``(s,)`` coefficients of the shared corrections (empty without them).
    """

    intercept: float
    se: float
    chi2: float
    dof: int
    birge: float
    coefficients: dict
    shared: np.ndarray

    def z(self, value: float) -> float:
        """Distance of the intercept from ``value`` in standard errors."""
        return (self.intercept - float(value)) / self.se


def extrapolate(terms: Any, y: Any, se: Any, groups: Sequence[Any] | None = None,
                shared: Any = None) -> Extrapolation:
    """Weighted least squares of ``y`` on a common intercept plus per-group (and shared) corrections.

    Parameters
    ----------
    terms:
        ``(m,)`` or ``(m, k)``: the correction terms :math:`t_k(n_j)` at each of the ``m`` points, with a
        coefficient per group (``k = 0`` columns allowed).
    y, se:
        ``(m,)`` means and their standard errors (finite, ``se > 0``).
    groups:
        ``(m,)`` labels; points with one label share their corrections.  ``None``: one series.
    shared:
        ``(m,)`` or ``(m, s)`` correction terms with one coefficient for all groups, or ``None``.

    Returns
    -------
    :class:`Extrapolation`.  Needs at least as many points as parameters (``1 + s + k * groups``).

    Test: ``tests/test_extrapolation.py`` (exact recovery of a noiseless model; the intercept's standard
    error covers the truth at the nominal rate on simulated noise; a model missing a term inflates the
    error by the Birge ratio).
    """
    y = np.asarray(y, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    t = np.asarray(terms, dtype=np.float64)
    t = t[:, None] if t.ndim == 1 else t  # (m, k)
    common = np.zeros((len(y), 0)) if shared is None else np.asarray(shared, dtype=np.float64)
    common = common[:, None] if common.ndim == 1 else common  # (m, s)
    if (y.ndim != 1 or se.shape != y.shape or t.ndim != 2 or t.shape[0] != y.shape[0]
            or common.ndim != 2 or common.shape[0] != y.shape[0]):
        raise ValueError(f"extrapolate needs terms (m, k), y (m,), se (m,) and shared (m, s); got {t.shape}, "
                         f"{y.shape}, {se.shape} and {common.shape}")
    if not (np.isfinite(y).all() and np.isfinite(t).all() and np.isfinite(common).all()
            and np.isfinite(se).all() and (se > 0).all()):
        raise ValueError("extrapolate needs finite terms and means, and finite standard errors > 0")
    labels = np.zeros(len(y), dtype=int) if groups is None else np.asarray(groups)
    if labels.shape != y.shape:
        raise ValueError(f"groups must have one label per point, got {labels.shape} for {y.shape}")
    names = list(dict.fromkeys(labels.tolist()))
    columns = [np.ones_like(y)] + [common[:, j] for j in range(common.shape[1])]
    for name in names:
        mask = (labels == name).astype(np.float64)  # (m,)
        columns += [t[:, j] * mask for j in range(t.shape[1])]
    design = np.stack(columns, axis=1)  # (m, p)
    m, p = design.shape
    if m < p:
        raise ValueError(f"extrapolate needs at least {p} points for {p} parameters, got {m}")
    weight = 1.0 / se  # (m,)
    coef, *_ = np.linalg.lstsq(design * weight[:, None], y * weight, rcond=None)  # (p,)
    cov = np.linalg.inv((design * weight[:, None] ** 2).T @ design)  # (p, p)
    chi2 = float((((y - design @ coef) * weight) ** 2).sum())
    dof = m - p
    birge = max(1.0, float(np.sqrt(chi2 / dof))) if dof > 0 else 1.0
    k, s = t.shape[1], common.shape[1]
    coefficients = {name: coef[1 + s + i * k:1 + s + (i + 1) * k] for i, name in enumerate(names)}
    return Extrapolation(intercept=float(coef[0]), se=float(np.sqrt(cov[0, 0])) * birge, chi2=chi2, dof=dof,
                         birge=birge, coefficients=coefficients, shared=coef[1:1 + s])
