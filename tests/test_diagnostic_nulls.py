"""Known answers by construction: heads whose law, sink and rule are known, read by the whole pipeline.

Each input goes through :func:`critscale.diagnostic.diagnose_qk` (q/k windows -> row statistics ->
summary beside the nulls), the function behind ``diagnose --qk``.
"""

import math

import numpy as np
import pytest

from critscale.diagnostic import diagnose_qk
from critscale.diagnostic.nulls import NULLS, RULE_NULLS

GUMBEL_RULE_NULLS = ("gauss_qk",) + tuple(RULE_NULLS["linear"].values())


@pytest.fixture(scope="module")
def gaussian_heads():
    rng = np.random.default_rng([12697, 1])
    shape = (1, 1, 32, 512, 32)  # one head, 32 windows of 512 tokens, d_head 32
    q = rng.standard_normal(shape).astype(np.float32)
    k = rng.standard_normal(shape).astype(np.float32)
    return diagnose_qk(q, k, nulls=GUMBEL_RULE_NULLS, null_windows=512, seed=3)


def test_gaussian_heads_are_gumbel_and_want_sqrt_2_log_n(gaussian_heads):
    """i.i.d. Gaussian q and k: every row is i.i.d. Gaussian given its query (Gumbel class, kappa_bar ~
    sqrt(2 log n)).  Rejects the old diagnostic's answers: the rule ``ssmax`` (log n) picked from a
    gamma_16 near 1.1 inflated by range-dominated rows with n < 64, and any law other than linear.
    The gamma interval (95%, bootstrap over 32 windows) must cover the Gaussian q/k null's gamma,
    measured by the same code on 512 other windows: with the null's own error (a quarter of the
    head's), a correct diagnostic covers it in about 94% of seeds; the seed is fixed, not tuned.
    The bootstrap's standard error was checked against the spread of gamma over 40 independent
    Gaussian heads (0.13 both, T = 512, 32 windows)."""
    head = gaussian_heads.heads.iloc[0]
    gauss = gaussian_heads.nulls.set_index("unit").loc["gauss_qk"]
    assert head["law"] == "linear"
    assert head["best_rule"] == "sqrt_2_log_n"
    assert head["gamma_low"] <= gauss["gamma"] <= head["gamma_high"]
    assert not head["sink"]


def test_rule_nulls_are_ordered_like_their_exact_scales(gaussian_heads):
    """The rule nulls' exact scales grow like 1, sqrt(log n), log n, (log n)^2, so the slopes the code
    measures on them must come out in that order, each inside its own interval of the others' gaps.
    Rejects a gamma estimator that is not monotone in the true growth (e.g. one dominated by the
    row's range, whose median rises alike for every family).  Also: the Gaussian q/k null reads the
    law it has by construction."""
    nulls = gaussian_heads.nulls.set_index("unit")
    order = [RULE_NULLS["linear"][rule] for rule in ("none", "sqrt_2_log_n", "ssmax", "log_n_squared")]
    gammas = nulls.loc[order, "gamma"].to_numpy()
    assert np.all(np.diff(gammas) > 0)
    assert np.all(nulls.loc[order[1:], "gamma_low"].to_numpy() > nulls.loc[order[:-1], "gamma_high"].to_numpy())
    assert nulls.loc["gauss_qk", "law"] == NULLS["gauss_qk"].law == "linear"


def test_a_planted_key_makes_a_sink_with_a_step_law():
    """Every query has a component a = sqrt(d) along u and the first key of every window is b u, with
    the planted logit 5 bulk standard deviations above the typical bulk maximum: a planted row whose
    planted entry is the first token.  Rejects a reading of these heads as linear or power, a sink
    test that misses the first key, and a nearest rule other than SSMax's log n (kappa_bar = log n / g).
    The rule decided is SSMax's or none: the planted null's bulk is uniform, this head's Gaussian, and
    their finite-n slopes differ by more than their intervals allow (``undecided``), never another rule."""
    rng = np.random.default_rng([12697, 2])
    layers, heads, windows, T, d = 1, 2, 16, 256, 16
    q = rng.standard_normal((layers, heads, windows, T, d))
    k = rng.standard_normal((layers, heads, windows, T, d))
    q[..., 0] = math.sqrt(d)
    bulk = math.sqrt(2 * d - 1)  # |q|: the standard deviation of q . k_j for a Gaussian key
    k[..., 0, :] = 0.0
    k[..., 0, 0] = bulk * (math.sqrt(2 * math.log(T)) + 5.0) / math.sqrt(d)
    diag = diagnose_qk(q, k, nulls=("planted", "planted_shrink"), null_windows=32)
    assert list(diag.heads["law"]) == ["step", "step"]
    assert diag.heads["sink"].all() and (diag.heads["sink_fraction"] == 1.0).all()
    assert (diag.heads["rows_step"] > 0.99).all()
    assert list(diag.heads["nearest_rule"]) == ["ssmax/entropy_invariant"] * 2
    assert set(diag.heads["best_rule"]) <= {"ssmax/entropy_invariant", "undecided"}


def test_scores_uniform_on_an_interval_follow_a_power_law():
    """d_head = 1, every query 1 and keys uniform on [-1, 1]: each row is i.i.d. uniform, the Weibull
    class with alpha = 1, where N(t) grows like a power of t.  Rejects reading bounded scores as
    Gumbel (linear) and any rescaling rule for them (no power of log n keeps c flat when kappa ~ n)."""
    rng = np.random.default_rng([12697, 3])
    q = np.ones((1, 1, 16, 256, 1))
    k = rng.uniform(-1.0, 1.0, size=(1, 1, 16, 256, 1))
    diag = diagnose_qk(q, k, scale=1.0, nulls=("unif",), null_windows=32)
    head = diag.heads.iloc[0]
    assert head["law"] == "power"
    assert head["rows_power"] > head["rows_linear"]
    assert head["best_rule"] == "undefined"
    assert diag.nulls.iloc[0]["law"] == "power"


def test_all_zero_and_constant_heads_are_degenerate_not_sinks():
    """All-zero q (every logit 0) and constant k (every logit of a row equal) read as degenerate heads: no sink,
    no kappa, no law, no rule, a warning in the summary; the third head and the nulls are read as usual.
    Rejects the old reading sink=True, kappa=inf without a warning."""
    from critscale.diagnostic.report import summary_text

    rng = np.random.default_rng(8)
    shape = (1, 3, 8, 128, 8)
    q = rng.standard_normal(shape).astype(np.float32)
    k = rng.standard_normal(shape).astype(np.float32)
    q[0, 0] = 0.0
    k[0, 1] = 1.0
    diag = diagnose_qk(q, k, nulls=("gauss_qk", "ptail2"), null_windows=8)
    heads = diag.heads.set_index("unit")
    for unit in ("L0H0", "L0H1"):
        head = heads.loc[unit]
        assert head["degenerate"] and head["degenerate_fraction"] == 1.0
        assert not head["sink"] and head["sink_fraction"] == 0.0
        assert np.isnan(head["kappa"]) and np.isnan(head["gamma"]) and np.isnan(head["rows_step"])
        assert head["law"] == "undefined" and head["best_rule"] == "undefined" and head["regime_kappa"] == "undefined"
    assert not heads.loc["L0H2", "degenerate"] and heads.loc["L0H2", "law"] != "undefined"
    assert np.isfinite(heads.loc["L0H2", "kappa"])
    assert not diag.nulls["degenerate"].any() and diag.meta["degenerate_heads"] == ["L0H0", "L0H1"]
    assert diag.meta["null_spread"] == pytest.approx(heads.loc["L0H2", "spread"], rel=1e-12)  # its rows alone
    warnings = [line for line in summary_text(diag).splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 of 3 heads are degenerate" in warnings[0] and "L0H0, L0H1" in warnings[0]


def test_an_input_of_zeros_gives_nulls_of_a_stated_spread():
    """Every row degenerate: the q/k nulls cannot copy a spread of 0 (they would be degenerate too)."""
    q = np.zeros((1, 1, 8, 128, 8), dtype=np.float32)
    diag = diagnose_qk(q, q, nulls=("gauss_qk",), null_windows=8)
    assert diag.heads["degenerate"].all() and not diag.heads["sink"].any()
    assert diag.meta["null_spread"] == 1.0 and "every row of the input is degenerate" in diag.meta["null_spread_from"]
    null = diag.nulls.iloc[0]
    assert not null["degenerate"] and np.isfinite(null["kappa"]) and null["law"] != "undefined"
