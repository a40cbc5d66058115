"""Chapter 14 (ci profile, executed by `make test`): what the page records about its arms and its criterion.

Skipped when the book has not been built (the ``ci_results`` fixture of conftest.py).
"""

import math

import numpy as np
import pytest

from critscale import context_extension as ce

pytestmark = pytest.mark.book
NB = "14_context_extension"


def test_criterion_recomputed_from_the_recorded_losses(page, params):
    """The verdict the summary box prints is what the library's criterion gives on the per-window losses the page
    recorded: a verdict typed by hand, or computed on other numbers than those shown, fails."""
    again = ce.criterion(page["beyond_losses"], seed=params["seed"], reps=page["bootstrap"])
    assert again["outcome"] == page["outcome"]
    for s in ce.CRITERION_MULTIPLES:
        entry = again["lengths"][s]
        assert ce.ARM_LABEL[entry["best"]] == page[f"best_{s}"]
        assert entry["difference"] == pytest.approx(page[f"diff_{s}"], rel=1e-9, abs=1e-12)
        assert entry["low"] == pytest.approx(page[f"diff_{s}_lo"], rel=1e-9, abs=1e-12)
        assert (entry["low"] <= 0) == entry["holds"]


def test_every_arm_is_scored_on_the_same_windows_at_every_length(page, params):
    """Per-window losses beyond L for every arm at every extended length, one value per evaluation window (the pairing
    the bootstrap needs); the oracle chose one grid value per length."""
    beyond = page["beyond_losses"]
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
    assert len(drift) == len(params["multiples"]) * len(ce.ARMS)
    assert all(math.isfinite(r["c drift"]) and r["c drift"] >= 0 for r in drift)
    for s in ce.CRITERION_MULTIPLES:
        sub = [r for r in drift if r["s"] == s]
        again = ce.spearman([r["c drift"] for r in sub], [r["loss beyond L"] for r in sub])
        assert (math.isnan(again) and math.isnan(page[f"spearman_{s}"])) or again == pytest.approx(page[f"spearman_{s}"])
        assert np.mean(page["beyond_losses"][str(s)]["none"]) == pytest.approx(
            next(r["loss beyond L"] for r in sub if r["arm"] == "none"), rel=1e-12)


def test_summary_box_numbers_are_defined(page):
    for key in ("diff_4", "diff_4_lo", "diff_4_hi", "diff_8", "diff_8_lo", "diff_8_hi"):
        assert isinstance(page[key], float) and math.isfinite(page[key]), key
    assert page["outcome"] in ("predicts", "fails")
    assert 0 < page["heldout_nats"] < math.log(256) + 0.1
