"""Per-row statistics of causal rows: the masked (T, T) layout against plain float64 loops.

Row i of a causal matrix holds n = i + 1 scores followed by -inf; every statistic must equal the
same statistic of the unmasked row of length n, computed here with explicit float64 loops from the
definitions of theory.md §3.1 (kappa_K = max over sorted positions with N >= K of log N / Delta).
"""

import math

import numpy as np
import pytest
import torch

from critscale.models.capture import causal_logits
from critscale.gpt2.stats import BETA_GRID, kernel_row_statistics, row_statistics


def _kappa_loop(scores, K):
    top = max(scores)
    gaps = sorted(top - s for s in scores)
    best = 0.0
    for idx, gap in enumerate(gaps):
        count = sum(1 for g in gaps if g <= gap)
        if count >= K:
            best = max(best, math.inf if gap == 0 else math.log(count) / gap)
    return best


def _softmax_loop(scores, beta):
    top = max(scores)
    weights = [math.exp(-beta * (top - s)) for s in scores]
    z = sum(weights)
    p = [w / z for w in weights]
    return p, -sum(pi * math.log(pi) for pi in p if pi > 0)


def _causal(T=40, d=6, seed=0, gain=2.0):
    g = torch.Generator().manual_seed(seed)
    q = gain * torch.randn(3, T, d, generator=g, dtype=torch.float64)
    k = gain * torch.randn(3, T, d, generator=g, dtype=torch.float64)
    return q, k


def test_row_statistics_match_loops():
    q, k = _causal()
    logits = causal_logits(q, k, 1 / math.sqrt(6)).numpy()  # (3, 40, 40)
    rows = logits[1, 15:]  # rows with n = 16..40
    stats = row_statistics(rows)
    one = int(np.argmin(np.abs(BETA_GRID - 1)))
    for r, i in enumerate(range(15, 40)):
        scores = [float(v) for v in logits[1, i, :i + 1]]
        assert stats["n"][r] == i + 1
        assert stats["kappa"][r] == pytest.approx(_kappa_loop(scores, 2), rel=1e-12)
        assert stats["kappa16"][r] == pytest.approx(_kappa_loop(scores, 16), rel=1e-12)
        p, h = _softmax_loop(scores, 1.0)
        assert stats["entropy"][r, one] == pytest.approx(h, rel=1e-10)
        assert stats["max_weight"][r, one] == pytest.approx(max(p), rel=1e-10)
        assert stats["first_weight"][r] == pytest.approx(p[0], rel=1e-10)
        assert stats["argmax_first"][r] == (scores[0] == max(scores))
        p_half, _ = _softmax_loop(scores, stats["beta_half"][r])
        assert max(p_half) == pytest.approx(0.5, abs=1e-9)
        top_gaps = sorted(max(scores) - s for s in scores)[:32]
        finite = stats["top_gaps"][r][np.isfinite(stats["top_gaps"][r])]
        np.testing.assert_allclose(finite, top_gaps, rtol=0, atol=1e-12)


def test_row_statistics_needs_model_beta():
    with pytest.raises(ValueError, match="beta = 1"):
        row_statistics(np.zeros((2, 5)), betas=np.array([0.5, 2.0]))
    with pytest.raises(ValueError, match="2-D"):
        row_statistics(np.zeros(5))


def test_kernel_path_agrees_with_reference():
    """The kernel-path assembly (bracket midpoints, interpolated beta_half, topk gaps) on the kernel
    package's float64 reference backend: kappa within the threshold grid's factor, beta_half within
    the interpolation error, everything else exact up to float32 logits."""
    q, k = _causal(T=48, d=8, seed=2, gain=1.5)
    scale = 1 / math.sqrt(8)
    reference_logits = causal_logits(q, k, scale).numpy()
    from_kernel = kernel_row_statistics(q.float(), k.float(), scale, 16, backend="reference")
    for h in range(3):
        ref = row_statistics(reference_logits[h, 15:])
        ker = from_kernel[h]
        np.testing.assert_array_equal(ker["n"], ref["n"])
        np.testing.assert_allclose(ker["kappa"], ref["kappa"], rtol=0.031)  # sqrt(1.06) - 1 = 0.0296
        np.testing.assert_allclose(ker["kappa16"], ref["kappa16"], rtol=0.031)
        np.testing.assert_allclose(ker["beta_half"], ref["beta_half"], rtol=0.01)
        np.testing.assert_allclose(ker["entropy"], ref["entropy"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(ker["max_weight"], ref["max_weight"], rtol=1e-4)
        np.testing.assert_allclose(ker["first_weight"], ref["first_weight"], rtol=1e-4, atol=1e-9)
        np.testing.assert_array_equal(ker["argmax_first"], ref["argmax_first"])
        np.testing.assert_allclose(ker["top_gaps"], ref["top_gaps"], rtol=1e-4, atol=1e-5)
