"""Kind ``qk`` (fused q.k logits): the Triton kernels against the critscale float64 reference.

The reference materialises ``scale * q k^T`` in float64 from the same (possibly bf16-rounded) inputs.
The kernel's fp32 dot product differs by at most ``gamma_d scale sum_k |q_k k_k|`` per logit, and the
tolerances on ``log Z`` and ``H`` follow from it (derivation in :mod:`critscale.kernels.testing`).
"""

import math

import numpy as np
import pytest
import torch

import critscale
from critscale.kernels import qk_row_stats
from critscale.kernels.qk import qk_scores
from critscale.kernels.testing import (assert_close_rel, backend_params, check_softmax_fields, device_of,
                                       require)

BETA = np.array([0.0, 0.5, 1.0, 4.0, 30.0, 1e4])
T = np.array([0.0, 0.1, 0.5, 1.0, 3.0, np.inf])


def dot_error_bound(q: torch.Tensor, k: torch.Tensor, scale: float) -> float:
    """Sup over logits of the fp32 dot-product error bound gamma_d scale sum_k |q_k k_k| (plus the scale product)."""
    d = q.shape[-1]
    u = 2.0 ** -24
    gamma = (d + 2) * u / (1 - (d + 2) * u)
    absdot = scale * torch.matmul(q.double().abs(), k.double().abs().transpose(-1, -2))
    return float(gamma * absdot.max())


def compare(res, q, k, scale, causal, offset=0):
    s = qk_scores(q, k, scale, causal, offset)  # float64 (..., rows, n)
    flat = s.reshape(-1, s.shape[-1]).numpy()
    ref = critscale.softmax_stats(flat, BETA)
    ds = dot_error_bound(q, k, scale)
    logz_tol = 2 * BETA[None, :] * ds
    h_tol = 2 * BETA[None, :] * ds * (2 * np.asarray(ref.entropy) + 1)
    out = res.to_numpy()
    shape = (-1, len(BETA))
    valid = np.isfinite(flat).sum(axis=1)

    class Flat:
        log_z = out.log_z.reshape(shape)
        entropy = out.entropy.reshape(shape)
        max_weight = out.max_weight.reshape(shape)
        collision = out.collision.reshape(shape)

    # p_max = e^{-log Z} and sum p^2 inherit the log Z error (relative, to first order)
    check_softmax_fields(Flat, ref, valid, extra_logz=logz_tol, extra_h=h_tol)
    np.testing.assert_array_equal(out.n_valid.reshape(-1), valid)
    return flat, out


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("causal", [False, True])
def test_fp32_logits_match_reference(backend, causal):
    require(backend)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, 37, 20, generator=g)  # (layers, heads, rows, d): d not a power of 2
    k = torch.randn(2, 3, 45, 20, generator=g)
    dev = device_of(backend)
    res = qk_row_stats(q.to(dev), k.to(dev), BETA, T, causal=causal, backend=backend, split=2)
    assert res.backend == backend and res.log_z.shape == (2, 3, 37, len(BETA))
    flat, out = compare(res, q, k, 1 / math.sqrt(20), causal)
    if causal:
        np.testing.assert_array_equal(out.n_valid[0, 0], np.minimum(np.arange(37) + 1, 45))


@pytest.mark.parametrize("backend", backend_params())
def test_counts_and_kappa_on_exact_logits(backend):
    """Integer q, k and scale 1/4: every logit is an exact multiple of 1/4 in fp32, so counts are exact."""
    require(backend)
    g = torch.Generator().manual_seed(4)
    q = torch.randint(-3, 4, (1, 19, 16), generator=g).float()
    k = torch.randint(-3, 4, (1, 70, 16), generator=g).float()
    t = np.array([0.0, 0.125, 0.375, 0.625, 1.125, 2.125, 5.125, np.inf])
    dev = device_of(backend)
    res = qk_row_stats(q.to(dev), k.to(dev), [1.0], t, scale=0.25, causal=True, causal_offset=7,
                       backend=backend).to_numpy()
    s = qk_scores(q, k, 0.25, True, 7).reshape(-1, 70).numpy()
    np.testing.assert_array_equal(res.counts.reshape(-1, len(t)), critscale.gap_counts(s, t))
    exact = critscale.accumulation_scale(s)
    lo, hi = res.kappa_lower.reshape(-1), res.kappa_upper.reshape(-1)
    tied = np.isinf(exact)
    assert (np.isinf(lo) == tied).all() and (np.isinf(hi) == tied).all()
    assert (lo[~tied] <= exact[~tied] * (1 + 1e-12)).all() and (hi[~tied] >= exact[~tied] * (1 - 1e-12)).all()


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs(backend, dtype):
    """bf16/fp16 q, k: products exact in fp32, fp32 accumulation; compared with the reference on the
    rounded inputs with the same derived tolerance as fp32 (the rounding of q, k to 16 bits is part of the input)."""
    require(backend)
    g = torch.Generator().manual_seed(7)
    q = torch.randn(3, 50, 64, generator=g).to(dtype)  # (heads, rows, d = 64 as in GPT-2)
    k = torch.randn(3, 77, 64, generator=g).to(dtype)
    dev = device_of(backend)
    res = qk_row_stats(q.to(dev), k.to(dev), BETA, T, causal=True, backend=backend)
    compare(res, q.double(), k.double(), 1 / 8, True)


@pytest.mark.parametrize("backend", backend_params())
def test_single_key_and_single_row(backend):
    """n = 1 (one key): log Z = H = 0, p_max = 1, kappa = 0; one query row, in 64 independent batches on a GPU.

    Pass 2 recomputes the logit; on a GPU it can come back a few ulps below pass 1's maximum, which
    must still count as the maximum (the snap distance of kernels/qk.py), else log Z < 0.
    In the interpreter both passes compute the logit tile with the same numpy operations on the same
    inputs (``_qk_tile``), so pass 2 returns pass 1's bits for every draw: there 8 batches (8 programs,
    each at its own batch offset) run every path that 64 would, at an eighth of the interpreter's time.
    """
    require(backend)
    dev = device_of(backend)
    batches = 8 if backend == "triton-interpreter" else 64
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(batches, 1, 8, generator=gen)
    k = torch.randn(batches, 1, 8, generator=gen)
    res = qk_row_stats(q.to(dev), k.to(dev), BETA, T, backend=backend).to_numpy()
    np.testing.assert_array_equal(res.log_z, np.zeros((batches, 1, len(BETA))))
    np.testing.assert_array_equal(res.max_weight, np.ones((batches, 1, len(BETA))))
    assert np.all(res.kappa_lower == 0) and np.all(res.kappa_upper == 0)


def test_errors_and_reference_backend():
    q = torch.randn(2, 5, 8)
    k = torch.randn(2, 9, 8)
    ref = qk_row_stats(q, k, [1.0, 2.0], [0.5], backend="reference")
    assert ref.backend == "reference" and ref.log_z.shape == (2, 5, 2)
    s = qk_scores(q, k, 1 / math.sqrt(8), False).reshape(-1, 9).numpy()
    assert_close_rel(ref.log_z.reshape(-1, 2).numpy(), critscale.softmax_stats(s, [1.0, 2.0]).log_z, 1e-12, 0, "log Z")
    with pytest.raises(ValueError, match="batch shape"):
        qk_row_stats(q, torch.randn(3, 9, 8), [1.0], [0.5])
    with pytest.raises(ValueError, match="dtype"):
        qk_row_stats(q, k.half(), [1.0], [0.5])
    with pytest.raises(ValueError, match="scale"):
        qk_row_stats(q, k, [1.0], [0.5], scale=-1.0)
    bad = q.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        qk_row_stats(bad, k, [1.0], [0.5])


def test_gpu_tile_shape_runs_in_interpreter():
    """The GPU tile shape (BM, BN) = (64, 32) with its masks, in the interpreter."""
    from critscale.kernels import qk as mod

    require("triton-interpreter")
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 70, 24, generator=g)
    k = torch.randn(1, 90, 24, generator=g)
    for shape in (mod.GPU_BLOCK,) + mod.GPU_BLOCK_ALTERNATIVES:
        res = qk_row_stats(q, k, BETA, T, causal=True, backend="triton-interpreter", block=shape, split=2)
        assert res.notes["block"][:2] == shape[:2]
        compare(res, q, k, 1 / math.sqrt(24), True)


def test_snap_distance_is_the_stated_bound():
    """snap = QK_SNAP_ULPS sqrt(BD) eps32 scale |q_i| max_j |k_j|, also when the keys span several chunks."""
    from critscale.kernels import qk as qk_module

    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 5, 8, generator=gen)
    k = torch.randn(2, qk_module.KEY_CHUNK + 7, 8, generator=gen)
    k[1, -1] *= 10.0  # the largest key sits in the last, partial chunk
    got = qk_module.snap_distance(q, k, 0.5, 16)
    eps32 = float(torch.finfo(torch.float32).eps)
    want = qk_module.QK_SNAP_ULPS * 4.0 * eps32 * 0.5 * q.double().norm(dim=-1) * k.double().norm(dim=-1).amax(-1, keepdim=True)
    torch.testing.assert_close(got.double(), want.reshape(-1), rtol=1e-6, atol=0)


def test_counts_of_a_tile_with_16_columns_per_lane():
    """The alternative block (BM, BN) = (64, 64) gives each lane 16 columns of a row per tile: their 16 words are
    reduced into a 5-bit sliced number.  A 4-bit one (the counting before) wrapped 16 to 0, so a threshold above
    every gap counted 0 of the 64 keys."""
    from critscale.kernels import qk as mod

    require("triton-interpreter")
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 8, 16, generator=g)
    k = torch.randn(1, 64, 16, generator=g)
    assert (64, 64, 4, 32, 4) in mod.GPU_BLOCK_ALTERNATIVES
    res = qk_row_stats(q, k, [1.0], [0.0, 100.0], backend="triton-interpreter", block=(64, 64, 4, 32, 4), split=1)
    assert res.counts.reshape(-1, 2)[:, 1].tolist() == [64.0] * 8
