"""The result of every kernel (:class:`RowStats`) and its finishing in float64, from per-row sums.

What a kernel hands over, per row with maximum ``M`` and gaps ``Delta_i = M - s_i`` (theory.md §3.1):

- pass 1: ``M``, the second order statistic with multiplicity (so the exact second gap
  ``Delta_(2)``), the minimum (the range ``R = Delta_(n)``), the numbers of valid and of bad entries;
- pass 2: the multiplicity ``m0`` of the maximum, ``A(beta) = sum_{Delta_i > 0} e^{-beta Delta_i}``,
  ``B(beta) = sum_i Delta_i e^{-beta Delta_i}``, ``C(beta) = A(2 beta)`` and the counts
  ``N(t_j) = #{i : Delta_i <= t_j}``.

Finishing (:func:`finish`): ``log Z = log1p(m0 - 1 + A)``, ``H = log Z + beta B / Z``,
``p_max = e^{-log Z}``, ``sum p^2 = (m0 + C) / Z^2``.  Separating ``m0`` keeps ``Z - 1`` (hence ``log Z`` of a
collapsed row) to full relative precision, as in :func:`critscale.softmax_stats`.  Everything here runs
on the device of the sums, without host synchronisation; input problems found by pass 1 become a
device-side flag that the entry point checks once, at the end of the call (:func:`raise_problems`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["Pass1", "RowStats", "combine_pass1", "finish", "kappa_bounds", "pass1_problems", "raise_problems",
           "reference_from_scores", "restore"]


@dataclass
class RowStats:
    """Row statistics of theory.md §3.1 on a beta grid and a threshold grid.

    Shapes: ``(..., n_beta)`` for the softmax fields, ``(..., n_t)`` for ``counts``, ``(...)`` for the rest.
    ``kappa_lower <= kappa_K <= kappa_upper`` (see :func:`kappa_bounds`); ``delta2`` is the exact second gap.
    ``backend`` names what ran: ``"triton-cuda"``, ``"triton-interpreter"`` or ``"reference"``; ``notes``
    records the kind (``"scores"``, ``"qk"``, ``"sampled"``) and how it was launched.
    """

    log_z: Any
    entropy: Any
    max_weight: Any
    collision: Any
    counts: Any
    top: Any
    delta2: Any
    range: Any
    n_valid: Any
    m0: Any
    kappa_lower: Any
    kappa_upper: Any
    beta: np.ndarray
    t: np.ndarray
    backend: str
    notes: dict = field(default_factory=dict)

    FIELDS = ("log_z", "entropy", "max_weight", "collision", "counts", "top", "delta2", "range",
              "n_valid", "m0", "kappa_lower", "kappa_upper")

    def to_numpy(self) -> "RowStats":
        """The same result with every field a float64 numpy array."""
        conv = {k: np.asarray(v.detach().cpu() if torch.is_tensor(v) else v, dtype=np.float64)
                for k, v in ((f, getattr(self, f)) for f in self.FIELDS)}
        return RowStats(**conv, beta=self.beta, t=self.t, backend=self.backend, notes=dict(self.notes))


@dataclass
class Pass1:
    """Per-row results of pass 1, float64/int64 on the kernel's device: shapes ``(rows,)``."""

    top: torch.Tensor
    second: torch.Tensor
    low: torch.Tensor
    n_valid: torch.Tensor
    n_bad: torch.Tensor


def combine_pass1(top1, top2, low, count, bad) -> Pass1:
    """Merge per-(row, column chunk) partial results ``(rows, chunks)`` into per-row ones."""
    both = torch.cat([top1, top2], dim=-1).double()  # (rows, 2 chunks)
    best2 = torch.topk(both, 2, dim=-1).values if both.shape[-1] >= 2 else torch.cat([both, both], -1)
    return Pass1(top=best2[:, 0], second=best2[:, 1], low=low.double().min(dim=-1).values,
                 n_valid=count.long().sum(dim=-1), n_bad=bad.long().sum(dim=-1))


def pass1_problems(p1: Pass1) -> torch.Tensor:
    """Per-row flags ``(3, rows)`` bool on the device: bad entries, empty rows, a range overflowing float32."""
    span = (p1.top - p1.low).float()
    return torch.stack([p1.n_bad > 0, p1.n_valid == 0, (p1.n_valid > 0) & ~torch.isfinite(span)])


def raise_problems(flags: torch.Tensor, what: str, bad_meaning: str) -> None:
    """Raise the ``ValueError`` the library raises for the first kind of problem found (one host sync).

    ``flags`` is :func:`pass1_problems`' ``(3, rows)`` tensor (possibly with extra leading checks or'ed in);
    ``bad_meaning`` says what a bad entry is for this kind (e.g. "NaN or +inf").
    """
    any_flag = flags.any(dim=-1).cpu()
    if not bool(any_flag.any()):
        return
    kind = int(torch.nonzero(any_flag)[0])
    rows = torch.nonzero(flags[kind]).flatten()[:10].tolist()
    if kind == 0:
        raise ValueError(f"{what} contain {bad_meaning} (rows {rows}); only -inf is allowed, it marks a masked entry")
    if kind == 1:
        raise ValueError(f"{what}: rows empty after masking (every entry is -inf): rows {rows}")
    raise ValueError(f"{what}: the range max - min of rows {rows} overflows float32")


def finish(p1: Pass1, m0: torch.Tensor, sum_a: torch.Tensor, sum_b: torch.Tensor, sum_c: torch.Tensor,
           counts: torch.Tensor, beta: np.ndarray, t: Any, backend: str, K: int = 2) -> RowStats:
    """Assemble the statistics in float64 from per-row sums (``(rows,)``, ``(rows, n_beta)``, ``(rows, n_t)``).

    ``beta`` and ``t`` are float64 arrays, or tensors already on the sums' device (no upload)."""
    dev = sum_a.device
    b = torch.as_tensor(beta, dtype=torch.float64).to(dev)[None, :]  # (1, nb)
    m0 = m0.double()[:, None]  # (rows, 1)
    log_z = torch.log1p(m0 - 1.0 + sum_a)  # (rows, nb)
    z = m0 + sum_a
    entropy = log_z + b * sum_b / z
    collision = (m0 + sum_c) / (z * z)
    delta2 = p1.top - p1.second
    rng = p1.top - p1.low
    lo, hi = kappa_bounds(counts.double(), t, p1.n_valid.double(), delta2, rng, m0[:, 0], K=K)
    return RowStats(log_z=log_z, entropy=entropy, max_weight=torch.exp(-log_z), collision=collision,
                    counts=counts.double(), top=p1.top, delta2=delta2, range=rng, n_valid=p1.n_valid.double(),
                    m0=m0[:, 0], kappa_lower=lo, kappa_upper=hi, beta=beta, t=t, backend=backend)


def kappa_bounds(counts: torch.Tensor, t: Any, n_valid: torch.Tensor, delta2: torch.Tensor,
                 rng: torch.Tensor, m0: torch.Tensor, K: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Bracket the accumulation scale ``kappa_K`` (theory.md §3.1) from gap counts on a grid.

    Known exactly per row: ``N(t_j)`` on the grid, ``N(R) = n`` at the range ``R``, ``N(t) = 1`` for
    ``t < Delta_(2)`` when the maximum is unique.  With these "points" ``a_1 < a_2 < ...``:

    - lower bound: every ``log N(a)/a`` with ``N(a) >= K`` is a value of the sup, and for ``K = 2``
      so is ``log N(Delta_(2))/Delta_(2) >= log 2/Delta_(2)``;
    - upper bound: on ``[a_{i-1}, a_i)`` the count is at most ``N(a_i)`` and ``t >= max(a_{i-1}, Delta_(2))``
      (and ``Delta_(K) >= Delta_(2)``), so the sup there is at most ``log N(a_i) / max(a_{i-1}, Delta_(2))``.

    Grid factor bound: for a geometric grid ``t_{j+1} = r t_j`` with ``t_1 <= Delta_(2)`` and ``t_J >= R``,
    every non-empty interval has ``a_i <= r max(a_{i-1}, Delta_(2))``, hence ``kappa_upper <= r kappa_lower``.

    Conventions as :func:`critscale.accumulation_scale`: ``inf`` when ``m0 >= K``; ``0`` when fewer than
    ``K`` valid entries.  ``t`` may be a float64 array or tensor (a tensor on the counts' device is not copied).
    """
    dev = counts.device
    rows = counts.shape[0]
    tt = torch.as_tensor(t if torch.is_tensor(t) else np.asarray(t, dtype=np.float64), dtype=torch.float64).to(dev)
    pts = torch.cat([tt[None, :].expand(rows, -1), rng[:, None]], dim=1)  # (rows, nt+1)
    npts = torch.cat([counts, n_valid[:, None]], dim=1)  # (rows, nt+1)
    order = torch.argsort(pts, dim=1, stable=True)
    pts = torch.gather(pts, 1, order)
    npts = torch.gather(npts, 1, order)
    npts = torch.cummax(npts, dim=1).values  # N is monotone; ties between a grid point and R agree
    logn = torch.log(npts.clamp(min=1.0))
    ok = (npts >= K) & (pts > 0) & torch.isfinite(pts)
    lower = torch.where(ok, logn / torch.where(pts > 0, pts, 1.0), torch.zeros_like(pts)).max(dim=1).values
    d2ok = (delta2 > 0) & (n_valid >= 2)
    if K == 2:
        lower = torch.maximum(lower, torch.where(d2ok, math.log(2.0) / torch.where(d2ok, delta2, 1.0),
                                                 torch.zeros_like(lower)))
    prev = torch.cat([torch.zeros_like(pts[:, :1]), pts[:, :-1]], dim=1)  # (rows, nt+1)
    start = torch.maximum(prev, delta2[:, None])
    nonempty = (start < pts) & (start > 0) & (npts >= K)
    upper = torch.where(nonempty, logn / torch.where(start > 0, start, 1.0), torch.zeros_like(pts)).max(dim=1).values
    upper = torch.maximum(upper, lower)
    inf = torch.full_like(lower, float("inf"))
    tied = m0 >= K
    short = n_valid < K
    lower = torch.where(tied, inf, torch.where(short, torch.zeros_like(lower), lower))
    upper = torch.where(tied, inf, torch.where(short, torch.zeros_like(upper), upper))
    return lower, upper


def restore(stats: RowStats, batch_shape: tuple[int, ...], like: Any) -> RowStats:
    """Reshape the flat ``(rows, ...)`` fields to ``batch_shape`` and convert them like the input."""
    out = {}
    for name in RowStats.FIELDS:
        v = getattr(stats, name)
        v = v.reshape(*batch_shape, *v.shape[1:])
        if isinstance(like, np.ndarray):
            v = v.detach().cpu().numpy()
        elif torch.is_tensor(like):
            v = v.to(like.device)
        out[name] = v
    return RowStats(**out, beta=stats.beta, t=stats.t, backend=stats.backend, notes=dict(stats.notes))


def reference_from_scores(scores64: torch.Tensor, beta: np.ndarray, t: np.ndarray, K: int = 2) -> RowStats:
    """Float64 torch reference of every field from materialised ``(rows, n)`` scores (``-inf`` masked).

    The tiny reference of the Triton tutorials: the same definitions, written the obvious way.
    """
    s = scores64.double()
    valid = s > float("-inf")
    top = s.max(dim=1).values  # (rows,)
    low = torch.where(valid, s, torch.full_like(s, float("inf"))).min(dim=1).values
    n_valid = valid.sum(dim=1)
    if s.shape[1] >= 2:
        second = torch.topk(s, 2, dim=1).values[:, 1]  # (rows,) second order statistic, ties kept
    else:
        second = torch.full_like(top, float("-inf"))
    delta = torch.where(valid, top[:, None] - s, torch.zeros_like(s))  # (rows, n)
    pos = valid & (delta > 0)
    m0 = (valid & (delta == 0)).sum(dim=1)
    b = torch.as_tensor(beta, dtype=s.dtype, device=s.device)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    w = torch.where(pos[:, :, None], torch.exp(-delta[:, :, None] * b), zero)  # (rows, n, nb)
    w2 = torch.where(pos[:, :, None], torch.exp(-2 * delta[:, :, None] * b), zero)
    tt = torch.as_tensor(np.asarray(t, dtype=np.float64), device=s.device)
    counts = (valid[:, :, None] & (delta[:, :, None] <= tt)).sum(dim=1)  # (rows, nt)
    p1 = Pass1(top=top, second=second, low=low, n_valid=n_valid, n_bad=torch.zeros_like(n_valid))
    return finish(p1, m0, w.sum(dim=1), (w * delta[:, :, None]).sum(dim=1), w2.sum(dim=1), counts, beta, t,
                  "reference", K=K)
