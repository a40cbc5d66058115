#!/usr/bin/env python3
"""Instruction counts of the compiled kernels for sm_90a, recorded for chapter 12 (no GPU needed).

    TRITON_INTERPRET=0 .venv/bin/python scripts/sass_record.py      # `make sass-record`; 1.5 min of CPU

Compiles every kernel one call launches (pass 1, then pass 2 once per chunk) at the default GPU blocks on
the benchmark's grids (``scripts/gpu_suite/table.py``: ``grid32``, ``grid1`` and, for stored scores,
``grid32-geo``), disassembles it with Triton's ``cuobjdump`` and counts its hot loop by pipe
(:mod:`critscale.kernels.sass`).  Two variants of pass 2 on ``grid32`` (half the thresholds, half the
ladder roots) give what one threshold and one ladder root cost per score.

The counts depend only on the compiled code: the kernels' source, the Triton version (and its ``ptxas``)
and the grids.  ``results/sass/kernels_sass.json`` records them with that provenance: the commit, the
Triton and ptxas versions, the SHA-256 of each source file the compiled code depends on, which the
chapter compares with the files it is built from, and the grids.  Exit status 2 when run under the interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

SCHEMA = "critscale-sass/1"
OUT = ROOT / "results" / "sass" / "kernels_sass.json"
# The files the compiled code depends on (the chapter checks their hashes; tests/test_chapter_12.py also
# checks that the recorded grids are the benchmark's).
SOURCES = ("kernels/tiles.py", "kernels/counting.py", "kernels/ladder.py", "kernels/twopass.py", "kernels/scores.py",
           "kernels/qk.py", "kernels/sampled.py", "kernels/sass.py")
KINDS = ("scores", "qk", "sampled")


def source_hashes(root: Path = ROOT) -> dict[str, str]:
    """SHA-256 of each file of :data:`SOURCES`."""
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in SOURCES}


def kernel_record(count) -> dict:
    """One loop of one launch: a kernel running both passes gives two records with the same ``launch``."""
    bound = count.bound()
    return {"kernel": count.kernel, "pass": count.pass_, "chunk": count.chunk, "launch": count.launch,
            "block": count.block,
            "registers": count.registers, "local_memory_instructions": count.local_memory_instructions,
            "loop_instructions": count.loop_instructions, "scores_per_iteration": count.scores_per_iteration,
            "block_instructions": count.block_instructions, "scores_per_block": count.scores_per_block,
            "per_score": count.per_score, "floor_clocks_per_score": count.floor_clocks_per_score,
            "bound": bound, "opcodes": count.opcodes}


def count(kind: str, beta, t) -> list[dict]:
    from critscale.kernels import sass

    specs = sass.launch_specs(kind, beta, t)
    return [kernel_record(c) for c in sass.run(specs)]


def pass2_total(records: list[dict]) -> float:
    """Instructions per score of the first pass-2 chunk."""
    return next(r["per_score"]["total"] for r in records if r["pass"] == 2)


def marginal_costs(kind: str, beta, t, full: list[dict]) -> dict:
    """Instructions per score of one threshold and of one ladder root (with its levels) in pass 2, from
    variants of the first chunk's grid with half its thresholds and half its roots."""
    import numpy as np

    from critscale.kernels import ladder, qk, sampled, scores

    _, _, nrc, ntc, _ = {"scores": scores, "qk": qk, "sampled": sampled}[kind].GPU_BLOCK
    plan = ladder.beta_plan(np.asarray(beta))
    n_roots, n_t = min(nrc, len(plan.roots)), min(ntc, len(t))
    half_t = count(kind, beta, np.asarray(t)[: n_t // 2])
    # keep the chains of the first half of the roots: betas whose root index is below n_roots // 2
    root_of = plan.a_slot // plan.levels
    keep = np.asarray(beta)[(root_of < n_roots // 2) & (plan.a_slot >= 0)]
    half_roots = count(kind, keep, np.asarray(t)[:n_t])
    base = pass2_total(full)
    return {"per_threshold": (base - pass2_total(half_t)) / (n_t - n_t // 2),
            "per_root": (base - pass2_total(half_roots)) / (n_roots - n_roots // 2),
            "levels_per_root": plan.levels, "first_chunk_roots": n_roots, "first_chunk_thresholds": n_t}


def ptxas_version() -> str:
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    out = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, check=True).stdout
    return next((line for line in out.splitlines() if "release" in line), out.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") != "0":
        print("sass_record.py: run with TRITON_INTERPRET=0 (the interpreter compiles nothing)", file=sys.stderr)
        return 2
    import numpy as np
    import triton

    from critscale.page.provenance import git_commit
    from gpu_suite import table

    started = time.time()
    grids = {"scores": ("grid32", "grid1", "grid32-geo"), "qk": ("grid32", "grid1"), "sampled": ("grid32", "grid1")}
    kinds = {}
    for kind in KINDS:
        kinds[kind] = {}
        for grid in grids[kind]:
            beta, t = (np.asarray(v) for v in (table.GRIDS[grid].beta, table.GRIDS[grid].t))
            kernels = count(kind, beta, t)
            kinds[kind][grid] = {"kernels": kernels}
            if grid == "grid32":
                kinds[kind][grid]["marginal"] = marginal_costs(kind, beta, t, kernels)
            print(f"[sass] {kind} {grid}: " + ", ".join(f"{k['kernel']}[{k['chunk']}] {k['per_score']['total']:.1f} "
                                                        f"instr/score, bound {k['bound']}" for k in kernels), flush=True)
    record = {
        "schema": SCHEMA,
        "what": "instructions per score of each kernel's hot loop, per pipe, compiled for sm_90a "
                "(critscale.kernels.sass); floors in clocks per score of one SM",
        "grids": {g: {"beta": list(table.GRIDS[g].beta), "t": list(table.GRIDS[g].t)}
                  for g in ("grid32", "grid1", "grid32-geo")},
        "kinds": kinds,
        "provenance": {"commit": git_commit(), "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "triton": triton.__version__, "ptxas": ptxas_version(), "arch": "sm_90a",
                       "sources": source_hashes(), "command": "TRITON_INTERPRET=0 python scripts/sass_record.py",
                       "wall_time_s": round(time.time() - started, 1)},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"[sass] wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} "
          f"in {record['provenance']['wall_time_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
