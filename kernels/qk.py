"""Kind ``qk``: row statistics of attention logits ``s_ij = scale * q_i . k_j`` computed on the fly.

What and why
------------
For a transformer layer the rows we study are the logit rows of every head (theory.md §6, P-13):
query ``i`` against keys ``j`` (``j <= i + causal_offset`` when causal).  Materialising them costs
``rows * n`` floats per head; here each ``(BM, BN)`` tile of logits is made by a tensor-core product
``Q_tile @ K_tile^T`` and folded straight into the statistics (:mod:`critscale.kernels.tiles`), in both
passes (:mod:`critscale.kernels.twopass`).  Recomputing the product in pass 2 costs ``2 d`` flops per score
on tensor cores, next to the per-beta work of the statistics.  fp32 inputs use an IEEE fp32 product (no
TF32 rounding); bf16/fp16 inputs use the tensor cores with fp32 accumulation (in the interpreter they are
first cast to fp32, because the interpreter's bf16 dot is broken, triton-lang/triton#11584).

Layout.  In the product's (MMA) layout the columns of one row are spread over the four lanes of a quad
(lane ``l`` holds columns ``8 j + 2 l + {0, 1}``) and each thread holds two rows.  The tile is handed to the
shared folds as ``(BM, V = BN / 4, L = 4)`` with exactly that placement (a reshape and permute that move no
data), so every reduction inside the column loop stays in-thread and the quad's partials are combined once
per program: the compiled pass 2 has no warp shuffle in its loop (the version before this one reduced each
tile across the quad: 164 shuffles per tile, although its comment said "no warp shuffles").  The key tile is
loaded as ``(BN, d)`` rows, contiguous along ``d`` (16-byte vector loads when the strides allow, and the
strides are specialised so that Triton can prove it), and the column loop is software-pipelined
(``num_stages``) so the next key tile is in flight while the current one is folded.

Order of this file (as in the Triton tutorials): torch reference -> kernels -> launcher and entry point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from .dispatch import FP32_MAX, beta_grid, check_K, fp32_overflow_message, pick_backend, threshold_grid
from .rowstats import RowStats, reference_from_scores, restore
from .scores import checked_reference, check_block
from .tiles import (BLOCK_WORDS, NLOW, block_counter, flush_low, fold_pass1, fold_pass2, init_pass1, init_pass2,
                    pass_prologue, store_pass1, store_pass2)
from .twopass import Launch, pow2, run_two_pass

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
    return reference_from_scores(s.reshape(-1, s.shape[-1]), beta_grid(beta), threshold_grid(t), K=check_K(K))


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
def _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, hi, d, scale, causal_offset,
             BN: tl.constexpr, BD: tl.constexpr, CAUSAL: tl.constexpr, CAST: tl.constexpr, IEEE: tl.constexpr):
    """The logit tile as ``(BM, V = BN/4, L = 4)``, ``-inf`` outside the rows, and its mask.

    Column ``c + 8 j + 2 l + e`` sits at ``v = 2 j + e``, lane ``l``: the place it has in the product's MMA
    layout, where lane ``l`` of a quad holds columns ``8 j + 2 l + {0, 1}``; so the folds' reductions over
    ``V`` stay in-thread and the per-lane partials are reduced across the quad once per program.
    """
    cols = c + tl.arange(0, BN)
    dcols = tl.arange(0, BD)
    k = tl.load(k_ptr + pid_b.to(tl.int64) * s_kb + cols.to(tl.int64)[:, None] * s_kn + dcols[None, :] * s_kd,
                mask=(cols < hi)[:, None] & (dcols < d)[None, :], other=0.0)  # (BN, BD)
    if CAST:
        k = k.to(tl.float32)
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")  # (BM, BN)
    else:
        s = tl.dot(q, tl.trans(k))
    inside = rmask[:, None] & (cols < hi)[None, :]
    if CAUSAL:
        inside = inside & (cols[None, :] <= rows[:, None] + causal_offset)
    s = tl.where(inside, s * scale, float("-inf"))
    BM: tl.constexpr = s.shape[0]
    s = tl.reshape(tl.permute(tl.reshape(s, (BM, BN // 8, 4, 2)), (0, 1, 3, 2)), (BM, BN // 4, 4))
    inside = tl.reshape(tl.permute(tl.reshape(inside, (BM, BN // 8, 4, 2)), (0, 1, 3, 2)), (BM, BN // 4, 4))
    return s, inside


_NO_SPEC = ["R", "n", "d", "causal_offset", "tiles", "SPLIT"]


@triton.jit
def _qk_range(pid_r, lo, hi, causal_offset, BM: tl.constexpr, CAUSAL: tl.constexpr):
    """The column range of a program: a causal row block sees no key beyond its last row + offset."""
    if CAUSAL:
        hi = tl.minimum(hi, pid_r * BM + BM + causal_offset)
    return lo, hi


@triton.jit(do_not_specialize=_NO_SPEC)
def _qk_pass1(q_ptr, k_ptr, s_qb, s_qm, s_qd, s_kb, s_kn, s_kd, d, scale, causal_offset, R, n, tiles, SPLIT,
              o_top1, o_top2, o_low, o_count, o_bad, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr,
              CAUSAL: tl.constexpr, CAST: tl.constexpr, IEEE: tl.constexpr, STAGES: tl.constexpr):
    pid_b, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    lo, hi = _qk_range(tl.program_id(1), lo, hi, causal_offset, BM, CAUSAL)
    q = _qk_load_q(q_ptr, pid_b, s_qb, s_qm, s_qd, rows, rmask, d, BD, CAST)
    top1, top2, low, count, bad = init_pass1(BM, 4)
    for c in tl.range(lo, hi, BN, num_stages=STAGES):
        s, inside = _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, hi, d, scale, causal_offset,
                             BN, BD, CAUSAL, CAST, IEEE)  # (BM, BN / 4, 4)
        top1, top2, low, count, bad = fold_pass1(s, inside, top1, top2, low, count, bad, True)
    store_pass1(grow * SPLIT + pid_c, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit(do_not_specialize=_NO_SPEC)
def _qk_pass2(q_ptr, k_ptr, s_qb, s_qm, s_qd, s_kb, s_kn, s_kd, d, scale, causal_offset, R, n, tiles, SPLIT,
              top_ptr, snap_ptr, tab_ptr, o_m0, o_a, o_b, o_n, BM: tl.constexpr, BN: tl.constexpr, ROOTS2: tl.constexpr,
              NR: tl.constexpr, LVR: tl.constexpr, NS: tl.constexpr, BNEED: tl.constexpr, NT: tl.constexpr,
              NTP: tl.constexpr, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr, NPL: tl.constexpr,
              NPLP: tl.constexpr, BD: tl.constexpr, CAUSAL: tl.constexpr, CAST: tl.constexpr,
              IEEE: tl.constexpr, STAGES: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr):
    pid_b, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    lo, hi = _qk_range(tl.program_id(1), lo, hi, causal_offset, BM, CAUSAL)
    q = _qk_load_q(q_ptr, pid_b, s_qb, s_qm, s_qd, rows, rmask, d, BD, CAST)
    top, snap, m0, acc_a, acc_b, acc_n = init_pass2(top_ptr, snap_ptr, grow, rmask, BM, 4, NS, NTP, NPLP)
    KB: tl.constexpr = BLOCK_WORDS // (BN // 4)  # tiles per block of the block counter (kernels.counting)
    for c0 in range(lo, hi, BN * KB):
        low = block_counter(acc_n, NLOW)
        for c in tl.range(c0, tl.minimum(c0 + BN * KB, hi), BN, num_stages=STAGES):
            s, _inside = _qk_tile(q, k_ptr, pid_b, s_kb, s_kn, s_kd, rows, rmask, c, hi, d, scale, causal_offset,
                                  BN, BD, CAUSAL, CAST, IEEE)  # (BM, BN / 4, 4)
            m0, acc_a, acc_b, low = fold_pass2(s, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2, NR, LVR, NS,
                                               BNEED, NT, SHIFT, BLO, NBK, NLOW, M0, SNAP0, False)
        acc_n = flush_low(acc_n, low, NPL, NLOW)
    store_pass2(grow * SPLIT + pid_c, rmask, m0, acc_a, acc_b, acc_n, o_m0, o_a, o_b, o_n, NS, NTP, NPL, NPLP)


# ----------------------------------------------------------------------------------------------
# Launcher and entry point
# ----------------------------------------------------------------------------------------------


# (BM, BN, roots per chunk, thresholds per chunk, num_warps).  Each thread holds the per-lane partials of two
# rows (the MMA layout), so a chunk is kept to 4 ladder roots and 32 thresholds (32 betas of ratio 2^{1/8} and
# 64 thresholds: two chunks).  ptxas for sm_90a (triton 3.7.1, bf16, d = 64): pass 2 at (64, 32) uses 255
# registers without local memory, (64, 64) spills; ``python -m critscale.kernels.sass`` prints both.  fp32
# inputs (IEEE products on the FMA units) use 32-row tiles.
GPU_BLOCK = (64, 32, 4, 32, 4)
GPU_BLOCK_FP32 = (32, 32, 4, 32, 4)
GPU_BLOCK_ALTERNATIVES = ((64, 64, 4, 32, 4), (64, 32, 8, 16, 4))
INTERPRETER_BLOCK = (16, 32, 8, 64, 4)
GPU_STAGES = 2  # software pipelining of the key loads


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
    # H200 run of commit 1f03a07 used k.float() here and shows the qk kind's extra memory growing with n)
    k_norm_max = torch.zeros(k.shape[0], 1, dtype=torch.float32, device=k.device)  # (B, 1)
    for start in range(0, k.shape[1], KEY_CHUNK):
        chunk_norm = torch.linalg.vector_norm(k[:, start:start + KEY_CHUNK], dim=-1, dtype=torch.float32)
        k_norm_max = torch.maximum(k_norm_max, chunk_norm.amax(dim=-1, keepdim=True))
    eps32 = float(torch.finfo(torch.float32).eps)
    return (QK_SNAP_ULPS * math.sqrt(BD) * eps32 * float(scale) * q_norm * k_norm_max).reshape(-1).contiguous()


def _launch(q: torch.Tensor, k: torch.Tensor, beta: np.ndarray, t: np.ndarray, scale: float, causal: bool,
            causal_offset: int, split: int | None, K: int, backend: str,
            block: tuple[int, int, int, int, int] | None = None, precheck: torch.Tensor | None = None) -> RowStats:
    """``q`` (B, rows, d), ``k`` (B, n, d) on the kernel's device; statistics of the ``B * rows`` rows."""
    B, R, d = q.shape
    n = k.shape[1]
    interpret = backend == "triton-interpreter"
    gpu_block = GPU_BLOCK_FP32 if q.dtype == torch.float32 else GPU_BLOCK
    blk = check_block(block or (INTERPRETER_BLOCK if interpret else gpu_block))
    BD = pow2(d, 16)
    cast = interpret and q.dtype != torch.float32
    launch = Launch(kind="qk", pass1=_qk_pass1, pass2=_qk_pass2,
                    args=(q, k, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2), d,
                          float(scale), int(causal_offset)),
                    R=R, n=n, batch=B, lanes=4, device=q.device, snap=snap_distance(q, k, scale, BD), gather=True,
                    what="logits q.k", bad_meaning="NaN or infinities (float32 overflow)", precheck=precheck,
                    precheck_message=fp32_overflow_message("q and k"),
                    constexprs=dict(BD=BD, CAUSAL=bool(causal), CAST=cast, IEEE=q.dtype == torch.float32 or cast,
                                    STAGES=1 if interpret else GPU_STAGES))
    out = run_two_pass(launch, beta, t, K, backend, blk, split)
    out.notes.update(head_block=BD)
    return out


def qk_row_stats(q: Any, k: Any, beta: Any, t: Any, *, scale: float | None = None, causal: bool = False,
                 causal_offset: int = 0, K: int = 2, backend: str = "auto", split: int | None = None,
                 block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of the logits ``scale * q k^T`` without materialising them (theory.md §3.1, §6 P-13).

    ``q``: ``(..., rows, d)``, ``k``: ``(..., n, d)`` with the same leading (batch: layers, heads) shape.
    ``scale`` defaults to ``1/sqrt(d)``.  With ``causal=True`` query ``i`` sees keys
    ``0 .. i + causal_offset`` (offset 0: row ``i`` sees keys ``0..i``, as in GPT-2).
    Inputs: float32 (exact fp32 products), bfloat16 or float16 (tensor cores, fp32 accumulation); float64
    inputs are rounded to float32 and refused outside its range.  A logit that overflows float32 is refused
    (``ValueError``), never read as masked.  Returns a :class:`RowStats` with fields ``(..., rows, ...)``.
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
        raise ValueError(f"q and k must share a float dtype (float32, float16, bfloat16, float64), got {qt.dtype}, "
                         f"{kt.dtype}")
    if isinstance(causal_offset, (bool, np.bool_)) or not isinstance(causal_offset, (int, np.integer)) \
            or causal_offset < 0:
        raise ValueError(f"causal_offset must be an integer >= 0 (every row needs a visible key), got {causal_offset!r}")
    d = qt.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be finite and > 0, got {scale}")
    K = check_K(K)
    beta_g = beta_grid(beta)
    t_g = threshold_grid(t)
    batch = tuple(qt.shape[:-1])
    R, n = qt.shape[-2], kt.shape[-2]
    q3 = qt.detach().reshape(-1, R, d)
    k3 = kt.detach().reshape(-1, n, d)
    which = pick_backend(backend, q3.shape[0] * R * n)
    if which == "reference":
        if q3.dtype == torch.float64 and bool(((torch.cat([q3.flatten(), k3.flatten()]).abs() > FP32_MAX)).any()):
            raise ValueError(fp32_overflow_message("q and k"))
        s = qk_scores(q3.cpu(), k3.cpu(), scale, causal, causal_offset).reshape(-1, n)
        overflow = ((s.abs() > FP32_MAX) & ~torch.isneginf(s)).any(dim=1)  # (rows,): +-inf in float32
        if bool(overflow.any()):
            raise ValueError(f"logits q.k contain NaN or infinities (float32 overflow) (rows "
                             f"{torch.nonzero(overflow).flatten()[:10].tolist()}); only -inf is allowed, it marks a "
                             "masked entry")
        out = checked_reference(s, beta_g, t_g, K, what="logits q.k")
    else:
        dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
        precheck = None
        if q3.dtype == torch.float64:
            precheck = torch.stack([(q3.abs() > FP32_MAX).any(), (k3.abs() > FP32_MAX).any()]).any().to(dev)
            q3, k3 = q3.float(), k3.float()
        out = _launch(q3.to(dev), k3.to(dev), beta_g, t_g, scale, causal, causal_offset, split, K, which, block,
                      precheck)
    return restore(out, batch, like)
