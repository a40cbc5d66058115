"""Shared pieces of the three row-statistics kernels: tile updates, host-side finishing, kappa bounds.

What every kernel computes (theory.md §3.1), for each row with maximum ``M`` and gaps ``Delta_i = M - s_i``:

- pass 1 (one streamed read): ``M``, the second order statistic ``s_(2)`` (with multiplicity, so the
  exact second gap ``Delta_(2) = M - s_(2)``), the minimum (the range ``R = Delta_(n)``), the number of
  valid (non ``-inf``) entries and the number of invalid ones (NaN, ``+inf``);
- pass 2 (a second streamed read, now with ``M`` known): the multiplicity ``m0`` of the maximum and,
  for every beta of a grid,

  ``A(beta) = sum_{Delta_i > 0} e^{-beta Delta_i}``, ``B(beta) = sum_i Delta_i e^{-beta Delta_i}``,
  ``C(beta) = sum_{Delta_i > 0} e^{-2 beta Delta_i}``,

  and the gap counts ``N(t_j) = #{i : Delta_i <= t_j}`` on a threshold grid.

Why two passes and not one online pass: the softmax sums could be kept online (rescaled when the
running maximum grows, as in flash attention), but the counts ``N(t_j)`` are comparisons against the
*final* maximum, and no finite summary of the entries below a running maximum gives them exactly.
With ``M`` known, every exponent is ``-beta Delta <= 0``, nothing is ever rescaled, and partial sums
over column chunks simply add, so a row can be split over many programs.  The second read costs
bytes (kind 1) or a recomputed tile (kinds 2 and 3), not exactness; the benchmark chapter says what
it costs.  Pass 2 is further split over chunks of betas and thresholds (the grid's third axis), each
program re-reading or re-making its tile, so that its accumulators fit in registers (see the tile
functions below).

Finishing on the host in float64 (``finish``):
``log Z = log1p(m0 - 1 + A)``, ``H = log Z + beta B / Z``, ``p_max = e^{-log Z}``,
``sum p^2 = (m0 + C) / Z^2``.  Separating ``m0`` keeps ``Z - 1`` (hence ``log Z`` of a collapsed row)
to full relative precision, as in :func:`critscale.softmax_stats`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

BACKENDS = ("triton-cuda", "triton-interpreter", "reference")

# Largest problem (rows * n scores) the automatic dispatcher sends to the interpreter; above it the
# CPU float64 reference runs.  The interpreter runs each program serially with numpy.
INTERPRETER_MAX_SCORES = 1 << 16

LOG2E = 1.4426950408889634


def interpreter_active() -> bool:
    """True when Triton runs kernels in its CPU interpreter in this process."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def cuda_usable() -> bool:
    """True when kernels can run on a CUDA device (and the interpreter is not forced)."""
    return torch.cuda.is_available() and not interpreter_active()


def pow2(x: int, lo: int = 1) -> int:
    """Smallest power of two ``>= max(x, lo)``."""
    return max(lo, 1 << max(0, int(x) - 1).bit_length())


# ----------------------------------------------------------------------------------------------
# Transposed tile updates (kind 2, :mod:`.qk`; kinds 1 and 3 use the coalesced "lane" updates below)
#
# Tiles are *transposed*: shape (BN, BM), axis 0 = columns of the rows, axis 1 = the BM rows.  Triton's
# default layout puts the 32 lanes of a warp (and the warps) along the last axis, so each thread holds
# BN scores of ONE row and every per-row reduction over axis 0 stays inside a thread: no warp shuffles,
# no shared memory, no barriers in the inner loop.  (With rows along axis 0, a row is spread over the
# lanes and every one of the 3 n_beta + n_t reductions per tile costs log2(32) shuffles, which would bound
# the kernels by the shuffle unit, not by exp2.)  The betas and thresholds are unrolled in chunks of
# NBC and NTC (``tl.static_range``), so each accumulator update touches one register per thread; the
# grid's last axis runs over the chunks.  For kind 2 the tile comes out of registers (tl.dot), so its layout
# costs nothing; for a tile loaded from memory (kind 1) it means that adjacent lanes read addresses a row
# apart (uncoalesced loads, measured at 5% of the copy bandwidth on an H200), hence the lane layout below.
# ----------------------------------------------------------------------------------------------


@triton.jit
def tile_pass1(s, inside, top1, top2, low, count, bad):
    """Fold one ``(BN, BM)`` fp32 tile into the running per-row (top1, top2, low, count, bad), each ``(BM,)``.

    ``inside`` marks the tile entries that belong to the row (in range, not causally masked).
    ``top2`` is the second order statistic with multiplicity (equal to ``top1`` on a tie).
    """
    isbad = inside & ((s != s) | (s == float("inf")))
    valid = inside & (s > float("-inf")) & (s == s) & (s < float("inf"))
    x = tl.where(valid, s, float("-inf"))
    m1 = tl.max(x, axis=0)  # (BM,)
    at_max = valid & (x == m1[None, :])
    n_at_max = tl.sum(at_max.to(tl.int32), axis=0)
    m2 = tl.max(tl.where(at_max, float("-inf"), x), axis=0)
    m2 = tl.where(n_at_max >= 2, m1, m2)
    new_top1 = tl.maximum(top1, m1)
    new_top2 = tl.maximum(tl.minimum(top1, m1), tl.maximum(top2, m2))
    low = tl.minimum(low, tl.min(tl.where(valid, s, float("inf")), axis=0))
    count += tl.sum(valid.to(tl.int32), axis=0)
    bad += tl.sum(isbad.to(tl.int32), axis=0)
    return new_top1, new_top2, low, count, bad


@triton.jit
def tile_pass2(s, inside, top, snap, beta2_ptr, t_ptr, m0, acc_a, acc_b, acc_c, acc_n,
               NBC: tl.constexpr, NTC: tl.constexpr):
    """Fold one ``(BN, BM)`` tile into the sums of NBC betas and the counts of NTC thresholds.

    ``top`` (BM,) are the row maxima of pass 1.  ``beta2_ptr`` points at this chunk's NBC values of
    ``beta * log2(e)`` (fp32), so ``e^{-beta Delta} = 2^{-beta2 Delta}``; ``t_ptr`` at its NTC thresholds.
    Accumulators: ``m0`` (BM,) int32; ``acc_a, acc_b, acc_c`` (NBC, BM) fp32; ``acc_n`` (NTC, BM) int32.
    """
    valid = inside & (s > float("-inf"))
    # (BN, BM), 0 where masked; clamped at 0 so that a score regenerated one ulp above the pass-1 maximum
    # (two compilations of the same generator, kinds 2 and 3) still counts as a maximum, never as m0 = 0.
    delta = tl.where(valid, tl.maximum(top[None, :] - s, 0.0), 0.0)
    # ``snap`` (BM,): a recomputed score within this distance below the pass-1 maximum is that maximum
    # recomputed with another rounding (see ``qk.QK_SNAP_ULPS``); 0 for stored scores, which are exact.
    delta = tl.where(delta <= snap[None, :], 0.0, delta)
    positive = valid & (delta > 0.0)
    m0 += tl.sum((valid & (delta == 0.0)).to(tl.int32), axis=0)
    bidx = tl.arange(0, NBC)[:, None]
    for i in tl.static_range(NBC):
        beta2 = tl.load(beta2_ptr + i)
        w = tl.where(positive, tl.exp2(-beta2 * delta), 0.0)  # (BN, BM)
        a = tl.sum(w, axis=0)  # (BM,), inside each thread
        bsum = tl.sum(w * delta, axis=0)
        c = tl.sum(w * w, axis=0)
        acc_a = tl.where(bidx == i, acc_a + a[None, :], acc_a)
        acc_b = tl.where(bidx == i, acc_b + bsum[None, :], acc_b)
        acc_c = tl.where(bidx == i, acc_c + c[None, :], acc_c)
    tidx = tl.arange(0, NTC)[:, None]
    for j in tl.static_range(NTC):
        tj = tl.load(t_ptr + j)
        cnt = tl.sum((valid & (delta <= tj)).to(tl.int32), axis=0)
        acc_n = tl.where(tidx == j, acc_n + cnt[None, :], acc_n)
    return m0, acc_a, acc_b, acc_c, acc_n


@triton.jit
def store_pass1(idx, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad):
    tl.store(o_top1 + idx, top1, mask=rmask)
    tl.store(o_top2 + idx, top2, mask=rmask)
    tl.store(o_low + idx, low, mask=rmask)
    tl.store(o_count + idx, count, mask=rmask)
    tl.store(o_bad + idx, bad, mask=rmask)


@triton.jit
def store_pass2(idx, rmask, chunk_id, m0, acc_a, acc_b, acc_c, acc_n, o_m0, o_a, o_b, o_c, o_n, NCH,
                NBC: tl.constexpr, NTC: tl.constexpr):
    """Store per-(row, column chunk) results; betas/thresholds of chunk ``chunk_id`` of ``NCH``."""
    tl.store(o_m0 + idx * NCH + chunk_id, m0, mask=rmask)
    bidx = tl.arange(0, NBC)[:, None]
    tidx = tl.arange(0, NTC)[:, None]
    base_b = idx[None, :] * (NCH * NBC) + chunk_id * NBC + bidx  # (NBC, BM)
    base_t = idx[None, :] * (NCH * NTC) + chunk_id * NTC + tidx  # (NTC, BM)
    tl.store(o_a + base_b, acc_a, mask=rmask[None, :])
    tl.store(o_b + base_b, acc_b, mask=rmask[None, :])
    tl.store(o_c + base_b, acc_c, mask=rmask[None, :])
    tl.store(o_n + base_t, acc_n, mask=rmask[None, :])


# ----------------------------------------------------------------------------------------------
# Coalesced ("lane") tile updates, used by kinds 1 and 3
#
# A tile is (BM, V, L): BM rows, and BN = L * V consecutive columns of each row, column ``l V + v`` at
# position (v, l).  The pointers are contiguous along the V axis, so the compiler gives each thread
# V = 4 adjacent fp32 (one 16-byte load) and puts the lanes, then the warps, along L: a warp reads
# 32 x 16 = 512 contiguous bytes of one row (coalesced), and with L = 32 num_warps every thread holds
# exactly one 4-vector of each of the BM rows.  Every reduction *inside* the column loop runs over V
# only, i.e. inside a thread: the running sums are per-lane partials (BM, NBC, L) and (BM, NTC, L),
# one register per thread per row and per beta/threshold, and the reduction across lanes and warps
# (shuffles, shared memory) happens once per program, after the loop (``lanes_reduce1``, ``store_lanes2``).
# The betas of a chunk are an axis of the tile (BM, NBC, V, L), so one loaded tile serves all NBC exp2's.
# V sits before L on purpose: Triton's default layout of the broadcast (BM, NBC, V, L) puts the lanes on
# the last axis and everything else in registers, which is the load's own layout, so no data moves
# between threads inside the loop (ptxas for sm_90a, triton 3.6.0 and 3.7.1: the pass-2 loop of kind 1 has
# one ld.global.v4 and 4 NBC ex2 per tile, no shfl, no bar.sync, no shared memory, no local memory; see
# kernels/scores.py for the register counts).
# ----------------------------------------------------------------------------------------------


@triton.jit
def _merge_order_stats(a1, a2, alow, acount, abad, b1, b2, blow, bcount, bbad):
    """Elementwise merge of two (top1, top2 with multiplicity, min, count, bad) summaries."""
    return (tl.maximum(a1, b1), tl.maximum(tl.minimum(a1, b1), tl.maximum(a2, b2)), tl.minimum(alow, blow),
            acount + bcount, abad + bbad)


@triton.jit
def _top2_over(top1, top2, axis: tl.constexpr):
    """Top two (with multiplicity) of the multiset of all ``top1`` and ``top2`` values along ``axis``."""
    m1 = tl.max(top1, axis=axis)
    at_max = top1 == tl.expand_dims(m1, axis)
    n_at = tl.sum(at_max.to(tl.int32), axis=axis)
    m2 = tl.maximum(tl.max(tl.where(at_max, float("-inf"), top1), axis=axis), tl.max(top2, axis=axis))
    return m1, tl.where(n_at >= 2, m1, m2)


@triton.jit
def lane_pass1(s, inside, top1, top2, low, count, bad):
    """Fold one ``(BM, V, L)`` fp32 tile into per-lane partials ``(BM, L)`` of (top1, top2, low, count, bad).

    ``top2`` is the second order statistic with multiplicity (equal to ``top1`` on a tie); the fold over
    V (axis 1) stays inside each thread.
    """
    isbad = inside & ((s != s) | (s == float("inf")))
    valid = inside & (s > float("-inf")) & (s == s) & (s < float("inf"))
    x = tl.where(valid, s, float("-inf"))
    t1, t2 = _top2_over(x, tl.full(x.shape, float("-inf"), tl.float32), 1)
    return _merge_order_stats(top1, top2, low, count, bad, t1, t2,
                              tl.min(tl.where(valid, s, float("inf")), axis=1),
                              tl.sum(valid.to(tl.int32), axis=1), tl.sum(isbad.to(tl.int32), axis=1))


@triton.jit
def lanes_reduce1(top1, top2, low, count, bad):
    """Per-row results ``(BM,)`` from the per-lane partials ``(BM, L)`` (once per program)."""
    m1, m2 = _top2_over(top1, top2, 1)
    return m1, m2, tl.min(low, axis=1), tl.sum(count, axis=1), tl.sum(bad, axis=1)


@triton.jit
def lane_pass2(s, inside, top, snap, beta2, tcut, m0, acc_a, acc_b, acc_c, acc_n):
    """Fold one ``(BM, V, L)`` tile into per-lane sums of NBC betas and counts of NTC thresholds.

    ``top`` (BM,) row maxima of pass 1; ``beta2`` (NBC,) values ``beta log2(e)``, so that
    ``e^{-beta Delta} = 2^{-beta2 Delta}``; ``tcut`` (NTC,) thresholds.  Partials: ``m0`` (BM, L) int32,
    ``acc_a, acc_b, acc_c`` (BM, NBC, L) fp32, ``acc_n`` (BM, NTC, L) int32.
    """
    valid = inside & (s > float("-inf"))
    # (BM, V, L), 0 where masked; clamped at 0 so that a score regenerated one ulp above the pass-1 maximum
    # (two compilations of the same generator, kind 3) still counts as a maximum, never as m0 = 0.
    delta = tl.where(valid, tl.maximum(top[:, None, None] - s, 0.0), 0.0)
    # ``snap`` (BM,): distance below the pass-1 maximum within which a regenerated score is that maximum
    # (kind 3: a few ulps of |top|); 0 for stored scores (kind 1), which are read back exactly.
    delta = tl.where(delta <= snap[:, None, None], 0.0, delta)
    positive = valid & (delta > 0.0)
    m0 += tl.sum((valid & (delta == 0.0)).to(tl.int32), axis=1)
    d4 = delta[:, None, :, :]  # (BM, 1, V, L)
    w = tl.where(positive[:, None, :, :], tl.exp2(-beta2[None, :, None, None] * d4), 0.0)  # (BM, NBC, V, L)
    acc_a += tl.sum(w, axis=2)
    acc_b += tl.sum(w * d4, axis=2)
    acc_c += tl.sum(w * w, axis=2)
    # NaN at masked entries: one compare per threshold (NaN <= t is false, also for t = +inf)
    dcount = tl.where(valid, delta, float("nan"))[:, None, :, :]  # (BM, 1, V, L)
    below = dcount <= tcut[None, :, None, None]  # (BM, NTC, V, L)
    acc_n += tl.sum(below.to(tl.int32), axis=2)
    return m0, acc_a, acc_b, acc_c, acc_n


@triton.jit
def store_lanes2(idx, rmask, chunk_id, m0, acc_a, acc_b, acc_c, acc_n, o_m0, o_a, o_b, o_c, o_n, NCH,
                 NBC: tl.constexpr, NTC: tl.constexpr):
    """Reduce the per-lane partials over the lanes (once) and store per-(row, column chunk) results.

    ``idx`` (BM,) = row * SPLIT + column chunk; betas/thresholds of chunk ``chunk_id`` of ``NCH``.
    """
    tl.store(o_m0 + idx * NCH + chunk_id, tl.sum(m0, axis=1), mask=rmask)
    bidx = tl.arange(0, NBC)[None, :]
    tidx = tl.arange(0, NTC)[None, :]
    base_b = idx[:, None] * (NCH * NBC) + chunk_id * NBC + bidx  # (BM, NBC)
    base_t = idx[:, None] * (NCH * NTC) + chunk_id * NTC + tidx  # (BM, NTC)
    tl.store(o_a + base_b, tl.sum(acc_a, axis=2), mask=rmask[:, None])
    tl.store(o_b + base_b, tl.sum(acc_b, axis=2), mask=rmask[:, None])
    tl.store(o_c + base_b, tl.sum(acc_c, axis=2), mask=rmask[:, None])
    tl.store(o_n + base_t, tl.sum(acc_n, axis=2), mask=rmask[:, None])


def lane_block(block: tuple[int, int, int, int, int], n_beta: int, n_t: int) -> tuple[int, int, int, int, int]:
    """The block ``(BM, BN, NBC, NTC, warps)`` actually launched: NBC and NTC shrunk to the grids' sizes
    (powers of two), so that one beta and one threshold cost one exp2 and one compare per score."""
    BM, BN, NBC, NTC, warps = block
    if BN % LANE_VEC or BN < LANE_VEC or BN & (BN - 1):
        raise ValueError(f"block: BN must be a power of two and a multiple of {LANE_VEC}, got {BN}")
    return BM, BN, min(NBC, pow2(n_beta)), min(NTC, pow2(n_t)), warps


LANE_VEC = 4  # fp32 per thread per row of a tile: one 16-byte load


# ----------------------------------------------------------------------------------------------
# Host side: validation, splitting, finishing, kappa bounds
# ----------------------------------------------------------------------------------------------


def as_grid(values: Any, name: str, sorted_: bool = False) -> np.ndarray:
    """A 1-D float64 grid of finite (thresholds: possibly ``+inf``) values ``>= 0``."""
    arr = np.atleast_1d(np.asarray(values.detach().cpu() if torch.is_tensor(values) else values,
                                   dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty scalar or 1-D array, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    if (arr < 0).any():
        raise ValueError(f"{name} must be >= 0, got {arr[arr < 0][:5]}")
    if not sorted_ and not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)][:5]}")
    if sorted_ and (np.diff(arr) < 0).any():
        raise ValueError(f"{name} must be sorted in non-decreasing order")
    return arr


def grid_chunks(beta: np.ndarray, t: np.ndarray, nbc: int, ntc: int, device) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Number of beta/threshold chunks and the padded device arrays ``beta * log2(e)`` and ``t`` (fp32).

    Padding: beta 0 and threshold ``+inf`` (their results are dropped on the host).
    """
    nch = max(-(-len(beta) // nbc), -(-len(t) // ntc))
    b = np.zeros(nch * nbc)
    b[: len(beta)] = beta * LOG2E
    tt = np.full(nch * ntc, np.inf)
    tt[: len(t)] = t
    f32 = dict(dtype=torch.float32, device=device)
    return nch, torch.as_tensor(b, **f32), torch.as_tensor(tt, **f32)


def sum_pass2(m0, a, b, c, cnt, nb: int, nt: int):
    """Host reduction over column chunks: ``m0`` (rows, split, nch) -> (rows,) from beta chunk 0; sums (rows, nb)."""
    return (m0[:, :, 0].long().sum(1), a[:, :, :nb].double().sum(1), b[:, :, :nb].double().sum(1),
            c[:, :, :nb].double().sum(1), cnt[:, :, :nt].long().sum(1))


def choose_split(row_blocks: int, n_tiles: int, target_programs: int) -> int:
    """Number of column chunks per row block so that about ``target_programs`` programs run."""
    want = max(1, -(-target_programs // max(1, row_blocks)))
    return int(max(1, min(want, n_tiles)))


@dataclass
class Pass1:
    """Per-row results of pass 1, float64/int64 on the host: shapes ``(rows,)``."""

    top: torch.Tensor
    second: torch.Tensor
    low: torch.Tensor
    n_valid: torch.Tensor
    n_bad: torch.Tensor


def combine_pass1(top1, top2, low, count, bad) -> Pass1:
    """Merge per-(row, chunk) partial results ``(rows, chunks)`` into per-row ones."""
    both = torch.cat([top1, top2], dim=-1).double()  # (rows, 2*chunks)
    best2 = torch.topk(both, 2, dim=-1).values  # (rows, 2) multiset top-2
    return Pass1(top=best2[:, 0], second=best2[:, 1], low=low.double().min(dim=-1).values,
                 n_valid=count.long().sum(dim=-1), n_bad=bad.long().sum(dim=-1))


def check_pass1(p1: Pass1, what: str) -> None:
    """Raise ``ValueError`` for NaN/+inf scores, empty rows, and rows whose range overflows fp32."""
    if bool((p1.n_bad > 0).any()):
        rows = torch.nonzero(p1.n_bad > 0).flatten()[:10].tolist()
        raise ValueError(f"{what} contain NaN or +inf (rows {rows}); only -inf is allowed, it marks a masked entry")
    if bool((p1.n_valid == 0).any()):
        rows = torch.nonzero(p1.n_valid == 0).flatten()[:10].tolist()
        raise ValueError(f"{what}: rows empty after masking (every entry is -inf): rows {rows}")
    span = (p1.top - p1.low).float()
    if not bool(torch.isfinite(span).all()):
        raise ValueError(f"{what}: the range max - min of some rows overflows float32")


@dataclass
class RowStats:
    """Row statistics of theory.md §3.1 on a beta grid and a threshold grid.

    Shapes: ``(..., n_beta)`` for the softmax fields, ``(..., n_t)`` for ``counts``, ``(...)`` for the rest.
    ``kappa_lower <= kappa <= kappa_upper`` (see :func:`kappa_bounds`); ``delta2`` is the exact second gap.
    ``backend`` names what ran: ``"triton-cuda"``, ``"triton-interpreter"`` or ``"reference"``.
    """

    log_z: Any
    entropy: Any
    max_weight: Any
    collision: Any
    counts: Any
    top: Any
    delta2: Any
    range: Any
    n_valid: Any
    m0: Any
    kappa_lower: Any
    kappa_upper: Any
    beta: np.ndarray
    t: np.ndarray
    backend: str
    notes: dict = field(default_factory=dict)

    FIELDS = ("log_z", "entropy", "max_weight", "collision", "counts", "top", "delta2", "range",
              "n_valid", "m0", "kappa_lower", "kappa_upper")

    def to_numpy(self) -> "RowStats":
        """The same result with every field a float64 numpy array."""
        conv = {k: np.asarray(v.detach().cpu() if torch.is_tensor(v) else v, dtype=np.float64)
                for k, v in ((f, getattr(self, f)) for f in self.FIELDS)}
        return RowStats(**conv, beta=self.beta, t=self.t, backend=self.backend, notes=dict(self.notes))


def finish(p1: Pass1, m0: torch.Tensor, sum_a: torch.Tensor, sum_b: torch.Tensor, sum_c: torch.Tensor,
           counts: torch.Tensor, beta: np.ndarray, t: np.ndarray, backend: str, K: int = 2) -> RowStats:
    """Assemble the statistics in float64 from per-row sums (``(rows,)``, ``(rows, n_beta)``, ``(rows, n_t)``)."""
    dev = sum_a.device
    b = torch.as_tensor(beta, dtype=torch.float64, device=dev)[None, :]  # (1, nb)
    m0 = m0.double()[:, None]  # (rows, 1)
    log_z = torch.log1p(m0 - 1.0 + sum_a)  # (rows, nb)
    z = m0 + sum_a
    entropy = log_z + b * sum_b / z
    collision = (m0 + sum_c) / (z * z)
    delta2 = p1.top - p1.second
    rng = p1.top - p1.low
    lo, hi = kappa_bounds(counts.double(), t, p1.n_valid.double(), delta2, rng, m0[:, 0], K=K)
    return RowStats(log_z=log_z, entropy=entropy, max_weight=torch.exp(-log_z), collision=collision,
                    counts=counts.double(), top=p1.top, delta2=delta2, range=rng, n_valid=p1.n_valid.double(),
                    m0=m0[:, 0], kappa_lower=lo, kappa_upper=hi, beta=beta, t=t, backend=backend)


def kappa_bounds(counts: torch.Tensor, t: Any, n_valid: torch.Tensor, delta2: torch.Tensor,
                 rng: torch.Tensor, m0: torch.Tensor, K: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Bracket the accumulation scale ``kappa_K`` (theory.md §3.1) from gap counts on a grid.

    Known exactly per row: ``N(t_j)`` on the grid, ``N(R) = n`` at the range ``R``, ``N(t) = 1`` for
    ``t < Delta_(2)`` when the maximum is unique.  With these "points" ``a_1 < a_2 < ...``:

    - lower bound: every ``log N(a)/a`` with ``N(a) >= K`` is a value of the sup, and for ``K = 2``
      so is ``log N(Delta_(2))/Delta_(2) >= log 2/Delta_(2)``;
    - upper bound: on ``[a_{i-1}, a_i)`` the count is at most ``N(a_i)`` and ``t >= max(a_{i-1}, Delta_(2))``
      (and ``Delta_(K) >= Delta_(2)``), so the sup there is at most ``log N(a_i) / max(a_{i-1}, Delta_(2))``.

    Grid factor bound: for a geometric grid ``t_{j+1} = r t_j`` with ``t_1 <= Delta_(2)`` and ``t_J >= R``,
    every non-empty interval has ``a_i <= r max(a_{i-1}, Delta_(2))``, hence ``kappa_upper <= r kappa_lower``.

    Conventions as :func:`critscale.accumulation_scale`: ``inf`` when ``m0 >= K``; ``0`` when fewer than
    ``K`` valid entries.
    """
    dev = counts.device
    rows = counts.shape[0]
    tt = torch.as_tensor(np.asarray(t, dtype=np.float64), device=dev)
    pts = torch.cat([tt[None, :].expand(rows, -1), rng[:, None]], dim=1)  # (rows, nt+1)
    npts = torch.cat([counts, n_valid[:, None]], dim=1)  # (rows, nt+1)
    order = torch.argsort(pts, dim=1, stable=True)
    pts = torch.gather(pts, 1, order)
    npts = torch.gather(npts, 1, order)
    npts = torch.cummax(npts, dim=1).values  # N is monotone; ties between a grid point and R agree
    logn = torch.log(npts.clamp(min=1.0))
    ok = (npts >= K) & (pts > 0) & torch.isfinite(pts)
    lower = torch.where(ok, logn / torch.where(pts > 0, pts, 1.0), torch.zeros_like(pts)).max(dim=1).values
    d2ok = (delta2 > 0) & (n_valid >= 2)
    if K == 2:
        lower = torch.maximum(lower, torch.where(d2ok, math.log(2.0) / torch.where(d2ok, delta2, 1.0),
                                                 torch.zeros_like(lower)))
    prev = torch.cat([torch.zeros_like(pts[:, :1]), pts[:, :-1]], dim=1)  # (rows, nt+1)
    start = torch.maximum(prev, delta2[:, None])
    nonempty = (start < pts) & (start > 0) & (npts >= K)
    upper = torch.where(nonempty, logn / torch.where(start > 0, start, 1.0), torch.zeros_like(pts)).max(dim=1).values
    upper = torch.maximum(upper, lower)
    inf = torch.full_like(lower, float("inf"))
    tied = m0 >= K
    short = n_valid < K
    lower = torch.where(tied, inf, torch.where(short, torch.zeros_like(lower), lower))
    upper = torch.where(tied, inf, torch.where(short, torch.zeros_like(upper), upper))
    return lower, upper


def restore(stats: RowStats, batch_shape: tuple[int, ...], like: Any) -> RowStats:
    """Reshape the flat ``(rows, ...)`` fields to ``batch_shape`` and convert them like the input."""
    out = {}
    for name in RowStats.FIELDS:
        v = getattr(stats, name)
        v = v.reshape(*batch_shape, *v.shape[1:])
        if isinstance(like, np.ndarray):
            v = v.detach().cpu().numpy()
        elif torch.is_tensor(like):
            v = v.to(like.device)
        out[name] = v
    return RowStats(**out, beta=stats.beta, t=stats.t, backend=stats.backend, notes=dict(stats.notes))


def reference_from_scores(scores64: torch.Tensor, beta: np.ndarray, t: np.ndarray, K: int = 2) -> RowStats:
    """Float64 torch reference of every field from materialised ``(rows, n)`` scores (``-inf`` masked).

    The tiny reference of the Triton tutorials: the same definitions, written the obvious way.
    """
    s = scores64.double()
    valid = s > float("-inf")
    top = s.max(dim=1).values  # (rows,)
    low = torch.where(valid, s, torch.full_like(s, float("inf"))).min(dim=1).values
    n_valid = valid.sum(dim=1)
    if s.shape[1] >= 2:
        second = torch.topk(s, 2, dim=1).values[:, 1]  # (rows,) second order statistic, ties kept
    else:
        second = torch.full_like(top, float("-inf"))
    delta = torch.where(valid, top[:, None] - s, torch.zeros_like(s))  # (rows, n)
    pos = valid & (delta > 0)
    m0 = (valid & (delta == 0)).sum(dim=1)
    b = torch.as_tensor(beta, dtype=torch.float64, device=s.device)
    w = torch.where(pos[:, :, None], torch.exp(-delta[:, :, None] * b), torch.zeros((), dtype=s.dtype, device=s.device))  # (rows, n, nb)
    sum_a = w.sum(dim=1)
    sum_b = (w * delta[:, :, None]).sum(dim=1)
    sum_c = (w * w).sum(dim=1)
    tt = torch.as_tensor(np.asarray(t, dtype=np.float64), device=s.device)
    counts = (valid[:, :, None] & (delta[:, :, None] <= tt)).sum(dim=1)  # (rows, nt)
    p1 = Pass1(top=top, second=second, low=low, n_valid=n_valid, n_bad=torch.zeros_like(n_valid))
    return finish(p1, m0, sum_a, sum_b, sum_c, counts, beta, t, "reference", K=K)


def pick_backend(requested: str, on_cuda: bool, scores_count: int) -> str:
    """The backend that runs: ``requested`` if given, else CUDA, else the interpreter for small sizes."""
    if requested not in ("auto",) + BACKENDS:
        raise ValueError(f"backend must be 'auto' or one of {BACKENDS}, got {requested!r}")
    if requested == "triton-cuda":
        if not cuda_usable():
            raise ValueError("backend 'triton-cuda' needs a CUDA device (and TRITON_INTERPRET unset)")
        return requested
    if requested == "triton-interpreter":
        if not interpreter_active():
            raise ValueError("backend 'triton-interpreter' needs TRITON_INTERPRET=1 set before triton was imported")
        return requested
    if requested == "reference":
        return requested
    if cuda_usable():
        return "triton-cuda"
    if interpreter_active() and scores_count <= INTERPRETER_MAX_SCORES:
        return "triton-interpreter"
    return "reference"
