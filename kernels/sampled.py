"""Kind ``sampled``: row statistics of i.i.d. score families generated inside the kernel (no memory cost in n).

What and why
------------
The Monte-Carlo of theory.md §5 needs rows of length ``n >= 2^24`` by the hundred; stored, one such row
set is gigabytes.  Here score ``(row, j)`` is a pure function of ``(seed, row, j)``, so a kernel can make any
tile on demand: pass 1 and pass 2 (:mod:`critscale.kernels.twopass`) see the same scores without storing
them, memory is flat in ``n``, and the result does not depend on the block sizes or the grid.

Generator, version :data:`GENERATOR_VERSION` (recorded in every result's ``notes["generator"]``).
Columns come in groups of four, ``j = 4 g + v``.  Group ``g`` of row ``r`` uses ``W`` Philox-4x32-10 blocks
(Salmon et al. 2011; the generator of ``tl.randint4x``) with counters ``(g W + k, r, 0, 0)``, ``k < W``, and
key ``seed``: their ``4 W`` words feed the four scores, ``W`` words each, in order.  ``W = 1`` for every family
but unif and sphere3 (``W = 2``: a 64-bit uniform per score) and sphere5 (``W = 3``: three uniforms); so one
Philox block makes four Gaussians (two Box–Muller pairs) or four one-word scores.  A thread holds the four
columns of a group (the tile layout of :mod:`.tiles`), so it runs each block once per tile, for every beta.
Version 1 (the recorded H200 Monte-Carlo before this version) ran one block per score and used words 0-2
of it; the two versions give different rows for the same seed.

Uniforms: ``u = min((x + 1/2) 2^-32, 1 - 2^-24)`` from a 32-bit word ``x``, in ``(0, 1)``, computed in
fp32 with correctly rounded operations, so the uniforms are bit-identical on every backend (GPU, the
interpreter, the numpy mirror :func:`sample_scores_numpy`).  The families then apply ``log2``, ``exp2``,
``sqrt``, ``cos``, ``sin`` in fp32: on CUDA the fast hardware approximations (``lg2.approx``, ``ex2.approx``,
``sin/cos.approx`` after the argument is put in ``(-pi, pi)``, libdevice's ``__nv_fast_*``), except the
logarithm of the uniform itself, which is libdevice's accurate ``log2``: ``lg2.approx`` has an absolute error
of about ``2^-22`` near 1, which is a large relative error of ``-ln u`` there (on an H200 the fast version
put a ptail3 score of 0.022 off by 1.4e-3 relative).  The interpreter and the numpy mirror call the same
numpy functions and agree bit for bit; GPU scores differ from the mirror in the last bits.  Tail resolution: the
smallest uniform is ``2^-33``, so an exponential variate reaches 22.9 and a Gaussian 6.77: enough for ``n``
up to about ``2^30``.

Finite families.  gauss, logexp, unif, sphere3 and sphere5 cannot make NaN or infinities for any parameters:
``u`` lies in ``[2^-33, 1 - 2^-24]``, so ``r = sqrt(-2 ln u) <= 6.8``, ``|cos|, |sin| <= 1``, ``E = -ln u`` lies in
``[6e-8, 22.9]`` and ``ln E`` is finite, and the reflected scores lie in ``[-2, 0]``.  Their kernels check no
entry (:data:`FINITE_CODES`).  ptail, edge and pareto overflow for small parameters (``u^{-1/a}`` at
``a = 0.1``), planted and simplex for parameters beyond float32's range, so theirs check every entry.

Column loops.  Each program runs its full tiles without masks (pass 2: pairs of them) and then masks one tile
(pass 1) or one pair (pass 2) at its end; rows ``>= R`` of a row block are generated and folded like the others,
and their results are never stored.  Pass 1 folds the four columns of a group one at a time, as the generator
makes them; pass 2 joins them into the tile of :mod:`.tiles` in the thread.  The generator's last products are
rounded on their own on CUDA, so pass 2 computes the gaps of the same fp32 scores as pass 1 (the compiler would
otherwise fuse ``top - r cos theta`` into one multiply-add).

Families (code, parameters; the laws of :mod:`critscale.families`, planted entry in column 0):
gauss (Box–Muller: ``r = sqrt(-2 ln u_a)``, ``theta = 2 pi (u_b - 1/2)``, scores ``r cos theta, r sin theta``),
``ptail<p>`` (``E^{1/p}``, ``E = -ln u``), logexp (``ln E``), ``edge`` (``-(c/E)^{1/q}``), unif, ``sphere3``
(``2u - 1``: the first coordinate of a uniform point of ``S^2`` is uniform), ``sphere5`` (``2 med(u_0, u_1, u_2)
- 1``: Beta(2, 2) is the median of three uniforms), planted, simplex, planted_shrink (margin ``c / log n``),
``pareto<a>`` (``u^{-1/a}``).  The family is a compile-time constant of the kernels (one compilation each).

Reflected families (float32 resolution at the endpoint).  unif, sphere3 and sphere5 have their top at the
endpoint 1, where fp32 spacing is ``6e-8`` while the relevant gaps are ``1/kappa_bar(n)`` (``1/n`` for unif
and sphere3: ``1.5e-8`` at ``n = 2^26``).  So the kernels generate ``score - 1``, a small negative number with
full relative precision near the top: unif ``-U'``, sphere3 ``-2 U'`` (``1 - U`` and ``U`` have the same
law), sphere5 ``-2 med(u_0, u_1, u_2)``; ``U' = (x_0 + (x_1 + 1/2) 2^-32) 2^-32`` is the 64-bit uniform
made from two words, whose fp32 rounding is relative ``2^-24`` even at ``2^-60``.  Every statistic but
``top`` depends on the gaps only; ``top`` gets the shift back in float64 (``FamilyCode.shift``).
``sphere<d>`` for ``d > 5`` is not generated in-kernel; those families raise ``ValueError``.

Order of this file (as in the Triton tutorials): numpy mirror (the reference generator) -> kernels ->
launcher and entry points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .dispatch import beta_grid, check_K, pick_backend, threshold_grid
from .rowstats import RowStats
from .scores import LANE_VEC, check_block, critscale_reference
from .tiles import (BLOCK_WORDS, NLOW, block_counter, flush_low, fold_pass1, fold_pass2, init_pass1, init_pass2,
                    pass_prologue, store_pass1, store_pass2)
from .twopass import Launch, run_two_pass

__all__ = ["FP32_GAP_LIMIT", "GENERATOR_VERSION", "FamilyCode", "family_code", "fp32_gap_ratio", "sample_scores",
           "sample_scores_numpy", "sampled_row_stats"]

GENERATOR_VERSION = 2

# Family codes: compile-time constants of the kernels (``FAM``) and of the numpy mirror.
GAUSS = tl.constexpr(2)
PTAIL = tl.constexpr(3)
LOGEXP = tl.constexpr(4)
EDGE = tl.constexpr(5)
UNIF = tl.constexpr(6)
SPHERE3 = tl.constexpr(7)
SPHERE5 = tl.constexpr(8)
PLANTED = tl.constexpr(9)
SIMPLEX = tl.constexpr(10)
PARETO = tl.constexpr(11)
WORDS = {6: 2, 7: 2, 8: 3}  # Philox words per score (W) where not 1
# Bit ``code`` set: the family's generator cannot make NaN or infinities for any parameters (module docstring,
# "Finite families"), so the kernels check no entry.  ptail, edge and pareto overflow for small parameters,
# planted and simplex for parameters beyond float32's range: they keep the checks.
FINITE_CODES = tl.constexpr((1 << GAUSS.value) | (1 << LOGEXP.value) | (1 << UNIF.value) | (1 << SPHERE3.value)
                            | (1 << SPHERE5.value))

_V = tl.constexpr(LANE_VEC)
LN2 = 0.6931471805599453
TWO_PI = 6.283185307179586
ONE_MINUS = np.float32(1.0 - 2.0 ** -24)
TWO_M32 = np.float32(2.0 ** -32)
TWO_M64 = np.float32(2.0 ** -64)


@dataclass(frozen=True)
class FamilyCode:
    """A family as the kernel sees it: an integer code, two fp32 parameters, the planted top score."""

    name: str
    code: int
    p0: float = 0.0
    p1: float = 0.0
    top: float = 0.0
    shift: float = 0.0  # the kernels generate ``score - shift`` (reflected families, see the module docstring)

    @property
    def words(self) -> int:
        """Philox words (and blocks per group of four columns) per score."""
        return WORDS.get(self.code, 1)

    @property
    def finite(self) -> bool:
        """Whether the generator makes only finite scores whatever the parameters (the kernels then check none)."""
        return bool((FINITE_CODES.value >> self.code) & 1)


def family_code(family: Any, n: int) -> FamilyCode:
    """Translate a :mod:`critscale.families` family (or its name) at row length ``n`` into kernel codes."""
    from critscale import families

    fam = families.get(family)
    name, par = fam.name, fam.params
    base = name.rstrip("0123456789.")
    if name == "gauss":
        return FamilyCode(name, GAUSS.value)
    if base == "ptail":
        return FamilyCode(name, PTAIL.value, p0=1.0 / par["p"])
    if name == "logexp":
        return FamilyCode(name, LOGEXP.value)
    if name.startswith("edge"):
        return FamilyCode(name, EDGE.value, p0=par["c"], p1=1.0 / par["q"])
    if name == "unif":
        return FamilyCode(name, UNIF.value, shift=1.0)
    if base == "sphere":
        if par["d"] == 3:
            return FamilyCode(name, SPHERE3.value, shift=1.0)
        if par["d"] == 5:
            return FamilyCode(name, SPHERE5.value, shift=1.0)
        raise ValueError(f"{name}: only sphere3 and sphere5 are generated in-kernel")
    if name.startswith("planted_shrink"):
        return FamilyCode(name, PLANTED.value, p1=par["w"], top=par["c"] / math.log(n))
    if name.startswith("planted"):
        return FamilyCode(name, PLANTED.value, p1=par["w"], top=par["g"])
    if name.startswith("simplex"):
        return FamilyCode(name, SIMPLEX.value, p0=par["rho"], p1=par["eta"], top=1.0)
    if base == "pareto":
        return FamilyCode(name, PARETO.value, p0=1.0 / par["alpha"])
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


def _one_word_numpy(code: int, x: np.ndarray, p0: np.float32, p1: np.float32) -> np.ndarray:
    f32 = np.float32
    u = _uniform_numpy(x)
    if code in (PTAIL.value, LOGEXP.value, EDGE.value):
        e = np.log2(u) * f32(-LN2)  # E = -ln u > 0
        if code == PTAIL.value:
            return np.exp2(np.log2(e) * p0)
        if code == LOGEXP.value:
            return np.log2(e) * f32(LN2)
        return -np.exp2(np.log2(p0 / e) * p1)
    if code == PLANTED.value:
        return -p1 * u
    if code == SIMPLEX.value:
        return p0 + p1 * (f32(2.0) * u - f32(1.0))
    if code == PARETO.value:
        return np.exp2(-np.log2(u) * p0)
    raise ValueError(f"unknown family code {code}")


def _box_muller_numpy(xa: np.ndarray, xb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    f32 = np.float32
    r = np.sqrt(np.log2(_uniform_numpy(xa)) * f32(-2.0 * LN2))
    theta = (_uniform_numpy(xb) - f32(0.5)) * f32(TWO_PI)
    return r * np.cos(theta), r * np.sin(theta)


def _median3_numpy(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def group_scores_numpy(fc: FamilyCode, words: list[np.ndarray]) -> list[np.ndarray]:
    """The four fp32 scores (minus ``fc.shift``) of groups of four columns from their ``4 W`` Philox words
    (uint32 arrays of one shape, in the kernel's order); column 0's planted top is not applied here."""
    f32 = np.float32
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        p0, p1 = f32(fc.p0), f32(fc.p1)
        if fc.code == GAUSS.value:
            s0, s1 = _box_muller_numpy(words[0], words[1])
            s2, s3 = _box_muller_numpy(words[2], words[3])
            return [s0, s1, s2, s3]
        if fc.code == UNIF.value:  # U(0,1) - 1 = -U'
            return [-_uniform_fine_numpy(words[2 * v], words[2 * v + 1]) for v in range(4)]
        if fc.code == SPHERE3.value:  # (2U - 1) - 1 = -2U'
            return [f32(-2.0) * _uniform_fine_numpy(words[2 * v], words[2 * v + 1]) for v in range(4)]
        if fc.code == SPHERE5.value:  # (2 med - 1) - 1 = -2 med'
            u = [_uniform_numpy(w) for w in words]
            return [f32(-2.0) * _median3_numpy(u[3 * v], u[3 * v + 1], u[3 * v + 2]) for v in range(4)]
        return [_one_word_numpy(fc.code, words[v], p0, p1) for v in range(4)]


def sample_scores_numpy(fc: FamilyCode, seed: int, rows: int, n: int, row0: int = 0) -> np.ndarray:
    """The scores the kernels generate, ``(rows, n)`` float32, computed with numpy (same operations).

    These are the family's scores minus ``fc.shift`` (reflected families: unif, sphere3, sphere5).
    """
    groups = -(-n // 4)
    W = fc.words
    g = np.arange(groups, dtype=np.uint64)[None, :]
    rws = (np.arange(rows, dtype=np.uint64) + np.uint64(row0)).astype(np.uint32)[:, None]
    words = []  # 4 W arrays (rows, groups), in the kernel's order
    for k in range(W):
        c0 = np.broadcast_to((g * np.uint64(W) + np.uint64(k)).astype(np.uint32), (rows, groups))
        words.extend(philox_numpy(seed, c0, np.broadcast_to(rws, (rows, groups))))
    parts = group_scores_numpy(fc, words)
    s = np.stack(parts, axis=-1).reshape(rows, 4 * groups)[:, :n].astype(np.float32)  # column 4 g + v
    if fc.code in (PLANTED.value, SIMPLEX.value):
        s[:, 0] = np.float32(fc.top)
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
def _log2(x, FAST: tl.constexpr):
    if FAST:
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def _log2_uniform(u, FAST: tl.constexpr):
    """log2 of a uniform in (0, 1), accurate in both modes (see the module docstring)."""
    if FAST:
        return libdevice.log2(u)
    else:
        return tl.log2(u)


@triton.jit
def _mul(a, b, FAST: tl.constexpr):
    """``a b`` rounded on its own: on CUDA an explicit ``mul.rn``, which the compiler does not contract with the
    pass-2 gap ``top - s`` into one fused multiply-add (that would be the gap of the unrounded score: pass 2
    would not see pass 1's scores).  The same bits as a plain multiply."""
    if FAST:
        return libdevice.mul_rn(a, b)
    else:
        return a * b


@triton.jit
def _one_word(x, FAM: tl.constexpr, p0, p1, FAST: tl.constexpr):
    """One score of a one-word family from the 32-bit word ``x``."""
    u = _uniform(x)
    if FAM == PTAIL or FAM == LOGEXP or FAM == EDGE:
        e = _log2_uniform(u, FAST) * -0.6931471805599453  # E = -ln u
        if FAM == PTAIL:
            s = tl.exp2(_log2(e, FAST) * p0)
        elif FAM == LOGEXP:
            s = _mul(_log2(e, FAST), 0.6931471805599453, FAST)
        else:
            s = -tl.exp2(_log2(p0 / e, FAST) * p1)
    elif FAM == PLANTED:
        s = _mul(-p1, u, FAST)
    elif FAM == SIMPLEX:
        s = p0 + p1 * (2.0 * u - 1.0)
    else:  # PARETO
        s = tl.exp2(-_log2_uniform(u, FAST) * p0)
    return s


@triton.jit
def _box_muller(xa, xb, FAST: tl.constexpr):
    """Two Gaussians from two words: ``r cos theta, r sin theta`` with ``theta`` in ``(-pi, pi)``."""
    r = tl.sqrt(_log2_uniform(_uniform(xa), FAST) * -1.3862943611198906)
    theta = (_uniform(xb) - 0.5) * 6.283185307179586
    if FAST:
        return _mul(r, libdevice.fast_cosf(theta), FAST), _mul(r, libdevice.fast_sinf(theta), FAST)
    else:
        return r * tl.cos(theta), r * tl.sin(theta)


@triton.jit
def _median3(a, b, c):
    return tl.maximum(tl.minimum(a, b), tl.minimum(tl.maximum(a, b), c))


@triton.jit
def _philox_block(seed, g, row, k: tl.constexpr, W: tl.constexpr):
    zero = tl.zeros_like(g)
    return tl.philox(seed, g * W + k, row, zero, zero)


@triton.jit
def _family_group(seed, g, row, FAM: tl.constexpr, p0, p1, FAST: tl.constexpr):
    """The scores (minus the family's shift) of columns ``4g, 4g+1, 4g+2, 4g+3`` of ``row`` (int32 tensors)."""
    if FAM == UNIF or FAM == SPHERE3:
        x0, x1, x2, x3 = _philox_block(seed, g, row, 0, 2)
        y0, y1, y2, y3 = _philox_block(seed, g, row, 1, 2)
        k = -1.0 if FAM == UNIF else -2.0
        s0 = k * _uniform_fine(x0, x1)
        s1 = k * _uniform_fine(x2, x3)
        s2 = k * _uniform_fine(y0, y1)
        s3 = k * _uniform_fine(y2, y3)
    elif FAM == SPHERE5:
        x0, x1, x2, x3 = _philox_block(seed, g, row, 0, 3)
        y0, y1, y2, y3 = _philox_block(seed, g, row, 1, 3)
        z0, z1, z2, z3 = _philox_block(seed, g, row, 2, 3)
        s0 = -2.0 * _median3(_uniform(x0), _uniform(x1), _uniform(x2))
        s1 = -2.0 * _median3(_uniform(x3), _uniform(y0), _uniform(y1))
        s2 = -2.0 * _median3(_uniform(y2), _uniform(y3), _uniform(z0))
        s3 = -2.0 * _median3(_uniform(z1), _uniform(z2), _uniform(z3))
    elif FAM == GAUSS:
        x0, x1, x2, x3 = _philox_block(seed, g, row, 0, 1)
        s0, s1 = _box_muller(x0, x1, FAST)
        s2, s3 = _box_muller(x2, x3, FAST)
    else:
        x0, x1, x2, x3 = _philox_block(seed, g, row, 0, 1)
        s0 = _one_word(x0, FAM, p0, p1, FAST)
        s1 = _one_word(x1, FAM, p0, p1, FAST)
        s2 = _one_word(x2, FAM, p0, p1, FAST)
        s3 = _one_word(x3, FAM, p0, p1, FAST)
    return s0, s1, s2, s3


@triton.jit
def _family_column(s, cols, rmask, hi, top, FAM: tl.constexpr, MASK: tl.constexpr):
    """Column ``v`` ``(BM, 1, L)`` of a tile (columns ``cols``) and its ``inside`` mask (:func:`_family_columns`)."""
    if FAM == PLANTED or FAM == SIMPLEX:
        s = tl.where(cols == 0, top, s)
    if MASK:
        inside = rmask[:, None, None] & (cols < hi)
        s = tl.where(inside, s, float("-inf"))
    else:
        inside = tl.full(s.shape, 1, tl.int1)
    return s, inside


@triton.jit
def _family_columns(seed, rows, rmask, row0, g0, hi, top, FAM: tl.constexpr, p0, p1, BN: tl.constexpr,
                    FAST: tl.constexpr, MASK: tl.constexpr = True):
    """The four columns ``v`` ``(BM, 1, L)`` of the tile of columns ``4 (g0 + l) + v`` (groups ``g0 + l``; the
    layout of :mod:`.tiles`) and their ``inside`` masks.  Each thread runs the Philox blocks of its group once.
    With ``MASK`` the entries outside the rows or at columns ``>= hi`` are ``-inf``; without it the tile is a
    full one (``4 g0 + BN <= hi``) and every entry is kept, those of rows ``>= R`` too, whose results the passes
    never store (``inside`` is then a constant true)."""
    lanes = tl.arange(0, BN // _V)[None, None, :]  # (1, 1, L)
    g = g0 + lanes + 0 * rows[:, None, None]  # (BM, 1, L) group index
    rr = (rows + row0)[:, None, None] + 0 * lanes  # (BM, 1, L)
    s0, s1, s2, s3 = _family_group(seed, g, rr, FAM, p0, p1, FAST)
    cols = 4 * (g0 + lanes)  # (1, 1, L): column v = 0
    s0, i0 = _family_column(s0, cols, rmask, hi, top, FAM, MASK)
    s1, i1 = _family_column(s1, cols + 1, rmask, hi, top, FAM, MASK)
    s2, i2 = _family_column(s2, cols + 2, rmask, hi, top, FAM, MASK)
    s3, i3 = _family_column(s3, cols + 3, rmask, hi, top, FAM, MASK)
    return s0, s1, s2, s3, i0, i1, i2, i3


@triton.jit
def _family_tile(seed, rows, rmask, row0, g0, hi, top, FAM: tl.constexpr, p0, p1, BN: tl.constexpr,
                 FAST: tl.constexpr, MASK: tl.constexpr = True):
    """The ``(BM, V, L)`` tile of :func:`_family_columns` and its ``inside`` mask, the columns joined in the thread."""
    s0, s1, s2, s3, i0, i1, i2, i3 = _family_columns(seed, rows, rmask, row0, g0, hi, top, FAM, p0, p1, BN, FAST,
                                                     MASK)
    return _stack4(s0, s1, s2, s3), _stack4(i0, i1, i2, i3)


@triton.jit
def _stack4(s0, s1, s2, s3):
    """The tile ``(BM, 4, L)`` whose column ``v`` is ``s_v`` ``(BM, 1, L)``: joined in the thread, the inverse of
    the column split of :func:`critscale.kernels.counting.halves` (so the compiler keeps the generator's layout)."""
    j = tl.join(tl.join(s0, s2), tl.join(s1, s3))  # (BM, 1, L, 2, 2): [.., p, q] = s_{2 p + q}
    y = tl.reshape(j, [s0.shape[0], s0.shape[2], 4])  # (BM, L, V)
    return tl.permute(y, (0, 2, 1))


@triton.jit
def _fold_columns(seed, rows, rmask, row0, g0, hi, top_score, top1, top2, low, count, bad, FAM: tl.constexpr, p0,
                  p1, BN: tl.constexpr, FAST: tl.constexpr, MASK: tl.constexpr, FINITE: tl.constexpr):
    """Pass 1 on one tile, folded one column ``(BM, 1, L)`` at a time in the generator's own layout (a tile
    ``(BM, V, L)`` built from the columns gets another layout from the compiler, and with it the generator
    computed twice)."""
    s0, s1, s2, s3, i0, i1, i2, i3 = _family_columns(seed, rows, rmask, row0, g0, hi, top_score, FAM, p0, p1, BN,
                                                     FAST, MASK)
    top1, top2, low, count, bad = fold_pass1(s0, i0, top1, top2, low, count, bad, True, True, FINITE)
    top1, top2, low, count, bad = fold_pass1(s1, i1, top1, top2, low, count, bad, True, True, FINITE)
    top1, top2, low, count, bad = fold_pass1(s2, i2, top1, top2, low, count, bad, True, True, FINITE)
    return fold_pass1(s3, i3, top1, top2, low, count, bad, True, True, FINITE)


@triton.jit(do_not_specialize=["seed", "row0", "R", "n"])
def _sample_kernel(out_ptr, seed, p0, p1, top, R, n, row0, BM: tl.constexpr, BN: tl.constexpr,
                   FAM: tl.constexpr, FAST: tl.constexpr):
    """Write the generated scores of a ``(R, n)`` block (testing and the CPU equality check)."""
    c = tl.program_id(0) * BN  # column tiles on axis 0: up to 2^31 - 1 of them (axis 1 stops at 65535)
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    s, inside = _family_tile(seed, rows, rows < R, row0, c // 4, n, top, FAM, p0, p1, BN, FAST)  # (BM, V, L)
    cols = c + tl.arange(0, _V)[None, :, None] + 4 * tl.arange(0, BN // _V)[None, None, :]
    tl.store(out_ptr + rows.to(tl.int64)[:, None, None] * n + cols, s, mask=inside)


@triton.jit(do_not_specialize=["seed", "row0", "R", "n", "tiles", "SPLIT"])
def _sampled_pass1(seed, p0, p1, top_score, row0, R, n, tiles, SPLIT, o_top1, o_top2, o_low, o_count, o_bad,
                   BM: tl.constexpr, BN: tl.constexpr, FAM: tl.constexpr, FAST: tl.constexpr):
    FINITE: tl.constexpr = (FINITE_CODES >> FAM) & 1 == 1
    _batch, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    top1, top2, low, count, bad = init_pass1(BM, BN // _V)
    full = lo + (hi - lo) // BN * BN  # the full tiles, without masks; then at most one partial tile
    for g0 in range(lo // 4, full // 4, BN // 4):  # the loop runs over groups of four columns
        top1, top2, low, nvalid, bad = _fold_columns(seed, rows, rmask, row0, g0, hi, top_score, top1, top2, low,
                                                     count, bad, FAM, p0, p1, BN, FAST, False, FINITE)
        if not FINITE:
            count = nvalid
    if FINITE:  # every entry of a full tile is valid: V per lane and tile
        count += (full - lo) // BN * _V
    if full < hi:
        top1, top2, low, count, bad = _fold_columns(seed, rows, rmask, row0, full // 4, hi, top_score, top1, top2, low,
                                                    count, bad, FAM, p0, p1, BN, FAST, True, FINITE)
    store_pass1(grow * SPLIT + pid_c, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad)


@triton.jit
def _fold_pair(seed, rows, rmask, row0, g0, hi, top_score, p0, p1, top, snap, m0, acc_a, acc_b, low, tab_ptr,
               BN: tl.constexpr, ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr, NS: tl.constexpr,
               BNEED: tl.constexpr, NT: tl.constexpr, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr,
               FAM: tl.constexpr, FAST: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr, MASK: tl.constexpr,
               FINITE: tl.constexpr):
    """Pass 2 on the two tiles at groups ``g0`` and ``g0 + BN / 4`` (full ones without ``MASK``), their count words
    paired in the block counter ``low``; ``FINITE``: the family makes finite scores only."""
    GAPS_FINITE: tl.constexpr = FINITE and not MASK
    s0, _inside = _family_tile(seed, rows, rmask, row0, g0, hi, top_score, FAM, p0, p1, BN, FAST, MASK)  # (BM, V, L)
    m0, acc_a, acc_b, low = fold_pass2(s0, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2, NR, LVR, NS, BNEED, NT,
                                       SHIFT, BLO, NBK, NLOW, M0, SNAP0, True, 0, GAPS_FINITE)
    s1, _inside = _family_tile(seed, rows, rmask, row0, g0 + BN // 4, hi, top_score, FAM, p0, p1, BN, FAST, MASK)
    return fold_pass2(s1, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO, NBK,
                      NLOW, M0, SNAP0, True, 1, GAPS_FINITE)


@triton.jit(do_not_specialize=["seed", "row0", "R", "n", "tiles", "SPLIT"])
def _sampled_pass2(seed, p0, p1, top_score, row0, R, n, tiles, SPLIT, top_ptr, snap_ptr, tab_ptr, o_m0, o_a, o_b, o_n,
                   BM: tl.constexpr, BN: tl.constexpr, ROOTS2: tl.constexpr, NR: tl.constexpr, LVR: tl.constexpr,
                   NS: tl.constexpr, BNEED: tl.constexpr, NT: tl.constexpr, NTP: tl.constexpr, SHIFT: tl.constexpr,
                   BLO: tl.constexpr, NBK: tl.constexpr, NPL: tl.constexpr, NPLP: tl.constexpr, FAM: tl.constexpr,
                   FAST: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr):
    FINITE: tl.constexpr = (FINITE_CODES >> FAM) & 1 == 1
    _batch, pid_c, rows, rmask, grow, lo, hi = pass_prologue(R, n, tiles, SPLIT, BM, BN)
    top, snap, m0, acc_a, acc_b, acc_n = init_pass2(top_ptr, snap_ptr, grow, rmask, BM, BN // _V, NS, NTP, NPLP)
    if BM == 1:  # top and snap as scalars: one load each, whichever layouts the compiler gives the tile's uses
        row, inside = _batch * R + tl.program_id(1), tl.program_id(1) < R
        top = tl.broadcast_to(tl.load(top_ptr + row, mask=inside, other=0.0), [BM])
        snap = tl.broadcast_to(tl.load(snap_ptr + row, mask=inside, other=0.0), [BM])
    KB: tl.constexpr = BLOCK_WORDS // _V // 2 * 2  # tiles per block (pairs) of the block counter (kernels.counting)
    full = lo + (hi - lo) // (2 * BN) * (2 * BN)  # pairs of full tiles, without masks; then one masked pair
    GB: tl.constexpr = BN // 4  # groups of four columns per tile: the loops run over groups
    for b0 in range(lo // 4, full // 4, GB * KB):
        low = block_counter(acc_n, NLOW)
        for g0 in range(b0, tl.minimum(b0 + GB * KB, full // 4), 2 * GB):  # two tiles share the count's climb
            m0, acc_a, acc_b, low = _fold_pair(seed, rows, rmask, row0, g0, hi, top_score, p0, p1, top, snap, m0, acc_a,
                                               acc_b, low, tab_ptr, BN, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO,
                                               NBK, FAM, FAST, M0, SNAP0, False, FINITE)
        acc_n = flush_low(acc_n, low, NPL, NLOW)
    if full < hi:
        low = block_counter(acc_n, NLOW)
        m0, acc_a, acc_b, low = _fold_pair(seed, rows, rmask, row0, full // 4, hi, top_score, p0, p1, top, snap, m0,
                                           acc_a, acc_b, low, tab_ptr, BN, ROOTS2, NR, LVR, NS, BNEED, NT, SHIFT, BLO,
                                           NBK, FAM, FAST, M0, SNAP0, True, FINITE)
        acc_n = flush_low(acc_n, low, NPL, NLOW)
    store_pass2(grow * SPLIT + pid_c, rmask, m0, acc_a, acc_b, acc_n, o_m0, o_a, o_b, o_n, NS, NTP, NPL, NPLP)


# ----------------------------------------------------------------------------------------------
# Launchers and entry points
# ----------------------------------------------------------------------------------------------


# (BM, BN, roots per chunk, thresholds per chunk, num_warps), as for kind scores: BN = 4 x 32 x num_warps
# columns, each thread makes the 4 columns of one group of each of the BM rows per tile, and every beta and
# threshold of the chunk (one chunk for 8 ladder roots and 64 thresholds) uses that one generation.
GPU_BLOCK = (1, 512, 8, 64, 4)
GPU_BLOCK_ALTERNATIVES = ((1, 512, 8, 32, 4), (1, 256, 8, 64, 2))
INTERPRETER_BLOCK = (16, 64, 8, 64, 4)

# A maximum regenerated with another rounding (two compilations of the same generator) counts as the
# maximum within 4 ulps of |top| (4 * 2^-23 relative).
SNAP_RELATIVE = 4.76837158203125e-07


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


def _check_size(rows: Any, n: Any, seed: Any, row0: Any) -> None:
    def is_int(v):
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))

    if not (is_int(n) and 1 <= n < 2 ** 31):
        raise ValueError(f"n must be an integer in [1, 2^31), got {n!r}")
    if not (is_int(row0) and row0 >= 0):
        raise ValueError(f"row0 must be an integer >= 0, got {row0!r}")
    if not (is_int(rows) and rows >= 1 and row0 + rows <= 2 ** 31):
        raise ValueError(f"rows must be an integer >= 1 with row0 + rows <= 2^31, got rows={rows!r}, row0={row0!r}")
    if not (is_int(seed) and 0 <= seed < 2 ** 63):
        raise ValueError(f"seed must be an integer in [0, 2^63), got {seed!r}")


def sample_scores(family: Any, n: int, rows: int, *, seed: int = 0, row0: int = 0,
                  backend: str = "auto") -> tuple[np.ndarray | torch.Tensor, str]:
    """The ``(rows, n)`` fp32 scores the kernels generate, and the backend that made them.

    These are the family's scores minus ``family_code(family, n).shift`` (1 for the reflected families unif,
    sphere3 and sphere5, 0 otherwise); the statistics depend on gaps only, and ``RowStats.top`` adds it back.
    """
    _check_size(rows, n, seed, row0)
    fc = family_code(family, n)
    which = pick_backend(backend, rows * n)
    if which == "reference":
        return sample_scores_numpy(fc, seed, rows, n, row0), which
    dev = torch.device("cuda") if which == "triton-cuda" else torch.device("cpu")
    out = torch.empty(rows, n, dtype=torch.float32, device=dev)
    BM, BN = 16, 64
    grid = (triton.cdiv(n, BN), triton.cdiv(rows, BM))
    if grid[1] > 65535:
        raise ValueError(f"rows must be at most {65535 * BM} per call, got {rows}")
    _sample_kernel[grid](out, int(seed), float(fc.p0), float(fc.p1), float(fc.top), rows, n, int(row0),
                         BM=BM, BN=BN, FAM=fc.code, FAST=which == "triton-cuda")
    return out, which


def sampled_row_stats(family: Any, n: int, rows: int, beta: Any, t: Any, *, seed: int = 0, row0: int = 0,
                      K: int = 2, backend: str = "auto", split: int | None = None,
                      block: tuple[int, int, int, int, int] | None = None) -> RowStats:
    """Row statistics of ``rows`` generated rows of length ``n`` of a family (theory.md §3.1, §5).

    Row ``r`` is the same whatever ``rows``, ``row0`` (global row ``row0 + r``), blocks and backend.
    Dispatch as :func:`critscale.kernels.scores_row_stats`; the reference backend materialises the scores with
    :func:`sample_scores_numpy` (in row blocks) and runs the critscale float64 reference on them.
    ``notes["generator"]`` records :data:`GENERATOR_VERSION`.
    """
    _check_size(rows, n, seed, row0)
    K = check_K(K)
    fc = family_code(family, n)
    beta_g = beta_grid(beta)
    t_g = threshold_grid(t)
    which = pick_backend(backend, rows * n)
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
        out.notes.update(kind="sampled")
    else:
        interpret = which == "triton-interpreter"
        dev = torch.device("cuda") if not interpret else torch.device("cpu")
        blk = check_block(block or (INTERPRETER_BLOCK if interpret else GPU_BLOCK))
        launch = Launch(kind="sampled", pass1=_sampled_pass1, pass2=_sampled_pass2,
                        args=(int(seed), float(fc.p0), float(fc.p1), float(fc.top), int(row0)), R=rows, n=n, batch=1,
                        lanes=blk[1] // LANE_VEC, device=dev, snap_relative=SNAP_RELATIVE,
                        what=f"generated {fc.name} scores", bad_meaning="NaN or infinities",
                        constexprs=dict(FAM=fc.code, FAST=not interpret))
        out = run_two_pass(launch, beta_g, t_g, K, which, blk, split)
    out.top = out.top + fc.shift  # float64: the family's own top score
    out.notes.update(family=fc.name, seed=seed, generator=GENERATOR_VERSION)
    return out
