"""Tile functions shared by the three kernels (``@triton.jit``; the kinds only make the tiles).

Layout.  A tile is ``(BM, V, L)``: ``BM`` rows, ``V`` columns held by one thread, ``L`` lanes.  For stored
and generated scores (kinds ``scores`` and ``sampled``) column ``c + l V + v`` sits at ``(v, l)``: each
thread holds the ``V = 4`` adjacent columns of one lane (one 16-byte load), the 32 lanes of a warp and then
the warps run along ``L``, and ``BM = 1`` on the GPU.  For the fused logits (kind ``qk``) ``L = 4``: the
tensor-core product's tile keeps its MMA placement (lane ``l`` of a quad holds columns ``8 j + 2 l + {0, 1}``
of two rows), see :mod:`critscale.kernels.qk`.  In every case the reductions inside the column loop run
over ``V``, inside one thread; the running sums are per-lane partials, reduced across lanes once per
program, after the loop (:func:`store_pass1`, :func:`store_pass2`).

Pass 1 keeps, per row, the maximum, the second order statistic with multiplicity, the minimum, the number
of valid entries and of bad ones (NaN, ``+inf``, and for computed scores ``-inf``: an overflow, not a mask).
Pass 2 knows the row maximum ``top`` and takes the beta ladder and the thresholds as compile-time
constants.  A masked entry enters as ``s = -inf``, i.e. with the gap ``Delta = +inf``, so that no per-beta
select is needed: ``2^{-b * inf} = 0``, and ``inf <= t`` is false for every (finite) threshold.  Entries
within ``snap`` of the maximum (``Delta <= snap``: exactly the maximum for stored scores, ``snap = 0``; a
maximum recomputed with another rounding for qk and sampled) are counted in ``m0`` and given
``Delta = +inf`` for the sums (their weights ``1`` are added on the host, exactly).  ``m0`` is accumulated
in float32 (exact below ``2^24`` per lane; the launcher keeps every lane below it); the gap counts are
bit-sliced integer counters, exact by construction (:mod:`critscale.kernels.counting`).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .counting import count_words, flush_low, halves, plane_counts, thermometer_words

FP32_MAX = tl.constexpr(3.4028234663852886e38)
NLOW = tl.constexpr(7)  # planes of the block counter (kernels.counting.count_words)
BLOCK_WORDS = tl.constexpr(127)  # the most words a lane adds into one block counter: 2^NLOW - 1


@triton.jit
def pass_prologue(R, n, tiles, SPLIT, BM: tl.constexpr, BN: tl.constexpr):
    """A program's place in the grid ``(1, row blocks, batch * SPLIT)``.

    Returns the batch index, the column chunk, the ``BM`` rows of the batch and their mask, the global rows
    (``batch * R + row``: the index of the result buffers) and the column range ``[lo, hi)``.
    """
    pid_bc = tl.program_id(2)
    pid_b = pid_bc // SPLIT
    pid_c = pid_bc % SPLIT
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    rmask = rows < R
    lo = pid_c * tiles * BN
    hi = tl.minimum(lo + tiles * BN, n)
    return pid_b, pid_c, rows, rmask, pid_b * R + rows, lo, hi


# ----------------------------------------------------------------------------------------------
# Pass 1: order statistics
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
def init_pass1(BM: tl.constexpr, L: tl.constexpr):
    """Per-lane partials ``(BM, L)`` of pass 1: top1, top2, low, count, bad."""
    return (tl.full([BM, L], float("-inf"), tl.float32), tl.full([BM, L], float("-inf"), tl.float32),
            tl.full([BM, L], float("inf"), tl.float32), tl.zeros([BM, L], tl.int32), tl.zeros([BM, L], tl.int32))


@triton.jit
def fold_pass1(s, inside, top1, top2, low, count, bad, NEG_INF_BAD: tl.constexpr, COLS: tl.constexpr = True,
               FINITE: tl.constexpr = False):
    """Fold one ``(BM, V, L)`` fp32 tile into the per-lane partials ``(BM, L)`` (reductions over ``V`` only).

    ``inside`` marks the entries of the rows (in range, not causally masked).  Bad entries: NaN and ``+inf``;
    with ``NEG_INF_BAD`` also ``-inf`` (computed scores, where ``-inf`` is an overflow, not a mask).
    ``FINITE``: the scores are finite by construction (a generator that cannot make NaN or infinities), so
    no entry is checked and none is bad.
    With ``COLS`` the top two are kept one column at a time (:func:`top2_cols`) and one compare of ``|s|``
    tells the finite entries from NaN and both infinities; without it they are reduced over ``V`` and merged.
    """
    if FINITE:
        finite = tl.full(s.shape, 1, tl.int1)
    elif COLS:
        finite = tl.abs(s) < float("inf")  # false for NaN and both infinities
    else:
        finite = (s == s) & (s < float("inf")) & (s > float("-inf"))
    valid = inside & finite
    if NEG_INF_BAD:
        isbad = inside & (~finite)
    else:
        isbad = inside & (~finite) & (s != float("-inf"))
    x = tl.where(valid, s, float("-inf"))
    lows = tl.min(tl.where(valid, s, float("inf")), axis=1)
    nvalid, nbad = tl.sum(valid.to(tl.int32), axis=1), tl.sum(isbad.to(tl.int32), axis=1)
    if COLS:
        top1, top2 = top2_cols(x, top1, top2, x.shape[1])
        low, count, bad = tl.minimum(low, lows), count + nvalid, bad + nbad
    else:
        t1, t2 = _top2_over(x, tl.full(x.shape, float("-inf"), tl.float32), 1)
        top1, top2, low, count, bad = _merge_order_stats(top1, top2, low, count, bad, t1, t2, lows, nvalid, nbad)
    return top1, top2, low, count, bad


@triton.jit
def top2_cols(x, top1, top2, V: tl.constexpr):
    """The top two (with multiplicity) of ``top1``, ``top2`` ``(BM, L)`` and the ``V`` columns of ``x``
    ``(BM, V, L)``, one column at a time: ``top2 <- max(top2, min(top1, x))``, ``top1 <- max(top1, x)``
    (a value equal to ``top1`` makes ``top2 = top1``), two instructions per score."""
    if V == 1:
        xv = tl.reshape(x, top1.shape)
        return tl.maximum(top1, xv), tl.maximum(top2, tl.minimum(top1, xv))
    else:
        x0, x1 = halves(x)
        top1, top2 = top2_cols(x0, top1, top2, V // 2)
        return top2_cols(x1, top1, top2, V // 2)


@triton.jit
def store_pass1(idx, rmask, top1, top2, low, count, bad, o_top1, o_top2, o_low, o_count, o_bad):
    """Reduce the per-lane partials ``(BM, L)`` across lanes (once per program) and store them at ``idx``."""
    m1, m2 = _top2_over(top1, top2, 1)
    tl.store(o_top1 + idx, m1, mask=rmask)
    tl.store(o_top2 + idx, m2, mask=rmask)
    tl.store(o_low + idx, tl.min(low, axis=1), mask=rmask)
    tl.store(o_count + idx, tl.sum(count, axis=1), mask=rmask)
    tl.store(o_bad + idx, tl.sum(bad, axis=1), mask=rmask)


# ----------------------------------------------------------------------------------------------
# Pass 2: sums on the beta ladder and gap counts
# ----------------------------------------------------------------------------------------------


@triton.jit
def load_top(top_ptr, snap_ptr, grow, rmask):
    """The row maxima ``top`` and snap distances ``snap`` ``(BM,)`` of the global rows ``grow``."""
    return tl.load(top_ptr + grow, mask=rmask, other=0.0), tl.load(snap_ptr + grow, mask=rmask, other=0.0)


@triton.jit
def zero_pass2(BM: tl.constexpr, L: tl.constexpr, NS: tl.constexpr, NTP: tl.constexpr, NPLP: tl.constexpr):
    """Zeroed pass-2 partials: fp32 ``m0`` ``(BM, L)``, ``acc_a, acc_b`` ``(BM, NS, L)`` (one slot per root and
    level), and the count planes ``(BM, NPLP, L)`` (uint64 words for more than 32 thresholds, else uint32)."""
    if NTP > 32:
        planes = tl.zeros([BM, NPLP, L], tl.uint64)
    else:
        planes = tl.zeros([BM, NPLP, L], tl.uint32)
    return tl.zeros([BM, L], tl.float32), tl.zeros([BM, NS, L], tl.float32), tl.zeros([BM, NS, L], tl.float32), planes


@triton.jit
def init_pass2(top_ptr, snap_ptr, grow, rmask, BM: tl.constexpr, L: tl.constexpr, NS: tl.constexpr,
               NTP: tl.constexpr, NPLP: tl.constexpr):
    """Everything pass 2 needs before its column loop: ``top`` and ``snap`` ``(BM,)`` (:func:`load_top`) and the
    zeroed partials (:func:`zero_pass2`)."""
    top, snap = load_top(top_ptr, snap_ptr, grow, rmask)
    m0, acc_a, acc_b, planes = zero_pass2(BM, L, NS, NTP, NPLP)
    return top, snap, m0, acc_a, acc_b, planes


@triton.jit
def block_counter(planes, NLOW: tl.constexpr):
    """A zeroed block counter: ``NLOW`` planes and the two parked carries of
    :func:`critscale.kernels.counting.count_words` (padded to a power of two), of the dtype of ``planes``."""
    NLP: tl.constexpr = 16 if NLOW + 2 > 8 else (8 if NLOW + 2 > 4 else 4)
    return tl.zeros([planes.shape[0], NLP, planes.shape[2]], planes.dtype)


@triton.jit
def slot_get(acc, slot, k: tl.constexpr):
    """Slot ``k`` ``(BM, L)`` of the accumulators ``acc`` ``(BM, NS, L)``: a select and an integer sum of
    zeros, exact, which the compiler folds away (the slot index is a compile-time constant)."""
    bits = tl.where(slot == k, acc.to(tl.int32, bitcast=True), 0)
    return tl.sum(bits, axis=1).to(tl.float32, bitcast=True)


@triton.jit
def chain_add(x, acc, V: tl.constexpr):
    """``acc + x_0 + ... + x_{V-1}`` added one column at a time (``x`` ``(BM, V, L)``, ``acc`` ``(BM, L)``):
    ``V`` adds, where a tree over ``V`` and then one add into ``acc`` issue as many."""
    if V == 1:
        return acc + tl.reshape(x, acc.shape)
    else:
        x0, x1 = halves(x)
        return chain_add(x1, chain_add(x0, acc, V // 2), V // 2)


@triton.jit
def chain_fma(x, y, acc, V: tl.constexpr):
    """``acc + x_0 y_0 + ... + x_{V-1} y_{V-1}`` as ``V`` fused multiply-adds, one column at a time (a tree
    of products and then one add into ``acc`` issues ``V + 1`` instructions, one of them a lone multiply)."""
    if V == 1:
        return tl.fma(tl.reshape(x, acc.shape), tl.reshape(y, acc.shape), acc)
    else:
        x0, x1 = halves(x)
        y0, y1 = halves(y)
        return chain_fma(x1, y1, chain_fma(x0, y0, acc, V // 2), V // 2)


@triton.jit
def fold_pass2(s, top, snap, m0, acc_a, acc_b, low, tab_ptr, ROOTS2: tl.constexpr, NR: tl.constexpr,
               LVR: tl.constexpr, NS: tl.constexpr, BNEED: tl.constexpr, NT: tl.constexpr, SHIFT: tl.constexpr,
               BLO: tl.constexpr, NBK: tl.constexpr, NLOW: tl.constexpr, M0: tl.constexpr, SNAP0: tl.constexpr,
               COLS: tl.constexpr = True, PHASE: tl.constexpr = -1, GAPS_FINITE: tl.constexpr = False,
               PAIR: tl.constexpr = False):
    """Fold one ``(BM, V, L)`` tile (``-inf`` where not in the row) into the pass-2 partials.

    The grid is compile-time: ``ROOTS2`` holds the chunk's ``NR`` ladder roots times ``log2(e)``, so they are
    instruction immediates, not registers.  For root ``r`` and level ``l < LVR`` (slot ``r LVR + l``):
    ``acc_a += sum_v w``, ``acc_b += sum_v w Delta`` (only where ``BNEED``: a level that only gives some
    ``C(beta) = A(2 beta)`` needs no ``B``) with ``w = 2^{-ROOTS2[r] Delta}`` at level 0 and
    ``w <- w^2`` one level up (the beta ladder, :mod:`critscale.kernels.ladder`).
    With ``COLS`` each slot's sums take the ``V`` columns one at a time into its accumulator (:func:`chain_add`,
    :func:`chain_fma`: one instruction per score and sum), and a top level that only feeds ``C`` adds
    ``fma(w, w, acc)`` without rounding ``w^2`` on its own (one rounding fewer than the bound of
    :func:`critscale.kernels.ladder.term_error_bound` allows for that level); without it (the tensor-core tile of
    the qk kind, whose MMA layout the column-at-a-time sums would have to convert) they are reduced over ``V``
    and then added.
    ``M0`` says where ``m0 = #{Delta <= snap}`` comes from: ``1`` counted here in float32, ``2`` the count at the
    threshold ``+0`` (a maximum within ``snap`` counts as gap ``+0``, every other gap is above ``snap >= 0``),
    ``0`` not needed (a chunk after the first).
    ``SNAP0``: ``snap`` is ``0`` and ``top`` is not ``-0`` (stored scores), so every gap is ``+0`` or positive and
    is counted as it is (``top - s`` is ``+0``, never ``-0``, for ``s = top``).
    The counts of the chunk's ``NT`` thresholds go as thermometer words (the word table at ``tab_ptr``:
    ``SHIFT``, ``BLO``, ``NBK``; held on chip for the qk kind's pipelined loop, which is the one without ``COLS``)
    into the block counter ``low`` (:mod:`critscale.kernels.counting`; ``PHASE`` pairs two tiles in a row; ``PAIR``:
    the table's two words of a bucket as one 16-byte load per score).
    ``GAPS_FINITE``: every gap of the tile is finite (no masked entry, finite scores), so the ``B`` sums take the
    gap with the entries within ``snap`` set to ``0`` (the count's gap) instead of a clamped one.
    """
    delta = top[:, None, None] - s  # (BM, V, L); +inf where masked
    near = delta <= snap[:, None, None]
    if M0 == 1:
        m0 += tl.sum(near.to(tl.float32), axis=1)
    dx = tl.where(near, float("inf"), delta)  # excluded from the sums: weight 2^-inf = 0
    if GAPS_FINITE:
        dfin = tl.where(near, 0.0, delta)  # where w = 0 (near), 0 * 0 = 0
    else:
        dfin = tl.minimum(dx, FP32_MAX)  # finite, so that 0 * dfin = 0
    slot = tl.arange(0, NS)[None, :, None]  # (1, NS, 1)
    V: tl.constexpr = s.shape[1]
    for r in tl.static_range(NR):
        w = tl.exp2(dx * (-ROOTS2[r]))  # (BM, V, L)
        for lv in tl.static_range(LVR):
            if not COLS:
                acc_a = tl.where(slot == r * LVR + lv, acc_a + tl.sum(w, axis=1)[:, None, :], acc_a)
                if BNEED[r * LVR + lv]:
                    acc_b = tl.where(slot == r * LVR + lv, acc_b + tl.sum(w * dfin, axis=1)[:, None, :], acc_b)
                if lv + 1 < LVR:
                    w = w * w
            else:
                if lv > 0 and lv + 1 == LVR and not BNEED[r * LVR + lv]:
                    # a top level that only gives some C(beta): its square fused with its add, w^2 never rounded
                    a = chain_fma(wprev, wprev, slot_get(acc_a, slot, r * LVR + lv), V)
                else:
                    a = chain_add(w, slot_get(acc_a, slot, r * LVR + lv), V)
                acc_a = tl.where(slot == r * LVR + lv, a[:, None, :], acc_a)
                if BNEED[r * LVR + lv]:
                    b = chain_fma(w, dfin, slot_get(acc_b, slot, r * LVR + lv), V)
                    acc_b = tl.where(slot == r * LVR + lv, b[:, None, :], acc_b)
                if lv + 2 < LVR or (lv + 2 == LVR and BNEED[r * LVR + lv + 1]):
                    w = w * w
                elif lv + 2 == LVR:
                    wprev = w
    if NT > 0:
        if SNAP0:
            dcount = delta
        else:
            dcount = tl.where(near, 0.0, delta)  # a maximum within snap counts as gap +0
        words = thermometer_words(dcount, tab_ptr, low, SHIFT, BLO, NBK, not COLS, PAIR)
        low = count_words(words, low, NLOW, COLS, PHASE)
    return m0, acc_a, acc_b, low


@triton.jit
def store_pass2(idx, rmask, m0, acc_a, acc_b, acc_n, o_m0, o_a, o_b, o_n, NS: tl.constexpr, NTP: tl.constexpr,
                NPL: tl.constexpr, NPLP: tl.constexpr):
    """Reduce the partials across lanes (once per program) and store them at ``idx``: buffers ``o_m0``
    ``(idx,)``, ``o_a``/``o_b`` ``(idx, NS)`` fp32, ``o_n`` ``(idx, NTP)`` int32 of this chunk."""
    tl.store(o_m0 + idx, tl.sum(m0, axis=1), mask=rmask)
    ab = idx[:, None] * NS + tl.arange(0, NS)[None, :]
    tl.store(o_a + ab, tl.sum(acc_a, axis=2), mask=rmask[:, None])
    tl.store(o_b + ab, tl.sum(acc_b, axis=2), mask=rmask[:, None])
    tl.store(o_n + idx[:, None] * NTP + tl.arange(0, NTP)[None, :], plane_counts(acc_n, NPL, NPLP, NTP),
             mask=rmask[:, None])
