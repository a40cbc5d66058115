"""Row statistics of a design's blocks against plain float64 loops, and the kernel path against both.

Query j of level n sees keys 0 .. n - m + j: every statistic must equal the same statistic of the
unmasked row of that length, computed here with explicit float64 loops from the definitions of
theory.md §3.1 (kappa_K = max over sorted positions with N >= K of log N / Delta).
"""

import math

import numpy as np
import pytest
import torch

from critscale.diagnostic.design import make_design
from critscale.diagnostic.rows import (BETA_GRID, MODEL_BETA, beta_half_from_grid, kernel_block_statistics,
                                       reference_block_statistics, resolve_backend, row_statistics)
from critscale.diagnostic.windows import ArraySource


def _kappa_loop(scores, K):
    top = max(scores)
    gaps = sorted(top - s for s in scores)
    best = 0.0
    for gap in gaps:
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


def _arrays(T=128, d=6, heads=2, windows=3, seed=0, gain=2.0):
    g = torch.Generator().manual_seed(seed)
    q = gain * torch.randn(1, heads, windows, T, d, generator=g, dtype=torch.float64)
    k = gain * torch.randn(1, heads, windows, T, d, generator=g, dtype=torch.float64)
    return q, k


@pytest.mark.parametrize("kind", ["prefix", "suffix"])
def test_block_rows_match_loops(kind):
    """Rejects an off-by-one in the causal mask (a query seeing its successor or missing itself), the
    suffix design reading the window's start instead of its end, and mislabelled rows."""
    q, k = _arrays()
    scale = 1 / math.sqrt(6)
    design = make_design(kind, 128, queries=4)
    T = 128
    block = next(b for b in ArraySource(q, k, scale).blocks(design) if b.n == 45)
    stats = reference_block_statistics(block)
    for r in range(len(stats["n"])):
        h, w, j = stats["head"][r], stats["window"][r], stats["query"][r]
        start = 0 if kind == "prefix" else T - 45  # the forward: the window's first or last 45 tokens
        i = start + 45 - 4 + j  # the query's position in the window
        scores = [float(scale * q[0, h, w, i] @ k[0, h, w, c]) for c in range(start, i + 1)]
        assert stats["n"][r] == len(scores) == 45 - 4 + j + 1
        assert stats["kappa"][r] == pytest.approx(_kappa_loop(scores, 2), rel=1e-12)
        assert stats["kappa16"][r] == pytest.approx(_kappa_loop(scores, 16), rel=1e-12)
        p, entropy = _softmax_loop(scores, 1.0)
        assert stats["entropy"][r, MODEL_BETA] == pytest.approx(entropy, rel=1e-10)
        assert stats["max_weight"][r, MODEL_BETA] == pytest.approx(max(p), rel=1e-10)
        assert stats["first_weight"][r] == pytest.approx(p[0], rel=1e-10)
        assert stats["argmax_first"][r] == (scores[0] == max(scores))
        assert stats["spread"][r] == pytest.approx(np.std(scores), rel=1e-10)
        p_half, _ = _softmax_loop(scores, stats["beta_half"][r])
        assert max(p_half) == pytest.approx(0.5, abs=1e-9)
        np.testing.assert_allclose(stats["top_gaps"][r], sorted(max(scores) - s for s in scores)[:32], atol=1e-12)


def test_planted_first_key_replaces_position_zero_of_every_forward():
    """The sink null's key sits at position 0 of each forward, also in the suffix design."""
    q, k = _arrays(heads=1, windows=1)
    key = torch.zeros(1, 1, 6, dtype=torch.float64)
    key[..., 0] = 50.0
    for block in ArraySource(q, k, 1.0, first_key=key).blocks(make_design("suffix", 128)):
        assert torch.equal(block.k[0, 0, 0, 0], key[0, 0])
        assert torch.equal(block.k[0, 0, 0, 1:], k[0, 0, 0, 128 - block.n + 1:])
    assert not torch.equal(k[0, 0, 0, 0], key[0, 0])  # the source arrays are left unchanged


def test_row_statistics_needs_model_beta():
    with pytest.raises(ValueError, match="beta = 1"):
        row_statistics(np.zeros((2, 5)), betas=np.array([0.5, 2.0]))
    with pytest.raises(ValueError, match="2-D"):
        row_statistics(np.zeros(5))


def test_backend_errors():
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend("fast")
    assert resolve_backend("reference") == "reference"
    if not torch.cuda.is_available():
        assert resolve_backend("auto") == "reference"
        with pytest.raises(ValueError, match="needs CUDA"):
            resolve_backend("kernel")


def test_kernel_path_agrees_with_reference():
    """The kernel-path assembly (bracket midpoints, interpolated beta_half, topk gaps, causal offset
    n - m) on the kernel package's float64 reference backend (the kernels themselves are tested
    against it in tests/test_kernels_qk.py; in Triton's interpreter this block takes minutes):
    kappa within the threshold grid's factor sqrt(1.06) - 1 = 0.0296, beta_half within the
    interpolation error (1%), everything else exact up to float32 logits.  Rejects a wrong causal
    offset (rows of the wrong length) and a scale applied twice or not at all."""
    q, k = _arrays(T=128, d=8, heads=2, windows=1, seed=2, gain=1.5)
    design = make_design("prefix", 128, queries=4)
    block = next(b for b in ArraySource(q, k, [1 / math.sqrt(8)]).blocks(design) if b.n == 64)
    ref = reference_block_statistics(block)
    ker = kernel_block_statistics(block, backend="reference")
    np.testing.assert_array_equal(ker["n"], ref["n"])
    np.testing.assert_allclose(ker["kappa"], ref["kappa"], rtol=0.031)
    np.testing.assert_allclose(ker["kappa16"], ref["kappa16"], rtol=0.031)
    np.testing.assert_allclose(ker["beta_half"], ref["beta_half"], rtol=0.01)
    np.testing.assert_allclose(ker["entropy"], ref["entropy"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ker["max_weight"], ref["max_weight"], rtol=1e-4)
    np.testing.assert_allclose(ker["first_weight"], ref["first_weight"], rtol=1e-4, atol=1e-9)
    np.testing.assert_array_equal(ker["argmax_first"], ref["argmax_first"])
    np.testing.assert_allclose(ker["spread"], ref["spread"], rtol=1e-5)
    np.testing.assert_allclose(ker["top_gaps"], ref["top_gaps"], rtol=1e-4, atol=1e-5)


def test_beta_half_interpolation_matches_the_root():
    import critscale

    rng = np.random.default_rng(11)
    rows = rng.standard_normal((20, 300))
    betas = np.geomspace(1e-2, 1e3, 301)
    approx = beta_half_from_grid(betas, critscale.softmax_stats(rows, betas).max_weight)
    # linear interpolation in log-log on a grid of ratio 1.0488: relative error well below 1%
    np.testing.assert_allclose(approx, critscale.beta_at_max_weight(rows, 0.5), rtol=0.01)
    assert BETA_GRID[MODEL_BETA] == 1.0


def test_rows_whose_logits_are_all_equal_are_degenerate():
    """A constant row (all-zero q or k) is flagged; a row with one differing entry, or one valid entry, is not."""
    rows = np.array([[0.0] * 6, [2.5] * 4 + [-np.inf] * 2, [0.0] * 5 + [1e-12], [1.0] + [-np.inf] * 5])
    stats = row_statistics(rows)
    np.testing.assert_array_equal(stats["degenerate"], [True, True, False, False])
    assert np.isinf(stats["kappa"][0])  # the row API keeps its convention: a tied maximum's kappa is inf


def test_kernel_path_flags_the_same_degenerate_rows():
    q, k = _arrays(T=128, d=8, heads=2, windows=1, seed=4)
    q[0, 0] = 0.0  # head 0: every logit 0
    design = make_design("prefix", 128, queries=4)
    block = next(b for b in ArraySource(q, k, [1 / math.sqrt(8)]).blocks(design) if b.n == 64)
    ref = reference_block_statistics(block)
    ker = kernel_block_statistics(block, backend="reference")
    np.testing.assert_array_equal(ker["degenerate"], ref["degenerate"])
    np.testing.assert_array_equal(ref["degenerate"], ref["head"] == 0)


def test_the_row_implementations_are_not_called_backends():
    """One word, one meaning: ``BACKENDS`` is the kernels' (``triton-cuda``, ...); the choice between the float64
    reference and the fused kernel is ``rows.IMPLEMENTATIONS``, and the command line offers exactly those."""
    import argparse

    from critscale import cli
    from critscale.diagnostic import rows
    from critscale.kernels import dispatch

    assert not hasattr(rows, "BACKENDS")
    assert dispatch.BACKENDS != rows.IMPLEMENTATIONS
    diagnose = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["diagnose"]
    assert next(a for a in diagnose._actions if a.dest == "backend").choices == rows.IMPLEMENTATIONS
