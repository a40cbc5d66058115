"""The deterministic theorems (chapters 02-03): recorded ci-profile numbers against theory.md.

Each test reads ``build/results/ci/<notebook>.json`` through the ``ci_results`` fixture (skipped when the
ci book has not been built) and checks it against the statement it illustrates:

- 02_free_energy: Theorem 1 (free-energy sandwich, H >= log Z) and Lemma 1 (Lambda = 0 iff beta >= kappa);
- 03_collapse_and_spreading: Theorem 2 (collapse), Theorem 3 (spreading) and its K = n case.

(Chapters 04 and 05 have their own files, tests/test_chapter_04.py and tests/test_chapter_05.py.)
Theorems 1-3 are deterministic inequalities, so every violation count must be exactly 0 (the notebooks
allow only float64 rounding, 1e-12 relative).
"""

import math

import pytest

import critscale as cs

FAMILIES = list(cs.families.STANDARD)


# ----------------------------------------------------------------------------- 02: free-energy sandwich

@pytest.fixture
def free_energy(ci_results):
    return ci_results("02_free_energy")["values"]


@pytest.mark.book
@pytest.mark.parametrize("key", ["violations_sandwich", "violations_sandwich_lower", "violations_sandwich_upper",
                                 "violations_entropy", "violations_lemma1", "violations_lambda_shape"])
def test_free_energy_no_violations(free_energy, key):
    """Theorem 1 and Lemma 1 hold on every (row, beta) checked."""
    assert free_energy[key] == 0


@pytest.mark.book
def test_free_energy_checked_every_family(free_energy):
    """The stress test really ran: every family, many (row, beta) pairs, no row silently dropped."""
    table = free_energy["sandwich_table"]
    families = [r["family"] for r in table["records"]]
    assert families == FAMILIES
    assert free_energy["sandwich_points"] >= 1000
    assert free_energy["lemma1_checked"] >= 100
    assert free_energy["tied_rows"] == 0  # continuous families: a tie would signal a sampler bug


@pytest.mark.book
def test_free_energy_margins(free_energy):
    """Margins of the inequalities: non-negative; Lambda(kappa) is 0 up to one rounding; Lemma 1's floor holds."""
    assert free_energy["min_margin_lower"] >= 0
    assert free_energy["min_margin_entropy"] >= 0
    # log Z <= Lambda(beta/2) + log 2: the recorded margin is the smallest slack, must be >= 0
    assert free_energy["min_margin_upper"] >= 0
    assert free_energy["lemma1_max_abs_at_kappa"] <= 1e-12
    assert free_energy["lemma1_min_margin"] >= -1e-12


@pytest.mark.book
def test_free_energy_sandwich_width(free_energy):
    """Below kappa the sandwich is O(1) nats wide: 0 <= log Z - Lambda and 0 <= Lambda(beta/2)+log 2 - log Z.

    The upper width is at most log 2 + (Lambda(beta/2) - Lambda(beta)); the medians must be positive and
    far below log n (n >= 256 in ci), else the bounds would not pin the free energy to leading order.
    """
    assert 0 < free_energy["lower_gap_median"] < math.log(256) / 2
    assert 0 < free_energy["upper_gap_median"] < math.log(256) / 2


# ----------------------------------------------------------------------------- 03: collapse and spreading

@pytest.fixture
def collapse(ci_results):
    return ci_results("03_collapse_and_spreading")["values"]


@pytest.mark.book
@pytest.mark.parametrize("key", ["violations_thm2", "violations_thm2_random", "violations_thm3",
                                 "violations_thm3_random", "violations_dispersion"])
def test_collapse_spreading_no_violations(collapse, key):
    """Theorems 2 and 3 (and the K = n dispersion bound) hold on every (row, beta) checked."""
    assert collapse[key] == 0


@pytest.mark.book
def test_collapse_spreading_checked(collapse):
    """Counts: 12 families x rows x 4 grid values (Thm 2) and x 3 K x 3 grid values (Thm 3)."""
    assert collapse["thm2_checked"] >= len(FAMILIES) * 4 * 10
    assert collapse["thm3_checked"] >= len(FAMILIES) * 9 * 10
    assert collapse["thm3_checked"] == collapse["thm2_checked"] * 9 // 4
    assert collapse["thm2_random_checked"] > 0 and collapse["thm3_random_checked"] > 0
    assert collapse["tied_rows"] == 0


@pytest.mark.book
def test_dispersion_scale_is_log_n_over_range(collapse):
    """kappa_n = log n / R exactly (proof of Corollary 'dispersion'); only float rounding allowed."""
    assert collapse["dispersion_kappa_max_relerr"] <= 1e-12


@pytest.mark.book
@pytest.mark.parametrize("bound", ["thm2_pmax", "thm2_entropy", "thm3_K2", "thm3_K16", "thm3_Kn"])
def test_tightness_quantiles_are_below_one(collapse, bound):
    """Actual/bound ratios: ordered quantiles, all <= 1 (a ratio > 1 would be a violation)."""
    q05, q50, q95 = (collapse[f"tight_{bound}_{q}"] for q in ("q05", "q50", "q95"))
    assert 0 <= q05 <= q50 <= q95 <= 1


@pytest.mark.book
def test_collapse_bound_is_attained_only_by_near_ties(collapse):
    """1 - p_max <= kappa/beta is loose for typical rows (median ratio well below 1, theory.md §5.3: 0.01).

    The 95% quantile must still be a sizeable fraction of the bound (theory.md: 0.70), else the check
    would be vacuous: 0.2 is far below the measured value and far above the median.
    """
    assert collapse["tight_thm2_pmax_q50"] < 0.2
    assert collapse["tight_thm2_pmax_q95"] > 0.2
