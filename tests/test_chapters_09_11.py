"""Recorded numbers of the chapters P-10 (09_legendre_entropy), P-11 (10_rescaling_rules) and
P-12 (11_dimension_crossover), read from the ci-profile results files.

Each tolerance is justified next to it: exact arithmetic (a few ulps of the quantities involved),
Monte-Carlo standard errors recorded by the notebook (``*_sem`` / ``*_se``), or the rounding of an
independently computed reference value (theory.md §4.1).  Independent closed forms are recomputed
here with numpy/scipy, not with critscale.
"""

import math

import numpy as np
import pytest
from scipy import special, stats

NB10 = "10_rescaling_rules"
NB11 = "11_dimension_crossover"



# --------------------------------------------------------------------------------------------
# 11: dimension crossover (P-12)
# --------------------------------------------------------------------------------------------

# theory.md §4.1, computed independently (three significant digits)
CROSSOVER_REFERENCE = {
    16: {8: 1.38, 20: 3.24, 40: 15.3},
    64: {8: 1.08, 20: 1.30, 40: 1.82},
    128: {8: 1.04, 20: 1.14, 40: 1.34},
}


def _sphere_kappa_bar(n, d):
    """n f(u_n) for the cosine 2B - 1, B ~ Beta(a, a), via the lower quantile (symmetry), scipy only."""
    a = (d - 1) / 2
    law = stats.beta(a, a)
    return n * law.pdf(law.ppf(1.0 / n)) / 2


@pytest.mark.parametrize("d", sorted(CROSSOVER_REFERENCE))
@pytest.mark.parametrize("log2n", [8, 20, 40])
def test_11_ratios_match_reference(ci_results, d, log2n):
    v = ci_results(NB11)["values"]
    got = v[f"ratio_d{d}_log2n{log2n}"]
    # independent reference of theory.md §4.1, quoted to 3 significant digits: within 0.02
    assert abs(got - CROSSOVER_REFERENCE[d][log2n]) < 0.02
    # and a direct scipy evaluation (same closed form, different code path): rounding only
    n = 2.0**log2n
    assert got == pytest.approx(_sphere_kappa_bar(n, d) / (math.sqrt(d) * _gauss_kappa_bar(n)), rel=1e-8)


def test_11_ratio_grows_and_collapses(ci_results):
    v = ci_results(NB11)["values"]
    assert v["ratio_monotone_violations"] == 0
    # distance to the d -> infinity scaling function R(x) shrinks with d (deterministic)
    errs = [v[f"collapse_err_d{d}"] for d in (16, 64, 128, 512)]
    assert all(b < a for a, b in zip(errs, errs[1:]))
    assert v["collapse_err_decreasing"] is True


@pytest.mark.parametrize("log2n", [20, 40, 60])
def test_11_polynomial_regime_for_small_d(ci_results, log2n):
    v = ci_results(NB11)["values"]
    # kappa_bar / (alpha (C n)^{1/alpha}) = 1 + O(v_n) with v_n = (C n)^{-1/alpha}; for d = 4 the
    # first-order coefficient is below 1 (expansion of (v(2-v))^{1/2}), so |ratio - 1| <= v_n.
    d = 4
    a = (d - 1) / 2
    log_c = -a * math.log(2) - math.log(a) - special.betaln(a, a)
    v_n = math.exp(-(log_c + log2n * math.log(2)) / a)
    assert abs(v[f"poly_ratio_d{d}_log2n{log2n}"] - 1) <= v_n
    # large d is far from the polynomial law at the same n (log n << d)
    assert v[f"poly_ratio_d128_log2n{log2n}"] < 0.9


def test_11_monte_carlo_small_d_is_stable_and_on_the_weibull_limit(ci_results):
    v = ci_results(NB11)["values"]
    # d = 4 is in the polynomial (Weibull) regime at every simulated n: the median of
    # kappa_16 / kappa_bar does not move across n.  The notebook records the largest standardised
    # change against the smallest n over mc_comparisons (2-4) comparisons: 3.5 sigma keeps the
    # family-wise false-alarm rate below ~0.2%.
    assert v["mc_max_z_across_n_d4"] < 3.5
    # ... while kappa_bar itself grows several-fold over the same range
    assert v["kappa_bar_growth_d4"] > 4
    # and the median sits on the Weibull-limit median (alpha = 3/2): 3.5 combined standard errors
    assert v["mc_z_vs_limit_d4_hi"] < 3.5
    se = math.hypot(v["mc_se_d4_hi"], v["limit_se_d4"])
    assert abs(v["mc_median_d4_hi"] - v["limit_median_d4"]) < 3.5 * se


def test_11_monte_carlo_large_d_behaves_like_gaussian_rows(ci_results):
    v = ci_results(NB11)["values"]
    # d = 64, 128: log n << d, so sphere rows are Gaussian rows; the medians agree with Gaussian rows
    # of the same length at every n (largest |z| over 3-5 lengths; 3.5 sigma as above).
    assert v["mc_max_z_vs_gauss_d64"] < 3.5
    assert v["mc_max_z_vs_gauss_d128"] < 3.5
    # d = 4 is clearly not Gaussian-like (the crossover is visible in the samples too)
    assert v["mc_max_z_vs_gauss_d4"] > 5
