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
    """The sentence names its denominator: the heads decided for a rule, with the undecided ones and those without a
    rule reading counted apart, so that the three counts add up to the heads (SmolLM2's sentence gave 186 decided
    and 64 undecided of 270 heads, leaving 20 unaccounted for)."""
    v = {**compare.verdict_numbers(diag), "decided": 4, "undecided": 4, "rule_undefined": 2, "heads": 10,
         "share": 0.75, "share_low": 0.19, "share_high": 0.99, "plurality": compare.RULE_TEXT["ssmax/entropy_invariant"]}
    sentence = compare.verdict_sentence("Model A", v)
    assert "of its 10 heads, 4 are decided for a rule, 4 undecided and 2 without a rule reading" in sentence
    assert "is read by a share 0.75 [0.19, 0.99] of the decided heads" in sentence
    assert "4 are decided for a rule and 6 undecided" in compare.verdict_sentence(
        "Model A", {**v, "undecided": 6, "rule_undefined": 0})
    real = compare.verdict_numbers(diag)
    assert real["decided"] + real["undecided"] + real["rule_undefined"] == real["heads"] == len(diag.heads)
    assert f"of its {real['heads']} heads, {real['decided']} are decided for a rule" in compare.verdict_sentence("M", real)


def test_sentences_print_rule_names_as_text_not_latex(diag):
    """The verdict sentence and the takeaway are glued as text: 'rule constant \\(\\beta\\)' printed as
    'rule constant (\\beta)' on the page; rule names are plain unicode (constant β, √(2 log n))."""
    v = {**compare.verdict_numbers(diag), "rule": compare.RULE_TEXT["none/yarn"], "decided": 3, "undecided": 3,
         "rule_undefined": 0, "heads": 6, "share": 2 / 3, "share_low": 0.1, "share_high": 0.99,
         "plurality": compare.RULE_TEXT["none/yarn"], "layer_rules": {compare.RULE_TEXT["none/yarn"]: 1}}
    for text in (compare.verdict_sentence("M", v), compare.verdict_sentence("M", compare.verdict_numbers(diag)),
                 compare.takeaway([("M", v)])):
        assert "\\(" not in text and "\\beta" not in text and "\\sqrt" not in text, text
    assert "has the rule constant β:" in compare.verdict_sentence("M", v)
    real = compare.verdict_numbers(diag)
    assert real["rule"] in compare.RULE_TEXT.values() and real["null_rule"] in compare.RULE_TEXT.values()
    assert compare.RULE_TEXT["sqrt_2_log_n"] == "√(2 log n)"


def test_a_model_read_up_to_its_sliding_window_gets_no_factor_beyond_it(diag):
    """Gemma 3 is read only up to its 512-token sliding window, which the page says the diagnostic does not read
    beyond; the takeaway gave it a factor at 8 times that window (4096 tokens)."""
    T = diag.meta["window_length"]
    v, w = compare.verdict_numbers(diag), compare.verdict_numbers(diag, window=T)
    assert math.isfinite(v["growth"]) and v["window"] is None
    assert math.isnan(w["growth"]) and math.isnan(w["growth_low"]) and w["window"] == T
    assert w["gamma"] == v["gamma"] and w["layers_above_null"] == 0
    assert math.isfinite(compare.verdict_numbers(diag, k=2, window=2 * T)["growth"])
    text = compare.takeaway([("Model A", v), ("Model B", w)])
    assert f"No factor for Model B (read only up to its {T}-token sliding window" in text
    assert text.count(f"{v['growth']:.3f}") == 1 and "of Model B" not in text
    assert compare.takeaway([("Model B", w)]).startswith(f"No factor can be read in this build: Model B (read only up")
    sentence = compare.verdict_sentence("Model B", w)
    assert f"no factor beyond {T} tokens" in sentence and "multiplied" not in sentence and "\\gamma$ is" in sentence
    columns = compare.verdict_table(diag, window=2 * T).columns
    assert compare.GROWTH_COLUMN.format(k=2) in columns and compare.GROWTH_COLUMN.format(k=4) not in columns
    assert not [c for c in compare.verdict_table(diag, window=T).columns if "at " in c]
    assert "512-token sliding window" in compare.no_factor_table(512).iloc[0, 0]


def test_read_window_is_the_shortest_sliding_window():
    from transformers import Gemma3TextConfig, LlamaConfig

    config = Gemma3TextConfig(num_hidden_layers=6, sliding_window=5,
                              layer_types=["sliding_attention"] * 5 + ["full_attention"])
    assert compare.read_window(config) == 5
    assert compare.read_window(LlamaConfig(num_hidden_layers=2)) is None
    assert compare.factor_multiples(128, 512) == (2, 4) and compare.factor_multiples(128) == compare.MULTIPLES


def test_takeaway_names_which_rule_the_decided_layers_read(diag):
    """The box said 'a published rule is singled out in 5 of 48 layers' where all five were constant β, the rule
    that does not rescale; the takeaway counts the layers decided for each rule."""
    constant, root = compare.RULE_TEXT["none/yarn"], compare.RULE_TEXT["sqrt_2_log_n"]
    v = compare.verdict_numbers(diag)
    a = {**v, "layers": 30, "layers_decided": 5, "layer_rules": {constant: 5}}
    b = {**v, "layers": 18, "layers_decided": 0, "layer_rules": {}}
    text = compare.takeaway([("Model A", a), ("Model B", b)])
    assert "5 of the 48 layers read are decided for a rule, all 5 for constant β, the rule that does not rescale" in text
    assert "no layer is decided for a rule that rescales β" in text and "published" not in text
    mixed = compare.takeaway([("Model A", {**a, "layer_rules": {constant: 4, root: 1}}), ("Model B", b)])
    assert "5 of the 48 layers read are decided for a rule (4 for constant β, 1 for √(2 log n))" in mixed
    assert "none of the 48 layers read is decided" in compare.takeaway([("Model A", {**a, "layer_rules": {}}),
                                                                        ("Model B", b)])
    assert "1 layer needs more growth" in compare.verdict_sentence("M", {**v, "layers_above_null": 1})


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
    assert f"of the 4 layers read" in text
    assert "no verdict" in compare.takeaway([])
    unread = compare.takeaway([("Model A", v), ("Model C", {**v, "growth": math.nan, "windows": 2})])
    assert "No factor for Model C (read on 2 windows, fewer than the 8 a $\\gamma$ needs)" in unread
    assert compare.takeaway([("Model C", {**v, "growth": math.nan, "windows": 2})]).startswith("No factor can be read")
    assert "layers read" not in unread.split("No factor for")[1]
    unread_sentence = compare.verdict_sentence("Model C", {**v, "growth": math.nan, "windows": 2})
    assert "on 2 windows: no $\\gamma$, rule or factor (a $\\gamma$ needs 8 windows)" in unread_sentence
    sentence = compare.verdict_sentence("Model A", v)
    assert f"{v['layers_decided']} of its 2 layers" in sentence and f"{v['null_gamma']:.2f}" in sentence


def test_attention_kind_names_sliding_layers():
    from transformers import Gemma3TextConfig, LlamaConfig

    config = Gemma3TextConfig(num_hidden_layers=6, sliding_window=5,
                              layer_types=["sliding_attention"] * 5 + ["full_attention"])
    assert compare.attention_kind(config, True) == ("causal; 5 of 6 layers see only the last 5 keys (sliding window), "
                                                    "the others every key")
    assert compare.attention_kind(LlamaConfig(num_hidden_layers=2), True) == "causal, every layer full"


def test_sentences_print_numbers_in_one_format(diag):
    """Three significant digits keep their trailing zeros (the operating sentence printed '1.7 times' beside '1.34',
    the beyond sentence '0.3 (null 0.0084)'), and a missing gamma is said, not printed as 'nan'."""
    line = compare.summary_line("M", diag)
    line.update(beta_half=1.7, first_weight=0.3, first_weight_null=0.0084)
    assert "at 1.70 times the model's own" in compare.operating_sentence(line)
    assert "first key 0.30 (null 0.0084)" in compare.beyond_sentence(line, 8)
    missing = compare.beyond_sentence({**line, "gamma": math.nan}, 8)
    assert "nan" not in missing and "no $\\gamma$ (it needs 8 windows)" in missing
    assert [compare.sig(x) for x in (1.7, 255.0, 0.00958, 1e-5)] == ["1.70", "255", "0.00958", "1×10⁻⁵"]
    table = compare.null_table([line]).iloc[0]  # the table prints the same quantity as the sentence
    assert table["weight on the first key (null)"] == "0.30 (0.0084)"
    assert compare.operating_table([line]).iloc[0]["\\(\\beta_{1/2}\\) (null)"].startswith("1.70 (")


def test_rule_sentence_counts_the_table_or_says_it_was_not_measured():
    import pandas as pd

    from critscale.diagnostic.calibration import rule_sentence

    table = pd.DataFrame({"family": ["a", "b"], "heads": [4, 4], "decided": [3, 2], "right": [3, 1],
                          "undecided": [0.25, 0.5]})
    text = rule_sentence(table, 4)
    assert "5 of 8 are decided, 4 of them right (80%)" in text and "38% of a family's heads" in text
    assert rule_sentence(table.iloc[:0], 0).startswith("The rule's accuracy is not measured in this build")
    for sentence in (text, rule_sentence(table.iloc[:0], 0)):  # reader text: no test file, no code-formatted word
        assert ".py" not in sentence and "`" not in sentence and "tests/" not in sentence, sentence
