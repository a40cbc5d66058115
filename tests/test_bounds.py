"""The deterministic bounds of chapters 02-04 (critscale.bounds): they hold on every row, are nearly
attained on exact rows, and the plausible slips named in each function's docstring fail there.

Two exact rows carry the power of these tests:

- ZIPF: scores -log k, k = 1..n, so N(t) = floor(e^t) and kappa = 1 exactly; it nearly attains the
  supercritical bounds (N(t) <= e^{kappa t} is almost an equality);
- TIED: one top score and K - 1 competitors tied at gap 1, so kappa_K = log K exactly; it attains the
  subcritical bounds at beta = 0 and stays close to them below kappa_K.
"""

import math

import numpy as np
import pytest

import critscale
from critscale import bounds, families

SLACK = 1e-12  # relative rounding allowance of an inequality between float64 values
ZIPF = -np.log(np.arange(1, 10**5 + 1, dtype=np.float64))  # (1e5,)
K_TIED = 16
TIED = np.concatenate([[0.0], -np.ones(K_TIED - 1)])  # (16,)


def family_rows():
    """Rows of every family at two lengths, tied maxima removed (kappa finite): ``(rows, n)`` per length."""
    out = []
    for name in families.names():
        for n in (64, 1024):
            scores = families.family_rows(name, n, 20, seed=5, stream=families.names().index(name))
            kappa = critscale.accumulation_scale(scores)
            out.append(scores[np.isfinite(kappa)])
    return out


ROWS = family_rows()


def holds(value, bound):
    return np.all(np.asarray(value) <= np.asarray(bound) * (1 + SLACK) + 1e-300)


def test_zipf_and_tied_rows_are_what_the_docstring_says():
    assert critscale.accumulation_scale(ZIPF) == 1.0
    assert critscale.accumulation_scale(TIED, K=K_TIED) == pytest.approx(math.log(K_TIED), rel=1e-15)


def test_free_energy_bounds():
    """thm-02-sandwich on every row; near-tight on ZIPF, where the slips Lambda(beta/theta) and log(1/theta) fail."""
    for scores in ROWS:
        kappa = critscale.accumulation_scale(scores)
        for x in (0.1, 0.5, 1.0, 2.0, 10.0):
            for theta in (0.25, 0.5, 0.9):
                sandwich = bounds.free_energy_bounds(scores, x * kappa[0], theta=theta)
                log_z = critscale.softmax_stats(scores, x * kappa[0]).log_z
                assert holds(sandwich.lower, log_z) and holds(log_z, sandwich.upper)
    beta = np.array([0.5, 1.5])
    log_z = critscale.softmax_stats(ZIPF, beta).log_z
    half = bounds.free_energy_bounds(ZIPF, beta, theta=0.5)
    assert holds(half.lower, log_z) and holds(log_z, half.upper)
    assert half.lower[0] == pytest.approx(0.5 * math.log(10**5), rel=1e-12)  # Lambda(1/2) = log(n)/2
    slipped_argument = critscale.legendre_transform(ZIPF, beta / 0.5) + math.log(2.0)
    assert log_z[1] > slipped_argument[1]  # Lambda(beta/theta) is too small above kappa
    ninety = bounds.free_energy_bounds(ZIPF, 1.5, theta=0.9)
    assert holds(log_z[1], ninety.upper)
    assert log_z[1] > critscale.legendre_transform(ZIPF, 0.9 * 1.5) + math.log(1 / 0.9)  # log(1/theta) slip
    assert critscale.legendre_transform(ZIPF, 0.25) > log_z[0]  # a lower bound at theta * beta would fail
    with pytest.raises(ValueError, match="theta must be in"):
        bounds.free_energy_bounds(ZIPF, 1.0, theta=1.0)
    # chapter 09's inline upper bound, bit for bit
    rows = families.family_rows("gauss", 256, 3, seed=1)
    beta = np.array([0.25, 0.5, 0.75]) * families.get("gauss").kappa_bar(256)
    assert np.array_equal(bounds.free_energy_bounds(rows, beta, theta=0.5).upper,
                          critscale.legendre_transform(rows, 0.5 * beta) + np.log(1 / (1 - 0.5)))


def test_sandwich_width_bound():
    """cor-02-width on every row at many beta and theta; attained by the step row (one top, n - 1 entries at
    gap g) at beta = log n / g, where the slips (1-theta)^2 log n, theta (1-theta) log n and log 1/(1-theta)
    alone (an O(1) width) fall short of the width; theta = 1 - 1/log n gives exactly 1 + log log n."""
    for scores in ROWS:
        n = scores.shape[-1]
        kappa = critscale.accumulation_scale(scores)
        for x in (0.05, 0.3, 1.0, 3.0):
            beta = x * kappa[0]
            lam = critscale.legendre_transform(scores, beta)
            for theta in (0.25, 0.5, 0.9, 1 - 1 / math.log(n)):
                width = bounds.free_energy_bounds(scores, beta, theta=theta).upper - lam
                assert holds(width, bounds.sandwich_width_bound(n, theta, lam))
                assert holds(bounds.sandwich_width_bound(n, theta, lam), bounds.sandwich_width_bound(n, theta))
    for n in (16, 1024, 2**20):
        g = 0.7
        step = np.concatenate([[0.0], -g * np.ones(n - 1)])  # (n,)
        beta = math.log(n) / g
        for theta in (0.25, 0.5, 0.9):
            width = bounds.free_energy_bounds(step, beta, theta=theta).upper - critscale.legendre_transform(step, beta)
            assert width == pytest.approx(bounds.sandwich_width_bound(n, theta), rel=1e-12)
            for slip in ((1 - theta) ** 2 * math.log(n), theta * (1 - theta) * math.log(n), 0.0):
                assert width > slip + math.log(1 / (1 - theta)) + 0.01
    for n in (16, 1024, 2**20):
        assert bounds.sandwich_width_bound(n, 1 - 1 / math.log(n)) == pytest.approx(1 + math.log(math.log(n)))
    with pytest.raises(ValueError, match="theta"):
        bounds.sandwich_width_bound(16, 1.0)


def test_collapse_bounds():
    """thm-03-collapse on every row; on ZIPF the slips kappa/beta, kappa/(2 beta) and item 2 without its second term fail."""
    x = np.array([1.01, 1.5, 2.5, 4.0, 10.0, 100.0, 1e4])
    for scores in ROWS:
        kappa = critscale.accumulation_scale(scores)[:, None]  # (r, 1)
        beta = x * kappa  # (r, m)
        stats = [critscale.softmax_stats(row, b) for row, b in zip(scores, beta)]
        z_minus_one = np.array([np.expm1(s.log_z) for s in stats])
        outside = np.array([-np.expm1(-s.log_z) for s in stats])
        entropy = np.array([s.entropy for s in stats])
        collapse = bounds.collapse_bounds(kappa, beta)
        assert holds(z_minus_one, collapse.z_minus_one) and holds(outside, collapse.outside)
        assert holds(entropy, collapse.entropy) and holds(entropy, collapse.entropy_simple)
        assert np.all(np.isinf(collapse.entropy[:, x <= 2])) and np.all(np.isinf(collapse.entropy_simple[:, x < 4]))
    stats = critscale.softmax_stats(ZIPF, np.array([1.5, 2.5, 4.0]))
    collapse = bounds.collapse_bounds(1.0, np.array([1.5, 2.5, 4.0]))
    z_minus_one, outside = np.expm1(stats.log_z), -np.expm1(-stats.log_z)
    assert holds(z_minus_one, collapse.z_minus_one) and holds(outside, collapse.outside)
    assert z_minus_one[0] / collapse.z_minus_one[0] > 0.8  # nearly attained
    assert z_minus_one[0] > 1.0 / 1.5  # slip kappa/beta for kappa/(beta - kappa)
    assert outside[0] > 1.0 / (2 * 1.5)  # slip kappa/(2 beta)
    assert holds(stats.entropy[1:], collapse.entropy[1:])
    assert stats.entropy[1] > 1.0 / (2.5 - 1.0)  # item 2 without its (4/e) kappa/(beta - 2 kappa) term
    # item 3 follows from item 2 at beta >= 4 kappa (equal at beta = 4 kappa): a smaller constant would not
    grid = bounds.collapse_bounds(1.0, np.linspace(4.0, 50.0, 200))
    assert np.all(grid.entropy_simple >= grid.entropy * (1 - SLACK))
    assert grid.entropy_simple[0] == pytest.approx(grid.entropy[0], rel=1e-14)
    assert bounds.COLLAPSE_ENTROPY_CONSTANT < 4.28


def test_collapse_bounds_reproduce_chapter_03():
    """With kappa = 1 (rows in units of kappa) the bounds are bit-identical to chapter 03's inline formulas."""
    x = np.array([1.5, 4.0, 10.0, 100.0, 1.05, 2.0, 3.999])
    collapse = bounds.collapse_bounds(1.0, x)
    assert np.array_equal(collapse.z_minus_one, 1.0 / (x - 1.0))
    assert np.array_equal(collapse.outside, 1.0 / x)
    with np.errstate(divide="ignore"):
        assert np.array_equal(collapse.entropy, np.where(x > 2, 1.0 / (x - 1.0) + (4.0 / np.e) / (x - 2.0), np.inf))
        assert np.array_equal(collapse.entropy_simple, np.where(x >= 4, (4.0 / 3.0 + 8.0 / np.e) / x, np.inf))


def test_collapse_bounds_trivial_cases():
    tied = bounds.collapse_bounds(np.inf, 5.0)  # tied maximum: nothing is claimed
    assert tied == (np.inf, 1.0, np.inf, np.inf)
    below = bounds.collapse_bounds(2.0, 1.0)
    assert below == (np.inf, 1.0, np.inf, np.inf)
    single = bounds.collapse_bounds(0.0, 3.0)  # one valid entry: Z = 1, H = 0
    assert single.z_minus_one == 0.0 and single.outside == 0.0 and single.entropy_simple == 0.0
    with pytest.raises(ValueError, match="broadcast"):
        bounds.collapse_bounds(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="kappa must be"):
        bounds.collapse_bounds(-1.0, 1.0)


def test_spreading_bounds():
    """thm-03-spreading on every row for K in {2, 16, n}; attained on TIED at beta = 0, where the slips
    K^-(1 + x) and log(K + 1) fail."""
    x = np.array([0.0, 0.1, 0.5, 0.9, 0.999])
    for scores in ROWS:
        n = scores.shape[-1]
        for K in (2, 16, n):
            kappa_K = critscale.accumulation_scale(scores, K=K)  # (r,)
            beta = x[None, :] * kappa_K[:, None]  # (r, m)
            spread = bounds.spreading_bounds(kappa_K[:, None], beta, K)
            for row, b, p_bound, h_bound in zip(scores, beta, spread.max_weight, spread.entropy):
                stats = critscale.softmax_stats(row, b)
                legendre = critscale.legendre_transform(row, b)
                assert holds(stats.max_weight, np.exp(-legendre)) and holds(np.exp(-legendre), p_bound)
                assert holds(h_bound, stats.entropy) and holds(h_bound, legendre)
    kappa_K = critscale.accumulation_scale(TIED, K=K_TIED)
    beta = x * kappa_K
    stats = critscale.softmax_stats(TIED, beta)
    spread = bounds.spreading_bounds(kappa_K, beta, K_TIED)
    assert holds(stats.max_weight, spread.max_weight) and holds(spread.entropy, stats.entropy)
    assert stats.max_weight[0] == pytest.approx(spread.max_weight[0], rel=1e-15)  # attained at beta = 0
    assert stats.entropy[0] == pytest.approx(spread.entropy[0], rel=1e-15)
    assert stats.max_weight[2] > K_TIED ** -(1 + 0.5)  # slip K^-(1 + x)
    assert stats.entropy[0] < math.log(K_TIED + 1)  # slip log(K + 1)


def test_spreading_bounds_reproduce_chapter_03_and_lemma1():
    """With kappa_K = 1 the bounds equal chapter 03's floor and K^-(1 - x) bit for bit; K = 2 is Lemma 1's floor."""
    x = np.array([0.1, 0.5, 0.9, 0.02, 0.97])
    for K in (2, 16, 1024):
        spread = bounds.spreading_bounds(1.0, x, K)
        assert np.array_equal(spread.entropy, (1.0 - x) * np.log(K))
        assert np.array_equal(spread.max_weight, K ** (-(1.0 - x)))
    lemma_x = np.array([0.5, 0.9, 0.99, 0.999, 0.9999])
    assert np.array_equal(bounds.spreading_bounds(1.0, lemma_x, 2).entropy, (1.0 - lemma_x) * np.log(2.0))
    # a maximum of multiplicity >= K (kappa_K = inf): p_max <= 1/K exactly; a short row (kappa_K = 0): trivial
    assert bounds.spreading_bounds(np.inf, 3.0, 4) == (0.25, pytest.approx(math.log(4)))
    short = bounds.spreading_bounds(0.0, 0.0, 4)
    assert short.max_weight == np.inf and short.entropy == -np.inf


def test_dispersion_bounds():
    """cor-03-dispersion equals spreading_bounds at K = n with kappa_n = log n / R, and is attained at beta = 0."""
    for scores in ROWS:
        n = scores.shape[-1]
        kappa_n = critscale.accumulation_scale(scores, K=n)
        beta = np.array([0.0, 0.3, 0.9]) * kappa_n[0]
        disp = bounds.dispersion_bounds(scores, beta)
        spread = bounds.spreading_bounds(kappa_n[:, None], beta[None, :], n)
        assert np.allclose(disp.max_weight, spread.max_weight, rtol=1e-13, atol=0)
        assert np.allclose(disp.entropy, spread.entropy, rtol=1e-13, atol=1e-13)
        stats = critscale.softmax_stats(scores, beta)
        assert holds(stats.max_weight, disp.max_weight) and holds(disp.entropy, stats.entropy)
        assert np.allclose(disp.max_weight[:, 0], 1.0 / n, rtol=1e-15)  # attained at beta = 0
    masked = np.array([[0.0, -2.0, -np.inf, -1.0], [3.0, -np.inf, -np.inf, -np.inf], [1.0, 1.0, 1.0, -np.inf]])
    disp = bounds.dispersion_bounds(masked, 0.5)
    assert disp.max_weight[0] == pytest.approx(3.0 ** -(1 - 0.5 * 2 / math.log(3)), rel=1e-15)  # n = 3, R = 2
    assert disp.entropy[0] == pytest.approx(math.log(3) - 0.5 * 2, rel=1e-15)
    assert (disp.max_weight[1], disp.entropy[1]) == (1.0, 0.0)  # one valid entry: trivial
    assert disp.max_weight[2] == pytest.approx(1 / 3) and disp.entropy[2] == pytest.approx(math.log(3))  # all tied


def test_critical_scale_bounds():
    """cor-04-critical-scale: both regimes hold on every row; TIED at beta = kappa_K/2 rejects K^-1, ZIPF at
    beta = 1.5 kappa rejects the threshold beta >= kappa for item 1."""
    for scores in ROWS:
        kappa = critscale.accumulation_scale(scores)
        kappa16 = critscale.accumulation_scale(scores, K=16)
        for x in (0.05, 0.25, 0.5, 4.0, 20.0):
            beta = x * kappa
            stats = [critscale.softmax_stats(row, b) for row, b in zip(scores, beta)]
            p = np.array([s.max_weight for s in stats])
            h = np.array([s.entropy for s in stats])
            crit = bounds.critical_scale_bounds(kappa, kappa16, 16, beta)
            assert holds(crit.max_weight_low, p) and holds(h, crit.entropy_high)
            assert holds(p, crit.max_weight_high) and holds(crit.entropy_low, h)
    kappa_K = critscale.accumulation_scale(TIED, K=K_TIED)
    stats = critscale.softmax_stats(TIED, kappa_K / 2)
    crit = bounds.critical_scale_bounds(critscale.accumulation_scale(TIED), kappa_K, K_TIED, kappa_K / 2)
    assert holds(stats.max_weight, crit.max_weight_high) and stats.max_weight > K_TIED**-1.0
    assert holds(crit.entropy_low, stats.entropy)
    zipf = critscale.softmax_stats(ZIPF, 1.5)
    assert bounds.critical_scale_bounds(1.0, 1.0, 2, 1.5).entropy_high == np.inf  # item 1 needs beta >= 4 kappa
    assert zipf.entropy > 4.28 / 1.5  # which matters: at beta = 1.5 kappa the bound would be violated
    short = bounds.critical_scale_bounds(1.0, 0.0, 16, 0.0)  # fewer than K entries: nothing claimed
    assert short.max_weight_high == 1.0 and short.entropy_low == 0.0


def test_beta_half_bracket():
    """cor-04-brackets item 1 holds on every row; ZIPF has beta_1/2 = 1.73 kappa (rejects the upper slip kappa),
    TIED has beta_1/2 = log 15 (rejects the lower slip 2 kappa_K (1 - log 2/log K))."""
    for scores in ROWS:
        half = critscale.beta_at_max_weight(scores, 0.5)
        kappa = critscale.accumulation_scale(scores)
        for K in (2, 4, 16, scores.shape[-1]):
            bracket = bounds.beta_half_bracket(kappa, critscale.accumulation_scale(scores, K=K), K)
            assert holds(bracket.lower, half) and holds(half, bracket.upper)
    zipf_half = critscale.beta_at_max_weight(ZIPF, 0.5)
    assert holds(zipf_half, bounds.beta_half_bracket(1.0, 1.0, 2).upper) and zipf_half > 1.7
    tied_half = critscale.beta_at_max_weight(TIED, 0.5)
    assert tied_half == pytest.approx(math.log(K_TIED - 1), rel=1e-14)
    bracket = bounds.beta_half_bracket(critscale.accumulation_scale(TIED),
                                       critscale.accumulation_scale(TIED, K=K_TIED), K_TIED)
    assert holds(bracket.lower, tied_half) and 2 * bracket.lower > tied_half
    assert bounds.beta_half_bracket(3.0, np.inf, 2).lower == 0.0  # K = 2: the lower end is 0
    kappa16 = 1.7
    assert bounds.beta_half_bracket(1.0, kappa16, 16).lower == kappa16 * (1.0 - np.log(2.0) / np.log(16))


def test_beta_entropy_bracket():
    """cor-04-brackets item 2 holds on every row; ZIPF at H0 = 0.05 has beta(H0) = 7 kappa, rejecting max(4, 4.28 H0)."""
    for scores in ROWS:
        kappa = critscale.accumulation_scale(scores)
        n = scores.shape[-1]
        for h in (0.05, 0.5, 1.0, 2.0):
            root = critscale.beta_at_entropy(scores, h)
            for K in (4, 16, n):
                bracket = bounds.beta_entropy_bracket(kappa, critscale.accumulation_scale(scores, K=K), K, h)
                assert holds(root, bracket.upper)
                if h < math.log(K):
                    assert holds(bracket.lower, root)
    zipf = critscale.beta_at_entropy(ZIPF, 0.05)
    upper = bounds.beta_entropy_bracket(1.0, 1.0, 2, 0.05).upper
    assert holds(zipf, upper) and upper == pytest.approx(4.28 / 0.05)
    assert zipf > max(4.0, 4.28 * 0.05)
    kappa, kappa16 = 2.0, 1.5
    bracket = bounds.beta_entropy_bracket(kappa, kappa16, 16, np.array([0.5, 1.0, 2.0]))
    assert np.array_equal(bracket.lower, kappa16 * (1.0 - np.array([0.5, 1.0, 2.0]) / np.log(16)))
    assert np.array_equal(bracket.upper, [max(4.0, 4.28 / 0.5) * kappa, max(4.0, 4.28) * kappa, 4.0 * kappa])
    with pytest.raises(ValueError, match="h must be"):
        bounds.beta_entropy_bracket(1.0, 1.0, 4, 0.0)
