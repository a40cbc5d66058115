"""Chapter 02 (free-energy sandwich): every check the notebook records, read from the ci-profile results.

thm-02-sandwich, lem-02-lambda-zero and cor-02-width are deterministic inequalities, so every violation count
must be exactly 0 (the notebook allows float64 rounding only, 1e-12 relative).  The width study is the one
statistical statement: the width of the sandwich on Gaussian rows at beta = c kappa_bar_n, fitted against
log n, is compared with the same computation on the smooth gap count of the Gaussian law, with standard
errors from the row-to-row spread.
"""

import math

import pytest

import critscale as cs

FAMILIES = list(cs.families.STANDARD)


@pytest.fixture
def values(ci_results):
    return ci_results("02_free_energy")["values"]


@pytest.mark.book
@pytest.mark.parametrize("key", ["violations_sandwich", "violations_sandwich_lower", "violations_sandwich_upper",
                                 "violations_entropy", "violations_width", "violations_lemma1",
                                 "violations_lambda_shape", "width_study_violations"])
def test_free_energy_no_violations(values, key):
    """thm-02-sandwich, cor-02-width and lem-02-lambda-zero hold on every (row, beta) checked; an upper bound
    with Lambda(beta/theta) for Lambda(theta beta), or a width bound without its log n term, fails here."""
    assert values[key] == 0


@pytest.mark.book
def test_free_energy_checked_every_family(values):
    """The stress test really ran: every family, many (row, beta) pairs, no row silently dropped."""
    table = values["sandwich_table"]
    families = [r["family"] for r in table["records"]]
    assert families == FAMILIES
    assert values["sandwich_points"] >= 1000
    assert values["lemma1_checked"] >= 100
    assert values["tied_rows"] == 0  # continuous families: a tie would signal a sampler bug


@pytest.mark.book
def test_free_energy_margins(values):
    """Margins of the inequalities: non-negative; Lambda(kappa) is 0 up to one rounding; Lemma 1's floor holds;
    the width bound is sharp (ratio 1 up to rounding where Lambda is affine on [0, beta]) and never exceeded."""
    assert values["min_margin_lower"] >= 0
    assert values["min_margin_entropy"] >= 0
    assert values["min_margin_upper"] >= 0  # log Z <= Lambda(beta/2) + log 2, smallest slack
    assert values["lemma1_max_abs_at_kappa"] <= 1e-12
    assert values["lemma1_min_margin"] >= -1e-12
    assert values["width_bound_max_ratio"] <= 1 + 1e-12


@pytest.mark.book
def test_width_at_fixed_theta_grows_like_log_n(values):
    """At theta = 1/2 the sandwich is a fixed fraction of log n wide on Gaussian rows, not O(1) nats.

    Rejects the false claim the chapter used to make (that the theta = 1/2 sandwich pins log Z to O(1)): a width
    bounded in n has slope 0 in log n, and the measured slope must exceed 5 standard errors.  The slope must also
    agree, within 3 standard errors, with the smooth gap count of the Gaussian law over the same lengths (the
    finite-n model; it omits the fluctuation of the row maximum, which shifts the width by a nearly constant
    amount and not its slope), and tend to the leading order c (1 - theta)(2 - (1 + theta) c) = 5/16; a
    coefficient of 1/2 or 1/8 (a slip in eq-02-gauss-width) is more than 0.1 away from both."""
    slope, se, model = values["width_slope_half"], values["width_slope_half_se"], values["width_model_slope_half"]
    assert slope > 5 * se
    assert abs(slope - model) <= 3 * se
    assert values["width_leading_half"] == pytest.approx(5 / 16)
    assert abs(model - 5 / 16) < 0.05


@pytest.mark.book
def test_width_with_theta_n_is_o_log_n(values):
    """With theta_n = 1 - 1/log n the width grows like log log n: its share of log n falls by more than 3
    standard errors between the shortest and the longest length, its slope in log n agrees with the smooth
    gap count within 3 standard errors and stays far below the theta = 1/2 slope, and the width stays below
    the bound 1 + log log n of cor-02-width.  A width proportional to log n (fixed theta) keeps its share."""
    first, last = values["width_ratio_theta_n_first"], values["width_ratio_theta_n_last"]
    se = math.hypot(values["width_ratio_theta_n_first_se"], values["width_ratio_theta_n_last_se"])
    assert first - last > 3 * se
    slope, slope_se = values["width_slope_theta_n"], values["width_slope_theta_n_se"]
    assert abs(slope - values["width_model_slope_theta_n"]) <= 3 * slope_se
    assert values["width_slope_half"] - slope > 3 * math.hypot(slope_se, values["width_slope_half_se"])
    assert values["width_theta_n_last"] <= 1 + math.log(math.log(values["width_n_last"]))


@pytest.mark.book
def test_step_row_exercise_attains_the_width_bound(values):
    """The exercise: the step row's theta = 1/2 width equals (1/2) log n + log 2 (the bound of cor-02-width is
    attained), and the minimiser of the bound is 1 - 1/log n to within the grid step 1e-4."""
    assert values["ex_step_max_diff"] <= 1e-12 * values["ex_step_last"]
    assert values["ex_theta_max_diff"] <= 1e-4


def test_legendre_duality_cites_a_reference_on_legendre_duality():
    """The Legendre-duality sentence cites Touchette 2009 (Legendre structure of entropy and free energy) and
    Rockafellar 1970 (convex conjugates), both present in the bibliography; it no longer cites Ruelle 1987, a
    paper on the REM and GREM, for the duality."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    chapter = (root / "notebooks" / "02_free_energy.md").read_text()
    line = next(l for l in chapter.splitlines() if "microcanonical/canonical duality" in l)
    assert "ruelle1987mathematical" not in line
    bib = (root / "book" / "references.bib").read_text()
    for key in ("touchette2009large", "rockafellar1970convex"):
        assert key in line
        assert "{" + key + "," in bib
