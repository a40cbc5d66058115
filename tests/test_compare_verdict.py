"""The verdict tables and sentences of chapter 13 (critscale.diagnostic.compare), on a small q/k diagnosis.

Each number of a table is the schedule's (critscale.diagnostic.schedule.layer_schedule) or the Gaussian null's,
so a table that drew its factor from another length, another exponent or another null's gamma fails.
"""

import math

import numpy as np
import pytest

from critscale.diagnostic import compare, diagnose_qk
from critscale.diagnostic.schedule import layer_schedule


@pytest.fixture(scope="module")
def diag():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 3, 8, 128, 16))
    k = rng.standard_normal((2, 3, 8, 128, 16))
    k[1, :, :, 0] += 3 * q[1].mean(axis=2)  # layer 1: a first key aligned with the queries (sinks)
    return diagnose_qk(q, k, nulls=("gauss_qk",), null_replicates=8)


def test_verdict_table_has_each_layer_the_model_and_the_null(diag):
    table = compare.verdict_table(diag)
    assert list(table["layer"]) == ["0", "1", "all", "Gaussian null"]
    schedule = layer_schedule(diag)
    for row, entry in zip(table.itertuples(index=False), schedule.layers + [schedule.model]):
        assert row[2] == entry["rule"]
        g, lo, hi = entry["growth"][8]
        assert table.loc[table["layer"] == row[0], compare.GROWTH_COLUMN.format(k=8)].item() == \
            compare._interval(g, lo, hi, 3)


def test_verdict_numbers_are_the_schedules_and_the_nulls(diag):
    v = compare.verdict_numbers(diag)
    T = diag.meta["window_length"]
    ref = diag.nulls.set_index("unit").loc["gauss_qk"]
    ratio = math.log(8 * T) / math.log(T)
    assert v["read_length"] == T and v["target_length"] == 8 * T
    assert v["growth"] == pytest.approx(ratio ** v["gamma"], rel=1e-12)
    assert v["null_gamma"] == pytest.approx(float(ref["gamma"]), rel=1e-12)
    assert v["null_growth"] == pytest.approx(ratio ** float(ref["gamma"]), rel=1e-12)
    assert v["layers"] == 2 and 0 <= v["layers_decided"] <= 2 and 0 <= v["layers_above_null"] <= 2


def test_takeaway_quotes_each_models_factor_and_the_decided_layers(diag):
    v = compare.verdict_numbers(diag)
    text = compare.takeaway([("Model A", v), ("Model B", {**v, "layers_decided": 0})])
    assert text.count(f"{v['growth']:.3f}") >= 2 and "Model A" in text and "Model B" in text
    assert f"in only {v['layers_decided']} of their 4 layers" in text
    assert "no verdict" in compare.takeaway([])
    unread = compare.takeaway([("Model A", v), ("Model C", {**v, "growth": math.nan, "windows": 2})])
    assert "No factor for Model C (read on 2 windows, fewer than the 8 a gamma needs)" in unread
    assert compare.takeaway([("Model C", {**v, "growth": math.nan, "windows": 2})]).startswith("No factor can be read")
    unread_sentence = compare.verdict_sentence("Model C", {**v, "growth": math.nan, "windows": 2})
    assert "on 2 windows: no $\\gamma$, rule or factor (a $\\gamma$ needs 8 windows)" in unread_sentence
    sentence = compare.verdict_sentence("Model A", v)
    assert f"{v['layers_decided']} of 2 layers" in sentence and f"{v['null_gamma']:.2f}" in sentence


def test_attention_kind_names_sliding_layers():
    from transformers import Gemma3TextConfig, LlamaConfig

    config = Gemma3TextConfig(num_hidden_layers=6, sliding_window=5,
                              layer_types=["sliding_attention"] * 5 + ["full_attention"])
    assert compare.attention_kind(config, True) == ("causal; 5 of 6 layers see only the last 5 keys (sliding window), "
                                                    "the others every key")
    assert compare.attention_kind(LlamaConfig(num_hidden_layers=2), True) == "causal, every layer full"


def test_rule_sentence_counts_the_table_or_says_it_was_not_measured():
    import pandas as pd

    from critscale.diagnostic.calibration import rule_sentence

    table = pd.DataFrame({"family": ["a", "b"], "heads": [4, 4], "decided": [3, 2], "right": [3, 1],
                          "undecided": [0.25, 0.5]})
    text = rule_sentence(table, 4)
    assert "5 of 8 are decided, 4 of them right (80%)" in text and "38% of a family's heads" in text
    assert rule_sentence(table.iloc[:0], 0).startswith("The rule's accuracy is not measured in this build")
