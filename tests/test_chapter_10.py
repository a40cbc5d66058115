"""Recorded numbers of chapter 10 (10_rescaling_rules, prop-10-rules), read from the ci-profile results.

Each tolerance is stated next to it: exact arithmetic (a few ulps of the quantities involved), Monte-Carlo
standard errors recorded by the notebook, or the rounding of an independently computed reference value
(theory.md §4.1).  Closed forms are recomputed here with math/scipy, not with critscale.
"""

import math

import pytest
from scipy import stats

pytestmark = pytest.mark.book

NB = "10_rescaling_rules"


def test_10_su_formula_is_the_legendre_transform_of_a_step(ci_results):
    """|Su - Lambda| = beta g/n exactly on the step row for c <= 1 (a formula off by the mean over n - 1 entries,
    or compared with H, is off by orders of magnitude more); 0 <= log Z - Lambda <= log 2; kappa = log n/g."""
    v = ci_results(NB)["values"]
    # the ratio is 1 up to cancellation in log n - beta g (size ~14, ulp ~2e-15) against beta g/n ~ 1e-6
    assert v["su_excess_over_bound"] == pytest.approx(1.0, abs=1e-6)
    assert v["su_free_energy_gap_min"] >= -1e-12
    assert v["su_free_energy_gap_max"] <= math.log(2) + 1e-12
    assert v["su_kappa_step_rel_err"] < 1e-12


def test_10_su_derivation_errors_cancel_and_its_second_step_misses_the_entropy(ci_results):
    """The derivation of item 1: the error of step (i), e1 = log(1 + (n^c - 1)/n) - beta g/n, and the excess of
    the free energy over Lambda, e2 = log(1 + (n^c - 1)/n), cancel to beta g/n (checked on every c <= 1 by the
    notebook to 1e-12); step (ii) misses H by beta g (1 - p_max), about c log n.  The sentence "both steps are
    exact" would need e1 = 0 and a step-(ii) error of 0: at c = 1/2, n = 2^20 they are 1e-3 and 0.5 log n."""
    v = ci_results(NB)["values"]
    n = v["su_n_max"]
    log_n = math.log(n)
    assert v["su_cancellation_max_err"] < 1e-12
    e2 = math.log1p((n**0.5 - 1) / n)
    assert v["su_free_energy_excess_c05"] == pytest.approx(e2, rel=1e-6)          # log Z - Lambda, cancellation ~1e-10
    assert v["su_step1_error_c05"] == pytest.approx(e2 - 0.5 * log_n / n, rel=1e-6)
    p_max = n**0.5 / (n**0.5 + n - 1)
    assert v["su_step2_error_over_log_n_c05"] == pytest.approx(0.5 * (1 - p_max), rel=1e-9)
    assert v["su_step1_error_c05"] > 1e-4 and v["su_step2_error_over_log_n_c05"] > 0.4


def test_10_su_step_row_values_against_closed_forms(ci_results):
    """Su's formula and H of the step row at c = 1/2 from their closed forms: the formula is 0.5 log n, the entropy
    close to log n (reading the formula as the entropy, the brief's slip, is off by 0.5 log n)."""
    v = ci_results(NB)["values"]
    n = v["su_n_max"]
    log_n = math.log(n)
    assert v["su_formula_over_log_n_c05"] == pytest.approx(0.5 + 0.5 / n, abs=1e-12)
    z = 1 + (n - 1) * n**-0.5
    p_top, p_bulk = 1 / z, n**-0.5 / z
    h = -p_top * math.log(p_top) - (n - 1) * p_bulk * math.log(p_bulk)
    assert v["su_entropy_over_log_n_c05"] == pytest.approx(h / log_n, rel=1e-9)
    assert v["su_entropy_over_log_n_c05"] - v["su_formula_over_log_n_c05"] > 0.45


def test_10_su_on_sampled_planted_rows(ci_results):
    """Su's zero on planted rows with a spread bulk is at c = g/(g + w/2) = 2/3 (a formula using the gap to the top
    of the bulk would give 1): s_max - mean(s) = (n-1)/n (1 + 1/2) on average, so the zero is at c = n/(1.5 (n-1));
    the mean over rows of the gap has sd (1/sqrt 12)/sqrt(rows (n-1)), and c = 1/gap moves by c sd/gap: 5 of those."""
    v = ci_results(NB)["values"]
    n, rows = v["planted_n"], v["planted_rows"]
    expected = n / (1.5 * (n - 1))
    sd = expected / 1.5 * (1 / math.sqrt(12)) / math.sqrt(rows * (n - 1))
    assert abs(v["planted_su_zero_c"] - expected) < 5 * sd + 1e-12
    # kappa <= log n / g holds deterministically (N(t) = 1 below g and N <= n), strictly a.s.
    assert 0 < v["planted_kappa_zero_c"] < 1
    # p_max = 1/2 needs beta <= 2 kappa (Corollary 5), so beta_1/2 / kappa_bar < 2 kappa / kappa_bar
    assert 0 < v["planted_half_c"] < 2 * v["planted_kappa_zero_c"]


def test_10_ssmax_example_exact(ci_results):
    """kappa = log n/5 and beta/kappa = 5 s = 2.15 exactly on SSMax's row (a kappa read at the wrong gap, e.g. log n/3,
    would put s = 0.43 at 1.29); p_max against its closed form; s at p_max = 1/2 is log(n-1)/(5 log n)."""
    v = ci_results(NB)["values"]
    assert v["ssmax_kappa_max_rel_err"] < 1e-12
    assert v["ssmax_beta_over_kappa_min"] == pytest.approx(5 * 0.43, abs=1e-12)
    assert v["ssmax_beta_over_kappa_max"] == pytest.approx(5 * 0.43, abs=1e-12)
    assert v["ssmax_s_critical"] == pytest.approx(0.2, abs=1e-12)
    assert v["ssmax_p_max_max_rel_err"] < 1e-12
    assert v["ssmax_thm2_violations"] == 0
    n = v["ssmax_n_last"]
    q = (n - 1) * n**-2.15
    assert v["ssmax_one_minus_p_max_last"] == pytest.approx(q / (1 + q), rel=1e-6)  # 1 - p_max loses ~1e-16/1e-7
    # p_max = 1/2 at (n-1) e^{-5 beta} = 1; root finder tolerance 1e-13 relative
    assert v["ssmax_s_half_last"] == pytest.approx(math.log(n - 1) / (5 * math.log(n)), rel=1e-9)


def _gauss_kappa_bar(n):
    """n phi(u_n), u_n the 1/n upper quantile (scipy, independent of critscale)."""
    return n * stats.norm.pdf(stats.norm.isf(1.0 / n))


def _yarn(n, n_train=4096):
    s = n / n_train
    return (0.1 * math.log(s) + 1) ** 2 if s > 1 else 1.0


def test_10_drift_factors_exact(ci_results):
    """Drift factors from 2^10 to 2^30: ratios of powers of log n on planted and edge rows, scipy's normal quantile
    on Gaussian rows (the inverse ratio, a plausible slip, gives the reciprocals, e.g. 1.73 for 0.577)."""
    v = ci_results(NB)["values"]
    lo, hi = 2.0**10, 2.0**30
    assert v["drift_lo"] == 2**10 and v["drift_hi_log2"] == 30
    assert v["drift_logn_planted"] == pytest.approx(1.0, abs=1e-12)
    assert v["drift_sqrt_planted"] == pytest.approx(math.sqrt(1 / 3), abs=1e-12)
    assert v["drift_logn2_planted"] == pytest.approx(3.0, abs=1e-12)
    assert v["drift_yarn_planted"] == pytest.approx(_yarn(hi) / 3.0, rel=1e-12)
    assert v["drift_logn2_edge"] == pytest.approx(1.0, abs=1e-12)
    assert v["drift_logn_edge"] == pytest.approx(1 / 3, abs=1e-12)
    assert v["drift_sqrt_edge"] == pytest.approx((1 / 3) ** 1.5, abs=1e-12)
    assert v["drift_yarn_edge"] == pytest.approx(_yarn(hi) / 9.0, rel=1e-12)
    k_lo, k_hi = _gauss_kappa_bar(lo), _gauss_kappa_bar(hi)
    assert v["drift_sqrt_gauss"] == pytest.approx(math.sqrt(3) * k_lo / k_hi, rel=1e-9)
    assert v["drift_logn_gauss"] == pytest.approx(3 * k_lo / k_hi, rel=1e-9)
    assert v["drift_yarn_gauss"] == pytest.approx(_yarn(hi) * k_lo / k_hi, rel=1e-9)
    # theory.md §4.1 quotes "about 2.8x" for YaRN on Gaussian rows (independent computation, two significant
    # digits): allow the rounding half-unit 0.05
    assert abs(v["drift_yarn_gauss"] - 2.8) < 0.05


def test_10_effective_exponents(ci_results):
    """d log f/d log log n at n = 2^30 by a central difference (truncation O(h^2) ~ 1e-8); a derivative in log n
    instead would give the exponent divided by log log n (0.17 for sqrt(2 log n))."""
    v = ci_results(NB)["values"]
    assert v["exponent_sqrt"] == pytest.approx(0.5, abs=1e-6)
    assert v["exponent_logn"] == pytest.approx(1.0, abs=1e-6)
    assert v["exponent_logn2"] == pytest.approx(2.0, abs=1e-6)
    n = 2.0**30
    yarn_exponent = 0.2 * math.log(n) / (0.1 * math.log(n / 4096) + 1)   # d log yarn / d log log n
    assert v["exponent_yarn"] == pytest.approx(yarn_exponent, abs=1e-6)
    assert v["exponent_family_planted"] == pytest.approx(1.0, abs=1e-6)
    assert v["exponent_family_edge"] == pytest.approx(2.0, abs=1e-6)
    assert 0.5 < v["exponent_family_gauss"] < 0.6   # sqrt(2 log n) plus a loglog correction that raises it
    assert v["closest_family_sqrt"] == "gauss"
    assert v["closest_family_logn"] == "planted"
    assert v["closest_family_logn2"] == "edge"
    assert v["closest_family_yarn"] == "edge"
    assert v["entropy_invariant_vs_ssmax_max_diff"] < 1e-12


def test_10_monte_carlo_matching_rule_keeps_collision_flat(ci_results):
    """Following sqrt(2 log n) from c = 2, E sum p^2 changes by the exactly computed move of its PD(1/c) limit plus
    the change of its finite-n excess over the limit, which only shrinks (Gumbel-class convergence from above,
    theory.md §5.2): the change minus the limit's move lies in [-(excess at the smallest n), 0], widened by 3
    standard errors (independent rows).  A rule that moved c as log n does raises E sum p^2 by the paired excess
    of the next test at the largest n, which is above the upper end of this interval."""
    v = ci_results(NB)["values"]
    sem = math.hypot(v["check_sqrt_sem_lo"], v["check_sqrt_sem_hi"])
    change = (v["check_sqrt_mean_hi"] - v["check_sqrt_mean_lo"]) - (v["check_sqrt_pd_hi"] - v["check_sqrt_pd_lo"])
    excess_lo = v["check_sqrt_mean_lo"] - v["check_sqrt_pd_lo"]
    assert excess_lo > 0
    assert -excess_lo - 3 * sem <= change <= 3 * sem
    assert v["check_sqrt_pd_lo"] == pytest.approx(1 - 1 / v["check_c0"], abs=1e-12)
    assert v["check_logn_minus_sqrt_hi"] > 3 * sem


@pytest.mark.parametrize("rule", ["logn", "yarn"])
def test_10_monte_carlo_mismatched_rules_drift(ci_results, rule):
    """Paired on the same rows, a mismatched rule's collision probability exceeds the matching rule's by more than
    5 paired standard errors, by the amount the PD(1/c) law predicts at the moved operating point.

    No allowance is taken from the observed offset.  The finite-size model is chapter 06's coupling: the paired
    excess is split, on the same rows, into the paired difference of the rows' own limit points (exact
    Poisson-Dirichlet samples, so it must match the PD(1/c) difference within 3 of its standard errors) and the
    difference of the two rules' finite-size corrections D_n, which eq-06-correction (leading term
    c eps_n/(c - 1)^2, falling in c above 1) predicts to be <= 0 (up to 3 of its standard errors) because the
    mismatched rule sits at the larger c.  A rule that did not move c gives an excess of 0; a wrong PD(1/c)
    difference (e.g. 1/c for 1 - 1/c) fails the limit-point comparison."""
    v = ci_results(NB)["values"]
    excess = v[f"check_{rule}_minus_sqrt_hi"]
    sem = v[f"check_{rule}_minus_sqrt_sem_hi"]
    assert excess > 5 * sem
    points, points_sem = v[f"check_{rule}_minus_sqrt_points_hi"], v[f"check_{rule}_minus_sqrt_points_sem_hi"]
    assert abs(points - v[f"check_{rule}_minus_sqrt_pd_hi"]) <= 3 * points_sem
    correction = v[f"check_{rule}_minus_sqrt_correction_hi"]
    assert excess == pytest.approx(points + correction, rel=1e-9)
    assert correction <= 3 * v[f"check_{rule}_minus_sqrt_correction_sem_hi"]
    assert v[f"check_{rule}_c_hi"] > v["check_c0"]


def test_10_exercise_solution(ci_results):
    """Exercise 10.1 on ptail3 rows (kappa_bar = 3 (log n)^{2/3}): drifts 3^{-1/6} and 3^{1/3} of sqrt(2 log n) and
    log n from 2^10 to 2^30, exponent 2/3, and (log n)^{2/3} flat; exponents 1/2 or 1 would give other drifts."""
    v = ci_results(NB)["values"]
    assert v["exercise_drift_sqrt"] == pytest.approx(3 ** (-1 / 6), rel=1e-12)
    assert v["exercise_drift_logn"] == pytest.approx(3 ** (1 / 3), rel=1e-12)
    assert v["exercise_gamma"] == pytest.approx(2 / 3, abs=1e-6)
    assert v["exercise_drift_gamma"] == pytest.approx(1.0, abs=1e-12)
