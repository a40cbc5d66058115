#!/usr/bin/env python3
"""The GPU results of the kernels chapter and of the theory chapters' Monte-Carlo, in one run.

Run on a CUDA machine from the repository root (python >= 3.10 with torch, triton, numpy, scipy, pandas,
pytest; no jupyter) where critscale is installed (`pip install .`; the session scripts install its carried wheel).

    CRITSCALE_COMMIT=<sha> python3 scripts/gpu_results.py --out DIR --budget-s 270   # everything, about 5 min
    python3 scripts/gpu_results.py --out DIR --parts bench                       # `make bench`
    python3 scripts/gpu_results.py --out DIR --quick                             # small sizes, about 2 min
    python3 scripts/gpu_results.py --out build/gpu-smoke --smoke                 # CPU, interpreter, tiny sizes

``CRITSCALE_COMMIT`` names the commit when the copy of the tree has no ``.git``.  Parts (``--parts``,
comma list, default all, run in this order): ``tests`` (the kernel tests with CUDA), ``bench`` (the
benchmark, its ceilings and counters), ``mc`` (the Monte-Carlo).  ``--budget-s`` is the time after which
no new benchmark point or Monte-Carlo length starts; the benchmark leaves the last ``MC_RESERVE_S`` of it
to the Monte-Carlo.  Each part writes complete files
of this run only (``--out``): ``kernels_tests.json``/``.log``, ``kernels_montecarlo.json``/``.csv``,
``kernels_bench.json``/``.csv``, and ``kernels_run.json`` (what ran, how long).  The modules and the
protocol are described in ``scripts/gpu_suite/__init__.py`` and ``scripts/gpu_suite/bench.py``.

Exit status: 0 when every part ran, 1 when a part failed (its files say how), 2 on bad arguments or when
there is no CUDA device outside the smoke mode.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_suite import env  # noqa: E402  (sets nothing on import; choose_interpreter does, before triton)

PARTS = ("tests", "bench", "mc")
MC_RESERVE_S = 60  # of the budget, kept for the Monte-Carlo when it runs after the benchmark


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="output folder")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)} (default: all)")
    ap.add_argument("--bench-only", action="store_true", help="the benchmark only (same as --parts bench)")
    ap.add_argument("--quick", action="store_true", help="small sizes, the GPU-marked tests only")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes on the CPU with Triton's interpreter: checks the scripts, measures nothing")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting new points after this many seconds (default 420, quick 150, smoke 600)")
    ap.add_argument("--pytest-child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    ap.add_argument("--ncu-child", help=argparse.SUPPRESS)
    ap.add_argument("--grid", default="grid32", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if args.bench_only:
        parts = ["bench"]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        ap.error(f"--parts: unknown or empty {unknown or parts}; use a comma list of {', '.join(PARTS)}")
    args.parts = [p for p in PARTS if p in parts]
    return args


def main(argv=None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    if raw[:1] == ["--pytest-child"]:
        from gpu_suite.cuda_tests import pytest_child

        return pytest_child(raw[1:])
    args = parse(raw)
    env.choose_interpreter(args.smoke)
    how = env.ensure_importable()
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print("gpu_results.py: no CUDA device here; use --smoke to check the scripts on a CPU", file=sys.stderr)
        return 2
    budget = args.budget_s or (600.0 if args.smoke else 150.0 if args.quick else 420.0)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    run = env.Run(out=out, smoke=args.smoke, quick=args.quick, budget_s=budget)
    from gpu_suite import table

    if args.ncu_child:
        from gpu_suite.counters import ncu_child

        return ncu_child(args.ncu_child, table.SIZES[run.mode], args.grid, run.mode)
    print(f"[gpu_results] critscale from {how}; device {run.device}; mode {run.mode}; out {out}", flush=True)
    status = {}
    for part in args.parts:
        started = time.time()
        run.reserve_s = MC_RESERVE_S if part == "bench" and "mc" in args.parts else 0.0
        try:
            if part == "tests":
                from gpu_suite.cuda_tests import run_tests

                result = run_tests(run)
            elif part == "mc":
                from gpu_suite.montecarlo import run_montecarlo

                result = run_montecarlo(run)
            else:
                from gpu_suite.bench import run_bench, write_bench
                from gpu_suite.floors import measure_ceilings

                result = write_bench(run, run_bench(run, measure_ceilings(run)), started)
            status[part] = {"status": result, "seconds": round(time.time() - started, 1)}
        except Exception as exc:  # the other parts still run; the status file says what failed
            status[part] = {"status": f"failed: {type(exc).__name__}: {str(exc)[:300]}",
                            "seconds": round(time.time() - started, 1)}
            traceback.print_exc()
    from gpu_suite.provenance import provenance

    (out / "kernels_run.json").write_text(json.dumps({"parts": status, "wall_time_s": round(run.elapsed(), 1),
                                                      "provenance": provenance(run, run.started)}, indent=1))
    print(f"[gpu_results] done in {run.elapsed():.0f} s: {status}", flush=True)
    return 0 if all(not v["status"].startswith("failed") for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
