"""Gap counts ``N(t_j) = #{i : Delta_i <= t_j}`` at a cost per score that does not depend on each threshold.

Comparing every gap with every threshold costs a compare and an add per score and threshold.  Here each
score costs one rank, found in a bucket table, and a few bitwise operations on one machine word that holds
all the chunk's thresholds at once (up to 64: one bit each).

**Bits are order.**  For float32 values ``x, y >= +0`` (``+inf`` included) the bit patterns, read as
unsigned integers, are ordered as the values: ``x <= y`` iff ``bits(x) <= bits(y)``.  Gaps are ``+0`` or
positive (a maximum within ``snap`` counts as gap ``+0``; a masked entry has gap ``+inf``), and the
thresholds are float32 values ``>= +0`` (``-0`` is turned into ``+0``, ``+inf`` into float32's largest
value), so every comparison below is an exact integer comparison of ``u = bits(Delta)`` with
``T_j = bits(t_j)``.

**Rank.**  With the chunk's distinct thresholds ``T_0 < ... < T_{m-1}``, ``rank(u) = #{j : T_j < u}``
satisfies ``rank(u) <= j  iff  u <= T_j`` (if ``u <= T_j`` no ``T_i`` with ``i >= j`` is below ``u``; if
``u > T_j`` all of ``T_0 .. T_j`` are).  So bit ``j`` of the *thermometer word* ``~0 << rank(u)`` (bits
``j >= rank`` set) is exactly ``[Delta <= t_j]``, and the count ``N(t_j)`` is the number of scores whose word
has bit ``j`` set.

**Bucket table (exact rank in O(1)).**  The host picks a shift ``S`` such that the buckets ``T_j >> S`` of
the thresholds are distinct, and clamps a score's bucket ``u >> S`` to ``[b_lo, b_hi]`` with
``b_lo = (T_1 >> S) - 1`` and ``b_hi = max((T_{m-2} >> S) + 1, b_lo + 1)``.  Each clamped bucket is then a
range of ``u`` that holds at most one threshold (the lowest range holds only ``T_0``, the highest only
``T_{m-1}``; the host checks this for every entry).  For the range ``[lo, hi)`` of bucket ``k`` the table
holds ``base_k = #{j : T_j < lo}`` and ``inner_k``, the threshold inside it (or ``2^32 - 1``, which no ``u``
exceeds).  For ``u`` in that range ``rank(u) = base_k + [u > inner_k]``: the thresholds below ``lo`` are
below ``u``, those at or above ``hi`` are above it, and the one inside is below ``u`` iff ``u > inner_k``.
No step rounds, so the counts are exact for every gap, at the thresholds as well as between them.  A group of
thresholds whose table would exceed :data:`TABLE_MAX` buckets (thresholds very close together over a wide
range) is split into several groups, each a pass-2 chunk of its own.

**Counting words (bit-sliced counters).**  A lane adds the words of its scores bit position by bit
position: its count of position ``j`` is kept in binary across ``P`` words ("planes"), bit ``p`` of the count
in bit ``j`` of plane ``p``.  The ``V`` words of one tile are first added to each other with full adders on
whole words (:func:`add_sliced`), then into the planes (:func:`ripple`).  Per score this is a fixed number of
bitwise instructions on one or two 32-bit registers (the word is 32 or 64 bits), whatever the number of
thresholds up to 64.  ``P`` is the bit length of the most scores one lane counts, so no carry leaves the
last plane; the epilogue (:func:`plane_counts`) turns the planes into integer counts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import triton
import triton.language as tl

__all__ = ["CountTable", "TABLE_MAX", "ThresholdGroup", "count_table", "planes_for", "threshold_bits",
           "threshold_groups"]

TABLE_MAX = 4096  # buckets of one chunk's table (int32 pairs: 32 KiB, read through the L1 cache)
_NONE = (1 << 32) - 1  # "no threshold in this bucket": no uint32 exceeds it


@dataclass(frozen=True)
class CountTable:
    """The bucket table of one chunk: shift ``S``, lowest bucket ``b_lo``, ``nbk`` buckets and ``entries``
    (``nbk`` bases, then ``nbk`` inner thresholds as int32 bit patterns)."""

    shift: int
    blo: int
    nbk: int
    entries: tuple[int, ...]


@dataclass(frozen=True)
class ThresholdGroup:
    """Consecutive thresholds counted in one pass-2 chunk: their distinct float32 values and table."""

    first: int
    index: tuple[int, ...]  # for each threshold of the group: its position in ``values``
    values: tuple[float, ...]
    table: CountTable


def threshold_bits(t) -> np.ndarray:
    """The float32 thresholds the kernels compare with, as uint32 bit patterns (``-0 -> +0``, ``+inf`` and
    values above float32's range -> its largest value)."""
    big = np.finfo(np.float32).max
    x = np.minimum(np.asarray(t, dtype=np.float64), float(big)).astype(np.float32) + np.float32(0.0)
    return x.view(np.uint32).astype(np.int64)


def count_table(bits: list[int]) -> CountTable | None:
    """The table of the distinct ascending bit patterns ``bits`` (module docstring), or ``None`` when it
    would need more than :data:`TABLE_MAX` buckets."""
    m = len(bits)
    for shift in range(31, 0, -1):
        b = [x >> shift for x in bits]
        if any(b[i] == b[i + 1] for i in range(m - 1)):
            continue
        blo = b[0] if m == 1 else b[1] - 1
        bhi = b[0] if m == 1 else max(b[m - 2] + 1, blo + 1)
        nbk = 1 << (bhi - blo).bit_length()  # a power of two (a tensor shape); the buckets above b_hi hold none
        if nbk > TABLE_MAX:
            return None
        base, inner = [], []
        for k in range(nbk):
            lo = 0 if k == 0 else (blo + k) << shift
            hi = 1 << 32 if k == nbk - 1 else (blo + k + 1) << shift
            i0, i1 = bisect.bisect_left(bits, lo), bisect.bisect_left(bits, hi)
            if i1 - i0 > 1:
                raise AssertionError(f"bucket {k} holds {i1 - i0} thresholds")  # excluded by the choice of b_lo, b_hi
            base.append(i0)
            inner.append(bits[i0] if i1 > i0 else _NONE)
        signed = [v - (1 << 32) if v >= 1 << 31 else v for v in inner]
        return CountTable(shift=shift, blo=blo, nbk=nbk, entries=tuple(base + signed))
    return None  # distinct patterns that differ only in their last bit, with others far away


def threshold_groups(t: tuple[float, ...], per_group: int) -> tuple[ThresholdGroup, ...]:
    """Split the sorted thresholds ``t`` into consecutive groups of at most ``per_group`` distinct float32
    values, each with a table of at most :data:`TABLE_MAX` buckets (greedy, in order)."""
    bits = [int(v) for v in threshold_bits(t)] if len(t) else []
    groups, start = [], 0
    while start < len(bits):
        end, best = start + 1, None
        while end <= len(bits):
            distinct = sorted(set(bits[start:end]))
            if len(distinct) > per_group:
                break
            table = count_table(distinct)
            if table is None:
                break
            best = (end, distinct, table)
            end += 1
        stop, distinct, table = best
        values = tuple(float(np.uint32(v).view(np.float32)) for v in distinct)
        groups.append(ThresholdGroup(first=start, index=tuple(distinct.index(v) for v in bits[start:stop]),
                                     values=values, table=table))
        start = stop
    return tuple(groups)


def planes_for(max_per_lane: int) -> int:
    """Planes of a lane that counts at most ``max_per_lane`` scores: the bit length of that number."""
    return max(1, int(max_per_lane).bit_length())


# ----------------------------------------------------------------------------------------------
# Kernel side
# ----------------------------------------------------------------------------------------------


@triton.jit
def add_sliced(a0, a1, a2, a3, b0, b1, b2, b3):
    """Sum of two bit-sliced 4-bit numbers (per bit position of the words): full adders on whole words."""
    s0 = a0 ^ b0
    k = a0 & b0
    s1 = a1 ^ b1 ^ k
    k = (a1 & b1) | (k & (a1 ^ b1))
    s2 = a2 ^ b2 ^ k
    k = (a2 & b2) | (k & (a2 ^ b2))
    s3 = a3 ^ b3 ^ k
    return s0, s1, s2, s3


@triton.jit
def thermometer_words(dcount, tab_ptr, word_like, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr,
                      NT: tl.constexpr, WBITS: tl.constexpr):
    """For gaps ``dcount`` (``>= +0``): the words ``~0 << rank`` (bit ``j`` = ``[Delta <= t_j]``), dtype of
    ``word_like``; the rank comes from the bucket table at ``tab_ptr``."""
    u = dcount.to(tl.uint32, bitcast=True)
    tab_base = tl.load(tab_ptr + tl.arange(0, NBK))
    tab_inner = tl.load(tab_ptr + NBK + tl.arange(0, NBK))
    bk = tl.minimum(tl.maximum((u >> SHIFT).to(tl.int32), BLO), BLO + NBK - 1) - BLO
    # a gather from the table held on chip (loaded once per program): no global load in the loop, which the
    # software pipeliner of the qk kind's loop could not schedule around its tensor-core product
    flat = tl.reshape(bk, [bk.numel])
    base = tl.reshape(tl.gather(tab_base, flat, 0), bk.shape)
    inner = tl.reshape(tl.gather(tab_inner, flat, 0), bk.shape).to(tl.uint32, bitcast=True)
    rank = base + (u > inner).to(tl.int32)
    ones = tl.full(dcount.shape, (1 << WBITS) - 1, word_like.dtype)
    if NT >= WBITS:  # rank can be WBITS: a shift by the word's width is not defined
        return tl.where(rank >= WBITS, tl.zeros_like(ones), ones << tl.minimum(rank, WBITS - 1).to(word_like.dtype))
    else:
        return ones << rank.to(word_like.dtype)


@triton.jit
def ripple(planes, c0, c1, c2, c3, NPL: tl.constexpr, NPLP: tl.constexpr):
    """Add the bit-sliced numbers ``(c0, c1, c2, c3)`` ``(BM, L)`` into the lane's ``NPL`` planes
    ``(BM, NPLP, L)`` (bit ``p`` of each count in plane ``p``)."""
    pidx = tl.arange(0, NPLP)[None, :, None]
    carry = tl.zeros_like(c0)
    for p in tl.static_range(NPL):
        a = tl.sum(tl.where(pidx == p, planes, 0), axis=1)
        if p == 0:
            x = c0
        elif p == 1:
            x = c1
        elif p == 2:
            x = c2
        elif p == 3:
            x = c3
        else:
            x = tl.zeros_like(c0)
        s = a ^ x ^ carry
        carry = (a & x) | (carry & (a ^ x))
        planes = tl.where(pidx == p, s[:, None, :], planes)
    return planes


@triton.jit
def count_words(words, planes, NPL: tl.constexpr, NPLP: tl.constexpr):
    """Add the words ``(BM, V, L)`` (``V <= 15``) of one tile into the planes ``(BM, NPLP, L)``."""
    z = tl.zeros_like(words)
    c0, c1, c2, c3 = tl.reduce((words, z, z, z), 1, add_sliced)
    return ripple(planes, c0, c1, c2, c3, NPL, NPLP)


@triton.jit
def plane_counts(planes, NPL: tl.constexpr, NPLP: tl.constexpr, NTP: tl.constexpr):
    """Counts ``(BM, NTP)`` int32 of bit positions ``0 .. NTP-1``, summed over the lanes of the planes."""
    pidx = tl.arange(0, NPLP)[None, :, None]
    jidx = tl.arange(0, NTP)[None, :, None]
    acc = tl.zeros([planes.shape[0], NTP, planes.shape[2]], tl.int32)
    for p in tl.static_range(NPL):
        a = tl.sum(tl.where(pidx == p, planes, 0), axis=1)  # (BM, L)
        bit = ((a[:, None, :] >> jidx.to(planes.dtype)) & 1).to(tl.int32)  # (BM, NTP, L)
        acc += bit << p
    return tl.sum(acc, axis=2)
