"""The critical temperatures and the ladder (chapters 04-05): recorded ci-profile numbers against theory.md.

Each test reads ``build/results/ci/<notebook>.json`` through the ``ci_results`` fixture (skipped when the
ci book has not been built) and checks it against the statement it illustrates:

- 04_critical_temperatures: Corollary 5 (brackets of beta_1/2 and beta(H0)) and entropy invariance (§5.4);
- 05_ladder: the family -> law table of §4.1 and the fitted exponents of §5.1.

Corollary 5 is a deterministic inequality, so every violation count must be exactly 0
(the notebooks allow only float64 rounding, 1e-12 relative, and 1e-9 relative for the root finders).
Statistical statements are tested only where the small ci sizes resolve them; the quantitative versions
(e.g. flatness of beta(H0)/kappa_bar for every family) live in the cpu profile and are discussed in the
notebooks, not asserted here.
"""

import math

import numpy as np
import pytest

import critscale as cs

FAMILIES = list(cs.families.STANDARD)


# ----------------------------------------------------------------------------- 04: critical temperatures

@pytest.fixture
def critical(ci_results):
    return ci_results("04_critical_temperatures")["values"]


@pytest.mark.book
def test_brackets_hold(critical):
    """Corollary 5: kappa_K (1 - log2/log K) <= beta_1/2 <= 2 kappa; same for beta(H0)."""
    assert critical["violations_beta_half"] == 0
    assert critical["violations_beta_entropy"] == 0
    assert critical["beta_half_checked"] >= len(FAMILIES) * 10
    assert critical["beta_entropy_checked"] >= len(FAMILIES) * 10
    assert critical["beta_half_max_upper_ratio"] <= 1 + 1e-9
    assert critical["beta_half_min_lower_ratio"] >= 1 - 1e-9


@pytest.mark.book
@pytest.mark.parametrize("family", ["planted", "simplex"])
def test_beta_half_of_planted_rows_sits_at_kappa_bar(critical, family):
    """Planted/simplex rows: p_max = 1/2 where (n-1) e^{-beta g} ~ 1, i.e. beta_1/2 ~ log n / g = kappa_bar.

    The bulk width w (planted) or eta (simplex) smears the gap, so the ratio is 1 up to O(w / g) relative
    corrections (theory.md §5.3 measures 0.78 for planted with w = g, 1.02 for the simplex): [0.6, 1.2].
    """
    assert 0.6 <= critical[f"beta_half_over_kappa_bar_median_{family}"] <= 1.2


def _factors(critical, family):
    """kappa_bar and Su's log n factor between the ci lengths n0 and n1 (computed here, not recorded)."""
    n0, n1 = critical["invariance_n0"], critical["invariance_n1"]
    fam = cs.families.get(family)
    kbar = fam.kappa_bar(n1) / fam.kappa_bar(n0)
    su = cs.rules.entropy_invariant(n1, n_train=n0)
    return kbar, su


@pytest.mark.book
def test_su_factor_recorded(critical):
    n0, n1 = critical["invariance_n0"], critical["invariance_n1"]
    assert critical["su_factor"] == pytest.approx(math.log(n1) / math.log(n0), rel=1e-12)


@pytest.mark.book
@pytest.mark.parametrize("H0", ["H0.5", "H1", "H2"])
def test_entropy_invariance_where_resolved(critical, H0):
    """beta(H0) follows kappa_bar_n, not log n (Corollary 5 with kappa ~ kappa_bar; theory.md §5.4).

    Tested only where the ci sizes resolve it: families whose kappa_bar factor between the shortest and
    longest ci length differs from Su's log n factor by more than 4x (at the ci lengths this selects the
    power-law families unif and sphere3; the selection is computed from cs.families and cs.rules, not
    listed, and must not be empty).  There the bootstrap interval of the Su-normalised drift must lie
    strictly beyond that of the kappa_bar-normalised drift, and the kappa_bar drift must be the closer
    to 1.  The other families are compared in the cpu profile (notebook text and drift table).
    """
    resolved = []
    for family in FAMILIES:
        kbar, su = _factors(critical, family)
        if abs(math.log(kbar / su)) <= math.log(4):
            continue
        resolved.append(family)
        tag = f"{H0}_{family}"
        lo_su, hi_su = critical[f"drift_su_lo_{tag}"], critical[f"drift_su_hi_{tag}"]
        lo_k, hi_k = critical[f"drift_kbar_lo_{tag}"], critical[f"drift_kbar_hi_{tag}"]
        assert lo_k <= critical[f"drift_kbar_{tag}"] <= hi_k, family
        if kbar > su:
            assert lo_su > hi_k, family
        else:
            assert hi_su < lo_k, family
        assert abs(math.log(critical[f"drift_kbar_{tag}"])) < abs(math.log(critical[f"drift_su_{tag}"])), family
    assert len(resolved) >= 2, "the ci lengths resolve no family: widen invariance_n in params/ci"


@pytest.mark.book
@pytest.mark.parametrize("H0", ["H0.5", "H1", "H2"])
@pytest.mark.parametrize("family", FAMILIES)
def test_drift_identity(critical, family, H0):
    """drift_su = drift_kbar * kappa_bar factor / Su factor: the two normalisations of one measurement."""
    kbar, su = _factors(critical, family)
    tag = f"{H0}_{family}"
    assert critical[f"drift_su_{tag}"] == pytest.approx(critical[f"drift_kbar_{tag}"] * kbar / su, rel=1e-9)


# ----------------------------------------------------------------------------- 05: the ladder

LADDER_COLUMNS_PREFIX = ["family", "predicted law"]
LADDER_RULES = {  # theory.md §4.1: which published rule each standard family's kappa_bar reproduces
    "gauss": "sqrt(2 log n)", "ptail1": "none", "ptail3": "none", "logexp": "log n", "edge": "(log n)^2",
    "planted": "log n", "simplex": "log n", "planted_shrink": "(log n)^2",
    "unif": "n^{2/(d-1)}, d = 3", "sphere3": "n^{2/(d-1)}, d = 3", "sphere5": "n^{2/(d-1)}, d = 5",
    "sphere9": "n^{2/(d-1)}, d = 9",
}
LOGLOG = ["gauss", "ptail1", "ptail3", "logexp", "edge", "planted", "simplex", "planted_shrink"]
POWER = ["unif", "sphere3", "sphere5", "sphere9"]


@pytest.fixture
def ladder(ci_results):
    return ci_results("05_ladder")["values"]


def _records(ladder):
    table = ladder["ladder_table"]
    return table["columns"], {r["family"]: r for r in table["records"]}


@pytest.mark.book
def test_ladder_table_shape(ladder):
    columns, records = _records(ladder)
    assert columns[:2] == LADDER_COLUMNS_PREFIX
    kbar_cols = [c for c in columns if c.startswith("κ̄ at n=2^")]
    assert len(kbar_cols) == 3
    for needed in ("fitted exponent of median κ_16 [95%]", "exact κ̄ slope", "published rule matched"):
        assert needed in columns
    assert sorted(records) == sorted(FAMILIES)


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_kappa_bar_columns_are_exact(ladder, family):
    """The kappa_bar columns equal the family's exact scale (rounded to 4 decimals in the table)."""
    columns, records = _records(ladder)
    fam = cs.families.get(family)
    for col in (c for c in columns if c.startswith("κ̄ at n=2^")):
        n = 2 ** int(col.split("^")[1])
        assert records[family][col] == pytest.approx(fam.kappa_bar(n), abs=5.1e-5, rel=1e-12)


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_rule_matches_section_4_1(ladder, family):
    _, records = _records(ladder)
    assert records[family]["published rule matched"] == LADDER_RULES[family]


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_exact_slope(ladder, family):
    """The recorded exact kappa_bar slope is the least-squares slope over the fitted lengths."""
    fit_n = np.asarray(ladder["fit_n"], dtype=float)
    x = np.log(np.log(fit_n)) if family in LOGLOG else np.log(fit_n)
    y = np.log(cs.families.get(family).kappa_bar(fit_n))
    expected = np.polyfit(x, y, 1)[0]
    assert ladder[f"kbar_slope_{family}"] == pytest.approx(expected, abs=1e-9)
    lo, hi = ladder[f"exponent_lo_{family}"], ladder[f"exponent_hi_{family}"]
    assert lo <= hi


@pytest.mark.book
@pytest.mark.parametrize("family", ["unif", "sphere3", "sphere5", "ptail1"])
def test_ladder_exponent_interval_contains_kappa_bar_slope(ladder, family):
    """Where meaningful, the 95% interval of the fitted exponent contains the exact kappa_bar slope.

    Meaningful means: the ratio kappa_16 / kappa_bar has no slow drift over the fitted lengths, so the two
    slopes agree at finite n.  That holds for the Weibull families (power-law corrections, log n
    coordinates, alpha <= 2) and for exponential scores (Renyi: the top gaps are exactly n-free sums of
    Exp/k).  sphere9 (alpha = 4) is left out: its median ratio still climbs (theory.md §5.1: 0.63 -> 0.70),
    and at cpu sizes its interval just excludes the exact slope.  For
    gauss, ptail3, logexp and edge the median ratio still drifts like a power of 1/log n (theory.md §5.1:
    gauss 0.81 -> 0.90 from 2^10 to 2^20), which biases the fitted slope upwards; at cpu sizes the
    interval excludes the exact slope for gauss and edge, as the notebook states.  For the planted
    families kappa approaches log n / g from below (Theorem 8), so their slope exceeds 1 by design.
    """
    lo, hi = ladder[f"exponent_lo_{family}"], ladder[f"exponent_hi_{family}"]
    assert lo <= ladder[f"kbar_slope_{family}"] <= hi
    assert ladder[f"kbar_slope_in_interval_{family}"] is True


@pytest.mark.book
@pytest.mark.parametrize("rungs", [("ptail1", "logexp", "edge"), ("sphere9", "sphere5", "unif")])
def test_ladder_rungs_are_resolved(ladder, rungs):
    """Rungs whose exact slopes differ by >= 1/4 in log n, or by 1 in log log n, are separated by the data:
    the fitted intervals are disjoint and ordered as the exact slopes."""
    for lower, upper in zip(rungs, rungs[1:]):
        assert ladder[f"kbar_slope_{lower}"] < ladder[f"kbar_slope_{upper}"]
        assert ladder[f"exponent_hi_{lower}"] < ladder[f"exponent_lo_{upper}"]


@pytest.mark.book
@pytest.mark.parametrize("family", LOGLOG + POWER)
def test_ladder_measured_scale_tracks_kappa_bar(ladder, family):
    """kappa_16 / kappa_bar is of order one at every length (the definition of an accumulation scale).

    Bounds from the limit laws: Gumbel median of kappa_16/kappa_bar is 0.98 (theory.md §5.1) and the Weibull
    medians are 0.19 (alpha = 1), 0.45 (alpha = 2), 0.65 (alpha = 4); planted rows sit at 1 - O(loglog n/log n).
    [0.1, 2] is wide enough for finite-n drift and small-sample medians, and narrow enough that a wrong
    scale (e.g. log n for Gaussian rows, a factor 2-3; n for sphere5, a factor 16-100) fails.
    """
    for key in ("median_ratio_first_", "median_ratio_last_"):
        assert 0.1 <= ladder[key + family] <= 2.0
