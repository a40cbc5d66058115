"""A diagnosis's nulls redrawn without its heads (pipeline.with_null_seed) and the agreement of two draws
(calibration.seed_agreement), on a few Gaussian heads; the agreement on a real model is held in
tests/test_diagnostic_calibration.py."""

import json

import numpy as np
import pandas as pd
import pytest

from critscale.diagnostic import calibration, pipeline
from critscale.diagnostic.design import DesignError


@pytest.fixture(scope="module")
def diag():
    return calibration.gaussian_heads("prefix", 8, 6, seed=5)


def test_the_same_seed_gives_the_same_diagnosis(diag):
    """Redrawing the nulls from the diagnosis's own seed reproduces every frame: the null stage is the only part
    redone and it depends on the seed alone (a null stage that drew from another stream, or heads whose bootstrap
    followed the null seed, fails)."""
    again = pipeline.with_null_seed(diag, 5)
    for name in ("heads", "nulls", "bins", "curves", "profiles", "replicates"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(diag, name), check_exact=True, obj=name)
    assert again.meta["seed"] == 5 and again.meta["heads_beyond_null"] == diag.meta["heads_beyond_null"]


def test_another_seed_redraws_the_nulls_and_keeps_the_heads(diag):
    """Seed 6: the nulls and replicates change, every head's own statistics and interval stay (the heads were not
    read again, and their bootstrap does not follow the null seed)."""
    other = pipeline.with_null_seed(diag, 6)
    own = ["rows_linear", "rows_power", "rows_step", "gamma", "gamma_low", "gamma_high", "p_max", "law", "sink"]
    pd.testing.assert_frame_equal(other.heads[own], diag.heads[own], check_exact=True)
    assert not np.array_equal(other.nulls["gamma"], diag.nulls["gamma"])
    assert not other.replicates.equals(diag.replicates)
    assert not np.array_equal(other.heads["null_p"], diag.heads["null_p"])
    assert other.meta["seed"] == 6 and "null_seconds" in other.meta


def test_agreement_counts_flags_and_rules():
    """Two tables of five heads: a head agrees when its flag (any beyond_null text or none) and its rule match."""
    def fake(flags, rules, seed):
        heads = pd.DataFrame({"unit": [f"L0H{i}" for i in range(5)], "beyond_null": flags, "best_rule": rules})
        return pipeline.Diagnosis(heads, *[pd.DataFrame()] * 4, meta={"seed": seed, "intervals": True})

    a = fake(["gamma+", "", "linear-", "", ""], ["undecided", "sqrt_2_log_n", "undefined", "none/yarn", "undecided"], 1)
    b = fake(["step+", "", "", "", ""], ["undecided", "sqrt_2_log_n", "undefined", "sqrt_2_log_n", "undecided"], 2)
    agreement = calibration.seed_agreement(a, b)
    assert (agreement["same_flag"], agreement["same_rule"], agreement["same"], agreement["heads"]) == (4, 4, 3, 5)
    assert agreement["share"] == pytest.approx(0.6) and agreement["low"] < 0.6 < agreement["high"]
    assert agreement["flagged"] == 2 and agreement["decided"] == 2 and agreement["seeds"] == [1, 2]
    shuffled = fake(*[list(reversed(c)) for c in (b.heads["beyond_null"], b.heads["best_rule"])], 2)
    shuffled.heads["unit"] = list(reversed(b.heads["unit"]))
    assert calibration.seed_agreement(a, shuffled)["same"] == 3  # matched by head, not by line
    other_heads = pipeline.Diagnosis(a.heads.assign(unit=list("abcde")), *[pd.DataFrame()] * 4, meta={"seed": 2})
    with pytest.raises(ValueError, match="different heads"):
        calibration.seed_agreement(a, other_heads)


def test_the_heads_record_round_trips_through_json(diag):
    """What a test keeps of a model (heads_record, as JSON) gives the same decisions under a seed as the diagnosis."""
    record = json.loads(json.dumps(calibration.heads_record(diag, model="Gaussian heads")))
    restored = calibration.from_heads_record(record)
    first, second = pipeline.with_null_seed(diag, 7), pipeline.with_null_seed(restored, 7)
    assert list(first.heads["beyond_null"]) == list(second.heads["beyond_null"])
    assert list(first.heads["best_rule"]) == list(second.heads["best_rule"])
    np.testing.assert_allclose(second.heads["null_p"], first.heads["null_p"], rtol=1e-9)


def test_a_diagnosis_without_a_null_plan_is_refused_in_one_line(diag):
    bare = pipeline.Diagnosis(diag.heads, *[pd.DataFrame()] * 4, meta=diag.meta)
    with pytest.raises(DesignError, match="keeps no null plan"):
        pipeline.with_null_seed(bare, 1)
    with pytest.raises(DesignError, match="seed must be an integer"):
        pipeline.with_null_seed(diag, 1.5)
    with pytest.raises(ValueError, match="not a heads record"):
        calibration.from_heads_record({"format": "something else"})


def test_without_intervals_nothing_is_redrawn_and_nothing_is_claimed(diag):
    """Too few windows for intervals: no head can be flagged or decided, so the agreement is not measured (no
    vacuous 100%) and no null is drawn (the bare diagnosis has no plan: a redraw would raise)."""
    bare = pipeline.Diagnosis(diag.heads, *[pd.DataFrame()] * 4, meta={**diag.meta, "intervals": False})
    agreement = calibration.null_seed_agreement(bare, 9)
    assert agreement["tested"] is False and np.isnan(agreement["share"]) and agreement["seeds"] == [5, 9]
    assert calibration.agreement_sentence("M", agreement).startswith("M: not measured in this build")
