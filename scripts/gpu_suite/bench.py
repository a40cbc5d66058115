"""Run the declared benchmark (``table.BLOCKS``) and write ``kernels_bench.json`` and ``.csv``.

Protocol, for every point (kind, grid, n) and every implementation the table times there, all in this
one process at this commit:

1. the device state (clocks, power, temperature) before the point and after it;
2. one first call (compilation, autotuning), its peak extra memory, and a check that it returned
   exactly the fields the table declares (the work it does);
3. the float64 reference error of that output on the sampled rows (``reference``);
4. the end-to-end time (``timing.time_call``: >= 10 CUDA-event repetitions, median and IQR) and the
   kernel-only time (``timing.kernel_time``: torch.profiler);
5. the floors of the point (``floors``) and, for implementations that do the kernel's whole work,
   the fraction of each floor reached; every time is also divided by the kernel's time at that point.

Order, so that a time budget drops the least important work (``PHASES``): the kernel at every point of
every block first, then the counters of each kind (``counters``: compiled-code counts, and Nsight Compute
where it is installed), then the baselines block by block, and last ``torch.compile`` with autotuning,
which compiles for minutes.
A point or an implementation that fails or is skipped (time budget) is recorded with its reason; nothing
is kept from an earlier run.
"""

from __future__ import annotations

import math
import time
import traceback

from . import counters, floors, reference, table, timing, work
from .provenance import device_state
from .output import write_csv, write_json

SCHEMA = "critscale-bench/2"
PHASES = ("kernel", "baselines", "autotuned")  # in this order; the counters run before the baselines


def phase_of(impl: str) -> str:
    """The phase an implementation is timed in: the kernel, the baselines, or the slow-to-compile autotuned one."""
    if impl == "kernel":
        return "kernel"
    return "autotuned" if table.IMPLS[impl].compile_mode == "max-autotune-no-cudagraphs" else "baselines"


def check_fields() -> None:
    """The table's ALL_FIELDS must be the kernels' RowStats.FIELDS (else 'equal work' means nothing)."""
    from critscale.kernels import RowStats

    if tuple(RowStats.FIELDS) != table.ALL_FIELDS:
        raise RuntimeError(f"RowStats.FIELDS {RowStats.FIELDS} != table.ALL_FIELDS {table.ALL_FIELDS}: "
                           "update scripts/gpu_suite/table.py so the baselines do the kernel's work")


def time_impl(run, impl: str, inp, ref: dict, ref_rows, sizes, point: dict) -> dict:
    """One implementation at one point: output check, reference error, times (see the module docstring)."""
    import torch

    spec = table.IMPLS[impl]
    rec = {**point, "impl": impl, "fields": list(spec.fields),
           "equal_work": set(spec.fields) >= set(table.ALL_FIELDS)}
    try:
        fn = work.build(impl, inp, run.smoke)
        rec["entry_point"] = getattr(fn, "entry_point", None)
        t0 = time.time()
        out, rec["peak_extra_bytes"] = timing.peak_extra_bytes(fn, run)
        rec["first_call_s"] = time.time() - t0
        if set(out) != set(spec.fields):
            raise RuntimeError(f"returned fields {sorted(out)}, the table declares {sorted(spec.fields)}")
        rec["error_vs_float64"] = reference.errors(out, ref, ref_rows)
        del out
        rec["time_ms"] = timing.time_call(fn, run, sizes.timing_budget_s)
        rec["kernel_time"] = timing.kernel_time(fn, run)
        rec["status"] = "ok"
    except Exception as exc:  # recorded next to the point, and the run goes on
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            run.empty_cache()
        rec["status"] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
        traceback.print_exc()
    return rec


def add_ratios(records: list[dict]) -> None:
    """Fractions of each floor (equal-work implementations) and time over the kernel's, per point."""
    kernel = {r["point"]: r for r in records if r["impl"] == "kernel" and r["status"] == "ok"}
    for r in records:
        if r["status"] != "ok":
            continue
        sec = r["time_ms"]["median"] * 1e-3
        if r["equal_work"]:
            r["frac_of_floor"] = {k: v / sec for k, v in r["floors"]["seconds"].items() if v}
        k = kernel.get(r["point"])
        if k is not None and r["impl"] != "kernel":
            r["time_over_kernel"] = r["time_ms"]["median"] / k["time_ms"]["median"]


def run_bench(run, ceilings: dict) -> dict:
    """Time every block of the table (in the order of ``PHASES``); the data written to ``kernels_bench.json``."""
    check_fields()
    sizes = table.SIZES[run.mode]
    plan = [(block, n, impls) for block in table.BLOCKS for n, impls in table.points(block, sizes)]
    records, blocks, references, counters_out = [], [], {}, {}
    for phase in PHASES:
        if phase == "baselines":
            counters_out = counters.measure(run, sizes, list(table.KINDS))
        for block, n, impls in plan:
            chosen = [i for i in impls if phase_of(i) == phase]
            if not chosen:
                continue
            beta, t = table.grid_values(block.grid, run.mode)
            rows = sizes.rows_at_n.get(n, sizes.rows)
            point = {"point": f"{block.kind}/{block.grid}/n=2^{int(round(math.log2(n)))}", "kind": block.kind,
                     "grid": block.grid, "n": n, "rows": rows, "n_beta": len(beta), "n_t": len(t)}
            if run.over_budget():
                records += [{**point, "impl": i, "status": f"skipped: time budget of {run.budget_s:.0f} s spent"}
                            for i in chosen]
                continue
            state = {"point": point["point"], "phase": phase, "device_before": device_state()}
            try:
                inp = work.make_inputs(block.kind, rows, n, sizes.d, beta, t, run.device, seed=n)
                if point["point"] not in references:  # the same inputs (seed n) in both phases
                    ref_rows = reference.sample_rows(rows, n, sizes.reference_scores)
                    references[point["point"]] = (ref_rows, reference.reference_fields(
                        reference.reference_scores(inp, ref_rows), beta, t))
                ref_rows, ref = references[point["point"]]
            except Exception as exc:
                records += [{**point, "impl": i, "status": f"error: inputs or reference: {type(exc).__name__}: "
                             f"{str(exc)[:300]}"} for i in chosen]
                traceback.print_exc()
                continue
            model = floors.work_model(block.kind, rows, n, beta, len(t), sizes.d)
            point["floors"] = {**floors.floors(model, ceilings), "work": model}
            for impl in chosen:
                rec = time_impl(run, impl, inp, ref, ref_rows, sizes, point)
                records.append(rec)
                shown = f"{rec['time_ms']['median']:.3f} ms" if rec["status"] == "ok" else rec["status"]
                print(f"[bench] {point['point']} {impl}: {shown}", flush=True)
            state["device_after"] = device_state()
            blocks.append(state)
            del inp
            run.empty_cache()
    add_ratios(records)
    return {
        "schema": SCHEMA,
        "setup": {
            "mode": run.mode, "rows": sizes.rows, "d": sizes.d,
            "grids": {g: dict(zip(("beta", "t"), (v.tolist() for v in table.grid_values(g, run.mode))))
                      for g in table.GRIDS},
            "kinds": {k.name: {"inputs": k.inputs, "entry_points": list(k.entry_points)}
                      for k in table.KINDS.values()},
            "impls": {i.name: {"fields": list(i.fields), "description": i.description,
                               "compile_mode": i.compile_mode} for i in table.IMPLS.values()},
            "all_fields": list(table.ALL_FIELDS),
            "compile": ("torch.compile(backend='eager', dynamic=True): dynamo only (smoke)" if run.smoke
                        else "torch.compile(dynamic=True) with each implementation's mode (inductor)"),
            "timing": timing.__doc__.strip(),
            "reference": reference.__doc__.strip(),
            "floors": floors.__doc__.strip(),
            "sampled_family": table.SAMPLED_FAMILY, "seed": table.SEED,
        },
        "ceilings": ceilings,
        "records": records,
        "blocks": blocks,
        "counters": counters_out,
        "errors": [f"{r['point']} {r['impl']}: {r['status']}" for r in records if r["status"] != "ok"],
    }


def write_bench(run, data: dict, started: float) -> str:
    """Write ``kernels_bench.json`` and ``.csv``; returns the part's status."""
    write_json(run, "kernels_bench", data, started)
    write_csv(run, "kernels_bench", data["records"])
    return "done" if not data["errors"] else f"done with {len(data['errors'])} errors (see kernels_bench.json)"
