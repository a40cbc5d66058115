"""Recorded numbers of chapter 11 (11_dimension_crossover, prop-11-crossover), read from the ci-profile results.

Each tolerance is stated next to it: exact arithmetic, the rounding of an independently computed reference value
(theory.md §4.1), or Monte-Carlo standard errors recorded by the notebook.  Closed forms are recomputed here with
scipy, not with critscale.
"""

import math

import pytest
from scipy import optimize, special, stats

pytestmark = pytest.mark.book

NB = "11_dimension_crossover"

# theory.md §4.1, computed independently (three significant digits)
CROSSOVER_REFERENCE = {
    16: {8: 1.38, 20: 3.24, 40: 15.3},
    64: {8: 1.08, 20: 1.30, 40: 1.82},
    128: {8: 1.04, 20: 1.14, 40: 1.34},
}


def _gauss_kappa_bar(n):
    """n phi(u_n), u_n the 1/n upper quantile (scipy, independent of critscale)."""
    return n * stats.norm.pdf(stats.norm.isf(1.0 / n))


def _sphere_kappa_bar(n, d):
    """n f(u_n) for the cosine 2B - 1, B ~ Beta(a, a), via the lower quantile (symmetry), scipy only."""
    a = (d - 1) / 2
    law = stats.beta(a, a)
    return n * law.pdf(law.ppf(1.0 / n)) / 2


def _scaling_limit(x):
    return math.exp(2 * x) * math.sqrt(-math.expm1(-2 * x) / (2 * x))


@pytest.mark.parametrize("d", sorted(CROSSOVER_REFERENCE))
@pytest.mark.parametrize("log2n", [8, 20, 40])
def test_11_ratios_match_reference(ci_results, d, log2n):
    """rho_d(n) against the independent table of theory.md §4.1 (3 significant digits: within 0.02) and a direct
    scipy evaluation (rounding only); the ratio without sqrt(d), a plausible slip, is off by factors of 4 to 11."""
    v = ci_results(NB)["values"]
    got = v[f"ratio_d{d}_log2n{log2n}"]
    assert abs(got - CROSSOVER_REFERENCE[d][log2n]) < 0.02
    n = 2.0**log2n
    assert got == pytest.approx(_sphere_kappa_bar(n, d) / (math.sqrt(d) * _gauss_kappa_bar(n)), rel=1e-8)


def test_11_ratio_grows_and_collapses(ci_results):
    """rho_d(n) never decreases along the grid, and its distance to the d -> infinity scaling function R(x)
    shrinks with d (deterministic); a scaling variable log n/sqrt(d) instead of log n/d would not collapse."""
    v = ci_results(NB)["values"]
    assert v["ratio_monotone_violations"] == 0
    errs = [v[f"collapse_err_d{d}"] for d in (16, 64, 128, 512)]
    assert all(b < a for a, b in zip(errs, errs[1:]))
    assert v["collapse_err_decreasing"] is True


@pytest.mark.parametrize("log2n", [20, 40, 60])
def test_11_polynomial_regime_for_small_d(ci_results, log2n):
    """kappa_bar / (alpha (C n)^{1/alpha}) = 1 + O(v_n), v_n = (C n)^{-1/alpha}; for d = 4 the first-order
    coefficient is below 1 (expansion of (v(2-v))^{1/2}), so |ratio - 1| <= v_n.  Large d is far from the
    polynomial law at the same n (log n << d): a ratio near 1 there would mean the crossover is not in log n/d."""
    v = ci_results(NB)["values"]
    d = 4
    a = (d - 1) / 2
    log_c = -a * math.log(2) - math.log(a) - special.betaln(a, a)
    v_n = math.exp(-(log_c + log2n * math.log(2)) / a)
    assert abs(v[f"poly_ratio_d{d}_log2n{log2n}"] - 1) <= v_n
    assert v[f"poly_ratio_d128_log2n{log2n}"] < 0.9


def test_11_monte_carlo_small_d_is_stable_and_on_the_weibull_limit(ci_results):
    """d = 4 is in the polynomial (Weibull) regime at every simulated n: the median of kappa_16/kappa_bar does not
    move across n (largest standardised change over 2-4 comparisons against the smallest n: 3.5 sigma keeps the
    family-wise false-alarm rate below ~0.2%) while kappa_bar grows several-fold, and it sits on the Weibull
    limit median (alpha = 3/2).  Normalising by the Gaussian-like scale sqrt(2 d log n) instead would make the
    median fall with kappa_bar's growth."""
    v = ci_results(NB)["values"]
    assert v["mc_max_z_across_n_d4"] < 3.5
    assert v["kappa_bar_growth_d4"] > 4
    assert v["mc_z_vs_limit_d4_hi"] < 3.5
    se = math.hypot(v["mc_se_d4_hi"], v["limit_se_d4"])
    assert abs(v["mc_median_d4_hi"] - v["limit_median_d4"]) < 3.5 * se


def test_11_monte_carlo_large_d_behaves_like_gaussian_rows(ci_results):
    """d = 64, 128 (log n << d): the medians agree with Gaussian rows of the same length at every n within the
    Bonferroni threshold the page quotes (family-wise 95% over the lengths), widened to 3.5 sigma for the two
    dimensions together; d = 4 is clearly not Gaussian-like (the crossover is visible in the samples too), and its
    largest difference to Gaussian rows is more than four times that of d = 128."""
    v = ci_results(NB)["values"]
    assert v["mc_z_threshold"] == pytest.approx(stats.norm.isf(0.025 / v["mc_lengths"]), rel=1e-12)
    assert v["mc_max_z_vs_gauss_d64"] < 3.5
    assert v["mc_max_z_vs_gauss_d128"] < 3.5
    assert v["mc_max_z_vs_gauss_d4"] > 5
    assert v["mc_max_diff_vs_gauss_d4"] > 4 * v["mc_max_diff_vs_gauss_d128"]


def test_11_exercise_solution(ci_results):
    """Exercise 11.1: R(x) = 1.1 at x* (scipy root of the closed form here), predicted log2 n = x* d/log 2, and the
    exact roots later than predicted by a factor that falls from d = 64 to d = 128 (the d -> infinity limit)."""
    v = ci_results(NB)["values"]
    x_star = optimize.brentq(lambda x: _scaling_limit(x) - 1.1, 1e-6, 1.0)
    assert v["exercise_x_star"] == pytest.approx(x_star, rel=1e-9)
    for d in (64, 128):
        assert v[f"exercise_log2n_predicted_d{d}"] == pytest.approx(x_star * d / math.log(2), rel=1e-9)
        n = 2.0 ** v[f"exercise_log2n_exact_d{d}"]
        assert _sphere_kappa_bar(n, d) / (math.sqrt(d) * _gauss_kappa_bar(n)) == pytest.approx(1.1, rel=1e-6)
    assert v["exercise_log_ratio_d64"] > v["exercise_log_ratio_d128"] > 1
