"""Kind 1 — row statistics of a stored score matrix, streamed without materialising anything per beta.

What and why
------------
Given scores ``(rows, n)`` (``-inf`` = masked) we want, for every row and every beta of a grid,
``log Z``, the entropy ``H``, ``p_max`` and ``sum p^2``, the gap counts ``N(t_j)`` on a threshold grid,
and brackets for the accumulation scale ``kappa`` (theory.md §3.1).  Eager PyTorch materialises a
``(rows, n)`` temporary per beta and per threshold; here each score is read twice (pass 1: max,
second value, min, count; pass 2: every sum and count) and nothing of size ``n`` is ever written.
The two-pass design is explained in :mod:`critscale.kernels._common`.

Order of this file (as in the Triton tutorials): torch reference -> kernels -> launcher.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from ._common import (LANE_VEC, Pass1, RowStats, as_grid, check_pass1, choose_split, combine_pass1, finish,
                      grid_chunks, lane_block, lane_pass1, lane_pass2, lanes_reduce1, pick_backend,
                      reference_from_scores, restore, store_lanes2, store_pass1, sum_pass2)

__all__ = ["row_stats", "torch_reference", "critscale_reference"]


# ----------------------------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------------------------


def torch_reference(scores: torch.Tensor, beta: Any, t: Any, K: int = 2) -> RowStats:
    """Float64 torch reference from materialised scores (small sizes: it builds ``(rows, n, n_beta)``)."""
    beta = as_grid(beta, "beta")
    t = as_grid(t, "t", sorted_=True)
    s = torch.as_tensor(scores).reshape(-1, scores.shape[-1]).double().cpu()
    return reference_from_scores(s, beta, t, K=K)


def critscale_reference(scores64: np.ndarray, beta: np.ndarray, t: np.ndarray, K: int = 2) -> RowStats:
    """The CPU path for large inputs: :func:`critscale.softmax_stats` and :func:`critscale.gap_counts`
    (float64, memory-bounded), plus the order statistics that the kernels' pass 1 computes."""
    from critscale.gaps import gap_counts
    from critscale.softmax import softmax_stats

    s = np.asarray(scores64, dtype=np.float64)  # (rows, n)
    st = softmax_stats(s, beta)
    counts = gap_counts(s, t)  # (rows, nt)
    valid = s > -np.inf
    top = s.max(axis=1)
    if s.shape[1] >= 2:
        second = -np.partition(-s, 1, axis=1)[:, 1]
    else:
        second = np.full_like(top, -np.inf)
    low = np.where(valid, s, np.inf).min(axis=1)
    m0 = (s == top[:, None]).sum(axis=1)
    p1 = Pass1(top=torch.from_numpy(top), second=torch.from_numpy(second), low=torch.from_numpy(low),
               n_valid=torch.from_numpy(valid.sum(axis=1)), n_bad=torch.zeros(len(top), dtype=torch.long))
    out = finish(p1, torch.from_numpy(m0), torch.zeros(len(top), len(beta), dtype=torch.float64),
                 torch.zeros(len(top), len(beta), dtype=torch.float64),
                 torch.zeros(len(top), len(beta), dtype=torch.float64),
                 torch.from_numpy(np.asarray(counts, dtype=np.float64)), beta, t, "reference", K=K)
    out.log_z = torch.from_numpy(np.asarray(st.log_z))
    out.entropy = torch.from_numpy(np.asarray(st.entropy))
    out.max_weight = torch.from_numpy(np.asarray(st.max_weight))
    out.collision = torch.from_numpy(np.asarray(st.collision))
    return out


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


# Layout (see "Coalesced tile updates" in _common): a program reads tiles (BM, V, L) of BM rows and BN = L V
# consecutive columns, contiguous along the middle axis, so each thread issues one 16-byte load per row and
# a warp reads 512 contiguous bytes of a row.  The row stride and ``n`` are specialised (Triton marks them
# divisible by 16 when they are), and each column chunk starts at a multiple of BN (``lo = pid_c * tiles *
# BN``), so the compiler can prove the 16-byte alignment of every vector and the constancy of the mask
# ``cols < hi`` over each vector.  The row count and the chunking are not specialised.  The column loop is
# unrolled twice (``loop_unroll_factor``), so that each thread has two 16-byte loads in flight: with one
# beta and one threshold both passes are bound by memory latency x bytes in flight, not by arithmetic.


@triton.jit
def _load_tile(x_ptr, rows, rmask, stride, c, hi, L: tl.constexpr, V: tl.constexpr):
    """The ``(BM, V, L)`` fp32 tile of columns ``c + l V + v`` of ``rows`` and its ``inside`` mask."""
    cols = c + tl.arange(0, V)[:, None] + tl.arange(0, L)[None, :] * V  # (V, L)
    inside = rmask[:, None, None] & (cols < hi)[None, :, :]  # (BM, V, L)
    ptrs = x_ptr + rows.to(tl.int64)[:, None, None] * stride + cols[None, :, :]
    s = tl.load(ptrs, mask=inside, other=float("-inf")).to(tl.float32)
    return s, inside


@triton.jit(do_not_specialize=["R", "tiles", "SPLIT"])
def _scores_pass1(x_ptr, stride, R, n, tiles, SPLIT, o_top1, o_top2, o_low, o_count, o_bad,
                  BM: tl.constexpr, L: tl.constexpr, V: tl.constexpr):
    """Program (row block, column chunk of ``tiles`` tiles): order statistics of its ``BM`` rows."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * BM + tl.arange(0, BM)
    rmask = rows < R
    lo = pid_c * tiles * (L * V)
    hi = tl.minimum(lo + tiles * (L * V), n)
    top1 = tl.full([BM, L], float("-inf"), tl.float32)
    top2 = tl.full([BM, L], float("-inf"), tl.float32)
    low = tl.full([BM, L], float("inf"), tl.float32)
    count = tl.zeros([BM, L], tl.int32)
    bad = tl.zeros([BM, L], tl.int32)
    for c in tl.range(lo, hi, L * V, loop_unroll_factor=2):
        s, inside = _load_tile(x_ptr, rows, rmask, stride, c, hi, L, V)  # (BM, V, L)
        top1, top2, low, count, bad = lane_pass1(s, inside, top1, top2, low, count, bad)
    top1, top2, low, count, bad = lanes_reduce1(top1, top2, low, count, bad)  # (BM,)
    store_pass1(rows * SPLIT + pid_c, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit(do_not_specialize=["R", "tiles", "SPLIT", "NCH"])
def _scores_pass2(x_ptr, stride, R, n, tiles, SPLIT, NCH, top_ptr, beta2_ptr, t_ptr,
                  o_m0, o_a, o_b, o_c, o_n,
                  BM: tl.constexpr, L: tl.constexpr, V: tl.constexpr, NBC: tl.constexpr, NTC: tl.constexpr):
    """Program (beta/threshold chunk, row block, column chunk): sums and counts relative to the row maxima.

    The chunk index is the grid's fastest axis, so the programs that read the same tile run together and
    all but the first find it in L2.
    """
    pid_k = tl.program_id(0)
    pid_r = tl.program_id(1)
    pid_c = tl.program_id(2)
    rows = pid_r * BM + tl.arange(0, BM)
    rmask = rows < R
    lo = pid_c * tiles * (L * V)
    hi = tl.minimum(lo + tiles * (L * V), n)
    top = tl.load(top_ptr + rows, mask=rmask, other=0.0)
    beta2 = tl.load(beta2_ptr + pid_k * NBC + tl.arange(0, NBC))  # (NBC,)
    tcut = tl.load(t_ptr + pid_k * NTC + tl.arange(0, NTC))  # (NTC,)
    m0 = tl.zeros([BM, L], tl.int32)
    acc_a = tl.zeros([BM, NBC, L], tl.float32)
    acc_b = tl.zeros([BM, NBC, L], tl.float32)
    acc_c = tl.zeros([BM, NBC, L], tl.float32)
    acc_n = tl.zeros([BM, NTC, L], tl.int32)
    for c in tl.range(lo, hi, L * V, loop_unroll_factor=2):
        s, inside = _load_tile(x_ptr, rows, rmask, stride, c, hi, L, V)  # (BM, V, L)
        m0, acc_a, acc_b, acc_c, acc_n = lane_pass2(s, inside, top, top * 0.0, beta2, tcut, m0, acc_a, acc_b, acc_c,
                                                     acc_n)
    store_lanes2(rows * SPLIT + pid_c, rmask, pid_k, m0, acc_a, acc_b, acc_c, acc_n, o_m0, o_a, o_b, o_c, o_n,
                 NCH, NBC, NTC)


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


# (BM, BN, NBC, NTC, num_warps): BN = 4 x 32 x num_warps columns, so each thread holds one 16-byte vector
# of each of the BM rows per tile; NBC betas and NTC thresholds per program (the grid's first axis runs
# over chunks; both are shrunk to the grid's sizes, see ``lane_block``).  The per-lane accumulators take
# BM (3 NBC + NTC + 1) registers per thread.  ptxas for sm_90a (triton 3.7.1 / 3.6.0), no spills anywhere:
# pass 1 about 31 registers; pass 2 30 for one beta and one threshold (full occupancy), 96 for the default,
# 168 for the 16/32 alternatives, ~105 for the 8-warp one.  Two rows per program (BM = 2) compile with
# layout conversions through shared memory inside the loop under triton 3.6, so BM stays 1 on the GPU.
# The benchmark times the default and the alternatives and keeps the fastest.
GPU_BLOCK = (1, 512, 8, 16, 4)
GPU_BLOCK_ALTERNATIVES = ((1, 512, 16, 32, 4), (1, 256, 16, 32, 2), (1, 1024, 8, 16, 8))
INTERPRETER_BLOCK = (16, 128, 4, 8, 4)


def launch_passes(x: torch.Tensor, beta: np.ndarray, t: np.ndarray, split: int | None, K: int,
                  backend: str, block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Run both passes on a ``(rows, n)`` tensor ``x`` (fp32/fp16/bf16, unit column stride) and finish."""
    R, n = x.shape
    dev = x.device
    interpret = backend == "triton-interpreter"
    BM, BN, NBC, NTC, warps = lane_block(block or (INTERPRETER_BLOCK if interpret else GPU_BLOCK), len(beta), len(t))
    row_blocks = triton.cdiv(R, BM)
    n_tiles = triton.cdiv(n, BN)
    nch, beta2, tt = grid_chunks(beta, t, NBC, NTC, dev)
    if split is None:
        target = 4 * torch.cuda.get_device_properties(dev).multi_processor_count if not interpret else 1
        split = choose_split(row_blocks * nch, n_tiles, target)
    split = int(max(1, min(split, n_tiles)))
    tiles = triton.cdiv(n_tiles, split)
    split = triton.cdiv(n_tiles, tiles)
    tile_args = dict(BM=BM, L=BN // LANE_VEC, V=LANE_VEC, num_warps=warps)
    f32 = dict(dtype=torch.float32, device=dev)
    i32 = dict(dtype=torch.int32, device=dev)
    top1, top2, low = (torch.empty(R, split, **f32) for _ in range(3))
    count, bad = (torch.empty(R, split, **i32) for _ in range(2))
    _scores_pass1[(row_blocks, split)](x, x.stride(0), R, n, tiles, split, top1, top2, low, count, bad, **tile_args)
    p1 = combine_pass1(top1, top2, low, count, bad)
    check_pass1(p1, "scores")
    top = p1.top.float().contiguous()
    m0 = torch.empty(R, split, nch, **i32)
    a, b, c = (torch.empty(R, split, nch * NBC, **f32) for _ in range(3))
    cnt = torch.empty(R, split, nch * NTC, **i32)
    _scores_pass2[(nch, row_blocks, split)](x, x.stride(0), R, n, tiles, split, nch, top, beta2, tt,
                                            m0, a, b, c, cnt, NBC=NBC, NTC=NTC, **tile_args)
    out = finish(p1, *sum_pass2(m0, a, b, c, cnt, len(beta), len(t)), beta, t, backend, K=K)
    out.notes.update(split=split, block=(BM, BN, NBC, NTC, warps), chunks=nch)
    return out


def row_stats(scores: Any, beta: Any, t: Any, *, K: int = 2, backend: str = "auto",
              split: int | None = None, block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of stored scores ``(..., n)`` at every ``beta`` and gap counts at every ``t``.

    Theory.md §3.1 (the objects bounded by Theorems 1–3 of §3.2).  Dispatch: a CUDA device runs the
    Triton kernels; without one, the same kernels run in the Triton interpreter for small inputs
    (``TRITON_INTERPRET=1``), else the float64 critscale reference runs.  ``result.backend`` says which.

    Inputs in float32, float16 or bfloat16 are read as they are (fp32 arithmetic); float64 inputs are
    rounded to float32 for the kernels (the reference keeps float64).  ``split`` forces the number of
    column chunks per row and ``block`` the shape ``(BM, BN, NBC, NTC, num_warps)`` (testing, tuning).
    """
    like = scores
    x = torch.as_tensor(scores) if not torch.is_tensor(scores) else scores
    if x.ndim < 1:
        raise ValueError("scores must have at least one dimension (rows are the last axis)")
    if x.shape[-1] == 0:
        raise ValueError("scores has rows of length 0: every row needs at least one entry")
    if not (x.is_floating_point()):
        raise ValueError(f"scores must be floating point, got {x.dtype}")
    beta_g = as_grid(beta, "beta")
    t_g = as_grid(t, "t", sorted_=True)
    batch = tuple(x.shape[:-1])
    flat = x.reshape(-1, x.shape[-1])
    which = pick_backend(backend, x.is_cuda, flat.numel())
    if which == "reference":
        s64 = flat.detach().double().cpu()
        if bool(torch.isnan(s64).any()) or bool(torch.isposinf(s64).any()):
            raise ValueError("scores contain NaN or +inf; only -inf is allowed, it marks a masked entry")
        if bool((~(s64 > float("-inf"))).all(dim=1).any()):
            raise ValueError("scores: rows empty after masking (every entry is -inf)")
        out = critscale_reference(s64.numpy(), beta_g, t_g, K=K)
    else:
        dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
        if flat.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            flat = flat.float()
        flat = flat.to(dev)
        if flat.stride(-1) != 1:
            flat = flat.contiguous()
        out = launch_passes(flat, beta_g, t_g, split, K, which, block)
    return restore(out, batch, like)
