"""Dimension crossover for keys on a sphere, ``prop-11-crossover`` (chapter 11; P-12 of theory.md §6, values in §4.1).

The scores :math:`\\langle q, k\\rangle` of a fixed unit query against keys uniform on :math:`S^{d-1}`
have variance :math:`1/d`, so their Gaussian approximation :math:`N(0, 1/d)` has accumulation scale
:math:`\\sqrt d\\,\\bar\\kappa^{\\rm G}_n`.  The proposition (our reconstruction) compares the exact
sphere scale with it through :func:`sphere_gauss_ratio` and gives the limit
:func:`crossover_scaling_limit` of that ratio in the variable :math:`x = \\log n/d`: the sphere rows obey
the Gaussian :math:`\\sqrt{\\log n}` law while :math:`\\log n \\ll d` and Bruno et al.'s polynomial law
only once :math:`\\log n \\gtrsim d`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import as_real, scalar_or_array
from .families import gauss, sphere

__all__ = ["sphere_gauss_ratio", "crossover_scaling_limit"]


def sphere_gauss_ratio(n: Any, d: int) -> Any:
    """:math:`\\rho_d(n) = \\bar\\kappa^{\\rm sph}_{n,d}/(\\sqrt d\\,\\bar\\kappa^{\\rm G}_n)`, exact (``prop-11-crossover``).

    Both scales are the exact hazards at the :math:`1/n`-quantile of :mod:`critscale.families`
    (``sphere(d).kappa_bar`` and ``gauss().kappa_bar``).  Item 1 of the proposition:
    :math:`\\rho_d(n) \\to R(\\log n/d)` (:func:`crossover_scaling_limit`) as :math:`d \\to \\infty`; item 2:
    :math:`\\rho_d(n) \\to \\infty` polynomially in ``n`` at fixed ``d``.

    Parameters
    ----------
    n:
        row lengths ``> 1``, a scalar or an array.
    d:
        the dimension, an integer ``>= 2``.

    Returns
    -------
    A float or an array of the shape of ``n``.

    Test: ``tests/test_crossover.py::test_sphere_gauss_ratio`` (the table of theory.md §4.1, computed
    there independently, and an mpmath evaluation of both quantiles at d = 16, n = 2^20; the ratio
    without the :math:`\\sqrt d`, or with :math:`d` in its place, is off by factors of 4).
    """
    n = as_real(n, "n", minimum=1, strict=True)
    return scalar_or_array(sphere(d).kappa_bar(n) / (np.sqrt(d) * gauss().kappa_bar(n)))


def crossover_scaling_limit(x: Any) -> Any:
    """:math:`R(x) = e^{2x}\\sqrt{(1 - e^{-2x})/(2x)}`, the limit of :math:`\\rho_d(n)` at :math:`\\log n/d \\to x` (``prop-11-crossover``, item 1).

    :math:`R(x) = 1 + \\frac32 x + O(x^2)` as :math:`x \\to 0` and :math:`R(0) = 1` (the Gaussian
    regime).  ``x >= 0``, a scalar or an array.

    Test: ``tests/test_crossover.py::test_crossover_scaling_limit`` (mpmath values, the expansion
    :math:`1 + \\frac32x`, and the exact ratios at d = 512 within the convergence of the chapter; the
    slip :math:`e^{x}` for :math:`e^{2x}` gives :math:`1 + \\frac12 x` and fails).
    """
    x = as_real(x, "x", minimum=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.exp(2 * x) * np.sqrt(-np.expm1(-2 * x) / (2 * x))
    return scalar_or_array(np.where(x == 0, 1.0, value))
