"""Dimension crossover for keys on a sphere (critscale.crossover, prop-11-crossover)."""

import math

import numpy as np
import pytest

from critscale import crossover, families


def test_sphere_gauss_ratio():
    """The table of theory.md §4.1 (computed there independently, 3 digits), chapter 11's expression bit for bit,
    and a 30-digit mpmath evaluation of both quantiles; without sqrt(d) the ratios would be 4 to 11 times larger."""
    quoted = {16: (1.38, 3.24, 15.3), 64: (1.08, 1.30, 1.82), 128: (1.04, 1.14, 1.34)}
    for d, values in quoted.items():
        ratios = crossover.sphere_gauss_ratio(2.0 ** np.array([8, 20, 40]), d)
        assert np.allclose(ratios, values, rtol=6e-3)
        n = 2.0 ** np.arange(2, 60.5, 0.5)
        gauss = families.get("gauss")
        assert np.array_equal(crossover.sphere_gauss_ratio(n, d),
                              families.sphere(d).kappa_bar(n) / (np.sqrt(d) * gauss.kappa_bar(n)))
    assert crossover.sphere_gauss_ratio(2.0**20, 16) == pytest.approx(mp_ratio(2**20, 16), rel=1e-9)
    with pytest.raises(ValueError, match="n must be"):
        crossover.sphere_gauss_ratio(1.0, 16)


def mp_ratio(n, d):
    """kappa_bar of sphere(d) over sqrt(d) kappa_bar of gauss at n, from the Beta and normal laws in mpmath."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(30):
        a = mpmath.mpf(d - 1) / 2
        target = 1 / mpmath.mpf(n)
        # P(X > u) = I_y(a, a) with y = (1 - u)/2 (by symmetry of Beta(a, a)); solve for y
        y = mpmath.findroot(lambda y: mpmath.betainc(a, a, 0, y, regularized=True) - target, mpmath.mpf("0.05"))
        density = y ** (a - 1) * (1 - y) ** (a - 1) / mpmath.beta(a, a) / 2  # f_X(u) = f_B((1 + u)/2)/2
        z = mpmath.findroot(lambda z: mpmath.erfc(z / mpmath.sqrt(2)) / 2 - target, mpmath.mpf(5))
        gauss = mpmath.exp(-z**2 / 2) / mpmath.sqrt(2 * mpmath.pi)
        return float(density / (mpmath.sqrt(d) * gauss))


def test_crossover_scaling_limit():
    """R(x) against mpmath, its expansion 1 + 3x/2 (the slip e^x for e^{2x} gives 1 + x/2), R(0) = 1, and the
    exact ratio approaching R at the rate ~ 4.3 log d / d found in chapter 11's range x in [0.02, 1]."""
    mpmath = pytest.importorskip("mpmath")
    for x in (0.01, 0.5, 2.0):
        with mpmath.workdps(30):
            exact = mpmath.exp(2 * x) * mpmath.sqrt((1 - mpmath.exp(-2 * x)) / (2 * x))
        assert crossover.crossover_scaling_limit(x) == pytest.approx(float(exact), rel=1e-14)
    small = 1e-6
    assert (crossover.crossover_scaling_limit(small) - 1) / small == pytest.approx(1.5, abs=1e-5)
    assert crossover.crossover_scaling_limit(0.0) == 1.0
    x = np.linspace(0.02, 1.0, 50)
    errors = []
    for d in (64, 128, 512):
        distance = np.abs(crossover.sphere_gauss_ratio(np.exp(x * d), d) - crossover.crossover_scaling_limit(x))
        errors.append(distance.max())
        assert distance.max() <= 5 * math.log(d) / d
    assert errors == sorted(errors, reverse=True)
    wrong = np.exp(x) * np.sqrt(-np.expm1(-2 * x) / (2 * x))
    assert np.max(np.abs(crossover.sphere_gauss_ratio(np.exp(x * 512), 512) - wrong)) > 0.5
    assert np.array_equal(crossover.crossover_scaling_limit(x), np.exp(2 * x) * np.sqrt(-np.expm1(-2 * x) / (2 * x)))
