"""Kind 3 — row statistics of i.i.d. score families generated inside the kernel (no memory cost in n).

What and why
------------
The Monte-Carlo of theory.md §5 needs rows of length ``n >= 2^24`` by the hundred; stored, one such row
set is gigabytes.  Here score ``(row, j)`` is a pure function of ``(seed, row, j)``: a Philox-4x32-10
block (Salmon et al. 2011; the generator of ``tl.randint4x``) with counter ``(j, row, 0, 0)`` and key
``seed``, whose first words become uniforms and then one score of the family (:mod:`critscale.families`
laws).  So a kernel can regenerate any tile on demand: pass 1 and pass 2 of
:mod:`critscale.kernels._common` see the same scores without storing them, memory is flat in ``n``, and
the result does not depend on the block sizes or the grid.

Uniforms: ``u = min((x + 1/2) 2^-32, 1 - 2^-24)`` from a 32-bit word ``x``, in ``(0, 1)``, computed in
fp32 with correctly rounded operations, so the uniforms are bit-identical on every backend (GPU, the
interpreter, the numpy mirror :func:`sample_scores_numpy`).  The families then apply ``log``, ``exp2``,
``sqrt``, ``cos`` in fp32: the interpreter and the numpy mirror call the same numpy functions and agree
bit for bit; the GPU's transcendental functions may differ from numpy in the last bits (a relative
difference around 1e-7 in a score).  Tail resolution: the smallest uniform is ``2^-33``, so an
exponential variate reaches 22.9 and a Gaussian 6.77: enough for ``n`` up to about ``2^30``.

Families (code, parameters; the laws of :mod:`critscale.families`, planted entry in column 0):
gauss (Box–Muller, words 0 and 1), ``ptail<p>`` (``E^{1/p}``, ``E = -log u``), logexp (``log E``),
``edge`` (``-(c/E)^{1/q}``), unif, ``sphere3`` (``2u - 1``: the first coordinate of a uniform point of
``S^2`` is uniform), ``sphere5`` (``2 med(u_0, u_1, u_2) - 1``: Beta(2, 2) is the median of three
uniforms; these three are generated reflected, see below), planted, simplex, planted_shrink (margin
``c / log n``), ``pareto<a>`` (``u^{-1/a}``).

Reflected families (float32 resolution at the endpoint).  unif, sphere3 and sphere5 have their top at the
endpoint 1, where fp32 spacing is ``6e-8`` while the relevant gaps are ``1/kappa_bar(n)`` (``1/n`` for unif
and sphere3: ``1.5e-8`` at ``n = 2^26``).  So the kernels generate ``score - 1``, a small negative number with
full relative precision near the top: unif ``-U'``, sphere3 ``-2 U'`` (``1 - U`` and ``U`` have the same
law), sphere5 ``-2 med(u_0, u_1, u_2)``; ``U' = (x_0 + (x_1 + 1/2) 2^-32) 2^-32`` is the 64-bit uniform
made from two words, whose fp32 rounding is relative ``2^-24`` even at ``2^-60``.  Every statistic but
``top`` depends on the gaps only; ``top`` gets the shift back in float64 (``FamilyCode.shift``).
``sphere<d>`` for ``d > 5`` is not generated in-kernel (it would need the ``(d-1)/2``-th order statistic
of ``d - 2`` uniforms); those families raise ``ValueError``.

Order of this file (as in the Triton tutorials): numpy mirror (the reference generator) -> kernels ->
launcher.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from ._common import (LANE_VEC, RowStats, as_grid, check_pass1, choose_split, combine_pass1, finish, grid_chunks,
                      lane_block, lane_pass1, lane_pass2, lanes_reduce1, pick_backend, store_lanes2, store_pass1,
                      sum_pass2)
from .scores import critscale_reference

__all__ = ["FP32_GAP_LIMIT", "FamilyCode", "family_code", "fp32_gap_ratio", "sample_scores", "sample_scores_numpy",
           "sampled_row_stats"]

GAUSS, PTAIL, LOGEXP, EDGE, UNIF, SPHERE3, SPHERE5, PLANTED, SIMPLEX, PARETO = range(2, 12)
ONE_MINUS = np.float32(1.0 - 2.0 ** -24)
TWO_M32 = np.float32(2.0 ** -32)
TWO_M64 = np.float32(2.0 ** -64)
TWO_PI = np.float32(6.283185307179586)


@dataclass(frozen=True)
class FamilyCode:
    """A family as the kernel sees it: an integer code, three fp32 parameters, the planted top score."""

    name: str
    code: int
    p0: float = 0.0
    p1: float = 0.0
    top: float = 0.0
    shift: float = 0.0  # the kernels generate ``score - shift`` (reflected families, see the module docstring)


def family_code(family: Any, n: int) -> FamilyCode:
    """Translate a :mod:`critscale.families` family (or its name) at row length ``n`` into kernel codes."""
    from critscale import families

    fam = families.get(family)
    name, par = fam.name, fam.params
    base = name.rstrip("0123456789.")
    if name == "gauss":
        return FamilyCode(name, GAUSS)
    if base == "ptail":
        return FamilyCode(name, PTAIL, p0=1.0 / par["p"])
    if name == "logexp":
        return FamilyCode(name, LOGEXP)
    if name.startswith("edge"):
        return FamilyCode(name, EDGE, p0=par["c"], p1=1.0 / par["q"])
    if name == "unif":
        return FamilyCode(name, UNIF, shift=1.0)
    if base == "sphere":
        if par["d"] == 3:
            return FamilyCode(name, SPHERE3, shift=1.0)
        if par["d"] == 5:
            return FamilyCode(name, SPHERE5, shift=1.0)
        raise ValueError(f"{name}: only sphere3 and sphere5 are generated in-kernel")
    if name.startswith("planted_shrink"):
        return FamilyCode(name, PLANTED, p1=par["w"], top=par["c"] / math.log(n))
    if name.startswith("planted"):
        return FamilyCode(name, PLANTED, p1=par["w"], top=par["g"])
    if name.startswith("simplex"):
        return FamilyCode(name, SIMPLEX, p0=par["rho"], p1=par["eta"], top=1.0)
    if base == "pareto":
        return FamilyCode(name, PARETO, p0=1.0 / par["alpha"])
    raise ValueError(f"family {name!r} has no in-kernel generator")


# ----------------------------------------------------------------------------------------------
# Reference generator: numpy mirror of the kernel, operation by operation, in fp32
# ----------------------------------------------------------------------------------------------


def philox_numpy(seed: int, c0: np.ndarray, c1: np.ndarray, rounds: int = 10) -> tuple[np.ndarray, ...]:
    """Philox-4x32 with counter ``(c0, c1, 0, 0)`` and key ``(seed lo, seed hi)``; four uint32 arrays."""
    mask = np.uint64(0xFFFFFFFF)
    x0 = c0.astype(np.uint64) & mask
    x1 = c1.astype(np.uint64) & mask
    x2 = np.zeros_like(x0)
    x3 = np.zeros_like(x0)
    k0 = np.uint64(seed & 0xFFFFFFFF)
    k1 = np.uint64((seed >> 32) & 0xFFFFFFFF)
    ra, rb = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    ka, kb = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    for _ in range(rounds):
        p_b = rb * x2  # < 2^64: no overflow
        p_a = ra * x0
        n0 = (p_b >> np.uint64(32)) ^ x1 ^ k0
        n2 = (p_a >> np.uint64(32)) ^ x3 ^ k1
        x1 = p_b & mask
        x3 = p_a & mask
        x0, x2 = n0, n2
        k0 = (k0 + ka) & mask
        k1 = (k1 + kb) & mask
    return tuple(v.astype(np.uint32) for v in (x0, x1, x2, x3))


def _uniform_numpy(x: np.ndarray) -> np.ndarray:
    u = (x.astype(np.float32) + np.float32(0.5)) * TWO_M32
    return np.minimum(u, ONE_MINUS)


def _uniform_fine_numpy(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``(hi + (lo + 1/2) 2^-32) 2^-32`` in fp32: the 64-bit uniform, full relative precision near 0."""
    u = hi.astype(np.float32) * TWO_M32 + (lo.astype(np.float32) + np.float32(0.5)) * TWO_M64
    return np.minimum(u, ONE_MINUS)


def sample_scores_numpy(fc: FamilyCode, seed: int, rows: int, n: int, row0: int = 0) -> np.ndarray:
    """The scores the kernels generate, ``(rows, n)`` float32, computed with numpy (same operations).

    These are the family's scores minus ``fc.shift`` (reflected families: unif, sphere3, sphere5).
    """
    cols = np.arange(n, dtype=np.uint32)[None, :]
    rws = (np.arange(rows, dtype=np.uint64) + np.uint64(row0)).astype(np.uint32)[:, None]
    c0 = np.broadcast_to(cols, (rows, n))
    c1 = np.broadcast_to(rws, (rows, n))
    x0, x1, x2, _ = philox_numpy(seed, c0, c1)
    u0 = _uniform_numpy(x0)
    f32 = np.float32
    p0, p1, top = f32(fc.p0), f32(fc.p1), f32(fc.top)
    with np.errstate(divide="ignore"):
        if fc.code == GAUSS:
            u1 = _uniform_numpy(x1)
            s = np.sqrt(f32(-2.0) * np.log(u0)) * np.cos(TWO_PI * u1)
        elif fc.code == PTAIL:
            s = np.exp2(np.log2(-np.log(u0)) * p0)
        elif fc.code == LOGEXP:
            s = np.log(-np.log(u0))
        elif fc.code == EDGE:
            s = -np.exp2(np.log2(p0 / -np.log(u0)) * p1)
        elif fc.code == UNIF:  # U(0,1) - 1 = -U'
            s = -_uniform_fine_numpy(x0, x1)
        elif fc.code == SPHERE3:  # (2U - 1) - 1 = -2U'
            s = f32(-2.0) * _uniform_fine_numpy(x0, x1)
        elif fc.code == SPHERE5:  # (2 med - 1) - 1 = -2 med'
            u1, u2 = _uniform_numpy(x1), _uniform_numpy(x2)
            med = np.maximum(np.minimum(u0, u1), np.minimum(np.maximum(u0, u1), u2))
            s = f32(-2.0) * med
        elif fc.code == PLANTED:
            s = -p1 * u0
        elif fc.code == SIMPLEX:
            s = p0 + p1 * (f32(2.0) * u0 - f32(1.0))
        elif fc.code == PARETO:
            s = np.exp2(-np.log2(u0) * p0)
        else:
            raise ValueError(f"unknown family code {fc.code}")
    s = s.astype(np.float32)
    if fc.code in (PLANTED, SIMPLEX):
        s[:, 0] = top
    return s


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def _uniform(x):
    u = (x.to(tl.float32) + 0.5) * 2.3283064365386963e-10
    return tl.minimum(u, 0.99999994039535522)


@triton.jit
def _uniform_fine(hi, lo):
    u = hi.to(tl.float32) * 2.3283064365386963e-10 + (lo.to(tl.float32) + 0.5) * 5.421010862427522e-20
    return tl.minimum(u, 0.99999994039535522)


@triton.jit
def _family_tile(seed, c0, c1, fam, p0, p1, top):
    """Scores (minus the family's shift) of family code ``fam`` at columns ``c0`` and rows ``c1`` (int32, one shape)."""
    zero = tl.zeros_like(c0)
    x0, x1, x2, x3 = tl.philox(seed, c0, c1, zero, zero)
    u0 = _uniform(x0)
    if fam == 2:  # gauss
        u1 = _uniform(x1)
        s = tl.sqrt(-2.0 * tl.log(u0)) * tl.cos(6.283185307179586 * u1)
    elif fam == 3:  # ptail
        s = tl.exp2(tl.log2(-tl.log(u0)) * p0)
    elif fam == 4:  # logexp
        s = tl.log(-tl.log(u0))
    elif fam == 5:  # edge
        s = -tl.exp2(tl.log2(p0 / -tl.log(u0)) * p1)
    elif fam == 6:  # unif, reflected: U - 1 = -U'
        s = -_uniform_fine(x0, x1)
    elif fam == 7:  # sphere3, reflected: (2U - 1) - 1 = -2U'
        s = -2.0 * _uniform_fine(x0, x1)
    elif fam == 8:  # sphere5, reflected: (2 med - 1) - 1 = -2 med'
        u1 = _uniform(x1)
        u2 = _uniform(x2)
        med = tl.maximum(tl.minimum(u0, u1), tl.minimum(tl.maximum(u0, u1), u2))
        s = -2.0 * med
    elif fam == 9:  # planted
        s = -p1 * u0
    elif fam == 10:  # simplex
        s = p0 + p1 * (2.0 * u0 - 1.0)
    else:  # pareto
        s = tl.exp2(-tl.log2(u0) * p0)
    if fam == 9 or fam == 10:
        s = tl.where(c0 == 0, top, s)
    return s


@triton.jit(do_not_specialize=["seed", "fam", "row0", "R", "n"])
def _sample_kernel(out_ptr, seed, fam, p0, p1, top, R, n, row0, BM: tl.constexpr, BN: tl.constexpr):
    """Write the generated scores of a ``(R, n)`` block (testing and the CPU equality check)."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    c0 = cols[None, :] + 0 * rows[:, None]  # (BM, BN)
    c1 = (rows + row0)[:, None] + 0 * cols[None, :]
    s = _family_tile(seed, c0, c1, fam, p0, p1, top)  # (BM, BN)
    m = (rows < R)[:, None] & (cols < n)[None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * n + cols[None, :], s, mask=m)


@triton.jit
def _generated_tile(seed, rows, rmask, row0, c, hi, fam, p0, p1, top, L: tl.constexpr, V: tl.constexpr):
    """The ``(BM, V, L)`` tile of columns ``c + l V + v`` (the layout of kind 1, see _common) and its mask."""
    cols = c + tl.arange(0, V)[:, None] + tl.arange(0, L)[None, :] * V  # (V, L)
    inside = rmask[:, None, None] & (cols < hi)[None, :, :]  # (BM, V, L)
    c0 = cols[None, :, :] + 0 * rows[:, None, None]
    c1 = (rows + row0)[:, None, None] + 0 * cols[None, :, :]
    return _family_tile(seed, c0, c1, fam, p0, p1, top), inside


@triton.jit(do_not_specialize=["seed", "fam", "row0", "R", "n", "tiles", "SPLIT"])
def _sampled_pass1(seed, fam, p0, p1, top, R, n, row0, tiles, SPLIT, o_top1, o_top2, o_low, o_count, o_bad,
                   BM: tl.constexpr, L: tl.constexpr, V: tl.constexpr):
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
    for c in range(lo, hi, L * V):
        s, inside = _generated_tile(seed, rows, rmask, row0, c, hi, fam, p0, p1, top, L, V)  # (BM, V, L)
        top1, top2, low, count, bad = lane_pass1(s, inside, top1, top2, low, count, bad)
    top1, top2, low, count, bad = lanes_reduce1(top1, top2, low, count, bad)  # (BM,)
    store_pass1(rows * SPLIT + pid_c, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit(do_not_specialize=["seed", "fam", "row0", "R", "n", "tiles", "SPLIT", "NCH"])
def _sampled_pass2(seed, fam, p0, p1, top_score, R, n, row0, tiles, SPLIT, NCH, top_ptr, beta2_ptr, t_ptr,
                   o_m0, o_a, o_b, o_c, o_n,
                   BM: tl.constexpr, L: tl.constexpr, V: tl.constexpr, NBC: tl.constexpr, NTC: tl.constexpr):
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
    for c in range(lo, hi, L * V):
        s, inside = _generated_tile(seed, rows, rmask, row0, c, hi, fam, p0, p1, top_score, L, V)  # (BM, V, L)
        # snap: 4 ulps of |top| (4 * 2^-23), for a maximum regenerated with another rounding
        m0, acc_a, acc_b, acc_c, acc_n = lane_pass2(s, inside, top, 4.76837158203125e-07 * tl.abs(top), beta2,
                                                     tcut, m0, acc_a, acc_b, acc_c, acc_n)
    store_lanes2(rows * SPLIT + pid_c, rmask, pid_k, m0, acc_a, acc_b, acc_c, acc_n, o_m0, o_a, o_b, o_c, o_n,
                 NCH, NBC, NTC)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


# (BM, BN, NBC, NTC, num_warps), as for kind 1: BN = 4 x 32 x num_warps columns, each thread generates 4
# adjacent columns of each of the BM rows per tile, the per-lane partials are reduced across lanes once per
# program.  Pass 2 regenerates the tile once per beta/threshold chunk, so larger chunks save Philox work at
# the price of registers; the benchmark times the default and the alternatives and keeps the fastest.
GPU_BLOCK = (1, 512, 8, 16, 4)
GPU_BLOCK_ALTERNATIVES = ((1, 512, 16, 32, 4), (1, 256, 16, 32, 2))
INTERPRETER_BLOCK = (16, 64, 4, 8, 4)


def fp32_gap_ratio(top: Any, shift: float, kappa_bar: float) -> np.ndarray:
    """Per row, the fp32 spacing at the generated top score times ``kappa_bar(n)``.

    ``top`` are the family's top scores (``RowStats.top``), ``shift`` the family's ``FamilyCode.shift``: the
    kernels hold ``top - shift`` in fp32, where neighbouring values differ by ``ulp(|top - shift|)``.  The gaps
    that matter are of order ``1 / kappa_bar``, so a ratio near 1 means fp32 cannot resolve them (the ratio is
    the relative rounding of a typical top gap).  Guard: ratio ``< 1e-2`` (:data:`FP32_GAP_LIMIT`).
    """
    held = np.abs(np.asarray(top, dtype=np.float64) - shift).astype(np.float32)
    return np.spacing(held).astype(np.float64) * float(kappa_bar)


FP32_GAP_LIMIT = 1e-2


def _check_size(rows: int, n: int, seed: int, row0: int) -> None:
    if not (isinstance(n, (int, np.integer)) and 1 <= n < 2 ** 31):
        raise ValueError(f"n must be an integer in [1, 2^31), got {n!r}")
    if not (isinstance(rows, (int, np.integer)) and rows >= 1 and row0 >= 0 and row0 + rows <= 2 ** 31):
        raise ValueError(f"rows must be >= 1 with row0 + rows <= 2^31, got rows={rows!r}, row0={row0!r}")
    if not (isinstance(seed, (int, np.integer)) and 0 <= seed < 2 ** 63):
        raise ValueError(f"seed must be an integer in [0, 2^63), got {seed!r}")


def sample_scores(family: Any, n: int, rows: int, *, seed: int = 0, row0: int = 0,
                  backend: str = "auto") -> tuple[np.ndarray | torch.Tensor, str]:
    """The ``(rows, n)`` fp32 scores the kernels generate, and the backend that made them.

    These are the family's scores minus ``family_code(family, n).shift`` (1 for the reflected families unif,
    sphere3 and sphere5, 0 otherwise); the statistics depend on gaps only, and ``RowStats.top`` adds it back.
    """
    _check_size(rows, n, seed, row0)
    fc = family_code(family, n)
    which = pick_backend(backend, False, rows * n)
    if which == "reference":
        return sample_scores_numpy(fc, seed, rows, n, row0), which
    dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
    out = torch.empty(rows, n, dtype=torch.float32, device=dev)
    BM, BN = 16, 64
    grid = (triton.cdiv(rows, BM), triton.cdiv(n, BN))
    _sample_kernel[grid](out, int(seed), fc.code, float(fc.p0), float(fc.p1), float(fc.top), rows, n, int(row0),
                         BM=BM, BN=BN)
    return out, which


def sampled_row_stats(family: Any, n: int, rows: int, beta: Any, t: Any, *, seed: int = 0, row0: int = 0,
                      K: int = 2, backend: str = "auto", split: int | None = None,
                      block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of ``rows`` generated rows of length ``n`` of a family (theory.md §3.1, §5).

    Row ``r`` is the same whatever ``rows``, ``row0`` (global row ``row0 + r``), blocks and backend.
    Dispatch as :func:`critscale.kernels.row_stats`; the reference backend materialises the scores with
    :func:`sample_scores_numpy` (in row blocks) and runs the critscale float64 reference on them.
    """
    _check_size(rows, n, seed, row0)
    fc = family_code(family, n)
    beta_g = as_grid(beta, "beta")
    t_g = as_grid(t, "t", sorted_=True)
    which = pick_backend(backend, False, rows * n)
    if which == "reference":
        step = max(1, (1 << 22) // n)
        parts = []
        for r0 in range(0, rows, step):
            s = sample_scores_numpy(fc, seed, min(step, rows - r0), n, row0 + r0)
            parts.append(critscale_reference(s.astype(np.float64), beta_g, t_g, K=K))
        out = parts[0]
        if len(parts) > 1:
            for name in RowStats.FIELDS:
                setattr(out, name, torch.cat([getattr(p, name) for p in parts], dim=0))
        out.top = out.top + fc.shift  # float64: the family's own top score
        out.notes.update(family=fc.name, seed=seed)
        return out
    interpret = which == "triton-interpreter"
    dev = torch.device("cuda") if not interpret else torch.device("cpu")
    BM, BN, NBC, NTC, warps = lane_block(block or (INTERPRETER_BLOCK if interpret else GPU_BLOCK), len(beta_g),
                                         len(t_g))
    row_blocks = triton.cdiv(rows, BM)
    n_tiles = triton.cdiv(n, BN)
    nch, beta2, tt = grid_chunks(beta_g, t_g, NBC, NTC, dev)
    if split is None:
        target = 4 * torch.cuda.get_device_properties(dev).multi_processor_count if not interpret else 1
        split = choose_split(row_blocks * nch, n_tiles, target)
    split = int(max(1, min(split, n_tiles)))
    tiles = triton.cdiv(n_tiles, split)
    split = triton.cdiv(n_tiles, tiles)
    common = (int(seed), fc.code, float(fc.p0), float(fc.p1), float(fc.top), rows, n, int(row0), tiles, split)
    tile_args = dict(BM=BM, L=BN // LANE_VEC, V=LANE_VEC, num_warps=warps)
    f32 = dict(dtype=torch.float32, device=dev)
    i32 = dict(dtype=torch.int32, device=dev)
    top1, top2, low = (torch.empty(rows, split, **f32) for _ in range(3))
    count, bad = (torch.empty(rows, split, **i32) for _ in range(2))
    _sampled_pass1[(row_blocks, split)](*common, top1, top2, low, count, bad, **tile_args)
    p1 = combine_pass1(top1, top2, low, count, bad)
    check_pass1(p1, f"generated {fc.name} scores")
    top = p1.top.float().contiguous()
    m0 = torch.empty(rows, split, nch, **i32)
    a, b, c = (torch.empty(rows, split, nch * NBC, **f32) for _ in range(3))
    cnt = torch.empty(rows, split, nch * NTC, **i32)
    _sampled_pass2[(nch, row_blocks, split)](*common, nch, top, beta2, tt, m0, a, b, c, cnt, NBC=NBC, NTC=NTC,
                                             **tile_args)
    out = finish(p1, *sum_pass2(m0, a, b, c, cnt, len(beta_g), len(t_g)), beta_g, t_g, which, K=K)
    out.top = out.top + fc.shift  # float64: the family's own top score
    out.notes.update(split=split, block=(BM, BN, NBC, NTC, warps), chunks=nch, family=fc.name, seed=seed)
    return out
