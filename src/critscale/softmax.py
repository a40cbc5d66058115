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

Memory is bounded: rows and, for long rows, columns are processed in blocks so that no temporary
holds more than ``2**22`` float64 values, whatever the row count, row length and number of betas.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

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


def _gap_sums(gaps: np.ndarray, betas: np.ndarray) -> _GapSums:
    """Exponential sums of ``(rows, n)`` gaps (``+inf`` = masked, any order) at betas ``(m,)``.

    Rows and columns are blocked so a ``(block_rows, m, block_cols)`` temporary holds at most
    ``2**22`` values.
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
        # Plain products and sums: batched matmul/einsum with one beta (m = 1) fall onto slow paths.
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
    gaps = _gaps_unsorted(conv.values)  # (rows, n)
    stats = _stats_from_sums(_gap_sums(gaps, betas), betas)
    if scalar:
        return SoftmaxStats(*(conv.restore(field[:, 0]) for field in stats))
    return SoftmaxStats(*(conv.restore(field, (len(betas),)) for field in stats))
