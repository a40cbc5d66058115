"""Chapter 03 (collapse and spreading): every check the notebook records, read from the ci-profile results.

thm-03-collapse, thm-03-spreading and cor-03-dispersion are deterministic inequalities, so every violation
count must be exactly 0 (the notebook allows float64 rounding only, 1e-12 relative).  The tightness
quantiles are ratios actual/bound, so they lie in [0, 1]; where the page states how tight a bound is, the
statement is tested with the reason for its allowance in the docstring.
"""

import math

import pytest

import critscale as cs

FAMILIES = list(cs.families.STANDARD)


@pytest.fixture
def values(ci_results):
    return ci_results("03_collapse_and_spreading")["values"]


@pytest.mark.book
@pytest.mark.parametrize("key", ["violations_thm2", "violations_thm2_random", "violations_thm3",
                                 "violations_thm3_random", "violations_dispersion"])
def test_collapse_spreading_no_violations(values, key):
    """Theorems thm-03-collapse and thm-03-spreading (and the K = n dispersion bound) hold on every (row, beta)
    checked; the slips kappa/(2 beta) for kappa/beta or K^-(1 + beta/kappa_K) would be violated on many rows."""
    assert values[key] == 0


@pytest.mark.book
def test_collapse_spreading_checked(values):
    """Counts: 12 families x rows x 4 grid values (collapse) and x 3 K x 3 grid values (spreading)."""
    assert values["thm2_checked"] >= len(FAMILIES) * 4 * 10
    assert values["thm3_checked"] >= len(FAMILIES) * 9 * 10
    assert values["thm3_checked"] == values["thm2_checked"] * 9 // 4
    assert values["thm2_random_checked"] > 0 and values["thm3_random_checked"] > 0
    assert values["tied_rows"] == 0


@pytest.mark.book
def test_dispersion_scale_is_log_n_over_range(values):
    """kappa_n = log n / R exactly (proof of cor-03-dispersion); only float rounding allowed."""
    assert values["dispersion_kappa_max_relerr"] <= 1e-12


@pytest.mark.book
@pytest.mark.parametrize("bound", ["thm2_pmax", "thm2_entropy", "thm3_K2", "thm3_K16", "thm3_Kn"])
def test_tightness_quantiles_are_below_one(values, bound):
    """Actual/bound ratios: ordered quantiles, all <= 1 (a ratio > 1 would be a violation)."""
    q05, q50, q95 = (values[f"tight_{bound}_{q}"] for q in ("q05", "q50", "q95"))
    assert 0 <= q05 <= q50 <= q95 <= 1


@pytest.mark.book
def test_collapse_bound_is_tight_near_kappa_and_loose_far_above(values):
    """The page's reading of the tightness: 1 - p_max <= kappa/beta is loose for a typical (row, beta) (median
    ratio below 0.2) but not vacuous (95% quantile above 0.2); it is within a factor of about two at beta = 1.5
    kappa (median above 0.25, i.e. within a factor 4 even allowing for the ci rows' spread) and exponentially
    loose at beta = 100 kappa (median below 1e-6, where one competitor at the typical top gap already has
    weight e^{-100 kappa Delta_(2)}).  A bound off by a constant factor (say kappa/(10 beta)) would put the
    median at 1.5 kappa above 1, a violation."""
    assert values["tight_thm2_pmax_q50"] < 0.2 < values["tight_thm2_pmax_q95"]
    assert values["thm2_first_x"] == 1.5 and values["thm2_last_x"] == 100
    assert 0.25 < values["tight_thm2_pmax_median_first_x"] <= 1
    assert values["tight_thm2_pmax_median_last_x"] < 1e-6


@pytest.mark.book
def test_zipf_exercise(values):
    """The exercise's Zipf row s_k = -log k: at beta = 4 kappa its ratios are those of the infinite row,
    (zeta(4) - 1) * 3 and (1 - 1/zeta(4)) * 4 with zeta(4) = pi^4/90 (the tail of the sum beyond n = 1000 is
    below 1e-9); near kappa the ratio for Z - 1 grows with n, and both stay <= 1 (item 1 of thm-03-collapse).
    At beta = 1.1 kappa the weight outside the maximum nearly attains its bound: with sum_{k<=n} k^-1.1 >=
    zeta(1.1) - 10 n^-0.1 the ratio 1.1 (1 - 1/Z) is above 0.93 for every n >= 10^4 (the longest ci row).
    A softmax without the maximum shift, or a bound kappa/beta in place of kappa/(beta - kappa), changes them."""
    zeta4 = math.pi**4 / 90
    assert values["ex_z_at_4"] == pytest.approx((zeta4 - 1) * 3, rel=1e-6)
    assert values["ex_outside_at_4"] == pytest.approx((1 - 1 / zeta4) * 4, rel=1e-6)
    assert values["ex_z_short"] < values["ex_z_long"] <= values["ex_z_best"] <= 1
    assert 0.9 < values["ex_outside_best"] <= 1
