"""Gap counts ``N(t_j) = #{i : Delta_i <= t_j}`` at a cost per score that does not depend on each threshold.

Comparing every gap with every threshold costs a compare and an add per score and threshold.  Here each
score costs one lookup in a word table (a shift, a clamp, a float compare and a select per 32 bits) and a
few bitwise operations on one machine word that holds all the chunk's thresholds at once (up to 64: one bit
each), added into bit-sliced counters with carry-save adders.

**Bits are order.**  For float32 values ``x, y >= +0`` (``+inf`` included) the bit patterns, read as
unsigned integers, are ordered as the values: ``x <= y`` iff ``bits(x) <= bits(y)``.  Gaps are ``+0`` or
positive (a maximum within ``snap`` counts as gap ``+0``; a masked entry has gap ``+inf``), and the
thresholds are float32 values ``>= +0`` (``-0`` is turned into ``+0``, ``+inf`` into float32's largest
value), so every comparison below is an exact integer comparison of ``u = bits(Delta)`` with
``T_j = bits(t_j)``, or, the same thing, an exact float32 comparison of ``Delta`` with ``t_j``.

**Rank.**  With the chunk's distinct thresholds ``T_0 < ... < T_{m-1}``, ``rank(u) = #{j : T_j < u}``
satisfies ``rank(u) <= j  iff  u <= T_j`` (if ``u <= T_j`` no ``T_i`` with ``i >= j`` is below ``u``; if
``u > T_j`` all of ``T_0 .. T_j`` are).  So bit ``j`` of the *thermometer word* ``~0 << rank(u)`` (bits
``j >= rank`` set) is exactly ``[Delta <= t_j]``, and the count ``N(t_j)`` is the number of scores whose word
has bit ``j`` set.

**Word table (exact word in O(1)).**  The host picks a shift ``S`` such that the buckets ``T_j >> S`` of
the thresholds are distinct, and clamps a score's bucket ``u >> S`` to ``[b_lo, b_hi]`` with
``b_hi = max((T_{m-2} >> S) + 1, b_lo + 1)`` and ``b_lo = (T_1 >> S) - 1``, or ``b_lo = 0`` when a table
from bucket 0 fits in :data:`TABLE_MAX` buckets (the kernel's lower clamp then disappears).  When the buckets
of all ``u < 2^31`` (every gap ``>= +0``, and NaN) fit in :data:`COVER_MAX`, a table from bucket 0 that is not held
on chip holds them all, and the kernel masks the bucket, ``(u >> S) & (nbk - 1)``, instead of clamping it: for
those ``u`` both are ``u >> S``, and the mask keeps any other bit pattern (a negative gap, only in a row that
pass 1 flags bad) inside the table.  Each bucket of the table is then a range of ``u`` that holds at most one
threshold (the lowest range holds only ``T_0``, the highest only ``T_{m-1}``; the host checks this for every
entry).  For the range ``[lo, hi)`` of bucket ``k`` with ``base_k = #{j : T_j < lo}`` the table holds the word
``~0 << base_k`` and, next to it (one 16-byte entry), the word ``~0 << (base_k + 1)`` (or ``~0 << base_k`` again
when the range holds no threshold), and ``inner_k``, the threshold inside it (or ``+inf``, which no gap
exceeds).  For ``u`` in that range ``rank(u) = base_k + [Delta > inner_k]``: the
thresholds below ``lo`` are below ``u``, those at or above ``hi`` are above it, and the one inside is below
``u`` iff ``Delta > inner_k``; so the word is the second word where ``Delta > inner_k`` and the first
otherwise.  No step rounds, so the counts are exact for every gap, at the thresholds as well as between them.
A group of thresholds whose table would exceed :data:`TABLE_MAX` buckets (thresholds very close together over
a wide range) is split into several groups, each a pass-2 chunk of its own.

**Counting words (bit-sliced counters).**  A lane adds the words of its scores bit position by bit
position: its count of position ``j`` is kept in binary across ``P`` words ("planes"), bit ``p`` of the count
in bit ``j`` of plane ``p``.  The column loop runs in blocks: inside a block the words go into a block
counter of ``NLOW`` planes (:func:`count_words`: the ``V`` words of a tile with ``V - 1`` carry-save adders,
Harley-Seal, and one carry word up the remaining low planes, or parked until the next tiles' carries join it,
so that two or four tiles share one climb), and after the block, whose at most
``2^NLOW - 1`` words keep every low count below ``2^NLOW``, the block counter is added into the planes
(:func:`flush_low`).  Per score this is a fixed number of bitwise instructions on one or two 32-bit
registers (the word is 32 or 64 bits), whatever the number of thresholds up to 64.  ``P`` is the bit length
of the most scores one lane counts, so no carry leaves the last plane; the epilogue (:func:`plane_counts`)
turns the planes into integer counts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import triton
import triton.language as tl

__all__ = ["CountTable", "TABLE_MAX", "ThresholdGroup", "count_table", "planes_for", "threshold_bits",
           "threshold_groups"]

TABLE_MAX = 4096  # buckets of one chunk's table (32 bytes each: 128 KiB, read through the L1 cache)
COVER_MAX = 2048  # a table from bucket 0 is grown to every bucket below 2^31 when that takes at most this many
_NONE = 0x7F800000  # "no threshold in this bucket": +inf, which no gap (>= +0, not NaN) exceeds


@dataclass(frozen=True)
class CountTable:
    """The word table of one chunk: shift ``S``, lowest bucket ``b_lo``, ``nbk`` buckets and ``entries``, ``4 nbk``
    int64 values: first, for each bucket ``k``, the pair of its thermometer word ``~0 << base_k`` (bits ``0 .. 63``;
    ``0`` for ``base_k = 64``) and the word ``~0 << (base_k + 1)`` of the gaps above its inner threshold (the same
    word when it holds none), at ``2 k`` and ``2 k + 1``; then, at ``2 nbk + 2 k``, that threshold as float32 bits
    (``+inf`` when it holds none, which no gap exceeds), each followed by a ``0``, so that a bucket's three
    entries are at one offset from ``2 k``."""

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


def _signed64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def thermometer(rank: int) -> int:
    """The 64-bit word with bits ``rank .. 63`` set (``[Delta <= t_j]`` for a gap of that rank), as an int."""
    return ((1 << 64) - 1) & ~((1 << rank) - 1) if rank < 64 else 0


def count_table(bits: list[int], compact: bool = False) -> CountTable | None:
    """The table of the distinct ascending bit patterns ``bits`` (module docstring), or ``None`` when it
    would need more than :data:`TABLE_MAX` buckets.  It starts at bucket 0 (no lower clamp in the kernel)
    when that fits, unless ``compact`` (a table held on chip, :func:`thermometer_words` with ``GATHER``)."""
    m = len(bits)
    for shift in range(31, 0, -1):
        b = [x >> shift for x in bits]
        if any(b[i] == b[i + 1] for i in range(m - 1)):
            continue
        blo = b[0] if m == 1 else b[1] - 1
        bhi = b[0] if m == 1 else max(b[m - 2] + 1, blo + 1)
        if not compact and 1 << bhi.bit_length() <= TABLE_MAX:
            blo = 0  # the table starts at bucket 0: no lower clamp in the kernel
        nbk = 1 << (bhi - blo).bit_length()  # a power of two (a tensor shape); the buckets above b_hi hold none
        if not compact and blo == 0 and (1 << 31) >> shift <= COVER_MAX:
            nbk = max(nbk, (1 << 31) >> shift)  # every gap's bucket is in the table: the kernel masks, not clamps
        if nbk > TABLE_MAX:
            return None
        words, above, inner = [], [], []
        for k in range(nbk):
            lo = 0 if k == 0 else (blo + k) << shift
            hi = 1 << 32 if k == nbk - 1 else (blo + k + 1) << shift
            i0, i1 = bisect.bisect_left(bits, lo), bisect.bisect_left(bits, hi)
            if i1 - i0 > 1:
                raise AssertionError(f"bucket {k} holds {i1 - i0} thresholds")  # excluded by the choice of b_lo, b_hi
            words.append(_signed64(thermometer(i0)))
            above.append(_signed64(thermometer(i1)))
            inner.append(bits[i0] if i1 > i0 else _NONE)
        pairs = [w for k in range(nbk) for w in (words[k], above[k])]
        return CountTable(shift=shift, blo=blo, nbk=nbk, entries=tuple(pairs + [w for x in inner for w in (x, 0)]))
    return None  # distinct patterns that differ only in their last bit, with others far away


def threshold_groups(t: tuple[float, ...], per_group: int, compact: bool = False) -> tuple[ThresholdGroup, ...]:
    """Split the sorted thresholds ``t`` into consecutive groups of at most ``per_group`` distinct float32
    values, each with a table of at most :data:`TABLE_MAX` buckets (greedy, in order; ``compact`` tables
    as :func:`count_table`)."""
    bits = [int(v) for v in threshold_bits(t)] if len(t) else []
    groups, start = [], 0
    while start < len(bits):
        end, best = start + 1, None
        while end <= len(bits):
            distinct = sorted(set(bits[start:end]))
            if len(distinct) > per_group:
                break
            table = count_table(distinct, compact)
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
def halves(x):
    """The columns of ``x`` ``(BM, V, L)`` in two halves ``(BM, V / 2, L)`` (even and odd ``v``; in-thread)."""
    y = tl.reshape(tl.permute(x, (0, 2, 1)), [x.shape[0], x.shape[2], x.shape[1] // 2, 2])
    a, b = tl.split(y)
    return tl.permute(a, (0, 2, 1)), tl.permute(b, (0, 2, 1))


@triton.jit
def csa(a, b, c):
    """Carry-save adder on whole words: per bit position ``a + b + c = s + 2 k`` (one ``LOP3`` each)."""
    return a ^ b ^ c, (a & b) | (c & (a ^ b))


@triton.jit
def plane_get(planes, p: tl.constexpr):
    """Plane ``p`` ``(BM, L)`` of ``planes`` ``(BM, NP, L)`` (a select the compiler folds away)."""
    pidx = tl.arange(0, planes.shape[1])[None, :, None]
    return tl.sum(tl.where(pidx == p, planes, 0), axis=1)


@triton.jit
def plane_set(planes, p: tl.constexpr, x):
    """``planes`` with plane ``p`` replaced by ``x`` ``(BM, L)``."""
    pidx = tl.arange(0, planes.shape[1])[None, :, None]
    return tl.where(pidx == p, x[:, None, :], planes)


@triton.jit
def _tree(words, low, V: tl.constexpr, P: tl.constexpr):
    """Add the ``V`` (a power of two) words ``(BM, V, L)`` into low planes ``0 .. P`` (``P = log2 V - 1``), kept
    as the low bits of the count; returns the planes and the carry word of weight ``V`` (``V - 1`` adders)."""
    if V == 1:
        return low, tl.reshape(words, [words.shape[0], words.shape[2]])
    else:
        x0, x1 = halves(words)
        low, c0 = _tree(x0, low, V // 2, P - 1)
        low, c1 = _tree(x1, low, V // 2, P - 1)
        sp, carry = csa(plane_get(low, P), c0, c1)
        return plane_set(low, P, sp), carry


@triton.jit
def add_sliced(a0, a1, a2, a3, a4, b0, b1, b2, b3, b4):
    """Sum of two bit-sliced 5-bit numbers (per bit position of the words): full adders on whole words."""
    s0 = a0 ^ b0
    k = a0 & b0
    s1 = a1 ^ b1 ^ k
    k = (a1 & b1) | (k & (a1 ^ b1))
    s2 = a2 ^ b2 ^ k
    k = (a2 & b2) | (k & (a2 ^ b2))
    s3 = a3 ^ b3 ^ k
    k = (a3 & b3) | (k & (a3 ^ b3))
    s4 = a4 ^ b4 ^ k
    return s0, s1, s2, s3, s4


@triton.jit
def count_words(words, low, NLOW: tl.constexpr, COLS: tl.constexpr = True, PHASE: tl.constexpr = -1):
    """Add the words ``(BM, V, L)`` of one tile (``V`` a power of two) into the block counter ``low``
    ``(BM, NLP, L)``, whose ``NLOW`` planes hold the low ``NLOW`` bits of each bit position's count.

    With ``COLS`` (a tile whose ``V`` columns sit in one thread) planes ``0 .. log2 V - 1`` are carry-save state
    (Harley-Seal): the ``V`` words cost ``V - 1`` carry-save adders, which leave one carry word of weight
    ``V``; it runs up the planes ``log2 V .. NLOW - 1`` (a half adder each).  Tiles in a row share that climb:
    ``PHASE = 0`` parks a tile's carry in plane ``NLOW``; ``PHASE = 1`` adds it, the tile's own carry and plane
    ``log2 V`` with one more carry-save adder, whose carry of weight ``2 V`` climbs from plane ``log2 V + 1`` (two
    tiles: phases 0, 1); ``PHASE = 2`` does the same but parks that carry of weight ``2 V`` in plane ``NLOW + 1``,
    and ``PHASE = 3`` then adds it, the next carry of weight ``2 V`` and plane ``log2 V + 1`` with a carry-save
    adder, whose carry of weight ``4 V`` climbs from plane ``log2 V + 2`` (four tiles: phases 0, 2, 0, 3, one climb
    per ``4 V`` words).  ``PHASE = -1``: a tile on its own.  Every count stays the sum of its planes' weights, parked
    ones included: a carry-save adder keeps ``a + b + c = s + 2 k`` per bit position.  Without ``COLS`` (the qk
    kind's MMA layout, which the column split would have to convert) the words are reduced over ``V <= 31`` into a
    5-bit sliced number (:func:`add_sliced`) that is added into the planes with full adders.
    The caller flushes ``low`` (:func:`flush_low`) before any count reaches ``2^NLOW``, after a ``PHASE`` 1 or 3
    (no carry parked)."""
    if COLS:
        V: tl.constexpr = words.shape[1]
        LV: tl.constexpr = (V >= 2) + (V >= 4) + (V >= 8) + (V >= 16) + (V >= 32)  # log2 V (V <= 32)
        low, carry = _tree(words, low, V, LV - 1)
        if PHASE == 0:
            low = plane_set(low, NLOW, carry)
        else:
            if PHASE >= 1:
                sp, carry = csa(plane_get(low, LV), plane_get(low, NLOW), carry)
                low = plane_set(low, LV, sp)
            if PHASE == 2:
                low = plane_set(low, NLOW + 1, carry)
            else:
                if PHASE == 3:
                    sp, carry = csa(plane_get(low, LV + 1), plane_get(low, NLOW + 1), carry)
                    low = plane_set(low, LV + 1, sp)
                for p in tl.static_range(LV + (PHASE >= 1) + (PHASE == 3), NLOW):
                    a = plane_get(low, p)
                    low = plane_set(low, p, a ^ carry)
                    carry = a & carry
    else:
        tl.static_assert(words.shape[1] <= 31, "count_words: at most 31 words per lane and tile without COLS")
        z = tl.zeros_like(words)
        c0, c1, c2, c3, c4 = tl.reduce((words, z, z, z, z), 1, add_sliced)
        carry = tl.zeros_like(c0)
        for p in tl.static_range(NLOW):
            a = plane_get(low, p)
            if p == 0:
                x = c0
            elif p == 1:
                x = c1
            elif p == 2:
                x = c2
            elif p == 3:
                x = c3
            elif p == 4:
                x = c4
            else:
                x = tl.zeros_like(c0)
            low = plane_set(low, p, a ^ x ^ carry)
            carry = (a & x) | (carry & (a ^ x))
    return low


@triton.jit
def flush_low(planes, low, NPL: tl.constexpr, NLOW: tl.constexpr):
    """Add the block counter ``low`` (``NLOW`` planes) into the lane's ``NPL`` planes (a full adder per plane):
    a lane's count is below ``2^NPL``, so no carry leaves the last plane and ``low`` has no bit at or above it."""
    carry = tl.zeros([planes.shape[0], planes.shape[2]], planes.dtype)
    for p in tl.static_range(NPL):
        a = plane_get(planes, p)
        if p < NLOW:
            x = plane_get(low, p)
            planes = plane_set(planes, p, a ^ x ^ carry)
            carry = (a & x) | (carry & (a ^ x))
        else:
            planes = plane_set(planes, p, a ^ carry)
            carry = a & carry
    return planes


@triton.jit
def _gather_word(arr_ptr, flat, bk, NBK: tl.constexpr, word_like):
    """Entries ``flat`` of the int64 values at ``arr_ptr``, ``arr_ptr + 2``, ... (``NBK`` of them, loaded once), as
    ``word_like``'s dtype."""
    a = tl.load(arr_ptr + 2 * tl.arange(0, NBK))
    lo = tl.reshape(tl.gather(a.to(tl.int32), flat, 0), bk.shape).to(tl.uint32)
    if word_like.dtype == tl.uint32:
        return lo
    else:
        hi = tl.reshape(tl.gather((a >> 32).to(tl.int32), flat, 0), bk.shape).to(tl.uint32)
        return (hi.to(tl.uint64) << 32) | lo.to(tl.uint64)


@triton.jit
def thermometer_words(dcount, tab_ptr, word_like, SHIFT: tl.constexpr, BLO: tl.constexpr, NBK: tl.constexpr,
                      GATHER: tl.constexpr = False, PAIR: tl.constexpr = False):
    """For gaps ``dcount`` (``>= +0``): the words ``~0 << rank`` (bit ``j`` = ``[Delta <= t_j]``), dtype of
    ``word_like`` (uint32: bits 0 .. 31 of the table's words; uint64: all 64), from the word table at
    ``tab_ptr``: the bucket's word above its inner threshold, else its word at or below it (one compare and a
    select per 32 bits).  Without ``GATHER`` each score's two words (side by side in the table) and its inner
    threshold are loads from one address, which the L1 cache serves, the two words one 16-byte load with ``PAIR``
    (two 8-byte loads without: a generated tile, whose generator the compiler would otherwise compute a second
    time in the layout of the 16-byte load); a table that starts at bucket 0 and holds
    every bucket below ``2^31`` takes twice the bucket as ``(u >> (SHIFT - 1)) & (2 NBK - 2)`` (a shift and a
    mask), any other clamps the bucket.  With ``GATHER`` the table is loaded once per program and read by a
    gather on chip (no global load in the loop: the software pipeliner of the qk kind's loop cannot schedule one
    around its tensor-core product)."""
    u = dcount.to(tl.uint32, bitcast=True)
    if GATHER:  # int32 pieces (a 64-bit gather is not made in shared memory)
        bk = u >> SHIFT
        if BLO > 0:
            bk = tl.maximum(bk, BLO)
        bk = tl.minimum(bk, BLO + NBK - 1)  # the bucket, clamped (module docstring)
        flat = tl.reshape(bk - BLO, [bk.numel]).to(tl.int32)
        below = _gather_word(tab_ptr, flat, bk, NBK, word_like)
        above = _gather_word(tab_ptr + 1, flat, bk, NBK, word_like)
        inner = tl.reshape(tl.gather(tl.load(tab_ptr + 2 * NBK + 2 * tl.arange(0, NBK)).to(tl.int32), flat, 0),
                           bk.shape)
    else:
        if BLO == 0 and NBK * (1 << SHIFT) >= 2147483648:
            # every u < 2^31 (every gap >= +0, NaN included) has its bucket in the table; the mask keeps the
            # load inside the table for any other bit pattern (a negative gap, only in a row flagged bad)
            pair = ((u >> SHIFT) & (NBK - 1)) * 2  # compiled as (u >> (SHIFT - 1)) & (2 NBK - 2)
        else:
            bk = u >> SHIFT
            if BLO > 0:
                bk = tl.maximum(bk, BLO)
            bk = tl.minimum(bk, BLO + NBK - 1)  # the bucket, clamped (module docstring)
            pair = 2 * (bk - BLO)
        row = tab_ptr + pair  # the bucket's two words, side by side (16 bytes, 16-byte aligned)
        if PAIR:
            below, above = tl.split(tl.load(row[:, :, :, None] + tl.arange(0, 2)[None, None, None, :]))
        else:
            below, above = tl.load(row), tl.load(row + 1)
        inner = tl.load(row + 2 * NBK)
    word = tl.where(dcount > inner.to(tl.uint32).to(tl.float32, bitcast=True), above, below)
    return word.to(word_like.dtype)


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
