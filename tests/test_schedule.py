"""The verdict and the schedule of a diagnosis (critscale.diagnostic.schedule).

* Heads whose kappa_16 follows c (log n)^gamma by construction (lognormal row noise and a factor per window shared
  by the heads of a layer, as the heads of a model share their windows), read by the diagnostic's own summary: each
  layer's gamma interval holds the gamma built in, and its growth interval the factor (log kT / log T)^gamma.
* The factor is exactly 1 up to the length read, increasing beyond it for gamma > 0, and equal to ``growth``.
* The JSON file gives back the same schedule, float for float.
* The bootstrap is paired across heads: replicate b resamples the same windows for every head (the pipeline's heads
  and fit_gamma with windows dropped for one head), and a layer of identical heads has the interval of one head.
  Resampling heads independently (columns shuffled per head) makes that interval far too narrow, which the test
  shows on the same data.
* A layer's rule is decided only when its share's interval lies above every other rule's.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from critscale.diagnostic import laws, pipeline, summary
from critscale.diagnostic.design import make_design
from critscale.diagnostic.rows import BETA_GRID
from critscale.diagnostic.schedule import (DECIDED_RULES, Schedule, ScheduleError, growth_ratio, layer_schedule,
                                           paired_median, rule_verdict)
from critscale.diagnostic.windows import ArraySource

T = 1024
WINDOWS = 16
QUERIES = 4
GAMMAS = {0: 0.5, 1: 1.5}  # layer -> gamma built into its heads
HEADS = 9
RULES = {0: ["sqrt_2_log_n"] * 8 + ["undecided"], 1: ["sqrt_2_log_n"] * 6 + ["none/yarn"] * 3}


def synthetic_unit(gamma: float, tilt: np.ndarray, rng: np.random.Generator) -> dict:
    """The row statistics of one head whose kappa_16 is 3 (log n)^gamma times lognormal noise and the window's tilt."""
    levels = make_design("suffix", T, queries=QUERIES).levels
    level = np.tile(np.repeat(levels, QUERIES), WINDOWS)
    n = level - np.tile(np.arange(QUERIES)[::-1], len(levels) * WINDOWS)
    window = np.repeat(np.arange(WINDOWS), len(levels) * QUERIES)
    rows = len(n)
    kappa16 = 3.0 * np.log(n) ** gamma * np.exp(rng.normal(0.0, 0.3, rows)
                                                + tilt[window] * (np.log(np.log(n)) - 1.8))
    gaps = np.sort(rng.exponential(size=(rows, laws.SHAPE_K)), axis=1)
    gaps[:, 0] = 0.0
    return {"n": n, "level": level, "window": window, "kappa16": kappa16, "kappa": kappa16, "beta_half": kappa16,
            "max_weight": np.full((rows, len(BETA_GRID)), 0.1), "entropy": np.full((rows, len(BETA_GRID)), 2.0),
            "top_gaps": gaps, "degenerate": np.zeros(rows, dtype=bool), "argmax_first": np.zeros(rows, dtype=bool),
            "first_weight": np.full(rows, 0.01), "spread": np.ones(rows)}


def synthetic_diagnosis(seed: int = 0) -> pipeline.Diagnosis:
    """Two layers of heads of known gamma, summarised by :func:`.summary.summarise_unit` with the pipeline's head seed."""
    rng = np.random.default_rng([1997, seed])
    records, boots = [], {}
    for layer, gamma in GAMMAS.items():
        tilt = rng.normal(0.0, 0.2, WINDOWS)  # the windows' change of slope, shared by the layer's heads
        for head in range(HEADS):
            unit = f"L{layer}H{head}"
            record, *_, boot = summary.summarise_unit(unit, layer, head, synthetic_unit(gamma, tilt, rng),
                                                      seed=pipeline.HEAD_SEED)
            records.append({**record, "best_rule": RULES[layer][head]})
            boots[unit] = boot
    meta = {"window_length": T, "levels": list(make_design("suffix", T).levels), "design": "suffix",
            "windows": WINDOWS, "intervals": True, "input": "synthetic heads"}
    empty = pd.DataFrame()
    return pipeline.Diagnosis(pd.DataFrame(records), empty, empty, empty, empty, meta=meta,
                              gamma_replicates=pipeline.gamma_replicate_frame(boots))


@pytest.fixture(scope="module")
def synthetic():
    diag = synthetic_diagnosis()
    return diag, layer_schedule(diag)


def test_growth_recovers_the_gamma_built_in(synthetic):
    """Ten draws of the two layers: at least 16 of the 20 intervals hold the gamma built in (a 95% interval misses
    more than 4 of 20 with probability 0.003), the growth interval holds (log kT / log T)^gamma exactly when the
    gamma interval holds gamma, and every estimate is within 0.25 of it."""
    covered = 0
    for seed in range(10):
        schedule = layer_schedule(synthetic_diagnosis(seed))
        assert schedule.read_length == T
        for entry in schedule.layers:
            gamma = GAMMAS[entry["layer"]]
            inside = entry["gamma_low"] <= gamma <= entry["gamma_high"]
            covered += inside
            assert abs(entry["gamma"] - gamma) < 0.25 and entry["gamma_high"] - entry["gamma_low"] < 0.5
            for k in (2, 4, 8):
                factor, low, high = schedule.growth(entry["layer"], k)
                assert (low <= growth_ratio(T, k) ** gamma <= high) == inside
                assert entry["growth"][k] == pytest.approx([factor, low, high], rel=1e-12)
            assert low < factor < high
        assert schedule.growth(1, 8)[0] > schedule.growth(0, 8)[0] > 1  # the steeper layer needs more
    assert covered >= 16, covered


def test_the_layer_rule_and_its_share(synthetic):
    """Nine heads a layer.  The first: 8 decided for one rule and 1 undecided, so the share is over the 8 decided
    heads (8 of 8, not 8 of 9: an undecided head backs no rule) and the rule is decided; the second: 6 of 9 against
    3 of 9 is not; the model's 14 of 17 decided is."""
    _, schedule = synthetic
    first, second = schedule.layers
    assert first["rule"] == "sqrt_2_log_n" and first["rule_share"] == pytest.approx(1.0)
    assert first["rule_heads"] == 8 and first["rule_undecided"] == 1 and first["rule_undefined"] == 0
    assert first["rule_share_low"] == pytest.approx(0.6306, abs=1e-4)  # Clopper-Pearson 95%, 8 of 8
    assert first["rule_shares"]["none/yarn"][2] == pytest.approx(0.3694, abs=1e-4)  # 0 of 8: below 0.6306
    assert "undecided" not in first["rule_shares"]  # not a rule: it has no share
    assert second["rule"] == "undecided" and second["plurality"] == "sqrt_2_log_n"
    assert second["rule_share_low"] < second["rule_shares"]["none/yarn"][2]  # 6 of 9 meets 3 of 9
    assert schedule.model["rule"] == "sqrt_2_log_n" and schedule.model["rule_heads"] == 2 * HEADS - 1
    assert schedule.model["rule_share"] == pytest.approx(14 / 17)


def test_factor_is_one_up_to_the_length_read_and_grows_beyond(synthetic):
    _, schedule = synthetic
    lengths = torch.arange(1, 8 * T + 1).reshape(8, T)
    for layer in (0, 1):
        f = schedule.factor(layer, lengths)
        assert f.shape == lengths.shape and f.dtype == torch.float32
        assert torch.equal(f[lengths <= T], torch.ones(T))  # exactly 1, not nearly
        beyond = f.flatten()[T:]
        assert (beyond[1:] >= beyond[:-1]).all() and beyond[-1] > beyond[0] > 1
        assert float(f[-1, -1]) == pytest.approx(schedule.growth(layer, 8)[0], rel=1e-5)  # float32
    with pytest.raises(ScheduleError, match="layer 7 is not in the schedule"):
        schedule.factor(7, lengths)
    with pytest.raises(ScheduleError, match="integer tensor"):
        schedule.factor(0, lengths.float())


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN, floats compared exactly."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def test_json_round_trip_is_exact(synthetic, tmp_path):
    """Every float comes back equal (repr precision); a layer without gamma (NaN) comes back NaN, not null or 0."""
    diag, _ = synthetic
    heads = diag.heads.copy()
    heads.loc[heads["layer"] == 1, "gamma"] = np.nan  # a layer of heads without gamma
    schedule = layer_schedule(pipeline.Diagnosis(heads, *[pd.DataFrame()] * 4, meta=diag.meta,
                                                 gamma_replicates=diag.gamma_replicates))
    schedule.run = {"command": "python -m critscale diagnose ...", "commit": "abc", "sha256": None}
    path = schedule.to_json(tmp_path / "schedule.json")
    back = Schedule.from_json(path)
    assert back.read_length == schedule.read_length
    assert _same(back.layers, schedule.layers) and _same(back.model, schedule.model)
    assert back.layers[0]["gamma"] == schedule.layers[0]["gamma"]  # exactly: repr precision
    assert math.isnan(back.layers[1]["gamma"]) and back.layers[1]["heads_excluded"] == HEADS
    assert back.run == schedule.run and back.source == schedule.source
    assert back.to_json(tmp_path / "again.json").read_text() == path.read_text()
    assert torch.equal(back.factor(1, torch.arange(1, T + 1)), torch.ones(T))  # no gamma: still 1 up to T
    with pytest.raises(ScheduleError, match="layer 1 has no gamma"):
        back.factor(1, torch.tensor([2 * T]))
    (tmp_path / "bad.json").write_text('{"layers": []}')
    with pytest.raises(ScheduleError, match="is not a critscale schedule"):
        Schedule.from_json(tmp_path / "bad.json")


def test_a_diagnosis_without_replicates_has_no_intervals(synthetic):
    """A diagnosis read back from tables (no bootstrap replicates kept): point values, NaN intervals, said so."""
    diag, with_replicates = synthetic
    schedule = layer_schedule(pipeline.Diagnosis(diag.heads, *[pd.DataFrame()] * 4, meta=diag.meta))
    assert schedule.source["intervals"] is False and with_replicates.source["intervals"] is True
    for entry, paired in zip(schedule.layers, with_replicates.layers):
        assert entry["gamma"] == paired["gamma"] and math.isnan(entry["gamma_low"]) and math.isnan(entry["gamma_high"])
        assert math.isnan(entry["growth"][2][1]) and entry["growth"][2][0] == paired["growth"][2][0]
    with pytest.raises(ScheduleError, match="needs a Diagnosis"):
        layer_schedule(diag.heads)


def test_the_pipeline_pairs_replicates_across_heads():
    """Head 1 is head 0 with its queries doubled: its kappa_16 is half of head 0's on every row, so every replicate's
    slope is the same when (and only when) replicate b resamples the same windows for both heads."""
    rng = np.random.default_rng(5)
    shape = (1, 3, 8, 128, 16)
    q = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    q[0, 1], k[0, 1] = 2 * q[0, 0], k[0, 0]
    diag = pipeline.diagnose_source(ArraySource(q, k, 0.25), make_design("prefix", 128, queries=2), describe="x",
                                    nulls=("gauss_qk",), null_windows=8, null_replicates=0, backend="reference")
    reps = diag.gamma_replicates
    assert reps.shape == (3, laws.N_BOOT)
    assert np.allclose(reps.loc["L0H0"], reps.loc["L0H1"], atol=1e-9)
    assert np.abs(reps.loc["L0H0"] - reps.loc["L0H2"]).max() > 0.1  # an unrelated head's replicates differ


def test_fit_gamma_pairs_replicates_when_a_head_loses_a_window():
    """A head whose rows of one window all have a tied maximum (kappa = inf, dropped) still resamples the windows that
    the other heads resample in each replicate (the weights are drawn over every window given).  Drawn over the kept
    windows only, its replicates were an independent draw (correlation near 0)."""
    rng = np.random.default_rng(8)
    level = np.tile(np.repeat([64, 91, 128, 181, 256], 8), 16)
    window = np.repeat(np.arange(16), 40)
    tilt = rng.normal(0.0, 0.5, 16)[window] * (np.log(np.log(level)) - 1.6)
    values = np.log(level) ** 0.5 * np.exp(rng.normal(0.0, 0.05, len(level)) + tilt)
    whole = laws.fit_gamma(level, level, values, window)
    lost = laws.fit_gamma(level, level, np.where(window == 3, np.inf, values), window)
    assert np.corrcoef(whole.boot, lost.boot)[0, 1] > 0.8


def test_a_layer_of_identical_heads_has_the_interval_of_one(synthetic):
    """The layer's median is bootstrapped per replicate over its heads: for identical heads it is the head's own
    interval.  Replicates resampled independently per head (shuffled columns) give an interval less than 3/4 as wide."""
    diag, _ = synthetic
    one = diag.gamma_replicates.loc["L0H0"].to_numpy()
    copies = np.tile(one, (HEADS, 1))
    gamma = float(diag.heads.set_index("unit").loc["L0H0", "gamma"])
    median, low, high, _ = paired_median(np.full(HEADS, gamma), copies)
    head = diag.heads.set_index("unit").loc["L0H0"]
    assert (low, high) == pytest.approx((head["gamma_low"], head["gamma_high"]), abs=1e-12)
    rng = np.random.default_rng(0)
    unpaired = np.stack([rng.permutation(row) for row in copies])
    _, low_u, high_u, _ = paired_median(np.full(HEADS, gamma), unpaired)
    assert high_u - low_u < 0.75 * (high - low)


@pytest.mark.parametrize("counts, rule", [
    ({"sqrt_2_log_n": 9}, "sqrt_2_log_n"),
    ({"sqrt_2_log_n": 8, "undecided": 1}, "sqrt_2_log_n"),  # 8 of 8 decided: [0.631, 1] above [0, 0.369]
    ({"sqrt_2_log_n": 7, "none/yarn": 2}, "undecided"),  # [0.400, 0.972] meets [0.028, 0.600]
    ({"ssmax/entropy_invariant": 3, "none/yarn": 3}, "undecided"),  # a tie
    ({"undecided": 5}, "undecided"),  # no head decided: no share, no rule
    ({"undefined": 4}, "undefined"),
])
def test_rule_verdict(counts, rule):
    rules = [r for r, c in counts.items() for _ in range(c)] + ["undefined"]
    verdict = rule_verdict(rules)
    assert verdict["rule"] == rule
    assert verdict["rule_undefined"] == counts.get("undefined", 0) + 1
    assert verdict["rule_undecided"] == counts.get("undecided", 0)
    assert verdict["rule_heads"] == len(rules) - verdict["rule_undefined"] - verdict["rule_undecided"]
    assert set(verdict["rule_shares"]) == set(DECIDED_RULES)
    with pytest.raises(ScheduleError, match="unknown head rule"):
        rule_verdict(["sqrt(2 log n)"])


def test_the_share_is_over_the_decided_heads():
    """3 heads decided for s log n, 1 for sqrt(2 log n), 6 undecided: the most frequent rule is s log n with 3 of the
    4 decided heads (0.75), not "undecided" with 6 of 10, nor s log n with 3 of 10 (the old denominator, which
    counted undecided heads as heads with a rule)."""
    verdict = rule_verdict(["ssmax/entropy_invariant"] * 3 + ["sqrt_2_log_n"] + ["undecided"] * 6)
    assert verdict["plurality"] == "ssmax/entropy_invariant" and verdict["rule_heads"] == 4
    assert verdict["rule_share"] == pytest.approx(0.75)
    assert verdict["rule"] == "undecided"  # 3 of 4: [0.194, 0.994] meets 1 of 4's [0.006, 0.806]


@pytest.fixture(scope="module")
def llama_schedule(tmp_path_factory):
    """A tiny random llama diagnosed by critscale.diagnose (8 windows of 128 tokens), its schedule written and read
    back as the README's snippet does."""
    from transformers import AutoModelForCausalLM

    from critscale.diagnostic.pipeline import diagnose
    from critscale.models.load import ByteTokenizer
    from test_capture_architectures import save_tiny

    path = save_tiny(tmp_path_factory.mktemp("llama"), "llama", max_position_embeddings=256)
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa").eval()
    text = " ".join(f"word{i % 97} and {i * 7 % 31}" for i in range(400))
    diag = diagnose(model, ByteTokenizer(), text, max_len=128, max_windows=8, nulls=("gauss_qk", "ptail1", "ptail2"),
                    null_windows=8, null_replicates=0, backend="reference")
    file = layer_schedule(diag).to_json(tmp_path_factory.mktemp("run") / "schedule.json")
    return model, Schedule.from_json(file)


@pytest.mark.slow
def test_the_snippet_leaves_the_model_alone_up_to_the_length_read(llama_schedule):
    """``with tempered(model, s.factor)``: logits of positions up to T = 128 equal the plain model's bit for bit, and
    each layer's factor alone changes those beyond T (a factor applied nowhere, or at every length, fails)."""
    from critscale.models.temperature import tempered

    model, s = llama_schedule
    assert s.read_length == 128 and [e["layer"] for e in s.layers] == [0, 1]
    assert all(abs(e["gamma"]) > 0.05 for e in s.layers), [e["gamma"] for e in s.layers]
    ids = torch.randint(1, 256, (1, 160), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        plain = model(ids).logits
        with tempered(model, s.factor):
            scheduled = model(ids).logits
        assert torch.equal(scheduled[:, :128], plain[:, :128])
        assert (scheduled[:, 128:] - plain[:, 128:]).abs().amax(-1).min() > 1e-4  # every row beyond T moves
        for layer in (0, 1):
            only = lambda l, n, layer=layer: s.factor(l, n) if l == layer else torch.ones(n.shape)
            with tempered(model, only):
                one_layer = model(ids).logits
            assert torch.equal(one_layer[:, :128], plain[:, :128])
            assert (one_layer[:, 128:] - plain[:, 128:]).abs().max() > 1e-4
            assert (one_layer[:, 128:] - scheduled[:, 128:]).abs().max() > 1e-4  # the other layer's share
        prompt = ids[:, :126]
        with tempered(model, s.factor):
            generated = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
        reference = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert generated.shape == (1, 134)
    assert torch.equal(generated[:, :129], reference[:, :129])  # tokens read from contexts of at most T


SNIPPET = ('from critscale.diagnostic.schedule import Schedule\n'
           'from critscale.models.temperature import tempered\n\n'
           's = Schedule.from_json("run/schedule.json")\n'
           'with tempered(model, s.factor):\n'
           '    model.generate(...)')


def test_the_documented_snippet_is_the_one_tested():
    """The diagnostic's manual (docs/diagnostic.md, linked from the README) and the module docstring show the
    snippet whose code path the test above runs."""
    from pathlib import Path

    import critscale.diagnostic.schedule as module

    manual = (Path(__file__).resolve().parents[1] / "docs" / "diagnostic.md").read_text()
    assert SNIPPET in manual
    assert "\n".join("    " + line if line else "" for line in SNIPPET.splitlines()) in module.__doc__
