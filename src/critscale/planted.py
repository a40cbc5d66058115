"""Closed forms of Theorem 8 (thm-08-planted): planted rows and the simplex of Chen et al. (chapter 08).

A planted row has one score :math:`g > 0` above :math:`n - 1` competitors; in the book's family
(:func:`critscale.families.planted`) the competitors are uniform on :math:`[-w, 0]`, and in the simplex
(:func:`critscale.families.simplex`) they sit at :math:`\\rho \\pm \\eta` below a self-score 1, so
:math:`g = 1 - \\rho`.  At :math:`\\beta = c\\log n/g` the planted token's weight jumps from 0 to 1 as
:math:`c` crosses 1.  The functions here are the deterministic and law-of-large-numbers formulas of that
theorem: the accumulation scale of the uniform bulk (item 4), the mean partition function and the collision
curve it implies, and the midpoint of the step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize

from ._validate import as_number, as_real, scalar_or_array

__all__ = ["kappa_deterministic", "z_lln", "collision_lln", "midpoint_lln", "simplex_collision_lln"]


def _lengths(n: Any) -> np.ndarray:
    return as_real(n, "n", minimum=2)


def kappa_deterministic(n: Any, g: float = 1.0, w: float = 1.0) -> tuple[float, float]:
    """Theorem 8 item 4: :math:`\\kappa_n \\approx \\max_{0<\\epsilon\\le w}\\log(1 + a\\epsilon)/(g + \\epsilon)`,
    :math:`a = (n - 1)/w`, with the count :math:`N(g + \\epsilon)` of a uniform bulk replaced by its mean.

    Returns ``(kappa, eps_star)``, the maximum and its maximiser (bounded scalar search to :math:`10^{-12}`).
    At the maximiser :math:`\\log(1 + a\\epsilon^\\ast) = a(g + \\epsilon^\\ast)/(1 + a\\epsilon^\\ast)` and
    :math:`\\kappa = a/(1 + a\\epsilon^\\ast)`, so :math:`g\\kappa_n/\\log n = 1 - O(\\log\\log n/\\log n)`.

    Test: ``tests/test_planted.py::test_kappa_deterministic`` (the stationarity identities, a brute-force
    maximum on a grid, and the approach to 1).
    """
    n = float(as_number(n, "n", minimum=2))
    g = as_number(g, "g", minimum=0, strict=True)
    w = as_number(w, "w", minimum=0, strict=True)
    a = (n - 1) / w
    res = optimize.minimize_scalar(lambda e: -np.log1p(a * e) / (g + e), bounds=(1e-12 * w, w),
                                   method="bounded", options={"xatol": 1e-12 * w})
    return float(-res.fun), float(res.x)


def z_lln(beta: Any, n: Any, g: float = 1.0, w: float = 1.0) -> Any:
    """Mean partition function of a planted row with a uniform bulk (Theorem 8, law of large numbers):
    :math:`\\mathbb E Z(\\beta) = 1 + (n - 1)e^{-\\beta g}(1 - e^{-\\beta w})/(\\beta w)`.

    ``beta > 0`` and ``n`` broadcast.  Test: ``tests/test_planted.py::test_z_lln`` (quadrature of
    :math:`\\mathbb E e^{-\\beta\\Delta}` and the simplex limit :math:`w \\to 0`).
    """
    beta = as_real(beta, "beta", minimum=0, strict=True)
    n = _lengths(n)
    g = as_number(g, "g", minimum=0, strict=True)
    w = as_number(w, "w", minimum=0, strict=True)
    return scalar_or_array(1 + (n - 1) * np.exp(-beta * g) * -np.expm1(-beta * w) / (beta * w))


def collision_lln(c: Any, n: Any, g: float = 1.0, w: float = 1.0) -> Any:
    """Law-of-large-numbers collision curve of planted rows at :math:`\\beta = c\\log n/g`:
    :math:`\\mathbb E Z(2\\beta)/(\\mathbb E Z(\\beta))^2` (the planted token carries :math:`1/Z`, each
    competitor :math:`e^{-\\beta\\Delta_i}/Z`).

    Test: ``tests/test_planted.py::test_collision_lln`` (the exact simplex formula of item 1 as
    :math:`w \\to 0`, and the limits 0 and 1 on either side of :math:`c = 1`).
    """
    c = as_real(c, "c", minimum=0, strict=True)
    n = _lengths(n)
    beta = c * np.log(n) / as_number(g, "g", minimum=0, strict=True)
    log_z2, log_z = np.log(np.asarray(z_lln(2 * beta, n, g, w))), np.log(np.asarray(z_lln(beta, n, g, w)))
    return scalar_or_array(np.exp(log_z2 - 2 * log_z))  # no overflow of Z^2 for huge n


def midpoint_lln(n: Any, g: float = 1.0, w: float = 1.0) -> float:
    """The :math:`c` at which :func:`collision_lln` crosses 1/2: the law-of-large-numbers midpoint of the step.

    With :math:`Z - 1 \\approx n^{1-c}/(c\\log n)` (for :math:`g = w`) the crossing solves
    :math:`(1 - c)\\log n \\approx \\log((\\sqrt2 - 1)c\\log n)`, so it lies below 1 by
    :math:`\\log((\\sqrt2 - 1)c\\log n)/\\log n` and tends to 1 like :math:`\\log\\log n/\\log n`.

    Test: ``tests/test_planted.py::test_midpoint_lln`` (the crossing, the asymptotic equation and the
    approach to 1).
    """
    n = float(as_number(n, "n", minimum=4))
    return float(optimize.brentq(lambda c: collision_lln(c, n, g, w) - 0.5, 1e-3, 2.0, xtol=1e-13))


def simplex_collision_lln(gamma: Any, n: Any, rho: float, eta: float) -> Any:
    """Law-of-large-numbers collision curve of the almost-simplex at :math:`\\beta = \\gamma\\log n`.

    Competitors uniform on :math:`\\rho \\pm \\eta` below a self-score 1 give
    :math:`\\mathbb E Z(\\beta) = 1 + (n - 1)e^{-\\beta g}\\sinh(\\beta\\eta)/(\\beta\\eta)`, :math:`g = 1 - \\rho`;
    ``eta = 0`` is the exact simplex of item 1, :math:`(1 + (n - 1)e^{-2\\beta g})/Z^2`.

    Test: ``tests/test_planted.py::test_simplex_collision_lln`` (the exact formula at :math:`\\eta = 0`,
    continuity as :math:`\\eta \\to 0`, and a Monte-Carlo mean of :math:`Z`).
    """
    gamma = as_real(gamma, "gamma", minimum=0, strict=True)
    n = _lengths(n)
    rho = as_number(rho, "rho", minimum=-1)
    eta = as_number(eta, "eta", minimum=0)
    if not rho + eta < 1:
        raise ValueError(f"the competitors must lie below the self-score 1: rho + eta = {rho + eta}")
    beta, g = gamma * np.log(n), 1.0 - rho

    def z(b: np.ndarray) -> np.ndarray:
        spread = np.sinh(b * eta) / (b * eta) if eta > 0 else 1.0
        return 1 + (n - 1) * np.exp(-b * g) * spread

    return scalar_or_array(z(2 * beta) / z(beta) ** 2)
