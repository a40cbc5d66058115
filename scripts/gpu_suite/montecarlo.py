"""Monte-Carlo of the theory chapters with the sampled kernel: ``kernels_montecarlo.json`` / ``.csv``.

For the families of theory.md §5, at ``n = 2^20, 2^24, 2^26``: ``E sum p^2`` and ``E H`` at
``beta = c kappa_bar(n)`` on a grid of ``c`` (means and standard errors over rows), medians of
``kappa / kappa_bar`` and ``kappa_16 / kappa_bar`` bracketed from the gap counts, and a per-row fp32
resolution guard.  Chapter 6 overlays the ``n = 2^24`` curves on its CPU Monte-Carlo.

The rows come from the sampled kernel's generator; its version (:data:`critscale.kernels.GENERATOR_VERSION`,
which changes whenever the same seed gives other rows) is written into the setup, into every result and
into every CSV line, so that a record made by another version of the generator is never mistaken for this one.
"""

from __future__ import annotations

import math
import os
import time
import traceback

import numpy as np

from .output import write_csv, write_json

FAMILIES = ("gauss", "ptail1", "ptail3", "logexp", "edge", "unif", "sphere3", "sphere5", "planted", "simplex",
            "planted_shrink")
C_GRID = [2.0 ** (k / 4) for k in range(-10, 22)]  # 0.177 .. 38.1, contains 1/4, 1/2, 1, 2, 4, 8
PLANS = {"full": [(2**20, 512), (2**24, 256), (2**26, 64)], "quick": [(2**20, 64), (2**24, 32)],
         "smoke": [(600, 6)]}
SMOKE_FAMILIES = ("gauss", "unif")  # one generated as is, one reflected (shift 1)
X_GRID = np.geomspace(2.0 ** -6, 2.0 ** 8, 64)  # thresholds in units of 1/kappa_bar
MAX_WORKERS = 12  # processes on the GPU: one CUDA context each


def finite_or_none(x: float):
    return float(x) if x is not None and math.isfinite(x) else None


def one_family(name: str, fam_idx: int, n: int, rows: int, c: np.ndarray, x_grid: np.ndarray) -> dict:
    from critscale import families
    from critscale.kernels import kappa_bounds, sampled

    fam = families.get(name)
    kb = float(fam.kappa_bar(n))
    seed = int(np.random.SeedSequence([12697, 24, fam_idx, n]).generate_state(1, np.uint64)[0] >> 1)
    t0 = time.time()
    res = sampled.sampled_row_stats(name, n, rows, c * kb, x_grid / kb, seed=seed)
    coll = res.collision.double().cpu().numpy()  # (rows, nc)
    ent = res.entropy.double().cpu().numpy()
    secs = time.time() - t0
    if res.notes.get("generator") != sampled.GENERATOR_VERSION:
        raise RuntimeError(f"{name}: the kernel reports generator {res.notes.get('generator')!r}, "
                           f"critscale.kernels.sampled.GENERATOR_VERSION is {sampled.GENERATOR_VERSION!r}")
    lo16, hi16 = kappa_bounds(res.counts, x_grid / kb, res.n_valid, res.delta2, res.range, res.m0, K=16)
    lo2, hi2 = res.kappa_lower.cpu().numpy(), res.kappa_upper.cpu().numpy()
    # fp32 resolution guard: ulp of the fp32 top score (as the kernel holds it) times kappa_bar
    shift = sampled.family_code(name, n).shift
    ratio = sampled.fp32_gap_ratio(res.top.double().cpu().numpy(), shift, kb)
    unresolved = np.nonzero(ratio >= sampled.FP32_GAP_LIMIT)[0]
    return {"family": name, "n": n, "log2_n": int(round(math.log2(n))), "rows": rows, "seed": seed,
            "generator_version": sampled.GENERATOR_VERSION,
            "kappa_bar": kb, "c": c.tolist(),
            "mean_collision": coll.mean(0).tolist(), "se_collision": (coll.std(0, ddof=1) / math.sqrt(rows)).tolist(),
            "mean_entropy": ent.mean(0).tolist(), "se_entropy": (ent.std(0, ddof=1) / math.sqrt(rows)).tolist(),
            "median_kappa16_over_bar": [float(np.median(lo16.cpu().numpy()) / kb),
                                        float(np.median(hi16.cpu().numpy()) / kb)],
            "median_kappa_over_bar": [finite_or_none(np.median(lo2) / kb), finite_or_none(np.median(hi2) / kb)],
            "threshold_grid_ratio": float(x_grid[1] / x_grid[0]), "seconds": secs, "backend": res.backend,
            "generated_shift": shift,
            "fp32_gap_ratio_max": float(ratio.max()), "fp32_gap_ratio_median": float(np.median(ratio)),
            "fp32_resolved": bool(len(unresolved) == 0), "fp32_rows_unresolved": int(len(unresolved)),
            "fp32_unresolved_rows": unresolved[:20].tolist()}


def family_task(name: str, fam_idx: int, plan: list, deadline: float) -> tuple[list, list]:
    """Every length of one family, in order, until ``deadline`` (epoch seconds): (results, errors)."""
    from .env import ensure_importable

    ensure_importable()  # a worker process imports the installed critscale as the parent did
    c, x_grid = np.array(C_GRID), X_GRID
    results, errors = [], []
    for n, rows in plan:
        if time.time() > deadline:
            errors.append(f"{name} n={n}: skipped, time budget spent")
            continue
        try:
            rec = one_family(name, fam_idx, n, rows, c, x_grid)
        except Exception as exc:  # recorded; the other lengths and families still run
            errors.append(f"{name} n={n}: {type(exc).__name__}: {str(exc)[:300]}")
            traceback.print_exc()
            continue
        results.append(rec)
        if rec["fp32_rows_unresolved"]:
            print(f"[mc] WARNING {name} n=2^{rec['log2_n']}: fp32 does not resolve the top gaps in "
                  f"{rec['fp32_rows_unresolved']}/{rows} rows", flush=True)
        print(f"[mc] {name} n=2^{rec['log2_n']} rows={rows}: {rec['seconds']:.2f} s", flush=True)
    return results, errors


def run_montecarlo(run) -> str:
    """All families; on the GPU one process per family at a time (each family and length is its own
    compilation of the sampled kernel, CPU-bound), in the smoke run one after the other in this process."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from critscale import limits
    from critscale.kernels import sampled

    started = time.time()
    plan = PLANS[run.mode]
    c = np.array(C_GRID)
    names = [(i, name) for i, name in enumerate(FAMILIES) if not run.smoke or name in SMOKE_FAMILIES]
    deadline = run.started + run.budget_s
    if run.smoke:
        done = [family_task(name, i, plan, deadline) for i, name in names]
    else:
        workers = max(1, min(len(names), (os.cpu_count() or 2) - 1, MAX_WORKERS))
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            done = list(pool.map(family_task, [nm for _, nm in names], [i for i, _ in names],
                                 [plan] * len(names), [deadline] * len(names)))
    results = [r for res, _ in done for r in res]
    errors = [e for _, err in done for e in err]
    limits_out = {"c": c.tolist(),
                  "pd_collision": [float(v) for v in np.asarray(limits.pd_collision(c), dtype=float)],
                  "pd_entropy": [finite_or_none(float(v)) for v in np.asarray(limits.pd_entropy(c), dtype=float)]}
    setup = {"families": list(SMOKE_FAMILIES if run.smoke else FAMILIES), "plan": plan, "c_grid": C_GRID,
             "generator_version": sampled.GENERATOR_VERSION,
             "threshold_grid": "t_j = x_j / kappa_bar(n), x geometric in [2^-6, 2^8], 64 points",
             "kappa_bracket": "kappa_16 in [lower, upper] from the counts (critscale.kernels.kappa_bounds); "
                              "upper <= r lower when the grid covers [Delta_(2), R]",
             "seeds": "SeedSequence([12697, 24, fam_idx, n]) (Philox key)",
             "fp32_guard": "per row, ulp(fp32 top score as generated, i.e. top - shift) * kappa_bar(n); "
                           f"rows with a ratio >= {sampled.FP32_GAP_LIMIT} are flagged (fp32_resolved false); "
                           "unif, sphere3, sphere5 are generated reflected (score - 1) for resolution"}
    write_json(run, "kernels_montecarlo", {"setup": setup, "results": results, "limits": limits_out,
                                           "errors": errors}, started)
    flat = [{"family": r["family"], "n": r["n"], "rows": r["rows"], "generator_version": r["generator_version"],
             "c": cv, "mean_collision": r["mean_collision"][i], "se_collision": r["se_collision"][i],
             "mean_entropy": r["mean_entropy"][i], "se_entropy": r["se_entropy"][i]}
            for r in results for i, cv in enumerate(r["c"])]
    write_csv(run, "kernels_montecarlo", flat)
    return "done" if not errors else f"done with {len(errors)} errors (see kernels_montecarlo.json)"
