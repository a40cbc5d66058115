"""Chapter 14 (ci profile, executed by `make test`): what the page records about its arms and its criterion.

Skipped when the book has not been built (the ``ci_results`` fixture of conftest.py).
"""

import math
import re

import numpy as np
import pytest

from critscale import context_extension as ce

pytestmark = pytest.mark.book
NB = "14_context_extension"


def test_criterion_recomputed_from_the_recorded_losses(page, params):
    """The verdict the summary box prints is what the library's criterion gives on the per-window losses the page
    recorded, for the main treatment: a verdict typed by hand, or computed on other numbers than those shown, fails."""
    main = params["treatments"][0]
    again = ce.criterion(page["beyond_losses"][main], seed=params["seed"], reps=page["bootstrap"])
    assert again["outcome"] == page["outcome"]
    for s in ce.CRITERION_MULTIPLES:
        entry = again["lengths"][s]
        assert ce.ARM_LABEL[entry["best"]] == page[f"best_{s}"]
        assert entry["difference"] == pytest.approx(page[f"diff_{s}"], rel=1e-9, abs=1e-12)
        assert entry["low"] == pytest.approx(page[f"diff_{s}_lo"], rel=1e-9, abs=1e-12)
        assert (entry["low"] <= 0) == entry["holds"]


def test_criterion_per_treatment_recomputed_and_shown(page, params):
    """Every position treatment of the build has its own criterion on the page, recomputed here from that
    treatment's recorded losses (best arm, schedule minus best, the outcome), with the schedule's loss against no
    rescaling beside it; the box names each other treatment's outcome."""
    again = ce.criteria(page["beyond_losses"], seed=params["seed"], reps=page["bootstrap"])
    assert set(again) == set(params["treatments"])  # the stored record sorts its keys
    rows = page["criteria_table"]["records"]
    assert len(rows) == len(params["treatments"]) * len(ce.CRITERION_MULTIPLES)
    for row in rows:
        treatment = next(t for t in params["treatments"] if ce.TREATMENT_LABEL[t] == row["treatment"])
        entry, arms = again[treatment]["lengths"][row["s"]], page["beyond_losses"][treatment][str(row["s"])]
        assert row["best arm"] == ce.ARM_LABEL[entry["best"]] and row["holds"] == entry["holds"]
        assert row["schedule - best"] == pytest.approx(entry["difference"], rel=1e-9, abs=1e-12)
        assert row["outcome"] == again[treatment]["outcome"]
        d, lo, hi = ce.paired_interval(arms["schedule"], arms["none"], params["seed"], page["bootstrap"])
        assert (row["schedule - none"], row["low (none)"], row["high (none)"]) == pytest.approx((d, lo, hi), rel=1e-9,
                                                                                              abs=1e-12)
    main = params["treatments"][0]
    for s in ce.CRITERION_MULTIPLES:
        row = next(r for r in rows if r["s"] == s and r["treatment"] == ce.TREATMENT_LABEL[main])
        assert f"{ce.relation(row['low (none)'], row['high (none)'], 'no rescaling')} at {s}L" in page["versus_none_text"]
    for t in params["treatments"][1:]:
        assert f"{ce.TREATMENT_LABEL[t]} it {again[t]['outcome']}" in page["others_box"]


def test_treatments_change_the_rope_parameters_and_yarn_has_no_temperature(page, params):
    """The treatment table shows the rope parameters each treatment ran with: its own rope type, YaRN pinned to
    attention_factor 1.0 and to the trained length, dynamic NTK at factor 1, interpolation at the longest factor."""
    rows = {r["treatment"]: r for r in page["treatment_table"]["records"]}
    assert set(rows) == {ce.TREATMENT_LABEL[t] for t in params["treatments"]}
    S, L = max(params["multiples"]), params["train_length"]
    for t in params["treatments"]:
        row = rows[ce.TREATMENT_LABEL[t]]
        assert row["rope_type"] == t
        if t == "yarn":
            assert row["attention_factor"] == 1.0 and row["original_max_position_embeddings"] == L
        assert row["factor"] == (1.0 if t == "dynamic" else S)


def test_loss_inside_L_rises_as_recorded(page, params):
    """The box's loss in [0, L) at the longest length and at the model's own length are the means of the recorded
    per-window losses, and the paired rise is recomputed from them (same windows)."""
    main, S = params["treatments"][0], max(params["multiples"])
    inside, own = np.array(page["inside_losses"][main][str(S)]), np.array(page["own_losses"])
    assert len(inside) == len(own) == params["evaluation_windows"]
    assert page["inside_at_longest"] == pytest.approx(inside.mean(), rel=1e-12)
    assert page["inside_own"] == pytest.approx(own.mean(), rel=1e-12)
    d, lo, hi = ce.paired_interval(inside, own, params["seed"], page["bootstrap"])
    assert (page["inside_rise"], page["inside_rise_lo"], page["inside_rise_hi"]) == pytest.approx((d, lo, hi), rel=1e-9,
                                                                                                abs=1e-12)
    word = "rises" if lo > 0 else "falls" if hi < 0 else "does not move distinguishably"
    assert f"the loss inside the trained length {word} before any arm acts" in page["inside_box"]


def test_every_arm_is_scored_on_the_same_windows_at_every_length(page, params):
    """Per-window losses beyond L for every treatment, arm and extended length, one value per evaluation window (the
    pairing the bootstrap needs); the oracle chose one grid value per treatment and length."""
    assert set(page["beyond_losses"]) == set(params["treatments"])
    for beyond in page["beyond_losses"].values():
        assert sorted(int(s) for s in beyond) == params["multiples"]
        for arms in beyond.values():
            assert set(arms) == set(ce.ARMS)
            assert {len(v) for v in arms.values()} == {params["evaluation_windows"]}
    chosen = [r for r in page["oracle_table"]["records"] if r["chosen"]]
    assert len(chosen) == len(params["multiples"]) * len(params["treatments"])
    assert all(r["factor"] in params["oracle_grid"] for r in chosen)


def test_none_arm_without_position_scaling_is_the_model_exactly(page):
    """On the page's own model and windows the 'none' arm through the tempered attention gives the model's loss
    exactly (the same arithmetic): a temperature path that rounds or a rebuilt rotary table that differs fails."""
    assert page["none_arm_difference"] == 0.0


def test_schedule_read_only_lengths_up_to_L_and_windows_do_not_overlap(page, params):
    """The diagnostic's forwards were at most L tokens long (the guard counted them), and the schedule, tuning and
    evaluation windows are disjoint ranges of the held-out text, in that order."""
    L = params["train_length"]
    assert page["schedule_forwards"] > 0 and page["schedule_longest"] == L
    assert page["schedule_read_length"] == L
    ranges = page["window_ranges"]
    assert ranges["schedule"] == [0, params["schedule_windows"] * L]
    assert ranges["schedule"][1] <= ranges["tuning"][0] < ranges["tuning"][1] <= ranges["evaluation"][0]
    span = max(params["multiples"]) * L + 1
    assert ranges["evaluation"][1] - ranges["evaluation"][0] == params["evaluation_windows"] * span


def test_bucket_intervals_hold_their_means_and_cover_every_bucket(page, params):
    """One row per treatment, length, arm and bucket of L positions, each mean inside its bootstrap interval."""
    rows = page["bucket_table"]["records"]
    expected = sum(s for s in params["multiples"]) * len(ce.ARMS) * len(params["treatments"])
    assert len(rows) == expected
    for r in rows:
        assert r["low"] - 1e-12 <= r["loss"] <= r["high"] + 1e-12


def test_drift_and_spearman_are_defined(page, params):
    """The c drift of every arm at every length is finite and non-negative, and the summary box's rank
    correlation is the Spearman correlation of the recorded drifts and losses."""
    drift = page["drift_table"]["records"]
    assert len(drift) == len(params["multiples"]) * len(ce.ARMS) * len(params["treatments"])
    assert all(math.isfinite(r["c drift"]) and r["c drift"] >= 0 for r in drift)
    main = params["treatments"][0]
    for s in ce.CRITERION_MULTIPLES:
        sub = [r for r in drift if r["s"] == s and r["treatment"] == ce.TREATMENT_LABEL[main]]
        again = ce.spearman([r["c drift"] for r in sub], [r["loss beyond L"] for r in sub])
        assert (math.isnan(again) and math.isnan(page[f"spearman_{s}"])) or again == pytest.approx(page[f"spearman_{s}"])
        assert np.mean(page["beyond_losses"][main][str(s)]["none"]) == pytest.approx(
            next(r["loss beyond L"] for r in sub if r["arm"] == "none"), rel=1e-12)


def test_summary_box_numbers_are_defined(page):
    for key in ("diff_4", "diff_4_lo", "diff_4_hi", "diff_8", "diff_8_lo", "diff_8_hi"):
        assert isinstance(page[key], float) and math.isfinite(page[key]), key
    assert page["outcome"] in ("predicts", "fails")
    assert 0 < page["heldout_nats"] < math.log(256) + 0.1


def test_operating_point_figure_has_intervals_over_windows(page, params):
    """The figure's rows (main treatment, longest length) carry a bootstrap interval for each median, holding it,
    and not all of zero width (the windows differ)."""
    rows = page["operating_points"]["records"]
    assert {r["arm"] for r in rows} == set(ce.ARMS)
    for key in ("p_max", "entropy", "c"):
        assert all(r[f"{key}_low"] - 1e-6 <= r[key] <= r[f"{key}_high"] + 1e-6 for r in rows), key
        assert any(r[f"{key}_high"] > r[f"{key}_low"] for r in rows), key


def test_box_correlation_carries_its_exact_permutation_p(page, params):
    """With six arms a rank correlation of 0.83 is not told from none at the 5% level (exact p = 0.058); the box gave
    the correlation bare.  Its p is recomputed here over every order of the recorded losses."""
    from itertools import permutations

    drift = page["drift_table"]["records"]
    main = ce.TREATMENT_LABEL[params["treatments"][0]]
    sub = [r for r in drift if r["s"] == 8 and r["treatment"] == main]
    x, y = [r["c drift"] for r in sub], [r["loss beyond L"] for r in sub]
    rho = ce.spearman(x, y)
    p = np.mean([abs(ce.spearman(x, order)) >= abs(rho) - 1e-12 for order in permutations(y)])
    shown = re.fullmatch(r"(-?\d\.\d\d), exact p = (\d\.\d{3})", page["spearman_8_text"])
    assert shown, page["spearman_8_text"]
    assert float(shown.group(1)) == pytest.approx(rho, abs=0.006) and float(shown.group(2)) == pytest.approx(p, abs=6e-4)
    assert 0.85 < page["spearman_critical"] < 0.9  # |rho| >= 0.886 for p <= 0.05 over six distinct pairs


def test_schedule_table_names_rules_and_intervals_as_the_reader_reads_them(page):
    """The schedule table a reader sees gives gamma with its interval in one cell and each layer's rule by its
    reader name (the code labels 'none/yarn' and 'sqrt_2_log_n' would reach the page through the raw table)."""
    from critscale.diagnostic.verdict import RULE_BOOK

    rows = page["schedule_shown"]["records"]
    raw = page["schedule_table"]["records"]
    assert len(rows) == len(raw) and all(r["rule"] in RULE_BOOK.values() for r in rows)
    for shown, r in zip(rows, raw):
        assert shown["γ [95%]"] == f"{r['γ (median of heads)']:.2f} [{r['γ low']:.2f}, {r['γ high']:.2f}]"
        assert shown["factor at 8L"] == f"{r['factor at 8L']:.3f}"
