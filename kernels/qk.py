"""Kind 2 — row statistics of attention logits ``s_ij = scale * q_i . k_j`` computed on the fly.

What and why
------------
For a transformer layer the rows we study are the logit rows of every head (theory.md §6, P-13):
query ``i`` against keys ``j`` (``j <= i + causal_offset`` when causal).  Materialising them costs
``rows * n`` floats per head; here each ``(BM, BN)`` tile of logits is made by a tensor-core product
``Q_tile @ K_tile^T`` in registers and folded straight into the statistics of
:mod:`critscale.kernels._common`, twice (pass 1: max, second value, min, count; pass 2: sums and
counts).  Recomputing the product in pass 2 costs ``2 d`` flops per score on tensor cores, against
``5 n_beta`` floating-point operations and ``n_beta`` exponentials per score for the statistics, so it
is cheap.  fp32 inputs use an IEEE fp32 product (no TF32 rounding); bf16/fp16 inputs use the tensor
cores with fp32 accumulation (in the interpreter they are first cast to fp32, because the interpreter's
bf16 dot is broken, triton-lang/triton#11584).

Order of this file (as in the Triton tutorials): torch reference -> kernels -> launcher.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from ._common import (RowStats, as_grid, check_pass1, choose_split, combine_pass1, finish, grid_chunks,
                      pick_backend, pow2, reference_from_scores, restore, store_pass1, store_pass2, sum_pass2,
                      tile_pass1, tile_pass2)
from .scores import critscale_reference

__all__ = ["qk_row_stats", "qk_scores", "torch_reference"]


# ----------------------------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------------------------


def qk_scores(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool, causal_offset: int = 0) -> torch.Tensor:
    """Float64 materialised logits ``(..., rows, n)`` with ``-inf`` where causally masked."""
    s = scale * torch.matmul(q.double(), k.double().transpose(-1, -2))  # (..., rows, n)
    if causal:
        rows, n = s.shape[-2:]
        i = torch.arange(rows, device=s.device)[:, None]
        j = torch.arange(n, device=s.device)[None, :]
        s = s.masked_fill(j > i + causal_offset, float("-inf"))
    return s


def torch_reference(q: torch.Tensor, k: torch.Tensor, beta: Any, t: Any, *, scale: float | None = None,
                    causal: bool = False, causal_offset: int = 0, K: int = 2) -> RowStats:
    """Float64 torch reference from materialised logits (small sizes)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = qk_scores(q.cpu(), k.cpu(), scale, causal, causal_offset)
    return reference_from_scores(s.reshape(-1, s.shape[-1]), as_grid(beta, "beta"), as_grid(t, "t", sorted_=True), K=K)


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def _qk_load_q(q_ptr, pid_b, s_qb, s_qm, s_qd, rows, rmask, d, BD: tl.constexpr, CAST: tl.constexpr):
    dcols = tl.arange(0, BD)
    q = tl.load(q_ptr + pid_b.to(tl.int64) * s_qb + rows.to(tl.int64)[:, None] * s_qm + dcols[None, :] * s_qd,
                mask=rmask[:, None] & (dcols < d)[None, :], other=0.0)
    if CAST:
        q = q.to(tl.float32)
    return q


@triton.jit
def _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, n, d, scale, causal_offset,
             BN: tl.constexpr, BD: tl.constexpr, CAUSAL: tl.constexpr, CAST: tl.constexpr,
             IEEE: tl.constexpr):
    """One transposed ``(BN, BM)`` fp32 logit tile (keys x queries) and its ``inside`` mask."""
    cols = c + tl.arange(0, BN)
    dcols = tl.arange(0, BD)
    kt = tl.load(k_ptr + pid_b.to(tl.int64) * s_kb + cols.to(tl.int64)[None, :] * s_kn + dcols[:, None] * s_kd,
                 mask=(cols < n)[None, :] & (dcols < d)[:, None], other=0.0)  # (BD, BN) = K^T tile
    if CAST:
        kt = kt.to(tl.float32)
    if IEEE:
        s = tl.dot(q, kt, input_precision="ieee")  # (BM, BN)
    else:
        s = tl.dot(q, kt)
    s = tl.trans(s * scale)  # (BN, BM): the row reductions of _common run over axis 0
    inside = (cols < n)[:, None] & rmask[None, :]
    if CAUSAL:
        inside = inside & (cols[:, None] <= rows[None, :] + causal_offset)
    return s, inside


_NO_SPEC = ["s_qb", "s_qm", "s_kb", "s_kn", "R", "n", "d", "causal_offset", "chunk", "SPLIT"]


@triton.jit(do_not_specialize=_NO_SPEC)
def _qk_pass1(q_ptr, k_ptr, s_qb, s_qm, s_qd, s_kb, s_kn, s_kd, R, n, d, scale, causal_offset, chunk, SPLIT,
              o_top1, o_top2, o_low, o_count, o_bad,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, CAUSAL: tl.constexpr,
              CAST: tl.constexpr, IEEE: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    pid_b = tl.program_id(2)
    rows = pid_r * BM + tl.arange(0, BM)
    rmask = rows < R
    q = _qk_load_q(q_ptr, pid_b, s_qb, s_qm, s_qd, rows, rmask, d, BD, CAST)
    lo = pid_c * chunk
    hi = tl.minimum(lo + chunk, n)
    if CAUSAL:
        hi = tl.minimum(hi, pid_r * BM + BM + causal_offset)
    top1 = tl.full([BM], float("-inf"), tl.float32)
    top2 = tl.full([BM], float("-inf"), tl.float32)
    low = tl.full([BM], float("inf"), tl.float32)
    count = tl.zeros([BM], tl.int32)
    bad = tl.zeros([BM], tl.int32)
    for c in range(lo, hi, BN):
        s, inside = _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, n, d, scale, causal_offset,
                             BN, BD, CAUSAL, CAST, IEEE)
        top1, top2, low, count, bad = tile_pass1(s, inside, top1, top2, low, count, bad)
    store_pass1((pid_b * R + rows) * SPLIT + pid_c, rmask, top1, top2, low, count, bad,
                o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit(do_not_specialize=_NO_SPEC + ["NCH"])
def _qk_pass2(q_ptr, k_ptr, s_qb, s_qm, s_qd, s_kb, s_kn, s_kd, R, n, d, scale, causal_offset, chunk, SPLIT,
              NCH, top_ptr, snap_ptr, beta2_ptr, t_ptr, o_m0, o_a, o_b, o_c, o_n,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, NBC: tl.constexpr, NTC: tl.constexpr,
              CAUSAL: tl.constexpr, CAST: tl.constexpr, IEEE: tl.constexpr):
    pid_k = tl.program_id(0)  # beta/threshold chunk: the fastest grid axis, so a tile's programs run together
    pid_r = tl.program_id(1)
    pid_bc = tl.program_id(2)  # batch index * SPLIT + column chunk
    pid_b = pid_bc // SPLIT
    pid_c = pid_bc % SPLIT
    rows = pid_r * BM + tl.arange(0, BM)
    rmask = rows < R
    q = _qk_load_q(q_ptr, pid_b, s_qb, s_qm, s_qd, rows, rmask, d, BD, CAST)
    lo = pid_c * chunk
    hi = tl.minimum(lo + chunk, n)
    if CAUSAL:
        hi = tl.minimum(hi, pid_r * BM + BM + causal_offset)
    grow = pid_b * R + rows
    top = tl.load(top_ptr + grow, mask=rmask, other=0.0)
    snap = tl.load(snap_ptr + grow, mask=rmask, other=0.0)
    m0 = tl.zeros([BM], tl.int32)
    acc_a = tl.zeros([NBC, BM], tl.float32)
    acc_b = tl.zeros([NBC, BM], tl.float32)
    acc_c = tl.zeros([NBC, BM], tl.float32)
    acc_n = tl.zeros([NTC, BM], tl.int32)
    for c in range(lo, hi, BN):
        s, inside = _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, n, d, scale, causal_offset,
                             BN, BD, CAUSAL, CAST, IEEE)
        m0, acc_a, acc_b, acc_c, acc_n = tile_pass2(s, inside, top, snap, beta2_ptr + pid_k * NBC,
                                                    t_ptr + pid_k * NTC, m0, acc_a, acc_b, acc_c, acc_n, NBC, NTC)
    store_pass2(grow * SPLIT + pid_c, rmask, pid_k, m0, acc_a, acc_b, acc_c, acc_n, o_m0, o_a, o_b, o_c, o_n,
                NCH, NBC, NTC)


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


# (BM, BN, NBC, NTC, num_warps).  GPU: from ptxas reports for sm_90a under triton 3.6.0 with d = 64:
# bf16/fp16, 64 x 32 tiles: 155 registers, no spills; fp32 inputs (IEEE products on the FMA units hold the
# fp32 Q tile in registers): 32 x 32 tiles, 152 registers, no spills (64 x 64 spilled kilobytes).
GPU_BLOCK = (64, 32, 8, 16, 4)
GPU_BLOCK_FP32 = (32, 32, 8, 16, 4)
GPU_BLOCK_ALTERNATIVES = ((32, 32, 8, 16, 4),)
INTERPRETER_BLOCK = (16, 32, 4, 8, 4)


# Pass 2 recomputes every logit.  The compiler may order the dot product's additions differently in the
# two passes, so the row maximum can come back a few ulps lower; a logit within
# QK_SNAP_ULPS * sqrt(BD) * eps32 * scale * |q_i| * max_j |k_j| (a bound on that rounding difference)
# below the pass-1 maximum is counted as the maximum (Delta = 0).  Gaps that small are below the
# resolution of fp32 logits anyway; the float64 reference has no such rule.
QK_SNAP_ULPS = 4.0
KEY_CHUNK = 65536  # keys per chunk when taking the largest key norm


def snap_distance(q: torch.Tensor, k: torch.Tensor, scale: float, BD: int) -> torch.Tensor:
    """Per-row distance below the maximum treated as rounding, ``(B * rows,)`` fp32 (see QK_SNAP_ULPS)."""
    q_norm = torch.linalg.vector_norm(q, dim=-1, dtype=torch.float32)  # (B, rows)
    # max_j |k_j| over key chunks: no fp32 copy of K, so the extra memory stays flat in n (the recorded
    # H200 run of commit 1f03a07 used k.float() here and shows kind 2's extra memory growing with n)
    k_norm_max = torch.zeros(k.shape[0], 1, dtype=torch.float32, device=k.device)  # (B, 1)
    for start in range(0, k.shape[1], KEY_CHUNK):
        chunk_norm = torch.linalg.vector_norm(k[:, start:start + KEY_CHUNK], dim=-1, dtype=torch.float32)
        k_norm_max = torch.maximum(k_norm_max, chunk_norm.amax(dim=-1, keepdim=True))
    eps32 = float(torch.finfo(torch.float32).eps)
    return (QK_SNAP_ULPS * math.sqrt(BD) * eps32 * float(scale) * q_norm * k_norm_max).reshape(-1).contiguous()


def _launch(q: torch.Tensor, k: torch.Tensor, beta: np.ndarray, t: np.ndarray, scale: float, causal: bool,
            causal_offset: int, split: int | None, K: int, backend: str,
            block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """``q`` (B, rows, d), ``k`` (B, n, d) on the kernel's device; statistics of the ``B * rows`` rows."""
    B, R, d = q.shape
    n = k.shape[1]
    dev = q.device
    interpret = backend == "triton-interpreter"
    gpu_block = GPU_BLOCK_FP32 if q.dtype == torch.float32 else GPU_BLOCK
    BM, BN, NBC, NTC, warps = block or (INTERPRETER_BLOCK if interpret else gpu_block)
    BD = pow2(d, 16)
    row_blocks = triton.cdiv(R, BM)
    n_tiles = triton.cdiv(n, BN)
    nch, beta2, tt = grid_chunks(beta, t, NBC, NTC, dev)
    if split is None:
        target = 4 * torch.cuda.get_device_properties(dev).multi_processor_count if not interpret else 1
        split = choose_split(row_blocks * B * nch, n_tiles, target)
    split = int(max(1, min(split, n_tiles)))
    chunk = triton.cdiv(n_tiles, split) * BN
    split = triton.cdiv(n, chunk)
    cast = interpret and q.dtype != torch.float32
    ieee = q.dtype == torch.float32 or cast
    common = (q, k, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
              R, n, d, float(scale), int(causal_offset), chunk, split)
    f32 = dict(dtype=torch.float32, device=dev)
    i32 = dict(dtype=torch.int32, device=dev)
    top1, top2, low = (torch.empty(B * R, split, **f32) for _ in range(3))
    count, bad = (torch.empty(B * R, split, **i32) for _ in range(2))
    _qk_pass1[(row_blocks, split, B)](*common, top1, top2, low, count, bad, BM=BM, BN=BN, BD=BD,
                                      CAUSAL=bool(causal), CAST=cast, IEEE=ieee, num_warps=warps)
    p1 = combine_pass1(top1, top2, low, count, bad)
    check_pass1(p1, "logits q.k")
    top = p1.top.float().contiguous()
    snap = snap_distance(q, k, scale, BD)  # (B * R,)
    m0 = torch.empty(B * R, split, nch, **i32)
    a, b, c = (torch.empty(B * R, split, nch * NBC, **f32) for _ in range(3))
    cnt = torch.empty(B * R, split, nch * NTC, **i32)
    _qk_pass2[(nch, row_blocks, B * split)](*common, nch, top, snap, beta2, tt, m0, a, b, c, cnt, BM=BM, BN=BN, BD=BD,
                                            NBC=NBC, NTC=NTC, CAUSAL=bool(causal), CAST=cast, IEEE=ieee,
                                            num_warps=warps)
    out = finish(p1, *sum_pass2(m0, a, b, c, cnt, len(beta), len(t)), beta, t, backend, K=K)
    out.notes.update(split=split, block=(BM, BN, NBC, NTC, warps), chunks=nch, head_block=BD)
    return out


def qk_row_stats(q: Any, k: Any, beta: Any, t: Any, *, scale: float | None = None, causal: bool = False,
                 causal_offset: int = 0, K: int = 2, backend: str = "auto", split: int | None = None,
                 block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of the logits ``scale * q k^T`` without materialising them (theory.md §3.1, §6 P-13).

    ``q``: ``(..., rows, d)``, ``k``: ``(..., n, d)`` with the same leading (batch: layers, heads) shape.
    ``scale`` defaults to ``1/sqrt(d)``.  With ``causal=True`` query ``i`` sees keys
    ``0 .. i + causal_offset`` (offset 0: row ``i`` sees keys ``0..i``, as in GPT-2).
    Inputs: float32 (exact fp32 products), bfloat16 or float16 (tensor cores, fp32 accumulation).
    Returns a :class:`RowStats` with fields ``(..., rows, ...)``; ``backend`` says what ran.
    """
    like = q
    qt = torch.as_tensor(q) if not torch.is_tensor(q) else q
    kt = torch.as_tensor(k) if not torch.is_tensor(k) else k
    if qt.ndim < 2 or kt.ndim < 2:
        raise ValueError(f"q and k need shapes (..., rows, d) and (..., n, d), got {tuple(qt.shape)} and {tuple(kt.shape)}")
    if qt.shape[:-2] != kt.shape[:-2] or qt.shape[-1] != kt.shape[-1]:
        raise ValueError(f"q {tuple(qt.shape)} and k {tuple(kt.shape)} must share batch shape and head dimension")
    if qt.shape[-2] == 0 or kt.shape[-2] == 0 or qt.shape[-1] == 0:
        raise ValueError("q and k need at least one row, one key and one feature")
    if qt.dtype != kt.dtype or qt.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise ValueError(f"q and k must share a float dtype (float32, float16, bfloat16), got {qt.dtype}, {kt.dtype}")
    if causal_offset < 0:
        raise ValueError("causal_offset must be >= 0 (every row needs at least one visible key)")
    d = qt.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be finite and > 0, got {scale}")
    beta_g = as_grid(beta, "beta")
    t_g = as_grid(t, "t", sorted_=True)
    batch = tuple(qt.shape[:-1])
    R, n = qt.shape[-2], kt.shape[-2]
    q3 = qt.reshape(-1, R, d)
    k3 = kt.reshape(-1, n, d)
    which = pick_backend(backend, qt.is_cuda, q3.shape[0] * R * n)
    if which == "reference":
        s = qk_scores(q3.detach().cpu(), k3.detach().cpu(), scale, causal, causal_offset)
        s = s.reshape(-1, n)
        if not bool(torch.isfinite(s.max(dim=1).values).all()):
            raise ValueError("logits q.k contain NaN or +inf")
        out = critscale_reference(s.numpy(), beta_g, t_g, K=K)
    else:
        dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
        if q3.dtype == torch.float64:
            q3, k3 = q3.float(), k3.float()
        out = _launch(q3.to(dev), k3.to(dev), beta_g, t_g, scale, causal, causal_offset, split, K, which, block)
    return restore(out, batch, like)
