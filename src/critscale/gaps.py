"""Gaps below the row maximum, the gap-counting function and the accumulation scale.

Implements the objects of theory.md §3.1 for every row of a batch (rows are the last axis):

- the gaps :math:`\\Delta_i = M - s_i` with :math:`M = \\max_i s_i`, sorted ascending
  (:func:`sorted_gaps`);
- the gap-counting function :math:`N(t) = \\#\\{i : \\Delta_i \\le t\\}` (:func:`gap_counts`);
- the accumulation scale
  :math:`\\kappa_K = \\sup\\{\\log N(t)/t : N(t) \\ge K\\}` (:func:`accumulation_scale`), with
  :math:`\\kappa = \\kappa_2` when the maximum is unique;
- the Legendre transform :math:`\\Lambda(\\beta) = \\sup_{t \\ge 0}[\\log N(t) - \\beta t]`
  (:func:`legendre_transform`), the lower bound of Theorem 1 (theory.md §3.2).

``-inf`` scores are masked: they become ``+inf`` gaps placed at the end of the sorted row and are
excluded from every count.  Both suprema are attained at a sorted gap :math:`\\Delta_{(k)}` because
:math:`N` is a right-continuous step function, so one sort per row gives them exactly.

Memory: one row block of at most ``2**22`` values (or one row, if longer) at a time.

:func:`in_units` shifts rows to maximum 0 and rescales them, so that one call evaluates every row at
its own inverse temperature (shift invariance and scale covariance, prop-01-invariances).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _validate
from ._validate import (as_beta, as_K, as_per_row, as_score_rows, as_scores, as_thresholds, check_sorted_block,
                        row_blocks)

__all__ = ["sorted_gaps", "gap_counts", "accumulation_scale", "legendre_transform", "in_units"]


def _sorted_gaps(values: np.ndarray) -> np.ndarray:
    """Sorted gaps of validated ``(rows, n)`` scores; masked entries become ``+inf`` at the end."""
    top = np.max(values, axis=-1, keepdims=True)  # (rows, 1); every row has a finite entry
    gaps = top - values  # (rows, n); -inf scores give +inf gaps
    gaps.sort(axis=-1)
    return gaps


_MIN_PIECE = 256  # fewest columns read at once by _max_ratio


def _rank_counts(n: int) -> np.ndarray:
    """``k + 1`` for sorted positions ``k = 0..n-1``: a lower bound on N(Delta_(k)), exact at tie-block ends.

    Within a block of equal gaps the true count N(Delta_(k)) (ties included, ``side="right"``) equals
    ``k + 1`` at the block's last position and is larger than ``k + 1`` before it.  Both
    ``log N(t)/t`` and ``log N(t) - beta t`` are largest at the block's last position, so the suprema
    over ``t`` are exactly the maxima over ``k`` of the same expressions with ``k + 1`` in place of N.
    """
    return np.arange(1, n + 1, dtype=np.float64)  # (n,)


def sorted_gaps(scores: Any) -> Any:
    """Gaps below the row maximum, sorted ascending: :math:`\\Delta_{(1)} = 0 \\le \\Delta_{(2)} \\le \\dots`.

    Definition of theory.md §3.1.  ``scores`` has shape ``(..., n)``; the result has the same shape.
    Masked (``-inf``) entries become ``+inf`` gaps at the end of their row, so the number of finite
    entries of a row is its number of valid scores.
    """
    conv = as_scores(scores)
    return conv.restore(_sorted_gaps(conv.values), (conv.n,))


def gap_counts(scores: Any, t: Any) -> Any:
    """Gap-counting function :math:`N(t) = \\#\\{i : \\Delta_i \\le t\\}` (theory.md §3.1).

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked and never counted.
    t:
        thresholds, a scalar or a 1-D array sorted non-decreasing with values ``>= 0`` (``+inf`` allowed).

    Returns
    -------
    ``(..., len(t))`` counts as float64 (``(...)`` for a scalar ``t``).  ``N`` is right-continuous:
    ``N(0)`` is the multiplicity of the maximum.

    Method: per row, the gaps and the thresholds are merged by one stable sort, gaps first, so a gap
    equal to a threshold sorts before it; the rank of threshold ``j`` minus ``j`` is then the number
    of gaps ``<= t_j`` (a vectorised ``searchsorted(..., side="right")`` for every row at once).
    """
    conv = as_scores(scores)
    thresholds, scalar = as_thresholds(t)
    values, n, m = conv.values, conv.n, len(thresholds)
    rows = values.shape[0]
    out = np.empty((rows, m))  # (rows, m)
    for rs in row_blocks(rows, n + m, per_cell=3):
        top = np.max(values[rs], axis=-1, keepdims=True)  # (r, 1)
        gaps = top - values[rs]  # (r, n)
        valid_count = np.isfinite(gaps).sum(axis=-1, keepdims=True)  # (r, 1)
        merged = np.concatenate([gaps, np.broadcast_to(thresholds, (gaps.shape[0], m))], axis=-1)  # (r, n+m)
        order = np.argsort(merged, axis=-1, kind="stable")  # (r, n+m)
        rank = np.empty_like(order)  # (r, n+m)
        np.put_along_axis(rank, order, np.arange(n + m), axis=-1)
        counts = rank[:, n:] - np.arange(m)  # (r, m): gaps <= t_j, masked +inf gaps included when t_j = inf
        out[rs] = np.minimum(counts, valid_count)
    if scalar:
        return conv.restore(out[:, 0])
    return conv.restore(out, (m,))


def accumulation_scale(scores: Any, K: int = 2) -> Any:
    """Accumulation scale :math:`\\kappa_K = \\sup\\{\\log N(t)/t : N(t) \\ge K\\}` per row (theory.md §3.1).

    Computed exactly as :math:`\\max_k \\log N(\\Delta_{(k)})/\\Delta_{(k)}` over the sorted positions
    with :math:`N(\\Delta_{(k)}) \\ge K` (ties counted, right-continuous ``N``), one sort per row.  With
    0-based sorted positions this is :math:`\\max_{k \\ge K-1} \\log(k+1)/\\Delta_{(k)}`: inside a block of
    tied gaps the maximum sits at the block's last position, where :math:`k+1 = N`.

    Conventions (all documented API decisions):

    - ``inf`` when the maximum has multiplicity ``>= K`` (for ``K = 2``: a tied maximum), since then
      :math:`N(0) \\ge K` and :math:`\\log N(0)/0 = \\infty`.
    - ``0`` for a row with fewer than ``K`` valid entries, in particular a single-entry row.  This is
      the infimum form :math:`\\kappa_K = \\inf\\{b \\ge 0 : N(t) \\le e^{bt} \\text{ whenever } N(t)\\ge K\\}`
      with an empty constraint set.  Every row with at least ``K`` valid entries has
      :math:`\\kappa_K > 0`, so ``0`` marks exactly the rows that are too short.
    - ``K < 2`` raises ``ValueError``.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    K:
        integer ``>= 2``.

    Returns
    -------
    ``(...)`` float64 array (or tensor) of :math:`\\kappa_K`.
    """
    K = as_K(K)
    conv = as_score_rows(scores)  # entries checked below, on the sorted rows
    values, n = conv.values, conv.n
    rows = values.shape[0]
    if n < K:
        return as_scores(scores).restore(np.zeros(rows))  # no position can have N >= K
    out = np.empty(rows)  # (rows,)
    for rs in row_blocks(rows, n, per_cell=1):
        ascending = np.sort(values[rs], axis=-1)  # (r, n); masked -inf first, NaN last
        top = check_sorted_block(conv, ascending)  # (r,)
        out[rs] = _max_ratio(ascending[:, : n - K + 1], top, n)
    return conv.restore(out)


def _max_ratio(ascending: np.ndarray, top: np.ndarray, n: int) -> np.ndarray:
    """``max_j log(n - j) / (top - ascending[:, j])`` per row of ``(r, w)`` scores sorted ascending.

    Column ``j`` of a row of length ``n`` sorted ascending holds the gap of sorted position
    ``k = n-1-j`` (count ``k+1 = n-j``): ``top - s`` decreases with ``s``, so these are the sorted gaps
    in reverse, each the same float as :func:`_sorted_gaps` gives, and the ratios, and so their
    maximum, are those of the sorted gaps.  ``log(k+1)/0 = inf`` at a maximum of multiplicity
    ``>= K``; masked (``+inf``) gaps give 0, which never beats a valid ratio (``> 0``) and yields the
    documented 0 for rows shorter than ``K`` (``w = n-K+1`` columns are read).

    The columns are read from the right (the smallest gaps) in cache-sized pieces.  A row is done
    once ``log(n) / gap`` at its next column is at most its best ratio: every column further left has a
    gap at least as large and a count no larger, so its ratio cannot be larger.
    """
    r, width = ascending.shape
    best = np.zeros(r)  # (r,)
    ceiling = float(np.log(np.float64(n))) * (1 + 2.0**-50)  # >= every rounded log(count)
    active = np.arange(r)  # rows not yet done
    stop = width
    step = max(_MIN_PIECE, _validate.CACHE_ELEMENTS // max(1, r))
    while active.size:
        start = max(0, stop - step)
        log_counts = np.log(np.arange(n - start, n - stop, -1, dtype=np.float64))  # (c,) log(n - j)
        ratio = top[active, None] - ascending[active, start:stop]  # (a, c) a contiguous copy of the piece
        with np.errstate(divide="ignore"):
            np.divide(log_counts, ratio, out=ratio)
        best[active] = np.maximum(best[active], ratio.max(axis=-1))
        if start == 0:
            break
        with np.errstate(divide="ignore"):
            bound = ceiling / (top[active] - ascending[active, start - 1])  # (a,)
        active = active[bound > best[active]]
        stop = start
    return best


def legendre_transform(scores: Any, beta: Any) -> Any:
    """Legendre transform :math:`\\Lambda(\\beta) = \\sup_{t \\ge 0}[\\log N(t) - \\beta t]` (theory.md §3.1).

    The lower bound of the free-energy sandwich, Theorem 1 (theory.md §3.2):
    :math:`\\Lambda(\\beta) \\le \\log Z(\\beta)`; by Lemma 1 it vanishes exactly for
    :math:`\\beta \\ge \\kappa` when the maximum is unique.  Computed as
    :math:`\\max_k[\\log N(\\Delta_{(k)}) - \\beta\\Delta_{(k)}]` over valid sorted positions.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    beta:
        a scalar or 1-D array of finite values ``>= 0``.

    Returns
    -------
    ``(..., len(beta))`` float64 (``(...)`` for a scalar ``beta``).
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    values, n, m = conv.values, conv.n, len(betas)
    rows = values.shape[0]
    out = np.empty((rows, m))  # (rows, m)
    for rs in row_blocks(rows, n, per_cell=4):
        gaps = _sorted_gaps(values[rs])  # (r, n)
        valid = np.isfinite(gaps)  # (r, n)
        log_counts = np.where(valid, np.log(_rank_counts(n)), -np.inf)  # (r, n)
        finite_gaps = np.where(valid, gaps, 0.0)  # (r, n); masked terms are -inf through log_counts
        r = gaps.shape[0]
        beta_step = max(1, _validate.MAX_ELEMENTS // max(1, r * n))
        for b0 in range(0, m, beta_step):
            bs = slice(b0, min(m, b0 + beta_step))
            terms = log_counts[:, None, :] - betas[None, bs, None] * finite_gaps[:, None, :]  # (r, b, n)
            out[rs, bs] = terms.max(axis=-1)
    if scalar:
        return conv.restore(out[:, 0])
    return conv.restore(out, (m,))


def in_units(scores: Any, scale: Any) -> Any:
    """Rows shifted to maximum 0 and multiplied by a per-row ``scale``: :math:`(s - \\max s)\\,a`.

    The gaps of the result are the gaps of the row in units of :math:`1/a`.  By shift invariance and
    scale covariance (prop-01-invariances, theory.md §3.1), :math:`\\kappa_K` of the result is
    :math:`\\kappa_K(s)/a`, and its softmax at inverse temperature :math:`x` is the row's softmax at
    :math:`x a`.  With :math:`a = \\kappa` (or :math:`\\kappa_K`) every row gets scale 1, so one call of
    :func:`critscale.softmax_stats` at :math:`\\beta = x` evaluates all rows at their own
    :math:`\\beta = x\\kappa` (chapters 02 and 03).  Shifting before scaling keeps the rounding of the
    gaps at the size of the gaps, not of the scores.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked and stay ``-inf``.
    scale:
        finite values ``> 0``, a scalar or one per row (broadcastable to the batch shape ``(...)``).

    Returns
    -------
    ``(..., n)`` float64, computed as ``(s - s.max(-1)) * scale`` entry by entry.

    Test: ``tests/test_gaps.py::test_in_units_rescales_kappa_and_softmax`` (kappa of the result is
    exactly 1 up to rounding and the softmax matches the row at ``x kappa``; scaling without the
    shift, or dividing by the scale, would not).
    """
    conv = as_scores(scores)
    factor = as_per_row(scale, conv.batch_shape, "scale", lambda a: np.isfinite(a) & (a > 0), "finite and > 0")
    values = conv.values  # (rows, n)
    out = (values - values.max(axis=-1, keepdims=True)) * factor[:, None]  # (rows, n)
    return conv.restore(out, (conv.n,))
