"""Stage 3: the statistics of every row the design reads (theory.md §3.1, §6 P-13).

For each row of logits ``s_ij = scale * q_i . k_j`` at the model's own temperature (``beta = 1``):

* the operating point, which does not depend on how kappa is defined: ``max_weight`` (p_max) and
  ``entropy`` on the temperature grid :data:`BETA_GRID` (units of the model's beta), and
  ``beta_half``, the beta with p_max = 1/2 (:func:`critscale.beta_at_max_weight`, Corollary 5);
* ``kappa`` = kappa_2 and ``kappa16`` = kappa_16 (:func:`critscale.accumulation_scale`);
* the first key's weight and whether it is the row maximum (sinks);
* the :data:`.laws.SHAPE_K` smallest sorted gaps (:func:`critscale.sorted_gaps`), for the law;
* ``spread``, the standard deviation of the row's logits (to put the null heads on the same scale);
* ``degenerate``: every valid logit of the row is the same number (all-zero or constant q or k), so
  that the row has no maximum, no gap and no kappa to read (its kappa is the tied maximum's inf).

Backends: ``"reference"`` computes everything in numpy float64 through the critscale API;
``"kernel"`` takes the kappa brackets and the softmax sums from the fused q·k kernel
``critscale.kernels.qk_row_stats`` on CUDA and the smallest gaps from ``torch.topk`` on float32
logits (:func:`kernel_block_statistics` also runs on the kernel package's float64 reference backend,
which is how it is tested without a GPU).
Differences between the two, all bounded: kappa and kappa_16 are the geometric midpoints of the
kernel's bracket (within the threshold grid's factor :data:`T_RATIO`); beta_1/2 is interpolated on a
beta grid of ratio :data:`BETA_RATIO`.
"""

from __future__ import annotations

import numpy as np
import torch

import critscale

from .laws import SHAPE_K
from .windows import QKBlock

# Temperature grid in units of the model's own beta (= 1 on its logits).
BETA_GRID = np.geomspace(1 / 16, 16, 9)
MODEL_BETA = int(np.flatnonzero(np.isclose(BETA_GRID, 1.0))[0])
# Which implementation computes the row statistics (the command line's --backend): the float64 reference or the
# fused q.k kernel; the kernels' own backends are another choice (critscale.kernels.dispatch.BACKENDS).
IMPLEMENTATIONS = ("auto", "reference", "kernel")


def row_statistics(rows: np.ndarray, *, betas: np.ndarray = BETA_GRID, shape_k: int = SHAPE_K) -> dict:
    """All per-row quantities of ``rows`` ``(r, n_max)`` (``-inf`` = masked, float64).

    The model's beta (1) must be in ``betas``.  Returns a dict of arrays: ``n``, ``kappa``,
    ``kappa16``, ``beta_half``, ``entropy`` ``(r, len(betas))``, ``max_weight`` ``(r, len(betas))``,
    ``first_weight``, ``argmax_first``, ``spread``, ``degenerate``, ``top_gaps`` ``(r, shape_k)``
    (``inf``-padded).
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
    kappa16 = critscale.accumulation_scale(rows, K=16)  # (r,) 0 when n < 16
    stats = critscale.softmax_stats(rows, betas)  # each (r, len(betas))
    top = rows.max(axis=-1)  # (r,)
    beta_half = np.full(len(rows), np.nan)
    solvable = np.isfinite(kappa) & (n >= 2)  # a tied maximum never reaches p_max = 1/2
    if solvable.any():
        beta_half[solvable] = critscale.beta_at_max_weight(rows[solvable], 0.5)
    log_z1 = stats.log_z[:, one[0]]  # (r,)
    first_weight = np.exp(rows[:, 0] - top - log_z1)  # (r,) softmax weight of position 0 at beta = 1
    argmax_first = rows[:, 0] >= top  # (r,) position 0 is (one of) the maxima
    zeroed = np.where(valid, rows, 0.0)  # (r, n_max)
    mean = zeroed.sum(axis=-1) / n  # (r,)
    spread = np.sqrt(np.where(valid, (zeroed - mean[:, None]) ** 2, 0.0).sum(axis=-1) / n)  # (r,)
    degenerate = (n >= 2) & (np.where(valid, rows, np.inf).min(axis=-1) == top)  # (r,) every valid logit equal
    gaps = critscale.sorted_gaps(rows)[:, :shape_k]  # (r, min(n_max, shape_k))
    if gaps.shape[1] < shape_k:  # rows shorter than shape_k: pad with +inf (no such gap)
        gaps = np.concatenate([gaps, np.full((len(gaps), shape_k - gaps.shape[1]), np.inf)], axis=1)
    return {"n": n, "kappa": kappa, "kappa16": kappa16, "beta_half": beta_half,
            "entropy": stats.entropy, "max_weight": stats.max_weight, "first_weight": first_weight,
            "argmax_first": argmax_first, "spread": spread, "degenerate": degenerate, "top_gaps": gaps}


def block_logits(block: QKBlock) -> np.ndarray:
    """Float64 logits ``(L, H, B, m, n)`` of a block, ``-inf`` where a causal query cannot see the key."""
    m, n = block.q.shape[-2], block.n
    scales = torch.as_tensor(block.scales, dtype=torch.float64, device=block.q.device)[:, None, None, None, None]
    logits = scales * (block.q.double() @ block.k.double().transpose(-1, -2))  # (L, H, B, m, n)
    logits = logits.cpu().numpy()
    if block.causal:
        hidden = np.arange(n)[None, :] > (n - m + np.arange(m))[:, None]  # (m, n) keys after the query
        logits[..., hidden] = -np.inf
    return logits


def labels(block: QKBlock) -> dict:
    """Layer, head, window, level and query index of each row of a block, flattened like its rows."""
    L, H, B, m = block.q.shape[:4]
    layer, head, window, query = np.meshgrid(np.arange(L), np.arange(H), block.windows, np.arange(m), indexing="ij")
    return {"layer": layer.ravel(), "head": head.ravel(), "window": window.ravel(),
            "level": np.full(L * H * B * m, block.n), "query": query.ravel()}


def reference_block_statistics(block: QKBlock) -> dict:
    """Labels and :func:`row_statistics` of every row of ``block`` (float64, numpy)."""
    logits = block_logits(block)  # (L, H, B, m, n)
    return {**labels(block), **row_statistics(logits.reshape(-1, block.n))}


def kernel_available() -> bool:
    """True when the fused q·k kernel exists and CUDA is usable (never under the interpreter)."""
    if not torch.cuda.is_available():  # checked first: importing the kernels on CPU needs the interpreter
        return False
    try:
        from critscale import kernels
        from critscale.kernels.dispatch import cuda_usable
    except ImportError:
        return False
    return hasattr(kernels, "qk_row_stats") and cuda_usable()


def resolve_backend(backend: str) -> str:
    """``auto``: the fused kernel on CUDA when it is available, else the float64 reference."""
    if backend not in IMPLEMENTATIONS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {IMPLEMENTATIONS}")
    if backend == "auto":
        return "kernel" if kernel_available() else "reference"
    if backend == "kernel" and not kernel_available():
        raise ValueError("backend 'kernel' needs CUDA and critscale.kernels.qk_row_stats")
    return backend


def block_statistics(block: QKBlock, backend: str = "reference") -> dict:
    """Labels and statistics of every row of ``block`` with a resolved backend."""
    if backend == "reference":
        return reference_block_statistics(block)
    return {**labels(block), **kernel_block_statistics(block, backend="triton-cuda")}


# Kernel path: geometric grids scaled to the block's logits (kappa is scale-covariant, theory.md §3.1).
T_RATIO = 1.06  # neighbouring thresholds: kappa is bracketed within this factor
BETA_RATIO = 1.12  # neighbouring betas of the interpolation grid of beta_{1/2}
DYNAMIC_RANGE = 1e7  # smallest threshold = largest possible gap / DYNAMIC_RANGE


def kernel_grids(q, k) -> tuple[np.ndarray, np.ndarray]:
    """Threshold and beta grids covering every gap of the logits ``q k^T`` (scale folded into ``q``).

    The largest gap is at most ``2 max|q_i| max|k_j|`` (Cauchy-Schwarz); thresholds run
    geometrically from that bound down by :data:`DYNAMIC_RANGE`, betas over the reciprocal span
    widened by 10 on each side, so p_max = 1/2 is bracketed for every row whose top gap is in range.
    """
    bound = max(2.0 * float(q.norm(dim=-1).max()) * float(k.norm(dim=-1).max()), 1e-30)
    t_min = bound / DYNAMIC_RANGE
    t_grid = np.geomspace(t_min, bound, int(np.ceil(np.log(DYNAMIC_RANGE) / np.log(T_RATIO))) + 1)
    b_lo, b_hi = 0.1 / bound, 10.0 / t_min
    beta_fine = np.geomspace(b_lo, b_hi, int(np.ceil(np.log(b_hi / b_lo) / np.log(BETA_RATIO))) + 1)
    return t_grid, beta_fine


def beta_half_from_grid(betas: np.ndarray, max_weight: np.ndarray) -> np.ndarray:
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


def kernel_block_statistics(block: QKBlock, *, backend: str = "triton-cuda", shape_k: int = SHAPE_K) -> dict:
    """The quantities of :func:`row_statistics` for every row of ``block``, from the fused q·k kernel."""
    from critscale.kernels import qk_row_stats

    L, H, B, m, d = block.q.shape
    n = block.n
    scales = torch.as_tensor(block.scales, dtype=torch.float32, device=block.q.device)[:, None, None, None, None]
    q = (block.q.float() * scales).reshape(L * H * B, m, d).contiguous()  # (G, m, d_h), scale folded in
    k = block.k.float().reshape(L * H * B, n, d).contiguous()  # (G, n, d_h)
    if backend == "triton-cuda":  # arrays from a file arrive on the CPU
        q, k = q.cuda(), k.cuda()
    t_grid, beta_fine = kernel_grids(q, k)
    betas = np.union1d(BETA_GRID, beta_fine)
    grid_index = np.searchsorted(betas, BETA_GRID)
    one = int(np.flatnonzero(np.isclose(betas, 1.0, rtol=0, atol=1e-12))[0])
    common = dict(beta=betas, t=t_grid, scale=1.0, causal=block.causal,
                  causal_offset=n - m if block.causal else 0, backend=backend)
    s2 = qk_row_stats(q, k, K=2, **common).to_numpy()  # fields (G, m, ...)
    s16 = qk_row_stats(q, k, K=16, **common).to_numpy()
    logits = q @ k.transpose(-1, -2)  # (G, m, n) float32
    if block.causal:
        hidden = torch.arange(n, device=q.device)[None, :] > (n - m + torch.arange(m, device=q.device))[:, None]
        logits = logits.masked_fill(hidden, float("-inf"))
    valid = torch.isfinite(logits)  # (G, m, n)
    zeroed = torch.where(valid, logits, torch.zeros_like(logits)).double()
    count = valid.sum(-1)  # (G, m)
    mean = zeroed.sum(-1) / count
    spread = torch.sqrt(torch.where(valid, (zeroed - mean[..., None]) ** 2, 0.0).sum(-1) / count)  # (G, m)
    low = torch.where(valid, logits, torch.full_like(logits, float("inf"))).amin(-1)  # (G, m)
    degenerate = (count >= 2) & (low == logits.amax(-1))  # (G, m) every valid logit equal
    kk = min(shape_k, n)
    top_vals = torch.topk(logits, kk, dim=-1).values.double()  # (G, m, kk)
    gaps = (top_vals[..., :1] - top_vals).reshape(-1, kk).cpu().numpy()  # (r, kk); -inf entries give +inf
    if kk < shape_k:
        gaps = np.concatenate([gaps, np.full((len(gaps), shape_k - kk), np.inf)], axis=1)
    first_logit = logits[..., 0].double().reshape(-1).cpu().numpy()  # (r,)
    top = s2.top.reshape(-1)
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731  (G, m, ...) -> (r, ...)
    return {
        "n": flat(s2.n_valid).astype(np.int64),
        "kappa": np.sqrt(flat(s2.kappa_lower) * flat(s2.kappa_upper)),
        "kappa16": np.sqrt(flat(s16.kappa_lower) * flat(s16.kappa_upper)),
        "beta_half": beta_half_from_grid(betas, flat(s2.max_weight)),
        "entropy": flat(s2.entropy)[:, grid_index],
        "max_weight": flat(s2.max_weight)[:, grid_index],
        "first_weight": np.exp(np.minimum(first_logit - top, 0.0) - flat(s2.log_z)[:, one]),
        "argmax_first": first_logit >= top - 1e-6 * np.maximum(1.0, np.abs(top)),
        "spread": spread.reshape(-1).cpu().numpy(),
        "degenerate": degenerate.reshape(-1).cpu().numpy(),
        "top_gaps": gaps,
    }
