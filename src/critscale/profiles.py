"""The Legendre (microcanonical) entropy profile of chapter 09, ``prop-09-legendre`` (Proposition 9 of theory.md §4.2).

The proposition (a heuristic, our reconstruction) says that below the critical scale the softmax of a
row is governed by one point of its gap-count: with :math:`\\sigma(t) = \\log N(t)` and :math:`t_\\beta`
the maximiser of :math:`\\sigma(t) - \\beta t`,

.. math::

    \\log Z \\approx \\Lambda(\\beta),\\qquad H(\\beta) \\approx \\sigma(t_\\beta),\\qquad
    \\langle\\Delta\\rangle_\\beta \\approx t_\\beta .

:func:`legendre_point` computes :math:`t_\\beta` and :math:`\\sigma(t_\\beta)` of every row, and
:func:`entropy_profile_limit` the limit of :math:`H/\\log n` at :math:`\\beta = c\\,\\bar\\kappa_n` that the
proposition predicts for each family.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import numpy as np

from . import _validate
from ._validate import as_beta, as_real, as_scores, row_blocks, scalar_or_array
from .families import Family, get
from .gaps import _rank_counts, _sorted_gaps

__all__ = ["LegendrePoint", "legendre_point", "entropy_profile_limit"]


class LegendrePoint(NamedTuple):
    """The maximiser of :math:`\\log N(t) - \\beta t` per row and beta, each ``(..., len(beta))``.

    Attributes
    ----------
    t_beta:
        the gap :math:`t_\\beta` at which :math:`\\log N(t) - \\beta t` is largest (the smallest such gap).
    log_count:
        :math:`\\sigma(t_\\beta) = \\log N(t_\\beta)`, the predicted entropy.
    """

    t_beta: Any
    log_count: Any


def legendre_point(scores: Any, beta: Any) -> LegendrePoint:
    """Where the Legendre transform is attained: :math:`t_\\beta` and :math:`\\log N(t_\\beta)` of each row.

    ``prop-09-legendre`` (chapter 09) predicts :math:`H(\\beta) \\approx \\log N(t_\\beta)` and
    :math:`\\langle\\Delta\\rangle_\\beta \\approx t_\\beta`; by construction
    :math:`\\Lambda(\\beta) = \\log N(t_\\beta) - \\beta t_\\beta` (:func:`critscale.legendre_transform`).
    The maximum is taken over the sorted gaps :math:`\\Delta_{(k)}` with :math:`\\log(k+1)` for
    :math:`\\log N` (0-based ``k``); inside a block of tied gaps the expression is largest at the block's
    last position, where :math:`k + 1 = N`, so ties are counted correctly.  Among equal maxima the
    smallest gap is returned.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    beta:
        a scalar or 1-D array of finite values ``>= 0``.

    Returns
    -------
    :class:`LegendrePoint` with fields ``(..., len(beta))`` (``(...)`` for a scalar ``beta``).

    Test: ``tests/test_profiles.py::test_legendre_point_against_brute_force`` (brute force over the
    distinct gaps with exact counts, rows with ties and masks; a count of ``k`` instead of ``k + 1``,
    or the first instead of the last position of a tie block, gives a different point).
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    values, n, m = conv.values, conv.n, len(betas)
    rows = values.shape[0]
    t_beta = np.empty((rows, m))  # (rows, m)
    log_count = np.empty((rows, m))  # (rows, m)
    log_ranks = np.log(_rank_counts(n))  # (n,)
    for rs in row_blocks(rows, n, per_cell=4):
        gaps = _sorted_gaps(values[rs])  # (r, n)
        valid = np.isfinite(gaps)  # (r, n)
        log_counts = np.where(valid, log_ranks, -np.inf)  # (r, n)
        finite_gaps = np.where(valid, gaps, 0.0)  # (r, n)
        r = gaps.shape[0]
        beta_step = max(1, _validate.MAX_ELEMENTS // max(1, r * n))
        for b0 in range(0, m, beta_step):
            bs = slice(b0, min(m, b0 + beta_step))
            terms = log_counts[:, None, :] - betas[None, bs, None] * finite_gaps[:, None, :]  # (r, b, n)
            k = np.argmax(terms, axis=-1)  # (r, b)
            t_beta[rs, bs] = np.take_along_axis(finite_gaps, k, axis=-1)
            log_count[rs, bs] = log_ranks[k]
    if scalar:
        return LegendrePoint(conv.restore(t_beta[:, 0]), conv.restore(log_count[:, 0]))
    return LegendrePoint(conv.restore(t_beta, (m,)), conv.restore(log_count, (m,)))


def _tail_exponent(fam: Family) -> float:
    """The exponent ``e`` of the profile ``1 - c**e`` of a Gumbel-class family (``inf`` for ptail1)."""
    base = fam.name.rstrip("0123456789.")
    if fam.name == "gauss":
        return 2.0  # psi(x) = x^2/2 + O(log x): p = 2
    if base == "ptail":
        p = fam.params["p"]
        if p < 1:
            raise ValueError(f"{fam.name}: the Legendre profile needs a concave log-count, i.e. p >= 1, got p={p}")
        return np.inf if p == 1 else p / (p - 1.0)
    if fam.name == "logexp":
        return 1.0
    if fam.name.startswith("edge"):
        q = fam.params["q"]
        return q / (q + 1.0)
    raise ValueError(f"{fam.name}: no Legendre entropy profile is derived for this Gumbel-class family")


def entropy_profile_limit(family: Union[str, Family], c: Any) -> Any:
    """Limit of :math:`H/\\log n` at :math:`\\beta = c\\,\\bar\\kappa_n`, ``prop-09-legendre`` (chapter 09; Prop. 9, theory.md §4.2).

    The Legendre relation :math:`H \\approx \\sigma(t_\\beta)` with :math:`\\sigma_n(t) \\approx \\log n -
    \\psi(u_n - t)`, :math:`\\psi = -\\log\\bar F`, gives (a heuristic; for Gaussian rows the classical
    random-energy-model entropy :math:`\\log n - \\beta^2/2`):

    ==================================  ===========================================
    family                              :math:`\\lim H/\\log n`
    ==================================  ===========================================
    ``gauss`` (:math:`p = 2`)            :math:`(1 - c^2)_+`
    ``ptail<p>``, :math:`p > 1`          :math:`(1 - c^{p/(p-1)})_+`
    ``ptail1``                          1 for :math:`c < 1`, 0 for :math:`c \\ge 1`
    ``logexp``                          :math:`(1 - c)_+`
    ``edge`` (:math:`e^{-c_0u^{-q}}`)    :math:`(1 - c^{q/(q+1)})_+` (:math:`1-\\sqrt c` for ``q = 1``)
    planted, simplex, planted_shrink    1 for :math:`c < 1`, 0 for :math:`c \\ge 1`
    Weibull class (unif, sphere)        0 for :math:`c > 0` (the entropy stays bounded, Thm 7)
    ==================================  ===========================================

    Above :math:`c = 1` the Gumbel-class entropy converges to the finite Poisson–Dirichlet value
    (:func:`critscale.limits.pd_entropy`), so the profile is 0 there; every family gives 1 at ``c = 0``
    (the uniform softmax).  Heavy (Fréchet) tails have no profile here (``ValueError``).  Convergence in
    ``n`` is logarithmically slow (chapter 09).

    Parameters
    ----------
    family:
        a :class:`~critscale.families.Family` or a name accepted by :func:`critscale.families.get`.
    c:
        :math:`c = \\beta/\\bar\\kappa_n \\ge 0`, a scalar or an array.

    Returns
    -------
    The limit, a float or an array of the shape of ``c``.

    Test: ``tests/test_profiles.py::test_entropy_profile_limit`` (the closed forms for p = 2, 3, the
    exponential and the endpoint families, the REM entropy :math:`\\log n - \\beta^2/2` of Gaussian rows
    computed exactly at :math:`n = e^{400}` by mpmath; the neighbouring exponent :math:`c^{p-1}` or
    :math:`c^{(p-1)/p}` fails).
    """
    fam = get(family)
    c = as_real(c, "c", minimum=0)
    if fam.domain == "frechet":
        raise ValueError(f"{fam.name}: heavy (Frechet) tails have no Legendre entropy profile "
                         "(their accumulation scale is not the hazard scale, theory.md §4.1)")
    if fam.domain == "weibull":
        return scalar_or_array(np.where(c == 0, 1.0, 0.0))
    if fam.domain == "step":
        return scalar_or_array(np.where(c < 1, 1.0, 0.0))
    exponent = _tail_exponent(fam)
    if np.isinf(exponent):
        return scalar_or_array(np.where(c < 1, 1.0, 0.0))
    return scalar_or_array(np.maximum(1.0 - c**exponent, 0.0))
