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


def _mp_annealed(name, n, beta, wrong_density=False):
    """Entropy and free-energy offset of the annealed profile by mpmath quadrature (25 digits), from the
    density and survival function written out here; wrong_density drops the hazard factor psi' of the
    density psi' e^{-psi} (a plausible slip).

    The Gibbs weight density(x) e^{beta x} peaks where the hazard equals beta (found by mpmath's root
    finder); it is integrated over a finite window around that level whose ends carry less than e^{-50}
    of it (the Gaussian tilted law is N(beta, 1); the others decay at least like e^{-50 sqrt(beta)}).
    """
    mpmath = pytest.importorskip("mpmath")
    mp = mpmath.mp
    mp.dps = 25
    beta = mp.mpf(beta)
    if name == "gauss":
        log_sf = lambda x: mp.log(mp.ncdf(-x))  # noqa: E731
        density = (lambda x: mp.exp(-x**2 / 2)) if wrong_density else mp.npdf
        start = beta
    elif name.startswith("ptail"):
        q = mp.mpf(name[len("ptail"):])
        log_sf = lambda x: -x**q  # noqa: E731
        density = (lambda x: mp.exp(-x**q)) if wrong_density else (lambda x: q * x**(q - 1) * mp.exp(-x**q))
        start = (beta / q) ** (1 / (q - 1))
    elif name == "logexp":
        log_sf = lambda x: -mp.exp(x)  # noqa: E731
        density = (lambda x: mp.exp(-mp.exp(x))) if wrong_density else (lambda x: mp.exp(x - mp.exp(x)))
        start = mp.log(beta)
    else:  # edge: scores -1/E, survival exp(-1/u) at -u
        log_sf = lambda x: 1 / x  # noqa: E731
        density = (lambda x: mp.exp(1 / x)) if wrong_density else (lambda x: mp.exp(1 / x) / x**2)
        start = -1 / mp.sqrt(beta)
    root = mp.findroot(lambda x: mp.diff(log_sf, x) + beta, start)  # hazard(root) = beta
    if name.startswith("ptail"):
        window = (mp.mpf(0), root + 60 / mp.sqrt(q * (q - 1) * root ** (q - 2)) + 5)
    else:
        window = {"gauss": (root - 15, root + 15), "logexp": (root - 60, root + 6), "edge": (50 * root, root / 50)}[name]
    shift = beta * root + log_sf(root)  # the supremum of beta x + log sf(x)
    weight = lambda x: density(x) * mp.exp(beta * x - shift)  # noqa: E731
    points = [window[0], root, window[1]]
    m0 = mp.quad(weight, points)
    m1 = mp.quad(lambda x: x * weight(x), points)
    log_m = mp.log(m0) + shift
    return float(mp.log(n) + log_m - beta * m1 / m0), float(log_m - shift)


@pytest.mark.parametrize("name", ["gauss", "ptail3", "ptail1.5", "logexp", "edge"])
def test_annealed_profile_against_quadrature(name):
    """H_ann = log n + log M - beta M'/M and D = log M - sup_x [beta x + log sf(x)] against mpmath quadrature of
    the densities written out above, below, at and above the critical scale of n = 2^12; the density without its
    hazard factor (e^{-psi} for psi' e^{-psi}) is off by more than 0.1 nats."""
    n = 2.0**12
    kappa_bar = families.get(name).kappa_bar(n)
    beta = np.array([0.25, 0.5, 0.75, 1.5]) * kappa_bar
    got = profiles.annealed_profile(name, n, beta)
    for j, b in enumerate(beta):
        entropy, offset = _mp_annealed(name, n, b)
        # float64 evaluation of closed forms and scipy quadrature at relative accuracy 1e-13 against 30 digits
        assert got.entropy[j] == pytest.approx(entropy, rel=1e-10, abs=1e-10)
        assert got.free_energy_offset[j] == pytest.approx(offset, rel=1e-10, abs=1e-10)
        wrong_entropy, wrong_offset = _mp_annealed(name, n, b, wrong_density=True)
        assert abs(wrong_entropy - entropy) + abs(wrong_offset - offset) > 0.1
    zero = profiles.annealed_profile(name, [2.0, n], 0.0)
    assert np.array_equal(zero.entropy, np.log([2.0, n])) and np.array_equal(zero.free_energy_offset, [0.0, 0.0])


@pytest.mark.parametrize("name,a", [("gauss", None), ("ptail3", 0.5), ("logexp", 0.5), ("edge", 0.5)])
def test_annealed_profile_expansions(name, a):
    """At beta = c kappa_bar_n the remainders r_H = H_ann - l(c) log n - a log log n (a = c^2/2 for Gaussian rows,
    1/2 for the others; l = entropy_profile_limit) and r_D = D - log log n / 2 converge as n grows: they move by
    less than 0.05 from log n = 200 to 700.  The allowance is the size of the first neglected terms of the
    Laplace expansion there (1/beta^2 <= 0.04 for Gaussian rows at c = 1/4, 1/beta <= 0.04 for the others).  A
    coefficient a - 1/2 or a + 1/2 (or a log log n coefficient of D of 0 or 1) moves the remainder by
    log(700/200)/2 = 0.63."""
    family = families.get(name)
    for c in (0.25, 0.5, 0.75):
        coefficient = c**2 / 2 if a is None else a
        remainders = []
        for log_n in (200.0, 700.0):
            n = math.exp(log_n)
            got = profiles.annealed_profile(family, n, c * family.kappa_bar(n))
            r_h = got.entropy - profiles.entropy_profile_limit(family, c) * log_n - coefficient * math.log(log_n)
            remainders.append((r_h, got.free_energy_offset - 0.5 * math.log(log_n)))
        (h_200, d_200), (h_700, d_700) = remainders
        assert abs(h_700 - h_200) < 0.05 and abs(d_700 - d_200) < 0.05


def test_annealed_profile_gaussian_is_the_rem_entropy_and_refuses_other_families():
    """Gaussian rows: H_ann = log n - beta^2/2 exactly (the random energy model); families without a derived
    profile are refused with a ValueError naming them."""
    beta = np.linspace(0.0, 6.0, 13)
    got = profiles.annealed_profile("gauss", 2.0**20, beta)
    np.testing.assert_allclose(got.entropy, 20 * math.log(2) - beta**2 / 2, rtol=0, atol=1e-12)
    for name in ("planted", "unif", "sphere5", "ptail1", "pareto2"):
        with pytest.raises(ValueError, match=name):
            profiles.annealed_profile(name, 1024, 1.0)
    with pytest.raises(ValueError, match="beta"):
        profiles.annealed_profile("gauss", 1024, -1.0)
