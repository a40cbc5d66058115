"""Softmax summaries of every row at many inverse temperatures, computed from the gaps.

Implements the definitions of theory.md §3.1: with gaps :math:`\\Delta_i = M - s_i`,

.. math::

    Z(\\beta) = \\sum_i e^{-\\beta\\Delta_i},\\quad p_{\\max} = 1/Z,\\quad
    H(\\beta) = \\log Z + \\beta\\langle\\Delta\\rangle_\\beta,\\quad
    \\textstyle\\sum_i p_i^2 = Z(2\\beta)/Z(\\beta)^2 .

Every exponent is :math:`-\\beta\\Delta_i \\le 0` and the maximum contributes exactly 1, so nothing
overflows (``beta * gap`` up to 1e6 and beyond simply underflows to 0).  The zero gaps are counted
separately (multiplicity ``m0``) so that :math:`\\log Z = \\operatorname{log1p}(m_0 - 1 + \\sum_{\\Delta_i>0}
e^{-\\beta\\Delta_i})` keeps full relative precision when the row has collapsed (``Z - 1`` tiny).
Masked (``-inf``) scores never enter a sum, also at ``beta = 0`` (no ``0 * inf``).

Speed and memory: rows and, for long rows, columns are processed in cache-sized blocks of
``2**16`` gaps, and each block is summed at every beta before the next is read, so no temporary is
larger than a block whatever the row count, row length and number of betas.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from . import _validate
from ._validate import as_beta, as_scores, blocks

__all__ = ["SoftmaxStats", "softmax_stats"]


class SoftmaxStats(NamedTuple):
    """Softmax summaries, each of shape ``(..., len(beta))`` (theory.md §3.1).

    Attributes
    ----------
    log_z:
        :math:`\\log Z(\\beta) = \\log\\sum_i e^{-\\beta\\Delta_i} = -\\log p_{\\max}` (the free energy of Theorem 1).
    entropy:
        Shannon entropy :math:`H(\\beta) = \\log Z + \\beta\\langle\\Delta\\rangle_\\beta` in nats.
    max_weight:
        :math:`p_{\\max} = e^{-\\log Z}` (the weight of each maximal entry).
    collision:
        :math:`\\sum_i p_i^2 = Z(2\\beta)/Z(\\beta)^2`.
    """

    log_z: Any
    entropy: Any
    max_weight: Any
    collision: Any


class _GapSums(NamedTuple):
    """Per-row sums over the valid entries of a row, at each beta; all ``(rows, m)``."""

    z_minus_one: np.ndarray  # Z - 1 = (m0 - 1) + sum_{Delta>0} e^{-beta Delta}
    z2_minus_one: np.ndarray  # Z(2 beta) - 1
    first: np.ndarray  # sum_i Delta_i e^{-beta Delta_i}


_MIN_INNER = 256  # betas are grouped so that one numpy call spans at least this many values of a short row
_UNDERFLOW = -746.0  # exp(x) is exactly 0 in float64 for every x below -745.14
_FAR = 1e300  # stand-in gap of the zero gaps of a block: exp(-beta * _FAR) == 0 for beta >= 746 / _FAR
_FAR_SHARE = 1 / 64  # the stand-in is used while zero gaps are at most this share of a block


class _Block(NamedTuple):
    """One cache-sized block of gaps, prepared once for all betas.

    Each weight ``exp(-beta * delta)`` has to be 0 at the zero gaps (they are counted in ``m0``) and at
    the masked ones.  A block with no masked entry and few zero gaps (``keep is None``) carries
    ``_FAR`` at its zero gaps, so the exponential itself gives 0 there for every beta but the tiniest;
    any other block carries 0 at those entries and a 0/1 array ``keep`` that each weight is multiplied by.
    Either way every product ``weight * delta`` is 0 there.
    """

    delta: np.ndarray  # (r, 1, c) the gaps, _FAR or 0 at the zero and masked gaps
    keep: np.ndarray | None  # (r, 1, c) 1.0 at the finite positive gaps, 0.0 elsewhere
    dropped: np.ndarray  # (r, 1, c) True at the zero and masked gaps
    zeros: np.ndarray  # (r,) number of zero gaps
    largest: float  # the largest finite gap


def _prepare(gaps: np.ndarray) -> _Block:
    """Prepare an ``(r, c)`` block of gaps (``+inf`` = masked) that may be overwritten."""
    largest = float(gaps.max())
    zero = gaps == 0  # (r, c)
    zeros = np.count_nonzero(zero, axis=-1)  # (r,)
    if largest < np.inf and zeros.sum() <= _FAR_SHARE * gaps.size:
        np.copyto(gaps, _FAR, where=zero)
        return _Block(gaps[:, None, :], None, zero[:, None, :], zeros, largest)
    dropped = zero | (gaps == np.inf)  # (r, c)
    np.copyto(gaps, 0.0, where=dropped)
    keep = (~dropped).astype(np.float64)  # (r, c)
    return _Block(gaps[:, None, :], keep[:, None, :], dropped[:, None, :], zeros, float(gaps.max()))


def _weights(block: _Block, betas: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``exp(-beta * Delta)`` at the kept gaps and 0 elsewhere, written into ``out`` ``(r, b, c)``.

    Exponents below ``_UNDERFLOW`` give 0 either way; when a kept gap can produce one they are set
    aside before the exponential, whose vector loop is many times slower on them.
    """
    with np.errstate(over="ignore"):  # beta * gap = inf underflows to weight 0, as it should
        np.multiply(block.delta, -betas[None, :, None], out=out)
    if float(betas.max()) * block.largest > -_UNDERFLOW:  # some kept exponents are below _UNDERFLOW
        tiny = out < _UNDERFLOW
        np.copyto(out, 0.0, where=tiny)
        np.exp(out, out=out)
        np.copyto(out, 0.0, where=tiny)
    else:
        np.exp(out, out=out)
    if block.keep is not None:
        return np.multiply(out, block.keep, out=out)  # zero gaps are counted in m0, masked ones nowhere
    if float(betas.min()) * _FAR < -_UNDERFLOW:  # exp(-beta * _FAR) need not be 0
        np.copyto(out, 0.0, where=block.dropped)
    return out


def _block_sums(gaps_of: Callable[[slice, slice], np.ndarray], rows: int, n: int, betas: np.ndarray) -> _GapSums:
    """Exponential sums of ``(rows, n)`` gaps, formed block by block by ``gaps_of(row_slice, column_slice)``.

    ``gaps_of`` returns a new array that may be overwritten.  Each block of about
    :data:`~critscale._validate.CACHE_ELEMENTS` gaps is prepared once and stays in cache while it is
    summed at one beta after another (several at once for short rows); every temporary is a block, so
    memory stays small whatever the row count, row length and number of betas.  Inside a block each
    sum runs along a whole block row, so a row that fits in one block is summed in the same order,
    over the same terms, as by :func:`_gap_sums_broadcast`.
    """
    m = betas.shape[-1]
    group = max(1, min(m, -(-_MIN_INNER // n)))  # betas per numpy call
    cells = max(1, min(_validate.CACHE_ELEMENTS, _validate.MAX_ELEMENTS) // group)
    sums = np.zeros((3, rows, m))  # s0, s1, s2
    zero_count = np.zeros(rows)  # (rows,) multiplicity m0 >= 1
    for rs, cs in blocks(rows, n, max_elements=cells):
        block = _prepare(gaps_of(rs, cs))
        zero_count[rs] += block.zeros
        r, c = block.zeros.shape[0], block.delta.shape[-1]
        weights = np.empty((r, group, c))
        product = np.empty((r, group, c))
        block_sums = np.empty((3, r, m))
        for b0 in range(0, m, group):
            bs = slice(b0, min(m, b0 + group))
            w = _weights(block, betas[bs], weights[:, : bs.stop - b0])
            p = product[:, : bs.stop - b0]
            w.sum(axis=-1, out=block_sums[0, :, bs])
            np.multiply(w, block.delta, out=p).sum(axis=-1, out=block_sums[1, :, bs])
            np.multiply(w, w, out=p).sum(axis=-1, out=block_sums[2, :, bs])
        sums[:, rs] += block_sums
    extra = (zero_count - 1.0)[:, None]  # (rows, 1)
    return _GapSums(z_minus_one=extra + sums[0], z2_minus_one=extra + sums[2], first=sums[1])


def _gap_sums(gaps: np.ndarray, betas: np.ndarray) -> _GapSums:
    """Exponential sums of ``(rows, n)`` gaps (``+inf`` = masked, any order) at betas ``(m,)``."""
    return _block_sums(lambda rs, cs: gaps[rs, cs].copy(), *gaps.shape, betas)


def _score_sums(values: np.ndarray, top: np.ndarray, betas: np.ndarray) -> _GapSums:
    """Exponential sums of the gaps ``top - values`` of ``(rows, n)`` scores with row maxima ``top``."""
    return _block_sums(lambda rs, cs: top[rs, None] - values[rs, cs], *values.shape, betas)


def _gap_sums_broadcast(gaps: np.ndarray, betas: np.ndarray) -> _GapSums:
    """The sums of :func:`_gap_sums` from ``(rows, m, cols)`` broadcasts of the definitions.

    The direct route, kept as the reference the blocked loop is tested and benchmarked against
    (``tests/test_softmax.py``, ``scripts/bench_cpu.py``): blocks of up to ``2**22`` values, each
    exponential written to and read back from memory.
    """
    rows, n = gaps.shape
    m = betas.shape[-1]
    zero_count = (gaps == 0).sum(axis=-1).astype(np.float64)  # (rows,) multiplicity m0 >= 1
    s0 = np.zeros((rows, m))
    s1 = np.zeros((rows, m))
    s2 = np.zeros((rows, m))
    for rs, cs in blocks(rows, n, per_cell=m):
        block = gaps[rs, cs]  # (r, c)
        positive = np.isfinite(block) & (block > 0)  # (r, c)
        delta = np.where(positive, block, 0.0)  # (r, c)
        with np.errstate(over="ignore"):  # beta * gap = inf underflows to weight 0, as it should
            weights = np.exp(-betas[None, :, None] * delta[:, None, :])  # (r, m, c)
        weights *= positive[:, None, :]  # zero gaps are counted in m0, masked ones nowhere
        s0[rs] += weights.sum(axis=-1)
        s1[rs] += (weights * delta[:, None, :]).sum(axis=-1)
        s2[rs] += (weights * weights).sum(axis=-1)
    extra = (zero_count - 1.0)[:, None]  # (rows, 1)
    return _GapSums(z_minus_one=extra + s0, z2_minus_one=extra + s2, first=s1)


def _stats_from_sums(sums: _GapSums, betas: np.ndarray) -> SoftmaxStats:
    """Assemble log Z, H, p_max and sum p^2 from the exponential sums (arrays ``(rows, m)``)."""
    log_z = np.log1p(sums.z_minus_one)
    z = 1.0 + sums.z_minus_one
    entropy = log_z + betas * (sums.first / z)
    collision = np.exp(np.log1p(sums.z2_minus_one) - 2.0 * log_z)
    return SoftmaxStats(log_z=log_z, entropy=entropy, max_weight=np.exp(-log_z), collision=collision)


def _gaps_unsorted(values: np.ndarray) -> np.ndarray:
    """Gaps ``M - s`` of validated ``(rows, n)`` scores; masked entries become ``+inf``."""
    return np.max(values, axis=-1, keepdims=True) - values  # (rows, n)


def softmax_stats(scores: Any, beta: Any) -> SoftmaxStats:
    """Log-partition function, entropy, maximum weight and collision probability of ``softmax(beta * s)``.

    Definitions of theory.md §3.1 (the quantities bounded by Theorems 1–3, §3.2), computed from the
    gaps as described in the module docstring.

    Parameters
    ----------
    scores:
        ``(..., n)`` scores; ``-inf`` entries are masked.
    beta:
        a scalar or 1-D array of finite inverse temperatures ``>= 0``.

    Returns
    -------
    :class:`SoftmaxStats` whose fields have shape ``(..., len(beta))`` (``(...)`` for a scalar ``beta``);
    numpy in gives numpy out, torch in gives torch out on the input's device, float64 throughout.
    """
    conv = as_scores(scores)
    betas, scalar = as_beta(beta)
    stats = _stats_from_sums(_score_sums(conv.values, conv.top, betas), betas)
    if scalar:
        return SoftmaxStats(*(conv.restore(field[:, 0]) for field in stats))
    return SoftmaxStats(*(conv.restore(field, (len(betas),)) for field in stats))
