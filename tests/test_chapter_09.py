"""Recorded numbers of chapter 09 (09_legendre_entropy, prop-09-legendre), read from the ci-profile results.

Each tolerance is stated next to it: exact arithmetic, or Monte-Carlo standard errors recorded by the
notebook.  The limit curves are written out here, independently of critscale.
"""

import math

import pytest

pytestmark = pytest.mark.book

NB = "09_legendre_entropy"
FAMILIES = ["gauss", "ptail3", "logexp", "edge"]
GAP_C = [0.25, 0.5, 0.75]  # the c values the notebook records (parameters gap_c and legendre_c)
LIMITS = {  # prop-09-legendre, written out
    "gauss": lambda c: 1 - c**2,
    "ptail3": lambda c: 1 - c**1.5,
    "logexp": lambda c: 1 - c,
    "edge": lambda c: 1 - math.sqrt(c),
}
NEIGHBOURS = {"gauss": ["ptail3"], "ptail3": ["gauss", "logexp"], "logexp": ["ptail3", "edge"], "edge": ["logexp"]}


def test_09_exact_inequalities_hold(ci_results):
    """The sandwich Lambda(beta) <= log Z <= Lambda(theta beta) + log(1/(1-theta)) and H >= log Z hold on every
    (row, c) pair (the notebook counts violations with a relative slack of 1e-9), and legendre_transform equals
    log N(t_beta) - beta t_beta at the maximiser of legendre_point.  A Legendre transform counting k instead of
    k + 1 competitors at the k-th gap would break the equality; one taken over the wrong sign of the gaps would
    exceed log Z."""
    v = ci_results(NB)["values"]
    assert v["legendre_violations"] == 0
    assert v["legendre_rows_checked"] == 4 * 3 * 3 * v["legendre_rows"]  # families x lengths x c x rows
    assert v["legendre_consistency_max_abs"] < 1e-9  # identical arithmetic up to rounding


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("c", GAP_C)
def test_09_limit_curves_are_the_proposition(ci_results, family, c):
    """The notebook's limits (critscale.profiles.entropy_profile_limit) are the closed forms above, exactly; the
    neighbouring exponents (e.g. 1 - c^{3/2} for Gaussian rows) differ by more than 0.05 at these c."""
    v = ci_results(NB)["values"]
    assert v[f"limit_{family}_c{c:g}"] == pytest.approx(LIMITS[family](c), abs=1e-12)
    for other in NEIGHBOURS[family]:
        assert abs(LIMITS[other](c) - LIMITS[family](c)) > 0.05


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("c", GAP_C)
def test_09_extrapolated_profile_hits_its_limit_and_rejects_the_neighbours(ci_results, family, c):
    """eq-09-finite-size fitted to E H/log n at three lengths: the intercept at 1/log n = 0 is within 3 of its
    standard errors of the predicted limit (12 fits: a family-wise false-alarm rate of about 3%), and for
    c <= 0.5 more than 5 standard errors from the limit curve of each neighbouring family, the plausible wrong
    answer (Gaussian rows with 1 - c^{3/2}, logexp rows with 1 - sqrt(c), ...).  The fit leaves one degree of
    freedom: its chi^2 stays below 10.8 (p = 0.001).  The raw value at the largest length is not a test of the
    limit: it is above both the limit and the lower neighbours."""
    v = ci_results(NB)["values"]
    tag = f"{family}_c{c:g}"
    value, se = v[f"extrap_{tag}"], v[f"extrap_se_{tag}"]
    assert abs(value - LIMITS[family](c)) < 3 * se
    assert v[f"extrap_z_{tag}"] == pytest.approx((value - LIMITS[family](c)) / se, rel=1e-9)
    if c <= 0.5:
        for other in NEIGHBOURS[family]:
            assert abs(value - LIMITS[other](c)) > 5 * se, f"{tag}: {other}'s curve is not rejected"
    assert v[f"extrap_chi2_{tag}"] < 10.8
    assert v[f"extrap_lo_{tag}"] == pytest.approx(value - 1.96 * se) and v[f"extrap_hi_{tag}"] > value


def test_09_leading_order_finite_size_models_fail_their_calibration(ci_results):
    """The page keeps the whole computed correction because the simpler models fail on a null with a known
    answer: regressed on 1/log n, with or without the leading log log n/log n term, H_ann/log n (whose limit is
    l(c) exactly) extrapolates to a value off by more than 3 standard errors of the Monte-Carlo intercept."""
    v = ci_results(NB)["values"]
    assert v["bias_loglog_max_in_se"] > 3
    worst_plain = max(abs(v[f"bias_plain_{f}_c{c:g}"]) / v[f"extrap_se_{f}_c{c:g}"] for f in FAMILIES for c in GAP_C)
    assert worst_plain > 3


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("c", [0.25, 0.5])
def test_09_free_energy_offset_follows_the_laplace_prefactor(ci_results, family, c):
    """log Z - Lambda(beta), in nats, tracks the annealed Laplace prefactor D(n) of eq-09-annealed, which grows
    like log log n / 2: the discrepancy r = (log Z - Lambda) - D at the largest length is no larger than at the
    smallest, up to 3 combined standard errors (independent rows).  Two plausible wrong answers fail the same
    comparison, and the test checks that they would: an offset bounded in n ("the free energy is the Legendre
    transform to within a constant", frozen at its value at the smallest length), and an offset as large as
    the width of the theta = 1/2 sandwich, a fixed fraction of log n."""
    v = ci_results(NB)["values"]
    tag = f"{family}_c{c:g}"
    offset = {s: v[f"freeenergy_offset_nats_{tag}_{s}"] for s in ("lo", "hi")}
    laplace = {s: v[f"laplace_{tag}_{s}"] for s in ("lo", "hi")}
    sem = math.hypot(v[f"freeenergy_offset_nats_sem_{tag}_lo"], v[f"freeenergy_offset_nats_sem_{tag}_hi"])
    allowance = abs(offset["lo"] - laplace["lo"]) + 3 * sem
    assert abs(offset["hi"] - laplace["hi"]) <= allowance
    bounded = offset["lo"]
    sandwich = v[f"sandwich_width_{tag}_hi"] * math.log(v["n_max"])
    for wrong in (bounded, sandwich):
        assert abs(wrong - laplace["hi"]) > allowance


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("c", [0.25, 0.5])
def test_09_free_energy_offset_shrinks_relative_to_log_n(ci_results, family, c):
    """(log Z - Lambda)/log n falls from the smallest to the largest length by more than 3 combined standard errors
    (independent rows); an offset proportional to log n would not fall.  Deep in the subcritical phase only:
    near c = 1 the competitors at t_beta are few and the ci data do not resolve the fall (the page says so)."""
    v = ci_results(NB)["values"]
    tag = f"{family}_c{c:g}"
    lo, hi = v[f"freeenergy_offset_{tag}_lo"], v[f"freeenergy_offset_{tag}_hi"]
    s_lo, s_hi = v[f"freeenergy_offset_sem_{tag}_lo"], v[f"freeenergy_offset_sem_{tag}_hi"]
    assert lo - hi > 3 * math.hypot(s_lo, s_hi)


def test_09_exercise_solution(ci_results):
    """Exercise 9.1: ptail1.5 rows at c = 1/2 extrapolate to 1 - c^3 within 3 standard errors and lie more than
    5 standard errors from the ptail3 curve 1 - c^{3/2} (the answer to the exercise's question)."""
    v = ci_results(NB)["values"]
    assert v["exercise_limit"] == pytest.approx(1 - 0.5**3, abs=1e-12)
    assert abs(v["exercise_value"] - v["exercise_limit"]) < 3 * v["exercise_se"]
    assert abs(v["exercise_value"] - (1 - 0.5**1.5)) > 5 * v["exercise_se"]
