"""The law-reading rules of critscale.gpt2.classify against rows whose law is known.

i.i.d. rows with a known extreme-value class (theory.md §4.1): exponential scores (Gumbel class,
E Delta_(k) = H_{k-1}, so log N is linear in t), uniform scores (Weibull alpha = 1,
E Delta_(k) = (k-1)/(n+1), so log N is linear in log t), and planted rows (one score g above
Gaussian noise, a step).  The fits of gamma are checked on kappa with a known exponent.
"""

import numpy as np
import pytest

from critscale.gpt2 import classify
from critscale.gpt2.stats import _beta_half_from_grid


def _head_law(rows):
    top = -np.sort(-rows, axis=-1)[:, :classify.SHAPE_K]  # (r, K) largest first
    gaps = top[:, :1] - top  # (r, K)
    profile = classify.head_profile(classify.profile_of_gaps(gaps))
    return classify.classify_profiles(profile[None, :])[0][0]


@pytest.mark.parametrize("n", [256, 1024])
def test_known_laws_are_read_back(n):
    rng = np.random.default_rng([12697, n])
    rows = 200
    exponential = rng.exponential(size=(rows, n))
    uniform = rng.uniform(size=(rows, n))
    gaussian = rng.standard_normal((rows, n))
    planted = rng.standard_normal((rows, n))
    planted[:, 0] = np.sqrt(2 * np.log(n)) + 3.0
    assert _head_law(exponential) == "linear"
    assert _head_law(gaussian) == "linear"
    assert _head_law(uniform) == "power"
    assert _head_law(planted) == "step"


def test_exact_profiles_are_classified():
    K = classify.SHAPE_K
    k = np.arange(1, K + 1)
    linear = np.log(k) / np.log(K)  # log N exactly linear in t
    power = (k - 1) / (K - 1.0)  # N - 1 proportional to t: log N linear in log t for large k
    power[0] = 0.0
    step = np.r_[0.0, np.linspace(0.9, 1.0, K - 1)]
    labels, sse_lin, sse_pow = classify.classify_profiles(np.stack([linear, power, step]))
    assert list(labels) == ["linear", "power", "step"]
    assert sse_lin[0] == pytest.approx(0.0, abs=1e-12)


def test_sse_matches_polyfit():
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(3, 20))
    y = rng.normal(size=20)
    for row in range(3):
        coef = np.polyfit(x[row], y, 1)
        residual = y - np.polyval(coef, x[row])
        assert classify._fit_sse(x[row:row + 1], y)[0] == pytest.approx(np.sum(residual**2), rel=1e-10)


def test_tied_maximum_has_no_profile():
    gaps = np.array([[0.0, 0.0, 1.0, 2.0], [0.0, 0.5, 1.0, 2.0], [0.0, 0.5, 1.0, np.inf]])
    profiles = classify.profile_of_gaps(gaps)
    assert np.isnan(profiles[0]).all() and np.isnan(profiles[2]).all()
    np.testing.assert_allclose(profiles[1], [0, 0.25, 0.5, 1.0])
    labels, _, _ = classify.classify_profiles(profiles)
    assert labels[0] == "undefined" and labels[2] == "undefined"


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0])
def test_fit_gamma_recovers_the_exponent(gamma):
    rng = np.random.default_rng([7, int(gamma * 10)])
    n = np.tile(np.arange(16, 1024), 4)  # four windows of causal rows
    windows = np.repeat(np.arange(4), 1024 - 16)
    noise = np.exp(rng.normal(0.0, 0.3, size=n.size))  # multiplicative, median 1
    kappa = 3.0 * np.log(n) ** gamma * noise
    fit = classify.fit_gamma(n, kappa, windows, n_boot=200)
    # the median of 32+ lognormal(0.3) draws per bin has sd <= 0.3 * 1.25 / sqrt(32) = 0.07 in log;
    # across a log log n lever of ~0.9 the slope's sd is below 0.1, so 0.3 is > 3 sd
    assert fit.gamma == pytest.approx(gamma, abs=0.3)
    assert fit.low <= fit.gamma <= fit.high
    assert list(fit.bins) == [4, 5, 6, 7, 8, 9]


def test_fit_gamma_needs_three_bins():
    with pytest.raises(ValueError, match="at least 3"):
        classify.fit_gamma(np.arange(16, 60), np.ones(44))
    with pytest.raises(ValueError, match="shapes differ"):
        classify.fit_gamma(np.arange(16, 60), np.ones(4))


def test_reference_slopes_follow_the_exact_scales():
    slopes = classify.reference_slopes(2.0 ** (np.arange(4, 10) + 0.5))
    assert slopes["ptail1"] == pytest.approx(0.0, abs=1e-9)  # kappa_bar = 1
    assert slopes["logexp"] == pytest.approx(1.0, abs=1e-9)  # kappa_bar = log n exactly
    assert 0.5 < slopes["gauss"] < 0.8  # finite-n slope above the leading order 1/2 (theory.md §5.1)
    assert classify.nearest_reference(0.95, slopes) == "logexp"


def test_beta_half_interpolation_matches_the_root():
    import critscale

    rng = np.random.default_rng(11)
    rows = rng.standard_normal((20, 300))
    betas = np.geomspace(1e-2, 1e3, 301)
    stats = critscale.softmax_stats(rows, betas)
    approx = _beta_half_from_grid(betas, stats.max_weight)
    exact = critscale.beta_at_max_weight(rows, 0.5)
    # linear interpolation in log-log on a grid of ratio 1.0488: relative error well below 1%
    np.testing.assert_allclose(approx, exact, rtol=0.01)
