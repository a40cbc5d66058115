"""Kind ``scores``: row statistics of a stored score matrix, streamed without materialising anything per beta.

Given scores ``(rows, n)`` (``-inf`` = masked) we want, for every row and every beta of a grid, ``log Z``,
the entropy ``H``, ``p_max`` and ``sum p^2``, the gap counts ``N(t_j)`` on a threshold grid, and brackets for
the accumulation scale ``kappa`` (theory.md §3.1).  Eager PyTorch materialises a ``(rows, n)`` temporary per
beta and per threshold; here each score is read twice (pass 1: order statistics; pass 2: every sum and
count, :mod:`critscale.kernels.twopass`) and nothing of size ``n`` is written.

Order of this file (as in the Triton tutorials): references -> kernels -> launcher and entry point.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from .dispatch import FP32_MAX, beta_grid, check_K, fp32_overflow_message, pick_backend, threshold_grid
from .rowstats import Pass1, RowStats, finish, reference_from_scores, restore
from .tiles import (block_counter, flush_low, fold_pass1, fold_pass2, init_pass1, load_top, pass_prologue,
                    store_pass1, store_pass2, zero_pass2)
from .twopass import Launch, run_two_pass

__all__ = ["checked_reference", "critscale_reference", "row_stats", "scores_row_stats", "torch_reference"]

LANE_VEC = 4  # fp32 per thread per row of a tile: one 16-byte load
PASS2_TILES = 4  # tiles per iteration of the pass-2 column loop: their counts share one climb of the block counter
# planes of the block counter (kernels.counting.count_words) and the most words a lane adds into it, 2^NLOW - 1:
# one plane more than the other kinds' (kernels.tiles.NLOW), as the four tiles' shared climb is cheaper than
# their flushes
NLOW = tl.constexpr(8)
BLOCK_WORDS = tl.constexpr(255)
_V = tl.constexpr(LANE_VEC)
_T = tl.constexpr(PASS2_TILES)
# Each bucket's two table words as one 16-byte load (kernels.counting): one instruction per score fewer, but about
# 84 registers more (250 against 166 per thread at the default block: two programs per multiprocessor instead of
# three, which the one launch of both passes needs to overlap one program's read with another's sums); off.
PAIR_LOAD = tl.constexpr(False)


# ----------------------------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------------------------


def torch_reference(scores: torch.Tensor, beta: Any, t: Any, K: int = 2) -> RowStats:
    """Float64 torch reference from materialised scores (small sizes: it builds ``(rows, n, n_beta)``)."""
    s = torch.as_tensor(scores).reshape(-1, scores.shape[-1]).double().cpu()
    return reference_from_scores(s, beta_grid(beta), threshold_grid(t), K=check_K(K))


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
    second = -np.partition(-s, 1, axis=1)[:, 1] if s.shape[1] >= 2 else np.full_like(top, -np.inf)
    low = np.where(valid, s, np.inf).min(axis=1)
    m0 = (s == top[:, None]).sum(axis=1)
    zeros = torch.zeros(len(top), len(beta), dtype=torch.float64)
    p1 = Pass1(top=torch.from_numpy(top), second=torch.from_numpy(second), low=torch.from_numpy(low),
               n_valid=torch.from_numpy(valid.sum(axis=1)), n_bad=torch.zeros(len(top), dtype=torch.long))
    out = finish(p1, torch.from_numpy(m0), zeros, zeros, zeros, torch.from_numpy(np.asarray(counts, dtype=np.float64)),
                 beta, t, "reference", K=K)
    out.log_z = torch.from_numpy(np.asarray(st.log_z))
    out.entropy = torch.from_numpy(np.asarray(st.entropy))
    out.max_weight = torch.from_numpy(np.asarray(st.max_weight))
    out.collision = torch.from_numpy(np.asarray(st.collision))
    return out


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


# Layout (see :mod:`.tiles`): a program reads tiles (BM, V, L) of BM rows and BN = L V consecutive columns,
# contiguous along the middle axis, so each thread issues one 16-byte load per row and a warp reads 512
# contiguous bytes of a row.  The row stride and ``n`` are specialised (Triton marks them divisible by 16
# when they are), and each column chunk starts at a multiple of BN, so the compiler can prove the 16-byte
# alignment of every vector.  Both passes run their full stretches of tiles without a mask (the rows of a
# partial row block are clamped to the last row, whose results are not stored) and only the last, partial
# stretch with the mask ``cols < hi``.  Pass 1 takes a pair of tiles per iteration and pass 2 four
# (``PASS2_TILES``, in pairs, whose counts share one climb of the block counter), so that each thread has two
# 16-byte loads in flight.  Three kernels: pass 1, pass 2 (one grid chunk), and both passes in one program for a program that
# holds whole rows (``SPLIT = 1``), whose pass 1 of one row block overlaps, on the same multiprocessor,
# pass 2 of another (the read of the scores and the arithmetic of the sums then share the time).


@triton.jit
def _load_tile(x_ptr, rows, rmask, stride, c, hi, BN: tl.constexpr, MASKED: tl.constexpr):
    """The ``(BM, V, L)`` fp32 tile of columns ``c + l V + v`` of ``rows``, ``-inf`` outside the rows (with
    ``MASKED``; without it every column is below ``hi`` and the rows were clamped to valid ones)."""
    cols = c + tl.arange(0, _V)[:, None] + tl.arange(0, BN // _V)[None, :] * _V  # (V, L)
    ptrs = x_ptr + rows.to(tl.int64)[:, None, None] * stride + cols[None, :, :]  # (BM, V, L)
    if MASKED:
        inside = rmask[:, None, None] & (cols < hi)[None, :, :]  # (BM, V, L)
        return tl.load(ptrs, mask=inside, other=float("-inf")).to(tl.float32)
    else:
        return tl.load(ptrs).to(tl.float32)


@triton.jit
def _pass1_pair(x_ptr, stride, rows, rmask, c, hi, top1, top2, low, count, bad, BN: tl.constexpr,
                MASKED: tl.constexpr):
    """Fold the two tiles at columns ``c`` and ``c + BN`` into pass 1's partials."""
    every = tl.full([1, 1, 1], 1, tl.int1)  # an entry loaded as -inf (past hi, or a row past R) is a masked one
    s0 = _load_tile(x_ptr, rows, rmask, stride, c, hi, BN, MASKED)  # (BM, V, L)
    s1 = _load_tile(x_ptr, rows, rmask, stride, c + BN, hi, BN, MASKED)  # -inf past hi: not valid, not bad
    top1, top2, low, count, bad = fold_pass1(s0, every, top1, top2, low, count, bad, False)
    return fold_pass1(s1, every, top1, top2, low, count, bad, False)


@triton.jit
def _pass1_row(x_ptr, stride, R, rows, rmask, lo, hi, BM: tl.constexpr, BN: tl.constexpr):
    """Pass 1's per-lane partials ``(BM, L)`` over columns ``[lo, hi)``: the full pairs of tiles in a loop
    without a mask, then at most one pair with it."""
    top1, top2, low, count, bad = init_pass1(BM, BN // _V)
    full = lo + (hi - lo) // (2 * BN) * (2 * BN)
    safe = tl.minimum(rows, R - 1)
    for c in range(lo, full, 2 * BN):
        top1, top2, low, count, bad = _pass1_pair(x_ptr, stride, safe, rmask, c, hi, top1, top2, low, count, bad,
                                                  BN, False)
    if full < hi:
        top1, top2, low, count, bad = _pass1_pair(x_ptr, stride, rows, rmask, full, hi, top1, top2, low, count, bad,
                                                  BN, True)
    return top1, top2, low, count, bad


@triton.jit
def _pass2_quad(x_ptr, stride, rows, rmask, c, hi, top, snap, m0, acc_a, acc_b, low, tab_ptr, BN: tl.constexpr,
                ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr, NS: tl.constexpr, BNEED: tl.constexpr,
                NT: tl.constexpr, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr, M0: tl.constexpr,
                SNAP0: tl.constexpr, MASKED: tl.constexpr):
    """Fold the ``PASS2_TILES = 4`` tiles at columns ``c, c + BN, c + 2 BN, c + 3 BN`` into pass 2's partials and
    the block counter ``low``: in pairs whose loads are in flight together, their counts in the phases 0, 2, 0, 3
    of :func:`critscale.kernels.counting.count_words` (one climb of the block counter per four tiles)."""
    tl.static_assert(_T == 4, "the pass-2 loop takes four tiles per iteration (count_words phases 0, 2, 0, 3)")
    for q in tl.static_range(2):
        s0 = _load_tile(x_ptr, rows, rmask, stride, c + 2 * q * BN, hi, BN, MASKED)  # (BM, V, L)
        s1 = _load_tile(x_ptr, rows, rmask, stride, c + (2 * q + 1) * BN, hi, BN, MASKED)  # -inf past hi: no weight
        m0, acc_a, acc_b, low = fold_pass2(s0, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2, NR, LVR, NS, BNEED,
                                           NT, SHIFT, BLO, NBK, NLOW, M0, SNAP0, True, 0, False, PAIR_LOAD)
        m0, acc_a, acc_b, low = fold_pass2(s1, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2, NR, LVR, NS, BNEED,
                                           NT, SHIFT, BLO, NBK, NLOW, M0, SNAP0, True, 2 + q, False, PAIR_LOAD)
    return m0, acc_a, acc_b, low


@triton.jit
def _pass2_block(x_ptr, stride, rows, rmask, c_lo, c_hi, hi, top, snap, m0, acc_a, acc_b, acc_n, tab_ptr,
                 BN: tl.constexpr, ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr, NS: tl.constexpr,
                 BNEED: tl.constexpr, NT: tl.constexpr, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr,
                 NPL: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr, MASKED: tl.constexpr):
    """One block of pass 2: the tiles of columns ``[c_lo, c_hi)``, four per iteration, into a fresh block counter,
    which is then flushed into the lane's count planes ``acc_n``."""
    low = block_counter(acc_n, NLOW)
    for c in range(c_lo, c_hi, _T * BN):
        m0, acc_a, acc_b, low = _pass2_quad(x_ptr, stride, rows, rmask, c, hi, top, snap, m0, acc_a, acc_b, low,
                                            tab_ptr, BN, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO, NBK, M0, SNAP0,
                                            MASKED)
    return m0, acc_a, acc_b, flush_low(acc_n, low, NPL, NLOW)


@triton.jit
def _pass2_row(x_ptr, stride, R, rows, rmask, lo, hi, top, snap, tab_ptr, BM: tl.constexpr, BN: tl.constexpr,
               ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr, NS: tl.constexpr, BNEED: tl.constexpr,
               NT: tl.constexpr, NTP: tl.constexpr, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr,
               NPL: tl.constexpr, NPLP: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr):
    """Pass 2's per-lane partials over columns ``[lo, hi)`` relative to the row maxima ``top`` (one grid chunk).
    The columns run in blocks of ``KB`` tiles, after each of which the block counter is flushed into the lane's
    count planes: the full blocks without a mask, then the last, partial one with it."""
    m0, acc_a, acc_b, acc_n = zero_pass2(BM, BN // _V, NS, NTP, NPLP)
    KB: tl.constexpr = BLOCK_WORDS // _V // _T * _T  # tiles per block: no count in the block counter reaches 2^NLOW
    full = lo + (hi - lo) // (BN * KB) * (BN * KB)
    safe = tl.minimum(rows, R - 1)
    for c0 in range(lo, full, BN * KB):
        m0, acc_a, acc_b, acc_n = _pass2_block(x_ptr, stride, safe, rmask, c0, c0 + BN * KB, hi, top, snap, m0, acc_a,
                                               acc_b, acc_n, tab_ptr, BN, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO,
                                               NBK, NPL, M0, SNAP0, False)
    if full < hi:  # the last, partial block: at most KB - 1 tiles, with the mask
        m0, acc_a, acc_b, acc_n = _pass2_block(x_ptr, stride, rows, rmask, full, hi, hi, top, snap, m0, acc_a, acc_b,
                                               acc_n, tab_ptr, BN, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO, NBK, NPL,
                                               M0, SNAP0, True)
    return m0, acc_a, acc_b, acc_n


@triton.jit(do_not_specialize=["R", "tiles", "SPLIT"])
def _scores_pass1(x_ptr, stride, R, n, tiles, SPLIT, o_top1, o_top2, o_low, o_count, o_bad,
                  BM: tl.constexpr, BN: tl.constexpr):
    """Program (row block, column chunk): order statistics of its ``BM`` rows."""
    _batch, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    top1, top2, low, count, bad = _pass1_row(x_ptr, stride, R, rows, rmask, lo, hi, BM, BN)
    store_pass1(grow * SPLIT + pid_c, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit(do_not_specialize=["R", "tiles", "SPLIT"])
def _scores_pass2(x_ptr, stride, R, n, tiles, SPLIT, top_ptr, snap_ptr, tab_ptr, o_m0, o_a, o_b, o_n,
                  BM: tl.constexpr, BN: tl.constexpr, ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr,
                  NS: tl.constexpr, BNEED: tl.constexpr, NT: tl.constexpr, NTP: tl.constexpr, SHIFT: tl.constexpr,
                  BLO: tl.constexpr, NBK: tl.constexpr, NPL: tl.constexpr, NPLP: tl.constexpr, M0: tl.constexpr,
                  SNAP0: tl.constexpr):
    """Program (row block, column chunk): ladder sums and counts relative to the row maxima (one grid chunk)."""
    _batch, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    top, snap = load_top(top_ptr, snap_ptr, grow, rmask)
    m0, acc_a, acc_b, acc_n = _pass2_row(x_ptr, stride, R, rows, rmask, lo, hi, top, snap, tab_ptr, BM, BN, ROOTS2, NR,
                                         LVR, NS, BNEED, NT, NTP, SHIFT, BLO, NBK, NPL, NPLP, M0, SNAP0)
    store_pass2(grow * SPLIT + pid_c, rmask, m0, acc_a, acc_b, acc_n, o_m0, o_a, o_b, o_n, NS, NTP, NPL, NPLP)


@triton.jit(do_not_specialize=["R", "tiles", "SPLIT"])
def _scores_fused(x_ptr, stride, R, n, tiles, SPLIT, o_top1, o_top2, o_low, o_count, o_bad, tab_ptr, o_m0, o_a, o_b,
                  o_n, BM: tl.constexpr, BN: tl.constexpr, ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr,
                  NS: tl.constexpr, BNEED: tl.constexpr, NT: tl.constexpr, NTP: tl.constexpr, SHIFT: tl.constexpr,
                  BLO: tl.constexpr, NBK: tl.constexpr, NPL: tl.constexpr, NPLP: tl.constexpr, M0: tl.constexpr,
                  SNAP0: tl.constexpr):
    """Program (row block) holding whole rows (``SPLIT = 1``): pass 1, then pass 2 of the first grid chunk
    relative to the maxima pass 1 found (the same fp32 values the two-launch path reads back: the lanes'
    maximum, ``-0`` as ``+0``; ``snap = 0``)."""
    _batch, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    top1, top2, low, count, bad = _pass1_row(x_ptr, stride, R, rows, rmask, lo, hi, BM, BN)
    store_pass1(grow, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)
    top = tl.max(top1, axis=1)  # (BM,) the row maxima
    top = tl.where(top == 0.0, 0.0, top)  # -0 -> +0: every gap top - s is then +0 or positive
    snap = tl.zeros_like(top)
    m0, acc_a, acc_b, acc_n = _pass2_row(x_ptr, stride, R, rows, rmask, lo, hi, top, snap, tab_ptr, BM, BN, ROOTS2, NR,
                                         LVR, NS, BNEED, NT, NTP, SHIFT, BLO, NBK, NPL, NPLP, M0, SNAP0)
    store_pass2(grow, rmask, m0, acc_a, acc_b, acc_n, o_m0, o_a, o_b, o_n, NS, NTP, NPL, NPLP)


# ----------------------------------------------------------------------------------------------
# Launcher and entry point
# ----------------------------------------------------------------------------------------------


# (BM, BN, roots per chunk, thresholds per chunk, num_warps): BN = 4 x 32 x num_warps columns, so each thread
# holds one 16-byte vector of each of the BM rows per tile.  The per-lane accumulators take
# BM (2 roots x levels + 1 + count planes x words) registers per thread (the grid itself is compiled in):
# 8 roots x 5 levels and 64 thresholds (one 64-bit word; 14 planes at 4096 x 2^20) is 81 + 28.
# ``python -m critscale.kernels.sass`` prints registers, local-memory traffic and instructions per score.
GPU_BLOCK = (1, 512, 8, 64, 4)
GPU_BLOCK_ALTERNATIVES = ((1, 512, 8, 32, 4), (1, 256, 8, 64, 2), (1, 1024, 8, 64, 8))
INTERPRETER_BLOCK = (16, 128, 8, 64, 4)


def check_block(block: tuple[int, int, int, int, int]) -> tuple[int, int, int, int, int]:
    """A launchable block ``(BM, BN, roots per chunk, thresholds per chunk, num_warps)``, all powers of two."""
    BM, BN, NRC, NTC, warps = (int(v) for v in block)
    if any(v < 1 or v & (v - 1) for v in (BM, BN, NRC, NTC, warps)) or BN < LANE_VEC:
        raise ValueError(f"block: every entry must be a power of two and BN >= {LANE_VEC}, got {block}")
    return BM, BN, NRC, NTC, warps


def launch_passes(x: torch.Tensor, beta: np.ndarray, t: np.ndarray, split: int | None, K: int, backend: str,
                  block: tuple[int, int, int, int, int] | None = None,
                  precheck: torch.Tensor | None = None) -> RowStats:
    """Run both passes on a ``(rows, n)`` tensor ``x`` (fp32/fp16/bf16, unit column stride) and finish."""
    interpret = backend == "triton-interpreter"
    blk = check_block(block or (INTERPRETER_BLOCK if interpret else GPU_BLOCK))
    R, n = x.shape
    launch = Launch(kind="scores", pass1=_scores_pass1, pass2=_scores_pass2, fused=_scores_fused, args=(x, x.stride(0)),
                    R=R, n=n,
                    batch=1, lanes=blk[1] // LANE_VEC, device=x.device,
                    what="scores", bad_meaning="NaN or +inf", precheck=precheck,
                    precheck_message=fp32_overflow_message("scores"))
    return run_two_pass(launch, beta, t, K, backend, blk, split)


def scores_row_stats(scores: Any, beta: Any, t: Any, *, K: int = 2, backend: str = "auto",
                     split: int | None = None, block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of stored scores ``(..., n)`` at every ``beta`` and gap counts at every ``t``.

    Theory.md §3.1 (the objects bounded by Theorems 1–3 of §3.2).  Dispatch: a CUDA device runs the
    Triton kernels; without one, the same kernels run in the Triton interpreter for small inputs
    (``TRITON_INTERPRET=1``), else the float64 critscale reference runs.  ``result.backend`` says which.

    Inputs in float32, float16 or bfloat16 are read as they are (fp32 arithmetic); float64 inputs are
    rounded to float32, and refused (``ValueError``, on every backend) when a finite score lies outside
    float32's range or a row's range overflows float32.  ``K``, ``beta`` and ``t`` are checked as the
    library checks them.  A beta grid containing doubling chains (e.g. geometric of ratio ``2^{1/m}``) costs
    one exponential per chain and score (:mod:`critscale.kernels.ladder`).  ``split`` forces the number of
    column chunks per row and ``block`` the shape ``(BM, BN, roots per chunk, thresholds per chunk, num_warps)``.
    """
    like = scores
    x = torch.as_tensor(scores) if not torch.is_tensor(scores) else scores
    if x.ndim < 1:
        raise ValueError("scores must have at least one dimension (rows are the last axis)")
    if x.shape[-1] == 0:
        raise ValueError("scores has rows of length 0: every row needs at least one entry")
    if x.is_complex() or not x.is_floating_point():
        raise ValueError(f"scores must be real floating point, got {x.dtype}")
    K = check_K(K)
    beta_g = beta_grid(beta)
    t_g = threshold_grid(t)
    batch = tuple(x.shape[:-1])
    flat = x.detach().reshape(-1, x.shape[-1])
    which = pick_backend(backend, flat.numel())
    if which == "reference":
        out = checked_reference(flat, beta_g, t_g, K)
    else:
        dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
        precheck = None
        if flat.dtype == torch.float64:
            precheck = ((flat.abs() > FP32_MAX) & torch.isfinite(flat)).any()  # device bool, read at the end
        if flat.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            flat = flat.float()
        flat = flat.to(dev)
        if flat.stride(-1) != 1:
            flat = flat.contiguous()
        out = launch_passes(flat, beta_g, t_g, split, K, which, block, precheck=None if precheck is None
                            else precheck.to(dev))
    return restore(out, batch, like)


def checked_reference(flat: torch.Tensor, beta: np.ndarray, t: np.ndarray, K: int,
                      what: str = "scores") -> RowStats:
    """The float64 reference with the kernels' input contract (the Triton path's errors, in the same words)."""
    s64 = flat.double().cpu()
    if bool(((s64.abs() > FP32_MAX) & torch.isfinite(s64)).any()):
        raise ValueError(fp32_overflow_message(what))
    if bool(torch.isnan(s64).any()) or bool(torch.isposinf(s64).any()):
        rows = torch.nonzero((torch.isnan(s64) | torch.isposinf(s64)).any(dim=1)).flatten()[:10].tolist()
        raise ValueError(f"{what} contain NaN or +inf (rows {rows}); only -inf is allowed, it marks a masked entry")
    valid = s64 > float("-inf")
    empty = ~valid.any(dim=1)
    if bool(empty.any()):
        raise ValueError(f"{what}: rows empty after masking (every entry is -inf): rows "
                         f"{torch.nonzero(empty).flatten()[:10].tolist()}")
    top = s64.max(dim=1).values
    low = torch.where(valid, s64, torch.full_like(s64, float("inf"))).min(dim=1).values
    over = ~torch.isfinite((top - low).float())
    if bool(over.any()):
        raise ValueError(f"{what}: the range max - min of rows {torch.nonzero(over).flatten()[:10].tolist()} "
                         "overflows float32")
    return critscale_reference(s64.numpy(), beta, t, K=K)


row_stats = scores_row_stats  # the name before the kinds were named; notebooks and scripts may still use it
