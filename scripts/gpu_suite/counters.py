"""What bounds each kernel, measured: Nsight Compute counters, or instruction counts of the compiled code.

Sources, each used when present (``counters.<kind>.sources`` says which ran and why others did not):

1. ``ncu`` on the PATH: one child process per kind runs one call of the kind's kernel at
   ``Sizes.counters_n`` inside an NVTX range, under ``ncu --clock-control none`` (the card's clocks are
   left alone) with the metrics below that the device offers; the report is read back as CSV in base
   units.  Per kernel: instructions executed (total and per pipe: FMA, ALU, XU = MUFU, LSU), each pipe's
   and the issue slots' utilisation (percent of peak while the SM is active), DRAM bytes and throughput.
   A kernel's *bound* is the largest of those utilisations.
2. ``critscale.kernels.sass``: every kernel one call launches at the grid, compiled by this machine's Triton
   for sm_90a and disassembled; instructions per score and pipe of its hot loop, the floor in clocks per
   score of each pipe and the bound pipe (the largest floor, instruction issue included).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .env import ROOT

NVTX_RANGE = "critscale_measure"
METRICS = (
    "gpu__time_duration.sum",
    "sm__inst_executed.sum",
    "sm__inst_executed_pipe_fma.sum",
    "sm__inst_executed_pipe_alu.sum",
    "sm__inst_executed_pipe_xu.sum",
    "sm__inst_executed_pipe_lsu.sum",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
UTILISATION = {  # name in the record -> metric: the candidates for a kernel's bound
    "fma pipe": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "alu pipe": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "xu (MUFU) pipe": "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active",
    "issue slots": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}
INSTRUCTIONS = {"total": "sm__inst_executed.sum", "fma": "sm__inst_executed_pipe_fma.sum",
                "alu": "sm__inst_executed_pipe_alu.sum", "xu": "sm__inst_executed_pipe_xu.sum",
                "lsu": "sm__inst_executed_pipe_lsu.sum"}


def available_metrics(ncu: str, wanted=METRICS) -> tuple[list[str], list[str]]:
    """(metrics the device offers, metrics it does not), from ``ncu --query-metrics``."""
    proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    bases = {line.split()[0] for line in proc.stdout.splitlines() if line.strip() and "__" in line.split()[0]}
    if proc.returncode != 0 or not bases:
        return list(wanted), []  # unknown: ask for all, ncu names any missing one in its error
    have = [m for m in wanted if m.split(".")[0] in bases]
    return have, [m for m in wanted if m not in have]


def _number(text: str):
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict]:
    """Rows of ``ncu --import R --csv --page raw --print-units base``: a header, a units row, one row per kernel."""
    rows = list(csv.reader(io.StringIO(text)))
    header_at = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    header = rows[header_at]
    kernels = []
    for r in rows[header_at + 1:]:
        if len(r) != len(header) or not r[header.index("ID")].strip():
            continue  # the units row, blank lines
        rec = dict(zip(header, r))
        kernels.append({"name": rec["Kernel Name"],
                        "metrics": {m: _number(rec[m]) for m in header if "__" in m}})
    return kernels


def summarize_kernel(k: dict, scores: int) -> dict:
    """One kernel's instructions (per score: warp instructions x 32 / scores), utilisations and bound."""
    m = k["metrics"]
    inst = {name: m.get(metric) for name, metric in INSTRUCTIONS.items()}
    util = {name: m.get(metric) for name, metric in UTILISATION.items() if m.get(metric) is not None}
    out = {"name": k["name"],
           "time_ms": m["gpu__time_duration.sum"] / 1e6 if m.get("gpu__time_duration.sum") else None,
           "warp_instructions": inst,
           "thread_instructions_per_score": {name: 32 * v / scores for name, v in inst.items() if v is not None},
           "utilisation_pct": util,
           "dram_bytes": {"read": m.get("dram__bytes_read.sum"), "write": m.get("dram__bytes_write.sum")}}
    if util:
        bound = max(util, key=util.get)
        out["bound"] = {"by": bound, "pct_of_peak": util[bound]}
    return out


def kernel_names(module) -> list[str]:
    """Names of the Triton kernels defined in a module (the ones a kind launches)."""
    import triton

    return sorted(name for name, obj in vars(module).items() if isinstance(obj, triton.runtime.jit.JITFunction))


def ncu_child(kind: str, sizes, grid: str, mode: str) -> int:
    """Inside ncu: one warm-up call, then one call inside the NVTX range that ncu profiles."""
    import torch

    from . import table, work

    beta, t = table.grid_values(grid, mode)
    inp = work.make_inputs(kind, sizes.rows, sizes.counters_n, sizes.d, beta, t, "cuda", seed=1)
    fn = work.build("kernel", inp, smoke=False)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return 0


def ncu_counters(run, kind: str, sizes, grid: str, metrics: list[str]) -> dict:
    """Profile one kind under ncu; per-kernel summaries, the kind's own kernels marked."""
    import importlib

    ncu = shutil.which("ncu")
    module = importlib.import_module(f"critscale.kernels.{_kind_module(kind)}")
    own = kernel_names(module)
    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / f"ncu_{kind}"
        cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include",
               f"{NVTX_RANGE}/", "--metrics", ",".join(metrics), "--export", str(rep), "--force-overwrite",
               sys.executable, str(ROOT / "scripts" / "gpu_results.py"), "--ncu-child", kind, "--out", tmp,
               "--grid", grid] + (["--quick"] if run.quick else [])
        prof = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ))
        if prof.returncode != 0 or not rep.with_suffix(".ncu-rep").exists():
            return {"status": f"error: ncu exited {prof.returncode}", "tail": (prof.stdout + prof.stderr)[-2000:]}
        raw = subprocess.run([ncu, "--import", str(rep.with_suffix(".ncu-rep")), "--csv", "--page", "raw",
                              "--print-units", "base"], capture_output=True, text=True, timeout=120)
    kernels = parse_raw_csv(raw.stdout)
    scores = sizes.rows * sizes.counters_n
    summaries = [summarize_kernel(k, scores) for k in kernels]
    for s in summaries:
        s["own"] = any(name in s["name"] for name in own)
    return {"status": "ok", "source": f"Nsight Compute ({ncu_version(ncu)}), --clock-control none",
            "rows": sizes.rows, "n": sizes.counters_n, "grid": grid, "kernels": summaries, "kind_kernels": own}


def ncu_version(ncu: str) -> str:
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    return out.splitlines()[-1] if out else "unknown version"


def _kind_module(kind: str) -> str:
    from .table import KINDS

    return KINDS[kind].module


def compiled_code_counts(kind: str, beta, t) -> dict:
    """Instructions per score and pipe of the code this machine's Triton compiles for the kind's kernels at
    the grid (``critscale.kernels.sass``: sm_90a, ``cuobjdump``), with each kernel's floor and bound pipe."""
    from critscale.kernels import sass

    specs = sass.launch_specs(kind, beta, t)
    kernels = []
    for count in sass.run(specs):  # one entry per loop: a kernel running both passes has two, with one launch
        bound = count.bound()
        kernels.append({"kernel": count.kernel, "pass": count.pass_, "chunk": count.chunk, "launch": count.launch,
                        "block": count.block,
                        "registers": count.registers, "local_memory_instructions": count.local_memory_instructions,
                        "per_score": count.per_score, "floor_clocks_per_score": count.floor_clocks_per_score,
                        "bound": {"by": bound, "clocks_per_score": count.floor_clocks_per_score[bound]}})
    return {"status": "ok", "source": f"critscale.kernels.sass (sm_{sass.ARCH}a, the Triton of this machine)",
            "kernels": kernels}


def measure(run, sizes, kinds, grid: str = "grid32") -> dict:
    """Counters of every kind: ncu where it is installed, and the instruction counts of the compiled code."""
    from .table import grid_values

    beta, t = grid_values(grid, run.mode)
    out = {}
    ncu = shutil.which("ncu")
    metrics, missing = (available_metrics(ncu) if ncu and not run.smoke else ([], []))
    for kind in kinds:
        if run.smoke:
            out[kind] = {"compiled_code": {"status": "not measured: the CPU smoke run compiles nothing for sm_90a "
                                                     "(tests/test_kernels_sass.py and chapter 12's record do)"},
                         "ncu": {"status": "not measured: CPU smoke run (no CUDA kernels to profile)"}}
            continue
        rec = {}
        try:
            rec["compiled_code"] = compiled_code_counts(kind, beta, t)
        except Exception as exc:  # recorded, never silent (ptxas or cuobjdump missing, a Triton API change)
            rec["compiled_code"] = {"status": f"error: {type(exc).__name__}: {str(exc)[:300]}"}
        if run.over_budget():
            rec["ncu"] = {"status": f"not measured: time budget of {run.budget_s:.0f} s spent"}
        elif not ncu:
            rec["ncu"] = {"status": "not measured: ncu is not on the PATH of this machine"}
        else:
            try:
                rec["ncu"] = ncu_counters(run, kind, sizes, grid, metrics)
                rec["ncu"]["metrics_unavailable"] = missing
            except Exception as exc:  # recorded, never silent: the run goes on to the other kinds
                rec["ncu"] = {"status": f"error: {type(exc).__name__}: {str(exc)[:300]}"}
        out[kind] = rec
        print(f"[counters] {kind}: ncu {rec['ncu']['status']}; compiled code {rec['compiled_code']['status']}",
              flush=True)
    return out
