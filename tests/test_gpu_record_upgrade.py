"""GPU records reach every reader through one upgrade path: critscale.page.gpu_results.load upgrades a benchmark of
schema 1 (the committed results/gpu/kernels_bench.json) to the current schema, and the readers of the old
layout are gone.

The reference below is chapter 12's reader of schema 1 as it was before the upgrade (``legacy_rows`` and
``describe_legacy``), kept here only as the oracle: the upgraded file must give the same rows and the same
words, bit for bit, since the numbers only moved.
"""

import copy
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from critscale.page import gpu_results

ROOT = Path(__file__).resolve().parents[1]
RAW = json.loads((ROOT / "results" / "gpu" / "kernels_bench.json").read_text())

KIND_NAMES = {1: "scores", 2: "qk", 3: "sampled"}
LEGACY_IMPLS = {"triton": "kernel", "triton (1 beta, 1 threshold)": "kernel", "triton (fp32 inputs)": "kernel (fp32 inputs)",
                "torch.compile": "compile"}


def legacy_rows(bench):
    setup, ceil, prov = bench["setup"], bench["ceilings"], bench["provenance"]
    earlier = (setup.get("partial_rerun") or {}).get("earlier_provenance") or {}
    out = []
    for r in bench["records"]:
        one = "1 beta" in r["impl"]
        nb = 1 if one else setup["n_beta"]
        scores = r["rows"] * r["n"]
        gen = 6 * scores if r["kind"] == 3 else 0
        fl = {"mufu": (scores * nb + gen) / ceil["exp2_per_s"], "fma": 4 * scores * nb / (ceil["fp32_fma_flops"] / 2)}
        if r["kind"] == 1:
            fl["hbm"] = 4 * scores / ceil["copy_bandwidth_Bps"]
        if r["kind"] == 2:
            fl["tensor"] = 2 * scores * setup["d"] / ceil["bf16_matmul_flops"]
        largest = max(fl, key=fl.get)
        impl = LEGACY_IMPLS.get(r["impl"], r["impl"])
        out.append({"kind": KIND_NAMES[r["kind"]],
                    "grid": r"1 \(\beta\), 1 \(t\)" if one else rf"{nb} \(\beta\) (ratio 1.25), {setup['n_t']} \(t\)",
                    "grid_short": r"1 \(\beta\)" if one else rf"{nb} \(\beta\), ratio 1.25",
                    "n": r["n"], "rows": r["rows"], "impl": impl,
                    "work": "all fields" if impl.startswith("kernel") else "fewer fields",
                    "time_ms": r["time_ms"], "q25": None, "q75": None, "kernel_ms": None,
                    "floor": largest, "floor_ms": 1e3 * fl[largest], "err_log_z": None,
                    "timed_at": earlier.get("commit", "an earlier run") if r.get("kept_from_earlier_run") else prov["commit"],
                    "timing": r["timing"], "peak_extra_bytes": r.get("peak_extra_bytes"),
                    "status": "ok" if r["time_ms"] else (r.get("error") or "no time")})
    return out


def describe_legacy(bench, recs):
    prov = bench["provenance"]
    earlier = (bench["setup"].get("partial_rerun") or {}).get("earlier_provenance")
    kept = int((recs.timed_at != prov["commit"]).sum())
    reps = [int(m) for m in recs.timing.str.extract(r"median of (\d+)")[0].dropna()]
    text = ("The recorded benchmark was written by an older version of the script and of the kernels, "
            "before this protocol. ")
    if kept and earlier:
        text += (f"Its {len(recs) - kept} kernel rows were timed in that run; its {kept} eager and torch.compile rows were "
                 "kept from an earlier run (both commits are in the provenance box), so its ratios compare two runs at "
                 "two commits. ")
    text += ("Its baselines computed fewer fields than the kernels (no second-largest score, no minimum, no NaN check, "
             "no finishing step or bracket), ")
    if reps:
        text += f"calls over 40 ms were timed as the median of as few as {min(reps)} CUDA-event timings, "
    text += ("and it recorded no running clocks, power or temperature and no counters. "
             "Its 32 β were geometric from 0.05 to 50 (ratio 1.25), a grid without doubling pairs. "
             "The floors of the full table are those of its own count of the algorithm (one exp2 per score and β, "
             "one FFMA counted as one instruction), not of the compiled code.")
    return text


def test_the_committed_benchmark_is_of_schema_1():
    assert RAW.get("schema") is None and isinstance(RAW["records"][0]["kind"], int)


def test_the_upgraded_benchmark_gives_the_rows_and_words_the_legacy_reader_gave_bit_for_bit():
    bench = gpu_results.load("kernels_bench")
    assert bench["schema"] == gpu_results.BENCH_SCHEMA and bench["upgraded_from"] == 1
    rows = gpu_results.bench_rows(bench)
    old = legacy_rows(RAW)
    assert len(rows) == len(old) == 41
    assert rows == old  # the same floats: the upgrade moves numbers, it recomputes none differently
    assert bench["setup"]["protocol_note"] == describe_legacy(RAW, pd.DataFrame(old))
    clock = float(re.search(r"(\d+) MHz", RAW["provenance"]["nvidia_smi"]).group(1))
    assert bench["provenance"]["max_sm_clock_mhz"] == clock and "max_sm_clock_mhz" not in RAW["provenance"]


def test_a_current_record_is_returned_as_it_is():
    current = {"schema": gpu_results.BENCH_SCHEMA, "records": [], "provenance": {}}
    assert gpu_results.upgrade("kernels_bench", current) is current
    other = {"results": []}
    assert gpu_results.upgrade("kernels_montecarlo", other) is other


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["setup"].update(n_beta=16), "a schema-1 grid of 16 betas"),
    (lambda d: d.pop("ceilings"), "not a benchmark of schema 1 either (field 'ceilings')"),
])
def test_a_file_of_neither_layout_is_refused_in_one_line(edit, words):
    data = copy.deepcopy(RAW)
    edit(data)
    with pytest.raises(gpu_results.GpuResultError, match=re.escape(words)) as err:
        gpu_results.upgrade("kernels_bench", data)
    assert "results/gpu/kernels_bench.json" in str(err.value) and "\n" not in str(err.value)


def test_no_reader_of_the_old_layout_remains():
    """Chapter 12 branched on ``schema is None`` in four places (rows, words, clock, memory note, recorded
    times) and gpu_suite/table.py kept the integer kinds of schema 1."""
    chapter = (ROOT / "notebooks" / "12_kernels.md").read_text()
    for needle in ('schema") is None', 'schema") is not None', "legacy_rows", "describe_legacy", "LEGACY_KIND",
                   "nvidia_smi"):
        assert needle not in chapter, needle
    assert "legacy_id" not in (ROOT / "scripts" / "gpu_suite" / "table.py").read_text()
