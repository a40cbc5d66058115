"""softmax_stats against float64 loops and scipy (logsumexp, entropy) (theory.md §3.1)."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import entropy as scipy_entropy

import critscale
from critscale import _validate, families


def example_rows(seed: int = 0) -> list[np.ndarray]:
    """Rows of every family plus ties, masks, n = 1, huge and tiny scales (all float64)."""
    rng = np.random.default_rng(seed)
    rows = [families.get(name).sample(n, 1, rng)[0] for name in families.names() for n in (2, 9, 40)]
    base = rng.standard_normal(25)
    masked = np.where(rng.random(25) < 0.4, -np.inf, base)
    masked[3] = 0.5
    rows += [np.array([0.3]), np.array([1.0, 1.0]), np.round(base, 1), np.concatenate([[3.0, 3.0], base]),
             masked, np.array([-np.inf, 5.0, -np.inf]), 1e150 * base, 1e-150 * base]
    return rows


def loop_stats(row: np.ndarray, beta: float) -> tuple[float, float, float, float]:
    """Explicit float64 loops over the entries: log Z, H, p_max, sum p^2 of softmax(beta * s)."""
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    weights = [math.exp(-beta * (top - x)) for x in valid]
    z = sum(weights)
    probs = [w / z for w in weights]
    h = -sum(p * math.log(p) for p in probs if p > 0)
    return math.log(z), h, max(probs), sum(p * p for p in probs)


@pytest.mark.parametrize("row_index", range(len(example_rows())))
def test_against_loops_and_scipy(row_index):
    row = example_rows()[row_index]
    valid = row[np.isfinite(row)]
    spread = max(np.ptp(valid), 1e-300)
    betas = np.array([0.0, 0.5, 3.0, 0.1 / spread, 1.0 / spread, 10.0 / spread])
    stats = critscale.softmax_stats(row, betas)
    for j, beta in enumerate(betas):
        log_z, h, p_max, collision = loop_stats(row, beta)
        assert stats.log_z[j] == pytest.approx(log_z, rel=1e-12, abs=1e-14)
        assert stats.entropy[j] == pytest.approx(h, rel=1e-10, abs=1e-13)
        assert stats.max_weight[j] == pytest.approx(p_max, rel=1e-12)
        assert stats.collision[j] == pytest.approx(collision, rel=1e-12)
        # scipy on the shifted logits beta (s - max s): log Z = logsumexp; entropy of the normalised weights
        logits = beta * (valid - valid.max())
        assert stats.log_z[j] == pytest.approx(logsumexp(logits) - logits.max(), rel=1e-12, abs=1e-13)
        probs = np.exp(logits - logsumexp(logits))
        assert stats.entropy[j] == pytest.approx(scipy_entropy(probs), rel=1e-10, abs=1e-13)


def test_shapes_scalar_beta_and_batches():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((2, 3, 10))
    stats = critscale.softmax_stats(scores, [0.0, 1.0])
    assert isinstance(stats, critscale.SoftmaxStats)
    assert all(field.shape == (2, 3, 2) for field in stats)
    scalar = critscale.softmax_stats(scores, 1.0)
    assert all(field.shape == (2, 3) for field in scalar)
    assert np.allclose(scalar.entropy, stats.entropy[..., 1], rtol=1e-14, atol=0)
    assert np.allclose(stats.max_weight, np.exp(-stats.log_z), rtol=0, atol=0)


def test_beta_zero_with_masks_is_uniform_over_valid_entries():
    row = np.array([0.2, -np.inf, -3.0, -np.inf, 7.0])
    stats = critscale.softmax_stats(row, 0.0)
    assert stats.log_z == pytest.approx(math.log(3), rel=1e-15)
    assert stats.entropy == pytest.approx(math.log(3), rel=1e-15)
    assert stats.collision == pytest.approx(1 / 3, rel=1e-15)
    assert not np.isnan([*stats]).any()


def test_no_overflow_at_large_beta_times_gap():
    row = np.array([0.0, -1.0, -2.0])
    stats = critscale.softmax_stats(row, [1e6, 1e300])
    assert np.all(stats.log_z == 0.0) and np.all(stats.entropy == 0.0)
    assert np.all(stats.max_weight == 1.0) and np.all(stats.collision == 1.0)
    tied = critscale.softmax_stats(np.array([2.0, 2.0, -1e6]), 1e6)
    assert tied.max_weight == 0.5 and tied.entropy == pytest.approx(math.log(2), rel=1e-15)


def test_collapsed_row_keeps_relative_precision():
    """log Z = log1p(Z - 1) when Z - 1 is tiny: exact to rounding, not 0."""
    gap = 50.0
    stats = critscale.softmax_stats(np.array([0.0, -gap]), 1.0)
    tail = math.exp(-gap)
    assert stats.log_z == pytest.approx(math.log1p(tail), rel=1e-14)
    expected_h = math.log1p(tail) + gap * tail / (1 + tail)
    assert stats.entropy == pytest.approx(expected_h, rel=1e-14)


def test_blocking_over_rows_columns_and_betas(monkeypatch):
    rng = np.random.default_rng(2)
    scores = rng.standard_normal((5, 300))
    scores[1, ::3] = -np.inf
    betas = np.linspace(0, 4, 7)
    reference = critscale.softmax_stats(scores, betas)
    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 7 * 40)  # forces column blocks of 40 entries
    blocked = critscale.softmax_stats(scores, betas)
    for a, b in zip(reference, blocked):
        assert np.allclose(a, b, rtol=1e-13, atol=0)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    scores = torch.randn(4, 16, dtype=torch.float64)
    stats = critscale.softmax_stats(scores, torch.tensor([0.5, 2.0]))
    assert all(isinstance(f, torch.Tensor) and f.dtype == torch.float64 for f in stats)
    reference = critscale.softmax_stats(scores.numpy(), [0.5, 2.0])
    probs = torch.softmax(2.0 * scores, dim=-1)
    assert torch.allclose(stats.collision[:, 1], (probs**2).sum(-1), rtol=1e-12, atol=0)
    assert np.array_equal(stats.entropy.numpy(), reference.entropy)


def test_scalar_beta_is_one_column_of_a_beta_array():
    """softmax_stats(s, 1.0) equals the first column of softmax_stats(s, [1, 1]) bit for bit, so chapter 03's
    stats_at_one work-around (two betas, one column kept) can become a plain scalar call without changing a
    recorded number; a different summation order for one beta would break the equality."""
    rng = np.random.default_rng(6)
    scores = np.concatenate([families.get(name).sample(300, 7, rng) for name in ("gauss", "unif", "planted")])
    scores[2, :50] = -np.inf
    single = critscale.softmax_stats(scores, 1.0)
    pair = critscale.softmax_stats(scores, np.array([1.0, 1.0]))
    for a, b in zip(single, pair):
        assert np.array_equal(a, b[:, 0])
