"""The Legendre entropy profile of chapter 09 (critscale.profiles, prop-09-legendre)."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

import critscale
from critscale import families, profiles


def brute_legendre_point(row, beta):
    """t_beta and log N(t_beta) by brute force over the distinct valid gaps, with exact (tie-counting) N."""
    valid = row[np.isfinite(row)]
    gaps = valid.max() - valid
    best = None
    for t in np.unique(gaps):
        value = math.log(np.sum(gaps <= t)) - beta * t
        if best is None or value > best[0]:
            best = (value, t, math.log(np.sum(gaps <= t)))
    return best[1], best[2]


def test_legendre_point_against_brute_force():
    """Rows with ties, masks and every family; a count k instead of k + 1, or the first position of a tie
    block, would give a different log N(t_beta) on the tied rows."""
    rng = np.random.default_rng(9)
    rows = [families.get(name).sample(25, 1, rng)[0] for name in families.names()]
    rows += [np.round(rng.standard_normal(30), 1), np.array([0.0, -1.0, -1.0, -1.0, -3.0]),
             np.where(rng.random(30) < 0.3, -np.inf, rng.standard_normal(30))]
    rows[-1][0] = 5.0
    beta = np.array([0.0, 0.3, 1.0, 3.0, 30.0])
    for row in rows:
        point = profiles.legendre_point(row, beta)
        for j, b in enumerate(beta):
            t, log_count = brute_legendre_point(row, b)
            assert point.t_beta[j] == t and point.log_count[j] == pytest.approx(log_count, rel=1e-15)
    tied = profiles.legendre_point(np.array([0.0, -1.0, -1.0, -1.0, -3.0]), 0.5)
    assert tied.log_count == pytest.approx(math.log(4)) and tied.t_beta == 1.0  # N(1) = 4, not 2


def test_legendre_point_is_the_legendre_transform_and_chapter_09():
    """log N(t_beta) - beta t_beta equals legendre_transform exactly, and t_beta, sigma equal chapter 09's code."""
    scores = families.family_rows("gauss", 2**10, 6, seed=3)
    beta = np.array([0.25, 0.5, 0.75]) * families.get("gauss").kappa_bar(2**10)
    point = profiles.legendre_point(scores, beta)
    assert np.array_equal(point.log_count - beta * point.t_beta, critscale.legendre_transform(scores, beta))
    gaps = critscale.sorted_gaps(scores)
    log_counts = np.log(np.arange(1, gaps.shape[-1] + 1))
    for i, row in enumerate(gaps):
        k = np.argmax(log_counts[None, :] - beta[:, None] * row[None, :], axis=-1)
        assert np.array_equal(point.t_beta[i], row[k]) and np.array_equal(point.log_count[i], log_counts[k])


def test_entropy_profile_limit():
    """The table of prop-09-legendre, chapter 09's inline curves bit for bit, and the boundary values."""
    c = np.linspace(0.0, 1.0, 201)
    chapter = {"gauss": lambda c: 1 - c**2, "ptail3": lambda c: 1 - c**1.5, "logexp": lambda c: 1 - c,
               "edge": lambda c: 1 - np.sqrt(c)}
    for name, curve in chapter.items():
        assert np.array_equal(profiles.entropy_profile_limit(name, c), curve(c))
        for value in (0.1, 0.25, 0.5, 0.75, 0.9):
            assert profiles.entropy_profile_limit(name, value) == curve(np.float64(value))
    assert profiles.entropy_profile_limit("ptail1.5", 0.5) == pytest.approx(1 - 0.5**3)
    assert profiles.entropy_profile_limit(families.edge(1.0, 2.0), 0.5) == pytest.approx(1 - 0.5 ** (2 / 3))
    above = np.array([1.0, 1.5, 4.0])
    for name in ("gauss", "ptail3", "logexp", "edge", "ptail1", "planted", "simplex", "unif", "sphere5"):
        assert np.all(profiles.entropy_profile_limit(name, above) == 0.0)  # finite PD / Poisson entropy
        assert profiles.entropy_profile_limit(name, 0.0) == 1.0  # uniform softmax at beta = 0
    assert profiles.entropy_profile_limit("planted", 0.99) == 1.0
    assert profiles.entropy_profile_limit("ptail1", 0.5) == 1.0
    assert profiles.entropy_profile_limit("unif", 0.3) == 0.0
    with pytest.raises(ValueError, match="Frechet"):
        profiles.entropy_profile_limit("pareto2", 0.5)
    with pytest.raises(ValueError, match="p >= 1"):
        profiles.entropy_profile_limit("ptail0.5", 0.5)
    with pytest.raises(ValueError, match="c must be"):
        profiles.entropy_profile_limit("gauss", -0.1)


@pytest.mark.parametrize("name,tolerance", [
    ("gauss", math.log(400) / 400),  # psi = x^2/2 + log x + ...: O(log log n / log n) at log n = 400
    ("ptail3", 1e-6), ("ptail1.5", 1e-6), ("logexp", 1e-6), ("edge", 1e-6), ("edge_c1_q2", 1e-6),
])
def test_profile_is_the_legendre_point_of_the_smooth_gap_count(name, tolerance):
    """sigma(t_beta)/log n of the smooth count sigma(t) = log n - psi(u_n - t), psi = -log sf of the family,
    maximised numerically at n = e^400 and beta = c kappa_bar_n, equals the profile: exactly (to the optimiser's
    accuracy) for the families whose psi is a pure power or exponential, and to O(log log n/log n) for the
    Gaussian; the neighbouring exponents c^(p-1) and c^((p-1)/p) are off by more than 0.05."""
    family = families.edge(1.0, 2.0) if name == "edge_c1_q2" else families.get(name)
    log_n = 400.0
    n = math.exp(log_n)
    u, kappa_bar = family.quantile(n), family.kappa_bar(n)

    def psi(x):
        return -stats.norm.logsf(x) if name == "gauss" else -np.log(family.sf(x))

    span = 1.0 if name.startswith("edge") else 3 * abs(u) + 50
    for c in (0.25, 0.5, 0.75):
        beta = c * kappa_bar
        best = optimize.minimize_scalar(lambda t: psi(u - t) + beta * t, bounds=(0, span), method="bounded",
                                        options={"xatol": 1e-12})
        measured = (log_n - psi(u - best.x)) / log_n
        predicted = profiles.entropy_profile_limit(family, c)
        assert measured == pytest.approx(predicted, abs=tolerance)
        if name in ("gauss", "ptail3"):
            p = 2.0 if name == "gauss" else 3.0
            for wrong in (c ** (p - 1), c ** ((p - 1) / p)):
                assert abs(measured - (1 - wrong)) > 0.05
