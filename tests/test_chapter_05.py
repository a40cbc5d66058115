"""Chapter 05 (the ladder): the recorded ci-profile numbers of notebooks/05_ladder.md against the statements.

Every test reads ``build/results/ci/05_ladder.json`` (skipped when the ci book has not been built), except
the exercise test, which runs the solution's code.  Each docstring names the plausible wrong answer the
test rejects; where the ci data decide, the test also asserts that the wrong answer fails on them, so the
margin is part of the test.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

import critscale as cs

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = list(cs.families.STANDARD)
LOGLOG = ["gauss", "ptail1", "ptail3", "logexp", "edge", "planted", "simplex", "planted_shrink"]
POWER = ["unif", "sphere3", "sphere5", "sphere9"]
IID = [f for f in LOGLOG + POWER if cs.families.get(f).iid]
STEP = ["planted", "simplex", "planted_shrink"]
LADDER_RULES = {  # appendix §4.1: which published rule each standard family's kappa_bar reproduces
    "gauss": r"\(\sqrt{2\log n}\)", "ptail1": "none", "ptail3": "none", "logexp": r"\(\log n\)",
    "edge": r"\((\log n)^2\)", "planted": r"\(\log n\)", "simplex": r"\(\log n\)", "planted_shrink": r"\((\log n)^2\)",
    "unif": r"\(n^{2/(d-1)}\), \(d=3\)", "sphere3": r"\(n^{2/(d-1)}\), \(d=3\)", "sphere5": r"\(n^{2/(d-1)}\), \(d=5\)",
    "sphere9": r"\(n^{2/(d-1)}\), \(d=9\)",
}
PARAMS = yaml.safe_load((ROOT / "params" / "ci" / "05_ladder.yaml").read_text())


@pytest.fixture
def ladder(ci_results):
    return ci_results("05_ladder")["values"]


def _records(ladder):
    table = ladder["ladder_table"]
    code = {cs.reader_names.reader_name(f): f for f in FAMILIES}  # the table's rows carry the reader names
    assert all(r["family"] in code for r in table["records"]), [r["family"] for r in table["records"]]
    return table["columns"], {code[r["family"]]: r for r in table["records"]}


def _coordinate(family, n):
    n = np.asarray(n, dtype=float)
    return np.log(np.log(n)) if family in LOGLOG else np.log(n)


def F(ladder, family):
    """The recorded fit of one family: fitted exponent, its interval lo..hi, the finite-n slopes, the flags."""
    return ladder["fits"][family]


def _se(ladder, family):
    """Bootstrap standard error of the fitted exponent: the 95% percentile interval's width over 3.92."""
    return (F(ladder, family)["hi"] - F(ladder, family)["lo"]) / 3.92


# ----------------------------------------------------------------------------- the table

@pytest.mark.book
def test_ladder_table_shape(ladder):
    columns, records = _records(ladder)
    assert columns[0] == "family"
    assert len([c for c in columns if c.startswith(r"\(\bar\kappa_n\), \(n=2^")]) == len(PARAMS["table_n"])
    for needed in (r"fitted exponent of median \(\kappa_{16}\) [95%]", r"\(\tilde\kappa_{n,16}\) slope",
                   r"\(\bar\kappa_n\) slope", "published rule"):
        assert needed in columns
    assert sorted(records) == sorted(FAMILIES)


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_kappa_bar_columns_are_exact(ladder, family):
    """The kappa_bar columns equal the family's exact scale."""
    columns, records = _records(ladder)
    fam = cs.families.get(family)
    for col in (c for c in columns if c.startswith(r"\(\bar\kappa_n\), \(n=2^")):
        n = 2 ** int(re.search(r"2\^\{(\d+)\}", col).group(1))
        assert records[family][col] == pytest.approx(fam.kappa_bar(n), rel=1e-12)


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_rule_matches_section_4_1(ladder, family):
    """The rule read off the leading-order law is appendix §4.1's (a wrong coordinate, log n for a
    Gumbel family, would give exponent 0 and "none" for every log-power family)."""
    _, records = _records(ladder)
    assert records[family]["published rule"] == LADDER_RULES[family]


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_finite_n_slopes_are_recomputed(ladder, family):
    """The recorded slopes of kappa_bar_n and of the quantile row are the least-squares slopes over the
    fitted lengths (numpy.polyfit here, the library in the notebook)."""
    fit_n = np.asarray(ladder["fit_n"], dtype=float)
    x = _coordinate(family, fit_n)
    kbar = np.polyfit(x, np.log(cs.families.get(family).kappa_bar(fit_n)), 1)[0]
    qrow = np.polyfit(x, np.log(cs.quantile_rows.quantile_row_scale(family, fit_n, PARAMS["K"])), 1)[0]
    assert F(ladder, family)["kbar_slope"] == pytest.approx(kbar, abs=1e-9)
    assert F(ladder, family)["qrow_slope"] == pytest.approx(qrow, abs=1e-9)
    assert F(ladder, family)["lo"] <= F(ladder, family)["fitted"] <= F(ladder, family)["hi"]


@pytest.mark.book
def test_ladder_counts_match_the_flags(ladder):
    """The counts the page quotes are the sums of the per-family flags, which match the intervals."""
    for key in ("kbar_slope", "qrow_slope"):
        flag = key.split("_")[0] + "_in"
        for f in FAMILIES:
            fit = F(ladder, f)
            assert fit[flag] == (fit["lo"] <= fit[key] <= fit["hi"])
        assert ladder[f"{key}_in_interval_count"] == sum(F(ladder, f)[flag] for f in FAMILIES)
    assert ladder["qrow_slope_in_interval_iid"] == sum(F(ladder, f)["qrow_in"] for f in IID)
    assert ladder["iid_families"] == len(IID) and ladder["fitted_families"] == len(FAMILIES)
    outside = [f for f in FAMILIES if not (F(ladder, f)["kbar_in"] and F(ladder, f)["qrow_in"])]
    assert ladder["outside_families"] == outside
    for key in ("fitted", "lo", "hi", "kbar_slope", "qrow_slope"):
        assert ladder[f"{key}_gauss"] == F(ladder, "gauss")[key]


# ----------------------------------------------------------------------------- the exponents

@pytest.mark.book
def test_ladder_exponents_follow_the_quantile_row_not_kappa_bar(ladder):
    """rem-05-quantile-row: the fitted exponents of the i.i.d. families agree with the quantile row's slopes.

    The statistic is sum_f ((fitted_f - predicted_f) / se_f)^2 over the nine i.i.d. families (independent
    rows, bootstrap standard errors), tested against the 99% point of chi^2 with 9 degrees of freedom, a
    1% false-alarm rate if the prediction is right.  Wrong answers rejected on the same data: the
    slopes of the exact kappa_bar_n over the same lengths (26.9 against 21.7 in the reference ci run)
    and the leading-order exponents (33.3).
    """
    threshold = stats.chi2.ppf(0.99, len(IID))

    def chi2(predicted):
        return sum(((F(ladder, f)["fitted"] - predicted(f)) / _se(ladder, f)) ** 2 for f in IID)

    leading = {f: cs.fitting.slope(_coordinate(f, [1e100, 1e300]), np.log(cs.families.get(f).law([1e100, 1e300])))
               for f in IID}
    assert chi2(lambda f: F(ladder, f)["qrow_slope"]) < threshold
    assert chi2(lambda f: F(ladder, f)["kbar_slope"]) > threshold, "no margin: kappa_bar's slopes pass too"
    assert chi2(leading.get) > threshold, "no margin: the leading-order exponents pass too"
    assert ladder["chi2_qrow_slope_iid"] == pytest.approx(chi2(lambda f: F(ladder, f)["qrow_slope"]), rel=1e-9)


@pytest.mark.book
@pytest.mark.parametrize("family", STEP)
def test_ladder_quantile_row_accounts_for_the_planted_excess(ladder, family):
    """Planted rows: kappa_16 is nearly deterministic, so the fitted slope's excess over kappa_bar_n's
    (1 or 2) is resolved, and the quantile row must account for at least 80% of it (the page's claim).
    Wrong answer rejected: no finite-n correction (kappa_bar's slope accounts for 0%)."""
    fitted, qrow, kbar = (F(ladder, family)[k] for k in ("fitted", "qrow_slope", "kbar_slope"))
    assert abs(fitted - kbar) > 10 * _se(ladder, family), "the excess is not resolved"
    assert 1 - abs(fitted - qrow) / abs(fitted - kbar) >= 0.8
    assert ladder["step_excess_explained"] >= 0.8


@pytest.mark.book
@pytest.mark.parametrize("rungs", [("ptail1", "logexp", "edge"), ("sphere9", "sphere5", "unif")])
def test_ladder_rungs_are_resolved(ladder, rungs):
    """Rungs a whole step apart (0, 1, 2 in log log n; 1/4, 1/2, 1 in log n) are separated by the data:
    the fitted intervals are disjoint and ordered as the exact slopes."""
    for lower, upper in zip(rungs, rungs[1:]):
        assert F(ladder, lower)["kbar_slope"] < F(ladder, upper)["kbar_slope"]
        assert F(ladder, lower)["hi"] < F(ladder, upper)["lo"]
    assert ladder["rung_pairs_resolved"] == ladder["rung_pairs"] == 4


# ----------------------------------------------------------------------------- the levels

@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_ladder_level_matches_the_quantile_row(ladder, family):
    """At every length the median of kappa_16 / kappa_bar_n is the quantile row's ratio within its error.

    Allowance: 3 standard errors of the log median (from its order statistics), plus the model error delta of the
    quantile row, which drops the random factor of the limit law.  delta is calibrated on the null where
    the quantile row is exact, exponential scores (its gaps are log k, so its ratio is 1 at every n): the
    largest |log median ratio| of ptail1 over the ci lengths, plus 0.04 for the limit laws' own offsets
    from the quantile row (appendix §5.1: Weibull medians 0.19, 0.45, 0.65 against 0.185, 0.44, 0.63).
    Wrong answer rejected: the scale log n for Gaussian rows (the test asserts that it fails at every
    length, by a margin of more than 0.4 in log at the ci lengths).
    """
    delta = max(abs(math.log(r)) for r in ladder["levels"]["ptail1"]["median_ratio"]) + 0.04
    lengths = ladder["lengths"]
    ratios, model, se = (ladder["levels"][family][key] for key in ("median_ratio", "qrow_ratio", "log_median_se"))
    for n, ratio, predicted, s in zip(lengths, ratios, model, se):
        assert abs(math.log(ratio / predicted)) <= delta + 3 * s, (family, n, ratio, predicted)
        if family == "gauss":
            wrong = ratio * cs.families.get("gauss").kappa_bar(n) / math.log(n)  # kappa_16 / log n
            assert abs(math.log(wrong / predicted)) > delta + 3 * s + 0.4, (n, wrong, predicted)


# ----------------------------------------------------------------------------- the definitions

def test_robustness_regime_bounds_are_the_diagnostics():
    """The operating-point regimes of the page are those of the attention diagnostic."""
    from critscale.diagnostic.summary import CROSSOVER

    for profile in ("ci", "cpu", "gpu"):
        params = yaml.safe_load((ROOT / "params" / profile / "05_ladder.yaml").read_text())
        assert tuple(params["regime_bounds"]) == CROSSOVER, profile


@pytest.mark.book
@pytest.mark.parametrize("family", FAMILIES)
def test_robustness_kappa_bar_rows_are_exact(ladder, family):
    """Under kappa_bar_n the exponent is the exact slope over the comparison's lengths and the operating
    point of beta = kappa_bar_n is 1 with no interval (a median over rows slipped in would not be)."""
    robust_n = np.asarray(PARAMS["robust_n"], dtype=float)
    slope = cs.fitting.slope(_coordinate(family, robust_n), np.log(cs.families.get(family).kappa_bar(robust_n)))
    assert ladder["robust_exponents"][f"kappa_bar_{family}"] == pytest.approx([slope] * 3, abs=1e-12)
    assert ladder["operating_points"][f"kappa_bar_{family}"] == pytest.approx([1.0] * 3, rel=1e-15)


@pytest.mark.book
@pytest.mark.parametrize("family", PARAMS["window_families"])
def test_robustness_window_midpoint_sits_between_the_threshold_and_the_limit(ladder, family):
    """thm-06-gumbel: in units of kappa_bar_n the mean of sum p^2 is far below 1/2 at the threshold c = 1
    and reaches 1/2 at c = 2 in the limit; the finite-n curves lie above the limit there (appendix §5.2),
    so the midpoint lies in (1, 2] up to its interval.  Wrong answers rejected: the crossing of 3/4
    instead of 1/2 (limit c = 4), and the threshold c = 1 itself taken for the midpoint."""
    for n in PARAMS["window_n"]:
        c, lo, hi = ladder["window_midpoints"][f"kappa_bar_{family}_{n}"]
        assert 1.0 < lo <= c <= hi and lo <= 2.0, (n, c, lo, hi)


@pytest.mark.book
@pytest.mark.parametrize("family", PARAMS["window_families"])
def test_robustness_definitions_shift_the_midpoint_by_the_operating_factor(ladder, family):
    """One crossing beta, four scales: at the operating length the midpoint under a definition divided by
    the midpoint under kappa_bar_n is kappa_bar_n over that definition's median scale, i.e. the operating
    point of beta = kappa_bar_n (same rows).  A slip that used different rows or another length for one
    definition breaks the identity."""
    n = PARAMS["operating_n"]
    assert n in PARAMS["window_n"]
    base = ladder["window_midpoints"][f"kappa_bar_{family}_{n}"][0]
    for d in ("kappa", "kappa_K", "beta_half"):
        shifted = ladder["window_midpoints"][f"{d}_{family}_{n}"][0]
        assert shifted / base == pytest.approx(ladder["operating_points"][f"{d}_{family}"][0], rel=1e-12)


@pytest.mark.book
def test_robustness_regime_flips_are_counted_from_the_operating_points(ladder):
    """The quoted regime changes are exactly the (family, definition) pairs whose operating point falls in
    another regime than kappa_bar_n's; for the Weibull families with alpha = 1 kappa_16 sits near 0.19
    kappa_bar_n, so beta = kappa_bar_n must read as supercritical (c >= 4) under kappa_16."""
    low, high = PARAMS["regime_bounds"]

    def regime(c):
        return int(c > low) + int(c >= high)

    points = ladder["operating_points"]
    flips = [(f, d) for f in FAMILIES for d in ("kappa", "kappa_K", "beta_half")
             if regime(points[f"{d}_{f}"][0]) != regime(points[f"kappa_bar_{f}"][0])]
    assert ladder["regime_flips"] == len(flips)
    assert ladder["regime_pairs"] == 3 * len(FAMILIES)
    for family in ("unif", "sphere3"):
        assert (family, "kappa_K") in flips


# ----------------------------------------------------------------------------- the exercise

def _solution_code(notebook: str, exercise: str) -> str:
    text = (ROOT / "notebooks" / notebook).read_text()
    block = text.split(f"Solution to exercise {exercise}", 1)[1]
    return re.search(r"```python\n(.*?)```", block, re.S).group(1)


def test_pareto_kappa_16_falls_like_minus_one_over_alpha_plus_one_over_log_n():
    """The ladder leaves heavy tails out because their kappa falls (the exercise of chapter 01 draws such rows):
    the median kappa_16 of Pareto(2) rows falls with a log n-exponent a little above -1/2 (-1/2 + 1/log n, not
    the hazard scale's -1/2 and not a rise), and kappa_16 / kappa_bar_n grows with n."""
    lengths = [2**10, 2**12, 2**14, 2**16]
    medians = [np.median(cs.accumulation_scale(cs.families.family_rows("pareto2", n, 200, 12697, stream=12), K=16))
               for n in lengths]
    exponent = cs.fitting.slope(np.log(lengths), np.log(medians))
    assert -0.5 < exponent < -0.3
    ratio = np.array(medians) / cs.families.get("pareto2").kappa_bar(np.array(lengths))
    assert ratio[-1] > ratio[0] * 1.3


def test_exercise_5_1_solution_runs_and_shows_the_quantile_row_slope_above_the_rung(capsys):
    """The folded solution's code runs, its quantile-row scale of the endpoint family is the closed form
    L (L - log 16) of eq-05-edge-quantile-row, and the local slope in log log n lies above the rung 2 and falls
    towards it (a slope at 2, or one that rises, would contradict the chapter's account of the fitted excess)."""
    namespace: dict = {}
    exec(_solution_code("05_ladder.md", "5.1"), namespace)
    assert np.max(np.abs(namespace["scale"] / namespace["closed"] - 1)) < 1e-9
    slopes = namespace["slopes"]
    assert np.all(slopes > 2.05) and np.all(np.diff(slopes) < 0)
    L = namespace["L"]
    assert slopes[0] < 1 + L[0] / (L[0] - np.log(16)) and slopes[-1] > 1 + L[-1] / (L[-1] - np.log(16))
    out = capsys.readouterr().out
    assert "local slopes" in out and "e-" not in out


@pytest.mark.book
def test_summary_box_names_every_planted_family_the_quantile_row_misses(ladder):
    """The summary box no longer bounds the planted miss by a bare number: its clause, built from the fits,
    names exactly the planted families whose 95% interval excludes the quantile row's slope, each with the
    distance in interval half-widths.  A box that says "at most <distance>" while a family (planted_shrink at
    about ten half-widths in the cpu profile) is rejected fails here."""
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "notebooks" / "05_ladder.md").read_text()
    lines = page.splitlines()
    claim = lines[lines.index("Claim") + 1]  # the box's claim, the definition line under "Claim"
    assert claim.startswith(": For each family of independent, identically distributed scores"), claim
    assert claim.endswith("{glue:md}`step_claim:myst`.")
    text = ladder["step_claim_text"]
    rejected = [f for f in STEP if not F(ladder, f)["lo"] <= F(ladder, f)["qrow_slope"] <= F(ladder, f)["hi"]]
    assert ladder["step_qrow_rejected"] == rejected
    for family in STEP:
        half = abs(F(ladder, family)["fitted"] - F(ladder, family)["qrow_slope"]) / (_se(ladder, family) * 1.96)
        assert ladder["step_qrow_half_widths"][family] == pytest.approx(half, rel=1e-9)
        reader = re.escape(cs.reader_names.reader_name(family))  # the reader name; "planted" is not "shrinking planted"
        named = bool(re.search(rf"(?:^|for |, | and ){reader} \({half:.1f} interval half-widths away\)", text))
        assert family in ("planted", "simplex") or family not in text, family  # planted_shrink is a code name
        assert named == (family in rejected), family
        assert (half > 1) == (family in rejected), family
