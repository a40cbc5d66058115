"""The verdict tables and sentences of chapter 13 (critscale.diagnostic.compare), on a small q/k diagnosis.

Each number of a table is the schedule's (critscale.diagnostic.schedule.layer_schedule) or the Gaussian null's,
so a table that drew its factor from another length, another exponent or another null's gamma fails.
"""

import math

import numpy as np
import pytest

from critscale.diagnostic import compare, diagnose_qk
from critscale.diagnostic.schedule import layer_schedule
from critscale.diagnostic.verdict import RULE_BOOK


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
    for (_, row), entry in zip(table.iterrows(), schedule.layers + [schedule.model]):
        assert row["rule"] == RULE_BOOK[entry["rule"]]
        assert row[compare.DECIDED_COLUMN] == entry["rule_heads"]
        g, lo, hi = entry["growth"][8]
        assert row[compare.GROWTH_COLUMN.format(k=8)] == compare._interval(g, lo, hi, 3)


def test_the_reader_never_sees_yarn_for_the_constant_rule_nor_a_code_name(diag):
    """The rule that keeps beta constant reads "constant beta" in every table and sentence (YaRN's factor grows
    with the length, chapter 14); the null table names each null by its reader name, not gauss_qk or ptail1."""
    from critscale.diagnostic.verdict import RULE_HTML, RULE_WORDS
    from critscale.diagnostic.nulls import NULLS

    for words in (RULE_BOOK, RULE_HTML, RULE_WORDS):
        assert "yarn" not in words["none/yarn"].lower() and "constant" in words["none/yarn"]
    table = compare.verdict_table(diag)
    assert not table.astype(str).apply(lambda c: c.str.contains("yarn|sqrt_2_log_n|ssmax/", case=False)).any().any()
    nulls = compare.nulls_table(diag)
    assert list(nulls["null"]) == ["Gaussian null"]
    names = [compare.null_name(u) for u in NULLS]
    assert len(set(names)) == len(NULLS)  # "planted" is its own reader name; every other null's differs from its code
    assert all(name != unit for unit, name in zip(NULLS, names) if unit != "planted")
    assert compare.null_name("ptail1") == "exponential" and compare.null_name("sphere9") == "sphere S⁸"


def test_verdict_sentence_gives_the_share_of_the_decided_heads(diag):
    """The sentence names its denominator: the heads decided for a rule, with the undecided ones counted apart."""
    v = {**compare.verdict_numbers(diag), "decided": 4, "undecided": 6, "heads": 10, "share": 0.75,
         "share_low": 0.19, "share_high": 0.99, "plurality": RULE_BOOK["ssmax/entropy_invariant"]}
    sentence = compare.verdict_sentence("Model A", v)
    assert "holds 75 [19, 99] % of the 4 heads decided for a rule; 6 of the 10 heads are undecided" in sentence
    assert "no head is decided for a rule" in compare.verdict_sentence("Model A", {**v, "decided": 0})


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
