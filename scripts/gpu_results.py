#!/usr/bin/env python3
"""Every GPU result of the kernels chapter (and the gpu profile of the theory chapters) in one run.

Run on any CUDA machine from the repository root (python >= 3.10 with torch, triton, numpy, scipy,
pytest, matplotlib; no papermill or jupyter needed).  critscale does not have to be installed: the
script makes ``critscale`` and ``critscale.kernels`` importable from ``src/`` and ``kernels/`` itself.
Installing works too::

    pip install --no-deps --no-build-isolation -e .          # optional
    CRITSCALE_COMMIT=<sha> python scripts/gpu_results.py --out results/gpu            # full, < 4 min on an H200
    CRITSCALE_COMMIT=<sha> python scripts/gpu_results.py --out results/gpu --quick    # < 1 min
    python scripts/gpu_results.py --out DIR --bench-only                              # `make bench`
    python scripts/gpu_results.py --out results/gpu --parts tests,bench --kinds 1,3 --keep-baselines  # ~90 s
    python scripts/gpu_results.py --out results/gpu --mc                              # Monte-Carlo only

(``--kinds`` and ``--keep-baselines`` merge into the ``kernels_bench.json`` already in ``--out``: the
records not rerun are kept, marked ``kept_from_earlier_run``, and ``setup.partial_rerun`` says what was.)

(``CRITSCALE_COMMIT`` names the commit when the copy of the tree has no ``.git``.)

What it writes under ``--out`` (small files; each JSON has a ``provenance`` block: device, driver,
versions, commit, date, wall time):

1. ``kernels_tests.json`` + ``kernels_tests.log``: ``pytest tests/test_kernels_*.py`` with CUDA
   (``TRITON_INTERPRET=0``): the GPU-marked cases run, the interpreter cases are skipped with their reason.
2. ``kernels_bench.json`` / ``.csv`` / ``.png``: kernel times against eager PyTorch and ``torch.compile``
   of the same statistics from materialised scores, ceilings measured in the same run (copy bandwidth,
   bf16 tensor-core rate, exp2 and FMA throughput), and each time's floors (bytes and operations counted
   first).
3. ``kernels_montecarlo.json`` / ``.csv``: kind 3 Monte-Carlo at ``n = 2^20, 2^24`` (and ``2^26``):
   ``E sum p^2`` and ``E H`` at ``beta = c kappa_bar(n)`` on a grid of ``c``, and medians of
   ``kappa_16 / kappa_bar`` (bracketed from the gap counts), for the families of theory.md §5.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T_START = time.time()
DEVICE = "cuda"
SMOKE = False  # --cpu-smoke: tiny sizes on CPU (interpreter), to test this script's logic without a GPU


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------------
# Import critscale and critscale.kernels from the tree (installed or not)
# ----------------------------------------------------------------------------------------------


def ensure_importable() -> str:
    """Make ``critscale.kernels`` importable; return how."""
    try:
        importlib.import_module("critscale.kernels")
        return "installed package"
    except ImportError:
        pass
    for name in [m for m in sys.modules if m == "critscale" or m.startswith("critscale.")]:
        del sys.modules[name]
    sys.path.insert(0, str(ROOT / "src"))
    os.environ.setdefault("CRITSCALE_ROOT", str(ROOT))
    import critscale

    spec = importlib.util.spec_from_file_location("critscale.kernels", ROOT / "kernels" / "__init__.py",
                                                  submodule_search_locations=[str(ROOT / "kernels")])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["critscale.kernels"] = mod
    spec.loader.exec_module(mod)
    critscale.kernels = mod
    return "source tree (src/ and kernels/ on the path)"


def pytest_child(args: list[str]) -> int:
    """Entry point of the pytest subprocess: same import set-up, then pytest."""
    ensure_importable()
    import pytest

    return pytest.main(args)


# ----------------------------------------------------------------------------------------------
# Provenance and output
# ----------------------------------------------------------------------------------------------


def provenance(section_start: float) -> dict:
    import torch
    import triton

    from critscale import provenance as prov

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = "nvidia-smi unavailable"
    driver = smi.split(",")[1].strip() if smi.count(",") >= 1 else "unknown"
    props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    return {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device",
        "driver": driver,
        "nvidia_smi": smi,
        "cuda": torch.version.cuda,
        "multiprocessors": getattr(props, "multi_processor_count", None),
        "memory_gib": round(props.total_memory / 2**30, 1) if props else None,
        "versions": {"torch": torch.__version__, "triton": triton.__version__,
                     **{k: v for k, v in prov.package_versions(("numpy", "scipy")).items()},
                     "python": platform.python_version()},
        "commit": prov.git_commit(),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_time_s": round(time.time() - section_start, 2),
        "script": "scripts/gpu_results.py",
        "argv": sys.argv[1:],
    }


def write_json(out: Path, name: str, data: dict, started: float) -> None:
    data = dict(data)
    data["provenance"] = provenance(started)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=_jsonable))
    print(f"[gpu_results] wrote {out / (name + '.json')} ({time.time() - started:.1f} s)", flush=True)


def _jsonable(x):
    import numpy as np

    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def finite_or_none(x: float):
    return float(x) if x is not None and math.isfinite(x) else None


# ----------------------------------------------------------------------------------------------
# 1. Tests
# ----------------------------------------------------------------------------------------------


def run_tests(out: Path, quick: bool) -> None:
    started = time.time()
    env = dict(os.environ, TRITON_INTERPRET="0", HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_kernels_*.py"))
    junit = out / "kernels_tests.junit.xml"
    args = ["-q", "-ra", "-p", "no:cacheprovider", f"--junitxml={junit}", *files]
    if quick:
        args += ["-m", "gpu"]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--pytest-child", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    log = proc.stdout + "\n--- stderr ---\n" + proc.stderr
    (out / "kernels_tests.log").write_text(log)
    summary = {"returncode": proc.returncode, "command": " ".join(["pytest", *args]), "files": files}
    try:
        import xml.etree.ElementTree as ET

        root = ET.parse(junit).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        cases = []
        for case in suite.iter("testcase"):
            status = "passed"
            detail = ""
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    status = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                    detail = (el.get("message") or "")[:300]
            cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "status": status,
                          "time_s": float(case.get("time", 0)), "detail": detail})
        counts = {}
        for c in cases:
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        summary.update(counts=counts, cases=cases)
        gpu_cases = [c for c in cases if c["test"].endswith("[cuda]") or "-cuda]" in c["test"] or "[cuda-" in c["test"]]
        summary["gpu_cases"] = {"total": len(gpu_cases),
                                "passed": sum(c["status"] == "passed" for c in gpu_cases)}
    except Exception as exc:  # keep the log even if the XML is missing
        summary["junit_error"] = repr(exc)
    summary["tail"] = log[-3000:]
    write_json(out, "kernels_tests", summary, started)


# ----------------------------------------------------------------------------------------------
# 2. Benchmark
# ----------------------------------------------------------------------------------------------


def timed(fn, budget_s: float = 0.6) -> tuple[float, str, int | None]:
    """(median time in ms, how it was timed, peak extra bytes of the first call).

    Fast calls: triton.testing.do_bench median.  Calls over 40 ms: the median of a few CUDA-event timings
    (do_bench's fixed 5-call estimate plus warm-up would cost many seconds per point).
    """
    import torch
    import triton

    mem = peak_extra_bytes(fn)  # the first (warm-up, compiling) call
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    est = time.perf_counter() - t0
    if SMOKE:
        return 1e3 * est, "cpu smoke (one perf_counter timing)", mem
    if est < 0.04:
        ms = triton.testing.do_bench(fn, warmup=10, rep=max(20, int(budget_s * 300)), return_mode="median")
        return float(ms), "triton.testing.do_bench median", mem
    reps = int(max(2, min(8, budget_s / est)))
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return float(times[len(times) // 2]), f"median of {reps} CUDA-event timings (call > 40 ms)", mem


def peak_extra_bytes(fn) -> int:
    """Peak device memory allocated by one call beyond what was allocated before it."""
    import torch

    if SMOKE:
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def empty_cache() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def measure_ceilings() -> dict:
    """Device-to-device copy bandwidth, bf16 tensor-core rate, exp2 and FMA throughput, measured now."""
    import torch
    import triton

    out = {}
    if SMOKE:
        return {"copy_bandwidth_Bps": 1e10, "bf16_matmul_flops": 1e12, "fp32_matmul_flops": 1e11,
                "exp2_per_s": 1e10, "fp32_fma_flops": 1e11, "notes": "cpu smoke: made-up ceilings"}
    src = torch.empty(2**30, dtype=torch.float32, device="cuda")  # 4 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=10, rep=100, return_mode="median")
    out["copy_bandwidth_Bps"] = 2 * src.numel() * 4 / (ms * 1e-3)
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    ms = triton.testing.do_bench(lambda: a @ b, warmup=10, rep=100, return_mode="median")
    out["bf16_matmul_flops"] = 2 * 8192**3 / (ms * 1e-3)
    a32, b32 = a.float(), b.float()
    ms = triton.testing.do_bench(lambda: a32 @ b32, warmup=5, rep=60, return_mode="median")
    out["fp32_matmul_flops"] = 2 * 8192**3 / (ms * 1e-3)
    del a, b, a32, b32

    from critscale.kernels.ceilings import exp2_chains, fma_chains

    n = 2**24
    x = torch.rand(n, device="cuda")
    o = torch.empty_like(x)
    iters = 256
    grid = (n // 1024,)
    ms = triton.testing.do_bench(lambda: exp2_chains[grid](x, o, ITERS=iters, BLOCK=1024), warmup=5, rep=60,
                                 return_mode="median")
    out["exp2_per_s"] = 4 * iters * n / (ms * 1e-3)
    ms = triton.testing.do_bench(lambda: fma_chains[grid](x, o, ITERS=iters, BLOCK=1024), warmup=5, rep=60,
                                 return_mode="median")
    out["fp32_fma_flops"] = 2 * 4 * iters * n / (ms * 1e-3)
    out["notes"] = ("copy: dst.copy_(src) of 4 GiB, bytes read + written; matmul: 8192^3 random inputs; exp2: four "
                    "independent chains of tl.exp2 (MUFU.EX2) per element; FMA: four independent chains of a*x+b "
                    "(2 flops each)")
    return out


def stats_from_scores(s, beta, t):
    """The statistics from materialised fp32 scores ``(r, n)``: the baseline that eager/compile run.

    Broadcasting over beta (r, n, n_beta) and thresholds (r, n, n_t); the caller splits rows so that the
    eager temporaries stay bounded.  Returns m0, A, B, C, counts as the kernels' pass 2 does.
    """
    import torch

    top = s.amax(dim=1, keepdim=True)  # (r, 1)
    valid = s > float("-inf")
    delta = torch.where(valid, top - s, torch.zeros_like(s))  # (r, n)
    pos = valid & (delta > 0)
    m0 = (valid & (delta == 0)).sum(dim=1)
    w = torch.where(pos[:, :, None], torch.exp(-delta[:, :, None] * beta), torch.zeros((), device=s.device))
    a = w.sum(dim=1)  # (r, nb)
    b = (w * delta[:, :, None]).sum(dim=1)
    c = (w * w).sum(dim=1)
    counts = (valid[:, :, None] & (delta[:, :, None] <= t)).sum(dim=1)  # (r, nt)
    return m0, a, b, c, counts


def chunk_rows(n: int, nb: int, limit_bytes: float = 2**31) -> int:
    return int(max(1, min(4096, limit_bytes // (n * max(nb, 64) * 4))))


BASELINE_IMPLS = ("eager", "torch.compile")


def run_bench(out: Path, quick: bool, ceilings: dict, budget_s: float, kinds: tuple[int, ...] = (1, 2, 3),
              keep_baselines: bool = False) -> None:
    """Benchmark the kernels of ``kinds``.  With a subset of the kinds or ``keep_baselines``, the records that
    were not rerun (other kinds; with ``keep_baselines`` the eager/torch.compile ones) are kept from the
    ``kernels_bench.json`` already in ``out``, so the file stays complete for the notebooks."""
    import numpy as np
    import torch

    from critscale.kernels import qk, sampled, scores

    started = time.time()
    rows, d, nb, nt = 4096, 64, 32, 64
    ns = [2**12, 2**16] if quick else [2**12, 2**14, 2**16, 2**18, 2**20]
    baseline_max_n = 2**16 if quick else 2**20
    ns2 = ns + ([] if quick else [2**22])
    ns3 = [2**12, 2**16, 2**20] + ([] if quick else [2**24])
    big3 = 2**20
    if SMOKE:
        rows, d, nb, nt = 24, 16, 4, 8
        ns, baseline_max_n, ns2, ns3, big3 = [256, 512], 512, [256, 512], [256, 512], 256
    dev = DEVICE
    beta = np.geomspace(0.05, 50.0, nb)
    t = np.concatenate([[0.0], np.geomspace(1e-3, 20.0, nt - 1)])
    beta_d = torch.as_tensor(beta, dtype=torch.float32, device=dev)
    t_d = torch.as_tensor(t, dtype=torch.float32, device=dev)
    compiled = stats_from_scores if SMOKE else torch.compile(stats_from_scores, dynamic=True)
    # --quick skips torch.compile: its first compilation alone takes tens of seconds
    baselines = [("eager", stats_from_scores)] + ([] if quick else [("torch.compile", compiled)])
    if keep_baselines:
        baselines = []
    records = []
    errors = []

    def over_budget() -> bool:
        return time.time() - T_START > budget_s

    def baseline(make_scores, n, kind, name, fn_stats):
        def run():
            cr = chunk_rows(n, nb)
            for r0 in range(0, rows, cr):
                s = make_scores(r0, min(rows, r0 + cr))
                fn_stats(s, beta_d, t_d)
        try:
            ms, how, mem = timed(run)
            return ms, how, mem, None
        except torch.cuda.OutOfMemoryError as exc:
            empty_cache()
            return None, None, None, f"out of memory: {str(exc)[:120]}"
        except Exception as exc:
            empty_cache()
            return None, None, None, f"{type(exc).__name__}: {str(exc)[:300]}"

    def floors(kind, n, r, nb_, nt_):
        scores_n = r * n
        exps = scores_n * nb_
        flops = scores_n * (5 * nb_ + 2 * nt_)  # pass 2: mul, ex2-arg, add, 2 fma per beta; compare+add per t
        f = {"scores": scores_n, "exp2": exps, "fp32_ops": flops}
        if kind == 1:
            f["bytes_one_read"] = scores_n * 4
            f["bytes_two_passes"] = 2 * scores_n * 4
            f["t_floor_bandwidth_s"] = f["bytes_one_read"] / ceilings["copy_bandwidth_Bps"]
        if kind == 2:
            f["tensor_flops_two_passes"] = 2 * 2 * scores_n * d
            f["t_floor_tensor_s"] = f["tensor_flops_two_passes"] / ceilings["bf16_matmul_flops"]
        f["t_floor_exp_s"] = exps / ceilings["exp2_per_s"]
        f["t_floor_fma_s"] = flops / ceilings["fp32_fma_flops"]
        return f

    def record(kind, n, r, impl, ms, how, mem, err, extra=None):
        rec = {"kind": kind, "n": n, "rows": r, "impl": impl, "time_ms": ms, "timing": how,
               "peak_extra_bytes": mem, "error": err}
        if ms:
            rec["scores_per_s"] = r * n / (ms * 1e-3)
        rec.update(floors(kind, n, r, nb, nt))
        if ms:
            for key in [k for k in rec if k.startswith("t_floor_")]:
                rec["frac_" + key[2:-2]] = rec[key] / (ms * 1e-3)
        if extra:
            rec.update(extra)
        records.append(rec)
        print(f"[bench] kind {kind} n=2^{int(math.log2(n))} {impl}: "
              f"{'%.3f ms' % ms if ms else err}", flush=True)

    # block choice: time the default and the alternatives once at n = 2^16 (full run only)
    chosen = {1: scores.GPU_BLOCK, 2: qk.GPU_BLOCK, 3: sampled.GPU_BLOCK}
    tuning = []
    if not quick:
        nt_ = ns[-1] if SMOKE else 2**16
        x = torch.randn(rows, nt_, device=dev)
        q = torch.randn(rows, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(nt_, d, device=dev, dtype=torch.bfloat16)
        for kind, mod, fn in ((1, scores, lambda blk: scores.row_stats(x, beta, t, block=blk)),
                              (2, qk, lambda blk: qk.qk_row_stats(q, k, beta, t, block=blk)),
                              (3, sampled, lambda blk: sampled.sampled_row_stats("gauss", nt_, rows, beta, t,
                                                                                block=blk))):
            if kind not in kinds:
                continue
            best = None
            for blk in (mod.GPU_BLOCK,) + tuple(mod.GPU_BLOCK_ALTERNATIVES):
                try:
                    ms, _, _ = timed(lambda: fn(blk), budget_s=0.3)
                except Exception as exc:
                    tuning.append({"kind": kind, "block": blk, "error": repr(exc)[:300]})
                    continue
                tuning.append({"kind": kind, "block": blk, "time_ms": ms})
                if best is None or ms < best[0]:
                    best = (ms, blk)
            if best:
                chosen[kind] = best[1]
        del x, q, k
        empty_cache()

    # kind 1: stored fp32 scores
    for n in (ns if 1 in kinds else []):
        if over_budget():
            errors.append(f"kind 1 n={n}: skipped, time budget")
            continue
        x = torch.randn(rows, n, device=dev)
        ms, how, mem = timed(lambda: scores.row_stats(x, beta, t, block=chosen[1]))
        record(1, n, rows, "triton", ms, how, mem, None)
        ms1, how1, _ = timed(lambda: scores.row_stats(x, beta[:1], t[:1], block=chosen[1]))
        record(1, n, rows, "triton (1 beta, 1 threshold)", ms1, how1, None, None,
               extra={"note": "bandwidth check: 2 reads per score, 1 exp2"})
        records[-1].update(floors(1, n, rows, 1, 1))
        records[-1].update({"frac_" + k[2:-2]: records[-1][k] / (ms1 * 1e-3) for k in list(records[-1])
                            if k.startswith("t_floor_")})
        if n <= baseline_max_n:
            for impl, fn_stats in baselines:
                res = baseline(lambda a, b: x[a:b], n, 1, impl, fn_stats)
                record(1, n, rows, impl, *res)
        del x
        empty_cache()

    # kind 2: fused q.k, bf16 inputs (as GPT-2 runs), one head of 4096 queries, non-causal
    q = torch.randn(rows, d, device=dev, dtype=torch.bfloat16)
    for n in (ns2 if 2 in kinds else []):
        if over_budget():
            errors.append(f"kind 2 n={n}: skipped, time budget")
            continue
        k = torch.randn(n, d, device=dev, dtype=torch.bfloat16)
        ms, how, mem = timed(lambda: qk.qk_row_stats(q, k, beta, t, block=chosen[2]))
        record(2, n, rows, "triton", ms, how, mem, None)
        if n <= baseline_max_n:
            scale = 1.0 / math.sqrt(d)
            qf, kf = q.float(), k.float()
            s_full = {}

            def make(a, b):  # materialised fp32 logits of the row chunk (the full S is rows x n fp32)
                return (qf[a:b] @ kf.T) * scale

            for impl, fn_stats in baselines:
                res = baseline(make, n, 2, impl, fn_stats)
                record(2, n, rows, impl, *res)
            del qf, kf, s_full
        del k
        empty_cache()
    if not quick and 2 in kinds:  # fp32 inputs (IEEE products on the FMA units) at one size, for the record
        k = torch.randn(ns[-1] if SMOKE else 2**16, d, device=dev)
        ms, how, _ = timed(lambda: qk.qk_row_stats(q.float(), k, beta, t))
        record(2, k.shape[0], rows, "triton (fp32 inputs)", ms, how, None, None)
        del k
    del q
    empty_cache()

    # kind 3: generated gauss rows
    for n in (ns3 if 3 in kinds else []):
        if over_budget():
            errors.append(f"kind 3 n={n}: skipped, time budget")
            continue
        r = rows if n <= big3 else (8 if SMOKE else 256)
        ms, how, mem = timed(lambda: sampled.sampled_row_stats("gauss", n, r, beta, t, block=chosen[3]))
        record(3, n, r, "triton", ms, how, mem, None)

    merged = None
    prev_path = out / "kernels_bench.json"
    if (set(kinds) != {1, 2, 3} or keep_baselines) and prev_path.exists():
        prev = json.loads(prev_path.read_text())
        fresh = {(r["kind"], r["n"], r["impl"]) for r in records}
        kept = [r for r in prev.get("records", []) if (r["kind"], r["n"], r["impl"]) not in fresh
                and (r["kind"] not in kinds or (keep_baselines and r["impl"] in BASELINE_IMPLS))]
        for r in kept:
            r["kept_from_earlier_run"] = prev.get("provenance", {}).get("date", True)
        records = kept + records
        prev_blocks = prev.get("setup", {}).get("blocks", {})
        for key, val in prev_blocks.items():
            if int(key) not in kinds:
                chosen[int(key)] = tuple(val)
        tuning = [t_ for t_ in prev.get("setup", {}).get("block_tuning", []) if t_.get("kind") not in kinds] + tuning
        merged = {"rerun_kinds": list(kinds), "baselines_kept": keep_baselines, "kept_records": len(kept),
                  "earlier_provenance": prev.get("provenance")}
    # ratios measured in the same run (kept baseline records: an earlier run on the same kind of machine)
    by = {(r["kind"], r["n"], r["impl"]): r for r in records}
    for rec in records:
        if rec["impl"] == "triton" and rec["time_ms"]:
            for base in ("eager", "torch.compile"):
                other = by.get((rec["kind"], rec["n"], base))
                if other and other["time_ms"]:
                    rec[f"speedup_vs_{base}"] = other["time_ms"] / rec["time_ms"]
    targets = assess_targets(records)
    data = {"setup": {"rows": rows, "d": d, "n_beta": nb, "n_t": nt, "beta": beta.tolist(), "t": t.tolist(),
                      "kind2_dtype": "bfloat16", "kind3_family": "gauss",
                      "baselines": "eager PyTorch and torch.compile(dynamic=True) of stats_from_scores on "
                                   "materialised fp32 scores (kind 2: the fp32 logits q k^T of a row chunk), rows "
                                   f"in chunks of 2 GiB of (rows, n, 64) temporaries; run up to n = {baseline_max_n}",
                      "blocks": {str(k): list(v) for k, v in chosen.items()}, "block_tuning": tuning},
            "ceilings": ceilings, "records": records, "targets": targets, "errors": errors}
    if merged:
        data["setup"]["partial_rerun"] = merged
    write_json(out, "kernels_bench", data, started)
    try:
        import pandas as pd

        pd.DataFrame(records).to_csv(out / "kernels_bench.csv", index=False)
    except Exception as exc:
        print("[bench] csv failed:", exc)
    try:
        plot_bench(records, out / "kernels_bench.png")
    except Exception as exc:
        print("[bench] plot failed:", exc)


def assess_targets(records: list[dict]) -> dict:
    """The issue's targets, each with the measured value (None where not measured)."""
    def pick(kind, impl, n_min=0):
        return [r for r in records if r["kind"] == kind and r["impl"] == impl and r["n"] >= n_min and r["time_ms"]]

    k1 = pick(1, "triton")
    k1b = pick(1, "triton (1 beta, 1 threshold)")
    k2 = pick(2, "triton", 2**16)
    k3 = pick(3, "triton")
    out = {
        "kind1_bandwidth_fraction_32beta_64t": max((r["frac_floor_bandwidth"] for r in k1), default=None),
        "kind1_bandwidth_fraction_1beta_1t": max((r["frac_floor_bandwidth"] for r in k1b), default=None),
        "kind1_target": ">= 0.70 of the one-read bandwidth floor",
        "kind2_min_speedup_vs_eager_n_ge_2^16": min((r.get("speedup_vs_eager", math.inf) for r in k2
                                                     if "speedup_vs_eager" in r), default=None),
        "kind2_min_speedup_vs_compile_n_ge_2^16": min((r.get("speedup_vs_torch.compile", math.inf) for r in k2
                                                       if "speedup_vs_torch.compile" in r), default=None),
        "kind2_target": ">= 10x eager and >= 3x torch.compile at n >= 2^16",
        "kind3_max_scores_per_s": max((r["scores_per_s"] for r in k3), default=None),
        "kind3_target": ">= 1e11 scores per second",
        "memory_extra_bytes_by_n": {f"kind{r['kind']}": {} for r in k1 + k2 + k3},
    }
    for r in k1 + k2 + k3:
        out["memory_extra_bytes_by_n"][f"kind{r['kind']}"][str(r["n"])] = r["peak_extra_bytes"]
    return out


def plot_bench(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex="col")
    for col, kind in enumerate((1, 2, 3)):
        ax, axr = axes[0, col], axes[1, col]
        impls = sorted({r["impl"] for r in records if r["kind"] == kind})
        for impl in impls:
            pts = sorted((r["n"], r["time_ms"]) for r in records
                         if r["kind"] == kind and r["impl"] == impl and r["time_ms"])
            if pts:
                ax.loglog(*zip(*pts), "o-", label=impl, base=2)
        floor = sorted((r["n"], 1e3 * max(r.get("t_floor_exp_s", 0), r.get("t_floor_fma_s", 0),
                                          r.get("t_floor_bandwidth_s", 0), r.get("t_floor_tensor_s", 0)))
                       for r in records if r["kind"] == kind and r["impl"] == "triton")
        if floor:
            ax.loglog(*zip(*floor), "k--", label="floor (max of counted/ceiling)", base=2)
        ax.set_title(f"kind {kind}")
        ax.set_ylabel("time (ms)")
        ax.legend(fontsize=7)
        for base in ("eager", "torch.compile"):
            pts = sorted((r["n"], r[f"speedup_vs_{base}"]) for r in records
                         if r["kind"] == kind and r["impl"] == "triton" and f"speedup_vs_{base}" in r)
            if pts:
                axr.semilogx(*zip(*pts), "o-", label=f"vs {base}", base=2)
        pts = sorted((r["n"], r["frac_floor_exp"]) for r in records
                     if r["kind"] == kind and r["impl"] == "triton" and "frac_floor_exp" in r)
        if pts:
            axr.semilogx(*zip(*pts), "s:", label="fraction of exp2 floor", base=2)
        axr.set_xlabel("n")
        axr.set_yscale("log")
        axr.set_ylabel("ratio")
        axr.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# 3. Monte-Carlo (gpu profile of the theory chapters)
# ----------------------------------------------------------------------------------------------

MC_FAMILIES = ("gauss", "ptail1", "ptail3", "logexp", "edge", "unif", "sphere3", "sphere5", "planted",
               "simplex", "planted_shrink")
C_GRID = [2.0 ** (k / 4) for k in range(-10, 22)]  # 0.177 .. 38.1, contains 1/4, 1/2, 1, 2, 4, 8


def run_montecarlo(out: Path, quick: bool, budget_s: float) -> None:
    import numpy as np
    import torch

    from critscale import families, limits
    from critscale.kernels import kappa_bounds, sampled

    started = time.time()
    plan = [(2**20, 64), (2**24, 32)] if quick else [(2**20, 512), (2**24, 256), (2**26, 64)]
    if SMOKE:
        plan = [(600, 6)]
    c = np.array(C_GRID)
    x_grid = np.geomspace(2.0 ** -6, 2.0 ** 8, 64)  # thresholds in units of 1/kappa_bar; ratio r below
    r_grid = float(x_grid[1] / x_grid[0])
    rows_out = []
    errors = []
    for fam_idx, name in enumerate(MC_FAMILIES):
        fam = families.get(name)
        for n, rows in plan:
            if time.time() - T_START > budget_s:
                errors.append(f"{name} n={n}: skipped, time budget")
                continue
            try:
                kb = float(fam.kappa_bar(n))
                seed = int(np.random.SeedSequence([12697, 24, fam_idx, n]).generate_state(1, np.uint64)[0] >> 1)
                t0 = time.time()
                res = sampled.sampled_row_stats(name, n, rows, c * kb, x_grid / kb, seed=seed)
                sync()
                secs = time.time() - t0
                coll = res.collision.double().cpu().numpy()  # (rows, nc)
                ent = res.entropy.double().cpu().numpy()
                lo16, hi16 = kappa_bounds(res.counts, x_grid / kb, res.n_valid, res.delta2, res.range, res.m0, K=16)
                lo2, hi2 = res.kappa_lower.cpu().numpy(), res.kappa_upper.cpu().numpy()
                # fp32 resolution guard: ulp of the fp32 top score (as the kernel holds it) times kappa_bar
                ratio = sampled.fp32_gap_ratio(res.top.double().cpu().numpy(), sampled.family_code(name, n).shift, kb)
                unresolved = np.nonzero(ratio >= sampled.FP32_GAP_LIMIT)[0]
                rec = {"family": name, "n": n, "log2_n": int(round(math.log2(n))), "rows": rows, "seed": seed,
                       "kappa_bar": kb, "c": c.tolist(),
                       "mean_collision": coll.mean(0).tolist(), "se_collision": (coll.std(0, ddof=1) / math.sqrt(rows)).tolist(),
                       "mean_entropy": ent.mean(0).tolist(), "se_entropy": (ent.std(0, ddof=1) / math.sqrt(rows)).tolist(),
                       "median_kappa16_over_bar": [float(np.median(lo16.cpu().numpy()) / kb),
                                                   float(np.median(hi16.cpu().numpy()) / kb)],
                       "median_kappa_over_bar": [finite_or_none(np.median(lo2) / kb),
                                                 finite_or_none(np.median(hi2) / kb)],
                       "threshold_grid_ratio": r_grid, "seconds": secs, "backend": res.backend,
                       "generated_shift": sampled.family_code(name, n).shift,
                       "fp32_gap_ratio_max": float(ratio.max()), "fp32_gap_ratio_median": float(np.median(ratio)),
                       "fp32_resolved": bool(len(unresolved) == 0), "fp32_rows_unresolved": int(len(unresolved)),
                       "fp32_unresolved_rows": unresolved[:20].tolist()}
                rows_out.append(rec)
                if len(unresolved):
                    print(f"[mc] WARNING {name} n=2^{rec['log2_n']}: fp32 does not resolve the top gaps in "
                          f"{len(unresolved)}/{rows} rows (ulp(top) kappa_bar up to {ratio.max():.2e})", flush=True)
                print(f"[mc] {name} n=2^{rec['log2_n']} rows={rows}: {secs:.2f} s; "
                      f"E sum p^2 at c=2: {coll.mean(0)[C_GRID.index(2.0)]:.3f}", flush=True)
            except Exception as exc:
                errors.append(f"{name} n={n}: {type(exc).__name__}: {str(exc)[:300]}")
                traceback.print_exc()
    pd_limits = {"c": c.tolist(),
                 "pd_collision": [float(v) for v in np.asarray(limits.pd_collision(c), dtype=float)],
                 "pd_entropy": [finite_or_none(float(v)) for v in np.asarray(limits.pd_entropy(c), dtype=float)]}
    data = {"setup": {"families": list(MC_FAMILIES), "plan": plan, "c_grid": C_GRID,
                      "threshold_grid": "t_j = x_j / kappa_bar(n), x geometric in [2^-6, 2^8], 64 points",
                      "kappa_bracket": "kappa_16 in [lower, upper] from the counts (critscale.kernels.kappa_bounds); "
                                       "upper <= r lower when the grid covers [Delta_(2), R]",
                      "seeds": "SeedSequence([12697, 24, fam_idx, n]) (Philox key)",
                      "fp32_guard": "per row, ulp(fp32 top score as generated, i.e. top - shift) * kappa_bar(n); "
                                    f"rows with a ratio >= {sampled.FP32_GAP_LIMIT} are flagged (fp32_resolved false); "
                                    "unif, sphere3, sphere5 are generated reflected (score - 1) for resolution"},
            "results": rows_out, "limits": pd_limits, "errors": errors}
    write_json(out, "kernels_montecarlo", data, started)
    try:
        import pandas as pd

        flat = []
        for rec in rows_out:
            for i, cv in enumerate(rec["c"]):
                flat.append({"family": rec["family"], "n": rec["n"], "rows": rec["rows"], "c": cv,
                             "mean_collision": rec["mean_collision"][i], "se_collision": rec["se_collision"][i],
                             "mean_entropy": rec["mean_entropy"][i], "se_entropy": rec["se_entropy"][i]})
        pd.DataFrame(flat).to_csv(out / "kernels_montecarlo.csv", index=False)
    except Exception as exc:
        print("[mc] csv failed:", exc)


# ----------------------------------------------------------------------------------------------


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--pytest-child":
        return pytest_child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="small sizes, GPU-marked tests only (< 1 min)")
    ap.add_argument("--bench-only", action="store_true", help="only the benchmark (make bench)")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--budget-s", type=float, default=None, help="stop starting new sizes after this many seconds")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on CPU (interpreter): tests the script")
    ap.add_argument("--parts", default="tests,mc,bench",
                    help="comma list of the parts to run: tests, mc (Monte-Carlo), bench (default: all three)")
    ap.add_argument("--kinds", default="1,2,3",
                    help="comma list of the kernel kinds to benchmark; the other kinds' records are kept from "
                         "the kernels_bench.json already in --out (default: 1,2,3)")
    ap.add_argument("--mc", action="store_true", help="only the Monte-Carlo (same as --parts mc)")
    ap.add_argument("--keep-baselines", action="store_true",
                    help="do not rerun eager/torch.compile; keep their records from the kernels_bench.json in --out")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if args.mc:
        parts = {"mc"}
    if args.bench_only:
        parts = {"bench"}
    if args.skip_tests:
        parts.discard("tests")
    if not parts <= {"tests", "mc", "bench"}:
        ap.error(f"--parts: unknown part(s) {sorted(parts - {'tests', 'mc', 'bench'})}; use tests, mc, bench")
    try:
        kinds = tuple(sorted({int(k) for k in args.kinds.split(",") if k.strip()}))
    except ValueError:
        ap.error(f"--kinds must be a comma list of 1, 2, 3, got {args.kinds!r}")
    if not kinds or not set(kinds) <= {1, 2, 3}:
        ap.error(f"--kinds must be a comma list of 1, 2, 3, got {args.kinds!r}")
    global DEVICE, SMOKE
    if args.cpu_smoke:
        DEVICE, SMOKE = "cpu", True
        os.environ["TRITON_INTERPRET"] = "1"
        parts.discard("tests")
    else:
        os.environ["TRITON_INTERPRET"] = "0"
    budget = args.budget_s or (50.0 if args.quick else 225.0)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    how = ensure_importable()
    import torch

    if not SMOKE and not torch.cuda.is_available():
        print("[gpu_results] no CUDA device: nothing to do (this script records GPU results only)")
        return 2
    print(f"[gpu_results] critscale from {how}; device {DEVICE}; out {out}", flush=True)
    status = {}
    if "tests" in parts:
        try:
            run_tests(out, args.quick)
            status["tests"] = "done"
        except Exception as exc:
            status["tests"] = repr(exc)
            traceback.print_exc()
    if "mc" in parts:
        try:
            run_montecarlo(out, args.quick, budget + (10 if args.quick else 0))
            status["montecarlo"] = "done"
        except Exception as exc:
            status["montecarlo"] = repr(exc)
            traceback.print_exc()
    if "bench" in parts:
        try:
            ceilings = measure_ceilings()
            print("[gpu_results] ceilings:",
                  {k: (f"{v:.3e}" if isinstance(v, float) else v) for k, v in ceilings.items()}, flush=True)
            run_bench(out, args.quick, ceilings, budget, kinds=kinds, keep_baselines=args.keep_baselines)
            status["bench"] = "done"
        except Exception as exc:
            status["bench"] = repr(exc)
            traceback.print_exc()
    wall = time.time() - T_START
    (out / "kernels_run.json").write_text(json.dumps({"status": status, "wall_time_s": wall, "parts": sorted(parts),
                                                      "kinds": list(kinds),
                                                      "provenance": provenance(T_START)}, indent=1))
    print(f"[gpu_results] done in {wall:.0f} s: {status}", flush=True)
    return 0 if all(v == "done" for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
