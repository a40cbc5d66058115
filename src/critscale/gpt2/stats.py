"""Per-row statistics of one head's causal logit rows, from the critscale row API.

For each row ``i`` (length ``n = i + 1``) of a head, at the model's own temperature
(``beta = 1`` on the logits of :func:`critscale.models.capture.causal_logits`), theory.md §3.1:

* ``kappa`` = kappa_2 and ``kappa16`` = kappa_16 (:func:`critscale.accumulation_scale`);
* ``beta_half``: the beta with p_max = 1/2 (:func:`critscale.beta_at_max_weight`, Corollary 5);
* the operating point ``c = 1/kappa`` (and ``c16 = 1/kappa16``): the model's beta in units of
  the accumulation scale (Corollary 4: c > 1 concentrates, c << 1 spreads);
* softmax summaries on a grid of betas (:func:`critscale.softmax_stats`): entropy, p_max;
* the first token's weight and whether it is the row maximum (sinks);
* the ``SHAPE_K`` smallest sorted gaps (:func:`critscale.sorted_gaps`) for the shape of log N(t).

Backends: ``"reference"`` computes everything in numpy float64 through the critscale API;
``"kernel"`` takes kappa bounds and the softmax sums from the fused q·k kernel
``critscale.kernels.qk_row_stats`` on CUDA (see :func:`kernel_available`) and the top gaps from a
float64 ``torch.topk`` on the device.
"""

from __future__ import annotations

import numpy as np

import critscale

from .classify import SHAPE_K

# Entropy-versus-temperature grid, in units of the model's own beta (= 1 on its logits).
BETA_GRID = np.geomspace(1 / 16, 16, 17)


def row_statistics(rows: np.ndarray, *, betas: np.ndarray = BETA_GRID, shape_k: int = SHAPE_K) -> dict:
    """All per-row quantities for ``rows`` of shape ``(r, n_max)`` (``-inf`` = masked, float64).

    The model's beta (1) must be in ``betas``.  Returns a dict of arrays: ``n``, ``kappa``,
    ``kappa16``, ``beta_half``, ``entropy`` ``(r, len(betas))``, ``max_weight`` ``(r, len(betas))``,
    ``first_weight``, ``argmax_first``, ``top_gaps`` ``(r, shape_k)`` (``inf``-padded).
    """
    rows = np.asarray(rows, dtype=np.float64)  # (r, n_max)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D (rows, n), got shape {rows.shape}")
    betas = np.asarray(betas, dtype=np.float64)
    one = np.flatnonzero(np.isclose(betas, 1.0, rtol=0, atol=1e-12))
    if one.size != 1:
        raise ValueError("betas must contain the model's own beta = 1 exactly once")
    valid = rows > -np.inf  # (r, n_max)
    n = valid.sum(axis=-1)  # (r,)
    kappa = critscale.accumulation_scale(rows, K=2)  # (r,)
    kappa16 = critscale.accumulation_scale(rows, K=16)  # (r,)
    stats = critscale.softmax_stats(rows, betas)  # each (r, len(betas))
    top = rows.max(axis=-1)  # (r,)
    unique_top = np.isfinite(kappa)  # tied maxima have kappa = inf and no beta_half
    beta_half = np.full(len(rows), np.nan)
    solvable = unique_top & (n >= 2)
    if solvable.any():
        beta_half[solvable] = critscale.beta_at_max_weight(rows[solvable], 0.5)
    log_z1 = stats.log_z[:, one[0]]  # (r,)
    first_weight = np.exp(rows[:, 0] - top - log_z1)  # (r,) softmax weight of position 0 at beta = 1
    argmax_first = rows[:, 0] >= top  # (r,) position 0 is (one of) the maxima
    gaps = critscale.sorted_gaps(rows)[:, :shape_k]  # (r, min(n_max, shape_k))
    if gaps.shape[1] < shape_k:  # rows shorter than shape_k: pad with +inf (no such gap)
        gaps = np.concatenate([gaps, np.full((len(gaps), shape_k - gaps.shape[1]), np.inf)], axis=1)
    return {"n": n, "kappa": kappa, "kappa16": kappa16, "beta_half": beta_half,
            "entropy": stats.entropy, "max_weight": stats.max_weight, "first_weight": first_weight,
            "argmax_first": argmax_first, "top_gaps": gaps}


def kernel_available() -> bool:
    """True when the fused q·k kernel exists and CUDA is usable (never under the interpreter)."""
    import torch

    if not torch.cuda.is_available():  # checked first: importing the kernels on CPU needs the interpreter
        return False
    try:
        from critscale import kernels
        from critscale.kernels._common import cuda_usable
    except ImportError:
        return False
    return hasattr(kernels, "qk_row_stats") and cuda_usable()


# Kernel path: geometric grids scaled to the layer's logits (kappa is scale-covariant, theory.md §3.1).
T_RATIO = 1.06  # neighbouring thresholds: kappa is bracketed within this factor
BETA_RATIO = 1.12  # neighbouring betas of the interpolation grid of beta_{1/2}
DYNAMIC_RANGE = 1e7  # smallest threshold = largest possible gap / DYNAMIC_RANGE


def kernel_grids(q, k, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Threshold and beta grids covering every gap of ``scale * q k^T`` (``q``, ``k``: (heads, T, d_h)).

    The largest gap is at most ``2 * scale * max|q_i| max|k_j|`` (Cauchy-Schwarz); thresholds run
    geometrically from that bound down by :data:`DYNAMIC_RANGE`, betas over the reciprocal span
    widened by 10 on each side, so p_max = 1/2 is bracketed for every row whose top gap is in range.
    """
    bound = 2.0 * scale * float(q.norm(dim=-1).max()) * float(k.norm(dim=-1).max())
    bound = max(bound, 1e-30)
    t_min = bound / DYNAMIC_RANGE
    t_grid = np.geomspace(t_min, bound, int(np.ceil(np.log(DYNAMIC_RANGE) / np.log(T_RATIO))) + 1)
    b_lo, b_hi = 0.1 / bound, 10.0 / t_min
    beta_fine = np.geomspace(b_lo, b_hi, int(np.ceil(np.log(b_hi / b_lo) / np.log(BETA_RATIO))) + 1)
    return t_grid, beta_fine


def _beta_half_from_grid(betas: np.ndarray, max_weight: np.ndarray) -> np.ndarray:
    """beta with p_max = 1/2 per row, by linear interpolation of log p_max in log beta on the grid.

    p_max is non-decreasing in beta (theory.md §3.1); NaN where the grid does not bracket 1/2.
    """
    target = np.log(0.5)
    logp = np.log(np.maximum(max_weight, 1e-300))  # (r, nb)
    above = logp >= target  # (r, nb)
    first = np.argmax(above, axis=-1)  # (r,)
    ok = above.any(axis=-1) & (first > 0)
    out = np.full(len(logp), np.nan)
    i = first[ok]
    r = np.flatnonzero(ok)
    x0, x1 = np.log(betas[i - 1]), np.log(betas[i])
    y0, y1 = logp[r, i - 1], logp[r, i]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(y1 > y0, (target - y0) / (y1 - y0), 0.0)
    out[r] = np.exp(x0 + frac * (x1 - x0))
    return out


def kernel_row_statistics(q, k, scale: float, n_min: int, *, backend: str = "triton-cuda",
                          shape_k: int = SHAPE_K) -> list[dict]:
    """The quantities of :func:`row_statistics` for every head of one layer, from the fused q·k kernel.

    ``q``, ``k``: ``(heads, T, d_h)`` on the device.  Differences from the reference, all bounded:
    kappa and kappa_16 are the geometric midpoints of the kernel's bracket (within the threshold
    grid's factor :data:`T_RATIO`); beta_{1/2} is interpolated on a beta grid of ratio
    :data:`BETA_RATIO` (:func:`kernel_grids`); the
    smallest gaps come from ``torch.topk`` on float32 logits formed on the device.
    Returns one dict per head, rows with ``n >= n_min``.
    """
    import torch

    from critscale.kernels import qk_row_stats

    heads, T, _ = q.shape
    t_grid, beta_fine = kernel_grids(q, k, scale)
    betas = np.union1d(BETA_GRID, beta_fine)
    grid_index = np.searchsorted(betas, BETA_GRID)
    one = int(np.flatnonzero(np.isclose(betas, 1.0, rtol=0, atol=1e-12))[0])
    common = dict(beta=betas, t=t_grid, scale=scale, causal=True, backend=backend)
    q, k = q.float().contiguous(), k.float().contiguous()  # (heads, T, d_h)
    s2 = qk_row_stats(q, k, K=2, **common).to_numpy()  # fields (heads, T, ...)
    s16 = qk_row_stats(q, k, K=16, **common).to_numpy()
    rows = slice(n_min - 1, T)
    first_logit = (scale * (q.double() @ k[:, 0].double()[..., None]))[..., 0].cpu().numpy()  # (heads, T)
    logits = scale * (q.float() @ k.float().transpose(-1, -2))  # (heads, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    logits = logits.masked_fill(mask, float("-inf"))
    kk = min(shape_k, T)
    top_vals = torch.topk(logits, kk, dim=-1).values.double().cpu().numpy()  # (heads, T, kk)
    del logits
    out = []
    for h in range(heads):
        top = s2.top[h, rows]
        gaps = top_vals[h, rows, :1] - top_vals[h, rows]  # (r, kk); -inf entries give +inf gaps
        if kk < shape_k:
            gaps = np.concatenate([gaps, np.full((len(gaps), shape_k - kk), np.inf)], axis=1)
        log_z1 = s2.log_z[h, rows, one]
        s0 = first_logit[h, rows]
        out.append({
            "n": s2.n_valid[h, rows].astype(np.int64),
            "kappa": np.sqrt(s2.kappa_lower[h, rows] * s2.kappa_upper[h, rows]),
            "kappa16": np.sqrt(s16.kappa_lower[h, rows] * s16.kappa_upper[h, rows]),
            "beta_half": _beta_half_from_grid(betas, s2.max_weight[h, rows]),
            "entropy": s2.entropy[h, rows][:, grid_index],
            "max_weight": s2.max_weight[h, rows][:, grid_index],
            "first_weight": np.exp(np.minimum(s0 - top, 0.0) - log_z1),
            "argmax_first": s0 >= top - 1e-6 * np.maximum(1.0, np.abs(top)),
            "top_gaps": gaps,
        })
    return out
