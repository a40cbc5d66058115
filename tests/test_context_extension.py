"""The context-extension experiment (critscale.context_extension): arms applied as intended, the schedule read
from lengths <= L only, and the pre-registered criterion.

A tiny seeded Llama (the trainer's architecture, untrained) stands in for the chapter's model: what is tested
is the arithmetic of the arms, not what a trained model does with them.
"""

import math

import numpy as np
import pytest
import torch

from critscale import context_extension as ce
from critscale.trainer.train import TrainConfig, build_model

L = 16


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = build_model(TrainConfig(n_layer=3, n_head=2, n_embd=32, n_positions=L, steps=0, architecture="llama"))
    return m.eval()


def _windows(t, count=2, seed=1):
    return np.random.default_rng(seed).integers(0, 256, size=(count, t))


def test_none_arm_without_position_scaling_is_the_model_exactly(model):
    """The 'none' arm (factor 1 through the tempered attention) under the 'none' treatment (the rotary module
    rebuilt from the default parameters) gives the unmodified model's per-token loss bit for bit, also beyond L;
    a rebuilt rotary table with other frequencies, or a factor that rounds, would not."""
    windows = _windows(4 * L + 1)
    plain = ce.token_losses(model, windows)
    with ce.positions(model, "none", 4, L):
        none = ce.token_losses(model, windows, ce.law_factor("none", L, 4))
    assert np.array_equal(plain, none)
    with ce.positions(model, "linear", 4, L):
        interpolated = ce.token_losses(model, windows, ce.law_factor("none", L, 4))
    assert np.abs(interpolated - plain).max() > 1e-4  # the treatment does act


def test_positions_sets_the_frequencies_and_puts_them_back(model):
    """Position interpolation divides the rotary frequencies by s; YaRN is pinned to attention_factor 1 (q.k not
    scaled through cos and sin) and to the trained length; both undone after the block."""
    before = model.model.rotary_emb.inv_freq.clone()
    with ce.positions(model, "linear", 4, L):
        assert torch.allclose(model.model.rotary_emb.inv_freq, before / 4)
    with ce.positions(model, "yarn", 4, L):
        assert model.model.rotary_emb.attention_scaling == 1.0
        assert model.config.rope_parameters["original_max_position_embeddings"] == L
    assert torch.equal(model.model.rotary_emb.inv_freq, before)
    assert model.config.rope_parameters["rope_type"] == "default"
    with pytest.raises(ce.ExtensionError, match="position treatment must be one of"):
        ce.rope_parameters("ntk", 2, L, 1e4)


def test_law_factors_are_the_published_forms():
    n = torch.tensor([1, L, L * L, L ** 3])
    assert torch.allclose(ce.law_factor("log", L, 8)(0, n), torch.tensor([1.0, 1.0, 2.0, 3.0]))
    assert torch.allclose(ce.law_factor("sqrt_log", L, 8)(0, n), torch.tensor([1.0, 1.0, 2 ** 0.5, 3 ** 0.5]))
    assert torch.allclose(ce.law_factor("yarn", L, 8)(2, n), torch.full((4,), (0.1 * math.log(8) + 1) ** 2))
    assert torch.equal(ce.law_factor("none", L, 8)(1, n), torch.ones(4))


def test_a_factor_multiplies_exactly_the_rows_of_the_layers_and_lengths_it_names(model):
    """Captured rows under a factor that names the last layer and lengths > L differ from the factor-1 rows by
    that factor on exactly those rows (earlier layers are untouched, so their q and k are the same)."""
    windows = _windows(3 * L)
    last = model.config.num_hidden_layers - 1
    named = lambda layer, n: torch.where((n > L) & (layer == last), 1.5, 1.0).float()  # noqa: E731
    ones = ce.law_factor("none", L, 3)
    rows = np.array([3, L - 1, L, L + 5, 3 * L - 1])  # context lengths 4, 16, 17, 22, 48
    with torch.no_grad(), ce.tempered_recording(model, ones) as plain:
        model(input_ids=torch.as_tensor(windows))
    with torch.no_grad(), ce.tempered_recording(model, named) as scaled:
        model(input_ids=torch.as_tensor(windows))
    assert len(plain) == len(scaled) == model.config.num_hidden_layers
    for a, b in zip(plain, scaled):
        with np.errstate(invalid="ignore"):  # -inf / -inf where a query cannot see the key
            ratio = ce.arm_logits(b, named, rows) / ce.arm_logits(a, ones, rows)  # (B, H, m, T)
        visible = np.isfinite(ratio)
        expected = np.where((rows + 1 > L) & (a["layer"] == last), 1.5, 1.0)[None, None, :, None]
        assert np.allclose(np.broadcast_to(expected, ratio.shape)[visible], ratio[visible], rtol=1e-9, atol=0)
        assert not np.isfinite(ratio[..., 0, 4:]).any()  # causal: row 3 sees keys 0..3 only


def test_captured_rows_with_the_factor_are_what_the_tempered_attention_computes(model):
    """softmax(arm_logits) @ v reproduces the attention output that the tempered forward hands to o_proj, for a
    factor varying with layer and length: a factor applied twice, or not at all, to the captured rows fails."""
    windows = _windows(2 * L)
    factor = lambda layer, n: (1.0 + 4.0 * layer) * torch.clamp(n.float() / L, min=1.0) ** 0.5  # noqa: E731
    layer = 1
    attention = model.model.layers[layer].self_attn
    got = {}
    hooks = [attention.v_proj.register_forward_hook(lambda m, i, o: got.__setitem__("v", o.detach())),
             attention.o_proj.register_forward_hook(lambda m, i, o: got.__setitem__("o_in", i[0].detach()))]
    try:
        with torch.no_grad(), ce.tempered_recording(model, factor) as calls:
            model(input_ids=torch.as_tensor(windows))
    finally:
        for h in hooks:
            h.remove()
    T = windows.shape[1]
    logits = torch.as_tensor(ce.arm_logits(calls[layer], factor, np.arange(T)))  # (B, H, T, T)
    B, H = logits.shape[:2]
    v = got["v"].view(B, T, H, -1).transpose(1, 2).double()  # (B, H, T, D)
    out = (torch.softmax(logits, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)
    assert torch.allclose(out.float(), got["o_in"], atol=2e-6, rtol=1e-5)
    untempered = torch.as_tensor(ce.arm_logits(calls[layer], ce.law_factor("none", L, 2), np.arange(T)))
    wrong = (torch.softmax(untempered, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)
    assert (wrong.float() - got["o_in"]).abs().max() > 1e-3


def test_length_guard_refuses_a_longer_input(model):
    with ce.length_guard(model, L) as seen:
        model(input_ids=torch.as_tensor(_windows(L)))
        with pytest.raises(ce.LengthGuardError, match=f"given {L + 1} tokens"):
            model(input_ids=torch.as_tensor(_windows(L + 1)))
    assert seen == {"forwards": 1, "longest": L}
    model(input_ids=torch.as_tensor(_windows(L + 1)))  # the guard is gone after the block


def test_schedule_windows_longer_than_the_trained_length_are_refused(model):
    with pytest.raises(ce.ExtensionError, match="more than the trained length 16"):
        ce.schedule_from_heads(model, _windows(2 * L), seed=0)


def test_oracle_picks_the_grid_value_with_the_lowest_loss(model):
    windows = _windows(2 * L + 1)
    best, scores = ce.oracle_temperature(model, windows, L, [0.5, 1.0, 2.0])
    assert [tau for tau, _ in scores] == [0.5, 1.0, 2.0]
    assert best == min(scores, key=lambda item: item[1])[0]


def test_buckets_and_beyond_means():
    losses = np.arange(10, dtype=float)[None, :].repeat(2, axis=0)  # positions 0..9
    assert np.array_equal(ce.bucket_means(losses, 4), [[1.5, 5.5, 8.5]] * 2)
    assert np.array_equal(ce.beyond_means(losses, 4), [6.5, 6.5])
    with pytest.raises(ce.ExtensionError, match="no position beyond"):
        ce.beyond_means(losses, 10)


def test_operating_points_hold_c_when_the_factor_is_one_and_move_it_by_the_factor(model):
    """c = 1 / kappa_16 of the tempered row: a constant factor 2 doubles every row's c exactly (kappa scales as
    1 / beta) and leaves the first layer's rows otherwise the same."""
    windows = _windows(2 * L)
    plain = ce.operating_points(model, windows, ce.law_factor("none", L, 2), L, per_bucket=3)
    first = lambda layer, n: torch.full(n.shape, 2.0 if layer == 0 else 1.0)  # noqa: E731
    doubled = ce.operating_points(model, windows, first, L, per_bucket=3)
    a, b = plain[plain["layer"] == 0], doubled[doubled["layer"] == 0]
    assert np.allclose(b["c"].to_numpy(), 2 * a["c"].to_numpy(), rtol=1e-9)
    assert (b["p_max"].to_numpy() >= a["p_max"].to_numpy() - 1e-12).all()  # p_max grows with beta
    assert set(plain["bucket"]) == {0, 1}
    assert ce.c_drift(plain, plain, L) >= 0


def test_criterion_predicts_when_the_schedule_matches_the_best_arm_and_fails_when_it_is_worse():
    rng = np.random.default_rng(0)
    base = rng.normal(2.0, 0.3, size=12)
    noise = lambda: rng.normal(0, 0.01, size=12)  # noqa: E731
    matched = {s: {"none": base + 0.5, "log": base + noise(), "schedule": base + noise()} for s in (4, 8)}
    assert ce.criterion(matched, seed=1)["outcome"] == "predicts"
    worse = {4: matched[4], 8: {**matched[8], "schedule": base + 0.2 + noise()}}
    result = ce.criterion(worse, seed=1)
    assert result["outcome"] == "fails"
    assert result["lengths"][4]["holds"] and not result["lengths"][8]["holds"]
    assert result["lengths"][8]["best"] == "log"
    assert result["lengths"][8]["low"] > 0.1
    with pytest.raises(ce.ExtensionError, match="schedule's losses at 4L"):
        ce.criterion({4: {"none": base}, 8: matched[8]}, seed=1)


def test_spearman():
    assert ce.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ce.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(ce.spearman([1, 2], [1, 2]))


def test_the_diagnostic_schedule_multiplies_exactly_the_layers_and_lengths_it_names(model):
    """A Schedule whose last layer grows as (log n / log L)^2 and whose other layers have gamma 0: the captured rows
    under schedule.factor differ from the untempered ones by that factor on the last layer beyond L only."""
    from critscale.diagnostic.schedule import Schedule

    last = model.config.num_hidden_layers - 1
    schedule = Schedule(L, [{"layer": layer, "gamma": 2.0 if layer == last else 0.0} for layer in range(last + 1)], {})
    windows = _windows(4 * L)
    rows = np.array([5, L - 1, L, 2 * L, 4 * L - 1])
    ones = ce.law_factor("none", L, 4)
    with torch.no_grad(), ce.tempered_recording(model, ones) as plain:
        model(input_ids=torch.as_tensor(windows))
    with torch.no_grad(), ce.tempered_recording(model, schedule.factor) as scaled:
        model(input_ids=torch.as_tensor(windows))
    grow = np.where(rows + 1 > L, (np.log(rows + 1) / np.log(L)) ** 2, 1.0)
    for a, b in zip(plain, scaled):
        with np.errstate(invalid="ignore"):
            ratio = ce.arm_logits(b, schedule.factor, rows) / ce.arm_logits(a, ones, rows)
        expected = np.broadcast_to((grow if a["layer"] == last else np.ones_like(grow))[None, None, :, None],
                                   ratio.shape)
        visible = np.isfinite(ratio)
        assert np.allclose(ratio[visible], expected[visible], rtol=1e-6)
    assert grow[-1] > 2  # the named rows do change


@pytest.mark.slow
def test_schedule_is_computed_from_lengths_up_to_L_only(monkeypatch):
    """schedule_from_heads runs the diagnostic under the length guard: every forward it makes has at most L
    tokens, and a diagnostic that fed the model a longer input would raise instead of reading it."""
    import critscale.diagnostic.pipeline as pipeline

    torch.manual_seed(0)
    length = 128  # the diagnostic's shortest window
    small = build_model(TrainConfig(n_layer=2, n_head=2, n_embd=32, n_positions=length, steps=0,
                                    architecture="llama")).eval()
    windows = _windows(length, count=8)
    diag, schedule, seen = ce.schedule_from_heads(small, windows, seed=0, nulls=("gauss_qk",), null_replicates=20)
    assert seen["forwards"] > 0 and seen["longest"] == length
    assert schedule.read_length == length and [e["layer"] for e in schedule.layers] == [0, 1]
    real = pipeline.diagnose_windows

    def peeking(loaded, w, **options):  # a diagnostic that also reads twice the length
        loaded.model(input_ids=torch.as_tensor(np.concatenate([w[:1], w[:1]], axis=1)))
        return real(loaded, w, **options)

    monkeypatch.setattr(pipeline, "diagnose_windows", peeking)
    with pytest.raises(ce.LengthGuardError, match=f"given {2 * length} tokens"):
        ce.schedule_from_heads(small, windows, seed=0, nulls=("gauss_qk",), null_replicates=20)


# ---------------------------------------------------------------- the position treatments crossed with the arms
def test_yarn_treatment_puts_no_temperature_on_cos_and_sin(model):
    """YaRN's frequencies with attention_factor 1.0: cos at position 0 is exactly 1 (transformers' default YaRN
    multiplies cos and sin by 0.1 ln s + 1, so q.k by its square); the highest frequency is kept and the lowest
    divided by s (YaRN's ramp), so the treatment does change the positions."""
    params = ce.rope_parameters("yarn", 4, L, 1e4)
    assert params["attention_factor"] == 1.0 and isinstance(params["attention_factor"], float)
    before = model.model.rotary_emb.inv_freq.clone()
    x = torch.zeros(1, 1, model.config.hidden_size)
    with ce.positions(model, "yarn", 4, L):
        rotary = model.model.rotary_emb
        cos, sin = rotary(x, torch.zeros(1, 1, dtype=torch.long))
        assert torch.equal(cos, torch.ones_like(cos)) and torch.equal(sin, torch.zeros_like(sin))
        assert torch.allclose(rotary.inv_freq[0], before[0]) and torch.allclose(rotary.inv_freq[-1], before[-1] / 4)
    default = dict(params)
    del default["attention_factor"]  # what transformers would do without the pin
    model.config.rope_parameters, saved = default, model.config.rope_parameters
    try:
        unpinned = type(model.model.rotary_emb)(model.config)
    finally:
        model.config.rope_parameters = saved
    assert unpinned.attention_scaling == pytest.approx(0.1 * math.log(4) + 1)


def test_dynamic_ntk_scales_at_the_forwards_own_length(model):
    """Dynamic NTK (factor 1): after a forward of 4L tokens the lowest frequency is divided by 4 and the highest
    kept (base theta 4^(d/(d-2))); transformers' factor s (here 4) would divide the lowest one by s^2 - s + 1 = 13."""
    before = model.model.rotary_emb.inv_freq.clone()
    with ce.positions(model, "dynamic", 4, L):
        rotary = model.model.rotary_emb
        assert model.config.rope_parameters["rope_type"] == "dynamic"
        assert torch.equal(rotary.inv_freq, before)  # nothing changes before a forward longer than L
        with torch.no_grad():
            model(input_ids=torch.as_tensor(_windows(4 * L)))
        assert rotary.attention_scaling == 1.0
        assert torch.allclose(rotary.inv_freq[0], before[0])
        assert rotary.inv_freq[-1].item() == pytest.approx(before[-1].item() / 4, rel=1e-5)
    assert torch.equal(model.model.rotary_emb.inv_freq, before)


@pytest.mark.parametrize("treatment", ["linear", "yarn", "dynamic"])
def test_every_treatment_changes_the_losses_beyond_and_inside_L(model, treatment):
    """Each treatment sets its own rope type and changes the model's per-token losses (a treatment that left the
    rotary tables alone would not); the temperature arms stay the same function of n under every treatment."""
    windows = _windows(4 * L + 1)
    plain = ce.token_losses(model, windows)
    with ce.positions(model, treatment, 4, L):
        assert model.config.rope_parameters["rope_type"] == treatment
        moved = ce.token_losses(model, windows)
    assert np.abs(moved - plain).max() > 1e-4
    assert model.config.rope_parameters["rope_type"] == "default"


def test_median_interval_resamples_windows_not_heads():
    """Two windows, one all 0 and one all 1: a replicate draws windows, so its median is 0, 0.5 or 1 and the
    interval spans [0, 1]; with every window alike the interval is the point itself."""
    values = np.stack([np.zeros((1, 4)), np.ones((1, 4))], axis=1)  # (m=1, W=2, H=4)
    low, high = ce.median_interval(values, seed=0, reps=400)
    assert low[0] == 0.0 and high[0] == 1.0
    same = np.full((3, 5, 4), 2.5)
    low, high = ce.median_interval(same, seed=0, reps=50)
    assert np.array_equal(low, [2.5] * 3) and np.array_equal(high, [2.5] * 3)


def test_operating_points_with_intervals_hold_their_medians(model):
    windows = _windows(2 * L, count=4)
    points = ce.operating_points(model, windows, ce.law_factor("log", L, 2), L, per_bucket=3, seed=1, reps=200)
    plain = ce.operating_points(model, windows, ce.law_factor("log", L, 2), L, per_bucket=3)
    for key in ce.POINT_STATS:
        assert (points[f"{key}_low"] <= points[key] + 1e-12).all() and (points[key] <= points[f"{key}_high"] + 1e-12).all()
        assert np.array_equal(points[key], plain[key])  # the intervals leave the medians as they were
        assert (points[f"{key}_high"] > points[f"{key}_low"]).any()
    assert "c_low" not in plain


def test_relation_reads_the_interval():
    assert ce.relation(0.01, 0.03, "no rescaling") == "worse than no rescaling"
    assert ce.relation(-0.03, -0.01, "no rescaling") == "better than no rescaling"
    assert ce.relation(-0.01, 0.02, "x") == "not distinguishable from x"


def test_criteria_is_the_criterion_of_each_treatment():
    """Per treatment, from that treatment's own losses: the schedule can predict under one and fail under another."""
    rng = np.random.default_rng(3)
    base = rng.normal(2.0, 0.3, size=12)
    noise = lambda: rng.normal(0, 0.01, size=12)  # noqa: E731
    good = {s: {"none": base + 0.5, "log": base + noise(), "schedule": base + noise()} for s in (4, 8)}
    bad = {s: {"none": base + 0.5, "log": base + noise(), "schedule": base + 0.3 + noise()} for s in (4, 8)}
    result = ce.criteria({"linear": good, "yarn": bad}, seed=2)
    assert list(result) == ["linear", "yarn"]
    assert result["linear"]["outcome"] == "predicts" and result["yarn"]["outcome"] == "fails"
    assert result["yarn"] == ce.criterion(bad, seed=2)
    with pytest.raises(ce.ExtensionError, match="at least one position treatment"):
        ce.criteria({}, seed=0)
