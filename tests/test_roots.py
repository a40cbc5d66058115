"""beta_at_max_weight / beta_at_entropy against scipy's brentq on float64 loops (Corollary 5, theory.md §3.2)."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

import critscale
from critscale import families


def loop_max_weight(row: np.ndarray, beta: float) -> float:
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    return 1.0 / sum(math.exp(-beta * (top - x)) for x in valid)


def loop_entropy(row: np.ndarray, beta: float) -> float:
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    weights = [math.exp(-beta * (top - x)) for x in valid]
    z = sum(weights)
    return -sum((w / z) * math.log(w / z) for w in weights if w > 0)


def family_rows(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [families.get(name).sample(30, 2, rng) for name in families.names()]
    return np.concatenate(rows, axis=0)  # (28, 30)


def reference_root(function, target: float) -> float:
    """brentq in log beta on a float64 loop; the function is monotone in beta."""
    return math.exp(brentq(lambda u: function(math.exp(u)) - target, -60.0, 60.0, xtol=1e-14, rtol=1e-14))


def test_max_weight_root_matches_brentq():
    rows = family_rows()
    for p in (0.1, 0.5, 0.9):
        beta = critscale.beta_at_max_weight(rows, p)
        assert beta.shape == (rows.shape[0],)
        for row, b in zip(rows, beta):
            expected = reference_root(lambda x, row=row: -loop_max_weight(row, x), -p)
            assert b == pytest.approx(expected, rel=1e-9)
        achieved = np.array([critscale.softmax_stats(row, b).max_weight for row, b in zip(rows, beta)])
        assert np.allclose(achieved, p, rtol=1e-11, atol=0)


def test_entropy_root_matches_brentq():
    rows = family_rows(1)
    for h in (0.05, 1.0, 2.5):
        beta = critscale.beta_at_entropy(rows, h)
        for row, b in zip(rows, beta):
            expected = reference_root(lambda x, row=row: loop_entropy(row, x), h)
            assert b == pytest.approx(expected, rel=1e-8)
        achieved = np.array([critscale.softmax_stats(row, b).entropy for row, b in zip(rows, beta)])
        assert np.allclose(achieved, h, rtol=1e-11, atol=0)


def test_ties_masks_and_boundary_values():
    rows = np.array([
        [1.0, 1.0, 0.0, -1.0, -np.inf],  # maximum of multiplicity 2, one masked entry
        [0.0, -0.5, -np.inf, -2.0, -3.0],
    ])
    beta = critscale.beta_at_max_weight(rows, 0.4)
    for row, b in zip(rows, beta):
        assert loop_max_weight(row, b) == pytest.approx(0.4, rel=1e-12)
    # the value at beta = 0 gives 0: p = 1/n_valid, h = log n_valid
    assert np.all(critscale.beta_at_max_weight(rows, 0.25) == 0.0)
    assert np.all(critscale.beta_at_entropy(rows, math.log(4)) == 0.0)
    h = critscale.beta_at_entropy(rows, 0.8)
    for row, b in zip(rows, h):
        assert loop_entropy(row, b) == pytest.approx(0.8, rel=1e-12)


def test_per_row_targets_and_batch_shape():
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((2, 3, 40))
    p = np.array([[0.2], [0.6]])  # broadcasts over the second batch axis
    beta = critscale.beta_at_max_weight(scores, p)
    assert beta.shape == (2, 3)
    achieved = critscale.softmax_stats(scores[1, 2], beta[1, 2]).max_weight
    assert achieved == pytest.approx(0.6, rel=1e-11)


def test_no_solution_names_the_rows():
    rows = np.array([[0.0, -1.0, -2.0], [1.0, 1.0, 0.0], [0.0, -1.0, -2.0]])
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        critscale.beta_at_max_weight(rows, 0.5)  # tied maximum: p_max < 1/2 for every beta
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_max_weight(rows, 0.2)  # p < 1/n_valid
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_entropy(rows, 2.0)  # h > log n_valid
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_entropy(rows, 0.0)  # H -> 0 only as beta -> inf
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        critscale.beta_at_entropy(rows, math.log(2))  # H > log 2 for every beta when the max is tied


def test_wide_gap_ranges_converge():
    """A row with gaps spanning 12 decades, and beta * gap far beyond 1e6."""
    row = np.array([0.0, -1e-6, -1.0, -1e6, -1e6])
    for p in (0.3, 0.5, 0.7):
        b = critscale.beta_at_max_weight(row, p)
        assert loop_max_weight(row, b) == pytest.approx(p, rel=1e-11)
    for h in (1e-8, 0.5, 1.5):
        b = critscale.beta_at_entropy(row, h)
        assert loop_entropy(row, b) == pytest.approx(h, rel=1e-9)


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    scores = torch.randn(5, 20)
    beta = critscale.beta_at_entropy(scores, 1.0)
    assert isinstance(beta, torch.Tensor) and beta.dtype == torch.float64 and beta.shape == (5,)
    assert np.allclose(beta.numpy(), critscale.beta_at_entropy(scores.double().numpy(), 1.0), rtol=0, atol=0)
