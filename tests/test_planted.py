"""Theorem 8 (thm-08-planted): the closed forms of critscale.planted, against direct computation."""

import math

import numpy as np
import pytest
from scipy import integrate

from critscale import planted


@pytest.mark.parametrize("n", [2**8, 2**14, 2**20])
def test_kappa_deterministic(n):
    """Item 4: the maximum of log(1 + a eps)/(g + eps) and its maximiser.

    The stationarity identities hold at the returned point, a brute-force maximum over a fine log grid agrees
    (a maximiser off by a factor 2 loses about 1e-2), and g kappa/log n lies below 1 by about (log L + 1)/L.
    """
    kappa, eps = planted.kappa_deterministic(n)
    a = n - 1
    assert math.log1p(a * eps) == pytest.approx(a * (1 + eps) / (1 + a * eps), rel=1e-6)
    assert kappa == pytest.approx(a / (1 + a * eps), rel=1e-6)
    grid = np.geomspace(1e-9, 1.0, 200001)
    assert kappa == pytest.approx(np.max(np.log1p(a * grid) / (1 + grid)), rel=1e-8)
    L = math.log(n)
    assert abs(kappa / L - (1 - (math.log(kappa) + 1) / L)) < 2 / (a * eps)  # stationarity, without the 1+
    far = planted.kappa_deterministic(2.0**400)[0] / (400 * math.log(2))
    assert 1 - far < (math.log(400 * math.log(2)) + 1) / (400 * math.log(2)) * 1.01


def test_z_lln():
    """E Z = 1 + (n-1) E e^{-beta (g + U w)} for U uniform on [0, 1]: quadrature, and w -> 0 gives the simplex."""
    n, g, w, beta = 1000, 1.0, 0.7, 3.3
    mean, _ = integrate.quad(lambda u: math.exp(-beta * (g + u * w)), 0, 1, epsabs=1e-14)
    assert planted.z_lln(beta, n, g, w) == pytest.approx(1 + (n - 1) * mean, rel=1e-12)
    assert planted.z_lln(beta, n, g, 1e-9) == pytest.approx(1 + (n - 1) * math.exp(-beta * g), rel=1e-8)
    assert np.asarray(planted.z_lln([1.0, 2.0], [10, 100])).shape == (2,)
    with pytest.raises(ValueError, match="beta"):
        planted.z_lln(0.0, n)


def test_collision_lln():
    """E Z(2 beta)/E Z(beta)^2 at beta = c log n/g: the simplex formula of item 1 as w -> 0, and the step."""
    n, g, c = 4096, 1.0, 0.8
    beta = c * math.log(n) / g
    z = 1 + (n - 1) * math.exp(-beta * g)
    exact = (1 + (n - 1) * math.exp(-2 * beta * g)) / z**2
    assert planted.collision_lln(c, n, g, 1e-9) == pytest.approx(exact, rel=1e-7)
    big = 2.0**200
    assert planted.collision_lln(0.5, big) < 1e-20 and 1 - planted.collision_lln(2.0, big) < 1e-20


def test_midpoint_lln():
    """The crossing of 1/2: exact on the curve, close to the root of (1 - c) L = log((sqrt 2 - 1) c L) (the
    approximation drops e^{-beta w} and n - 1 versus n), and below 1 by about log(0.41 c L)/L."""
    for log2n in (8, 14, 20, 40):
        n = 2.0**log2n
        c = planted.midpoint_lln(n)
        assert planted.collision_lln(c, n) == pytest.approx(0.5, abs=1e-12)
        L = math.log(n)
        approx = 1 - math.log((math.sqrt(2) - 1) * c * L) / L
        assert abs(c - approx) < 3e-3
    assert planted.midpoint_lln(2.0**20) < planted.midpoint_lln(2.0**40) < planted.midpoint_lln(2.0**400) < 1


def test_simplex_collision_lln():
    """Almost-simplex: eta = 0 is item 1 exactly, small eta is continuous, and E Z matches a Monte-Carlo mean."""
    n, rho, gamma = 2**12, 0.5, 2.5
    beta, g = gamma * math.log(n), 0.5
    z = 1 + (n - 1) * math.exp(-beta * g)
    assert planted.simplex_collision_lln(gamma, n, rho, 0.0) == pytest.approx(
        (1 + (n - 1) * math.exp(-2 * beta * g)) / z**2, rel=1e-14)
    assert planted.simplex_collision_lln(gamma, n, rho, 1e-7) == pytest.approx(
        planted.simplex_collision_lln(gamma, n, rho, 0.0), rel=1e-9)
    rng = np.random.default_rng(2)
    eta = 0.05
    gaps = g + eta * (2 * rng.random(2_000_000) - 1)  # competitors at rho -/+ eta below the self-score 1
    mc = 1 + (n - 1) * np.exp(-beta * gaps).mean()
    spread = math.sinh(beta * eta) / (beta * eta)
    assert 1 + (n - 1) * math.exp(-beta * g) * spread == pytest.approx(mc, rel=1e-3)
    with pytest.raises(ValueError, match="below the self-score"):
        planted.simplex_collision_lln(gamma, n, 0.98, 0.05)
