"""Every documented bad input raises ValueError naming the problem; nothing is silently clipped."""

import math

import numpy as np
import pytest

import critscale

ROW = np.array([0.0, -1.0, -2.5])

# (callable of the scores, a name for the test id)
SCORE_FUNCTIONS = [
    (lambda s: critscale.sorted_gaps(s), "sorted_gaps"),
    (lambda s: critscale.gap_counts(s, [0.0, 1.0]), "gap_counts"),
    (lambda s: critscale.accumulation_scale(s), "accumulation_scale"),
    (lambda s: critscale.legendre_transform(s, [0.0, 1.0]), "legendre_transform"),
    (lambda s: critscale.softmax_stats(s, [0.0, 1.0]), "softmax_stats"),
    (lambda s: critscale.beta_at_max_weight(s, 0.5), "beta_at_max_weight"),
    (lambda s: critscale.beta_at_entropy(s, 0.5), "beta_at_entropy"),
]


@pytest.mark.parametrize("function", [f for f, _ in SCORE_FUNCTIONS], ids=[i for _, i in SCORE_FUNCTIONS])
@pytest.mark.parametrize("bad,message", [
    (np.array([0.0, np.nan, 1.0]), "NaN"),
    (np.array([0.0, np.inf, 1.0]), r"\+inf"),
    (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), r"rows empty after masking.*\[1\]"),
    (np.zeros((2, 0)), "length 0"),
    (np.float64(3.0), "at least one dimension"),
    (np.array([1e308, -1e308]), "overflows"),
    (np.array(["a", "b"]), "numeric"),
    (np.array([1 + 1j, 2.0]), "real"),
])
def test_bad_scores(function, bad, message):
    with pytest.raises(ValueError, match=message):
        function(bad)


@pytest.mark.parametrize("function", [critscale.softmax_stats, critscale.legendre_transform])
@pytest.mark.parametrize("beta,message", [
    (-0.5, ">= 0"),
    ([1.0, -1e-300], ">= 0"),
    (np.nan, "finite"),
    (np.inf, "finite"),
    ([[1.0, 2.0]], "1-D"),
])
def test_bad_beta(function, beta, message):
    with pytest.raises(ValueError, match=message):
        function(ROW, beta)


@pytest.mark.parametrize("K,message", [(1, "K must be >= 2"), (0, "K must be >= 2"), (-3, "K must be >= 2"),
                                       (2.5, "integer"), ("2", "integer"), (True, "integer")])
def test_bad_K(K, message):
    with pytest.raises(ValueError, match=message):
        critscale.accumulation_scale(ROW, K=K)


@pytest.mark.parametrize("t,message", [
    ([1.0, 0.5], "sorted"),
    ([-0.1, 1.0], ">= 0"),
    ([0.0, np.nan], "NaN"),
    ([[0.0, 1.0]], "1-D"),
])
def test_bad_thresholds(t, message):
    with pytest.raises(ValueError, match=message):
        critscale.gap_counts(ROW, t)


def test_bad_root_targets_and_shapes():
    scores = np.zeros((2, 3)) + np.array([0.0, -1.0, -2.0])
    with pytest.raises(ValueError, match="p must be in"):
        critscale.beta_at_max_weight(scores, 0.0)
    with pytest.raises(ValueError, match="p must be in"):
        critscale.beta_at_max_weight(scores, 1.5)
    with pytest.raises(ValueError, match="h must be finite"):
        critscale.beta_at_entropy(scores, -0.1)
    with pytest.raises(ValueError, match="h must be finite"):
        critscale.beta_at_entropy(scores, np.nan)
    with pytest.raises(ValueError, match="does not match the batch shape"):
        critscale.beta_at_max_weight(scores, [0.5, 0.6, 0.7])


def test_masked_entries_are_not_errors_and_not_clipped():
    row = np.array([-np.inf, 0.0, -1.0, -np.inf])
    assert critscale.gap_counts(row, np.inf) == 2  # masked entries are never counted
    assert critscale.accumulation_scale(row) == pytest.approx(math.log(2))
    huge = np.array([0.0, -1e300])
    assert critscale.softmax_stats(huge, 1e10).log_z == 0.0  # underflow to exactly 0, not an error


def test_torch_bad_input():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="NaN"):
        critscale.softmax_stats(torch.tensor([0.0, float("nan")]), 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        critscale.softmax_stats(torch.tensor([0.0, 1.0]), torch.tensor([-1.0]))
