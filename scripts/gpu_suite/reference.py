"""Float64 reference error of every implementation at every timed point.

The reference is critscale's own float64 code (``softmax_stats``, ``gap_counts``, ``accumulation_scale``:
the one the kernel tests use) on a sample of rows spread over the point's rows, as many as fit in
``Sizes.reference_scores`` scores (at least one).  Its scores are the ones the implementations see:
the stored fp32 scores, the float64 logits of the bf16 ``q`` and ``k``, or the generated fp32 rows.

Errors reported per field (only the fields an implementation returns):

- softmax fields and ``lse``: ``max_rel``, the largest ``|got - want| / (|want| + floor)`` with the floor
  ``n 2^-126`` (times 88 for the entropy) of terms below fp32's normal range, as in
  ``critscale.kernels.testing``, and ``max_abs``, the largest ``|got - want|`` (nats for ``log_z``,
  ``lse`` and the entropy: a route that gets the entropy by cancellation, ``lse - beta <s>``, has a
  small absolute but a huge relative error on collapsed rows, where ``H`` is near 0);
- ``counts``: the number of entries that differ;
- ``top``, ``delta2``, ``range``, ``n_valid``, ``m0``: the largest relative difference;
- ``kappa_lower``/``kappa_upper``: the number of rows where the bracket misses the exact ``kappa``.

For qk the reference logits are float64 while every implementation's are fp32, so counts and the
bracket can differ where a gap lies within fp32 rounding of a threshold; the baselines, which use fp32
logits too, show the same differences.
"""

from __future__ import annotations

import numpy as np

from .table import SAMPLED_FAMILY, SEED, SOFTMAX_FIELDS

UNDERFLOW = 2.0 ** -126


def sample_rows(rows: int, n: int, budget_scores: int) -> np.ndarray:
    """Indices of the reference rows: evenly spread, ``clip(budget / n, 1, rows)`` of them."""
    count = int(min(rows, max(1, budget_scores // n)))
    return np.unique(np.linspace(0, rows - 1, count).round().astype(int))


def reference_scores(inp, rows: np.ndarray) -> np.ndarray:
    """float64 scores ``(len(rows), n)`` of the sampled rows, as the implementations see them."""
    import torch

    idx = torch.as_tensor(rows, device=inp.device)
    if inp.kind == "scores":
        return inp.x[idx].double().cpu().numpy()
    if inp.kind == "qk":
        return ((inp.q[idx].double() @ inp.k.double().T) * inp.scale).cpu().numpy()
    import critscale.kernels as ck

    return np.stack([ck.sample_scores(SAMPLED_FAMILY, inp.n, 1, seed=SEED, row0=int(r))[0].double().cpu().numpy()[0]
                     for r in rows])


def reference_fields(s64: np.ndarray, beta: np.ndarray, t: np.ndarray) -> dict:
    """Every field in float64 from scores ``(r, n)``, plus ``lse`` and the exact ``kappa``."""
    import critscale as cs

    st = cs.softmax_stats(s64, beta)
    valid = s64 > -np.inf
    top = s64.max(axis=1)
    second = -np.partition(-s64, 1, axis=1)[:, 1] if s64.shape[1] >= 2 else np.full_like(top, -np.inf)
    low = np.where(valid, s64, np.inf).min(axis=1)
    return {"log_z": st.log_z, "entropy": st.entropy, "max_weight": st.max_weight, "collision": st.collision,
            "lse": st.log_z + np.asarray(beta)[None, :] * top[:, None], "counts": cs.gap_counts(s64, t),
            "top": top, "delta2": top - second, "range": top - low, "n_valid": valid.sum(axis=1).astype(float),
            "m0": (s64 == top[:, None]).sum(axis=1).astype(float), "kappa": cs.accumulation_scale(s64)}


def _numpy(v) -> np.ndarray:
    import torch

    return (v.detach().double().cpu().numpy() if torch.is_tensor(v) else np.asarray(v, dtype=np.float64))


def errors(out: dict, ref: dict, rows: np.ndarray) -> dict:
    """Errors of an implementation's output ``out`` (all rows) against ``ref`` (the sampled rows)."""
    n_valid = ref["n_valid"][:, None]
    err = {"reference_rows": int(len(rows))}
    for name, value in out.items():
        got = _numpy(value)[rows]
        if name in SOFTMAX_FIELDS:
            want = ref[name]
            floor = n_valid * UNDERFLOW * (88.0 if name == "entropy" else 1.0)
            with np.errstate(invalid="ignore"):
                diff = np.where(np.isinf(want) & (got == want), 0.0, np.abs(got - want))
            diff = np.where(np.isnan(diff), np.inf, diff)
            err[name] = {"max_rel": float(np.max(diff / (np.abs(np.where(np.isinf(want), 0.0, want)) + floor))),
                         "max_abs": float(np.max(diff))}
        elif name == "counts":
            err["counts_mismatch"] = int(np.sum(got != ref["counts"]))
        elif name in ("top", "delta2", "range", "n_valid", "m0"):
            want = ref[name]
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.where(got == want, 0.0, np.abs(got - want) / np.maximum(np.abs(want), 1e-300))
            err[name] = float(np.max(rel))
    if "kappa_lower" in out:
        lo, hi, kap = _numpy(out["kappa_lower"])[rows], _numpy(out["kappa_upper"])[rows], ref["kappa"]
        fin = np.isfinite(kap)
        err["kappa_bracket_violations"] = int(np.sum(lo[fin] > kap[fin] * (1 + 1e-9))
                                              + np.sum(hi[fin] < kap[fin] * (1 - 1e-9))
                                              + np.sum(np.isinf(lo) != np.isinf(kap)))
    return err
