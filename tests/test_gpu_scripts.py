"""The GPU scripts, checked without a GPU: the smoke run, equal work, floors, counters parsing, the gpu book.

The smoke run (``scripts/gpu_results.py --smoke``) executes the benchmark table, the Monte-Carlo and the
counters step on the CPU with Triton's interpreter at tiny sizes, so that a GPU session only runs what
was already run here.  Times from it mean nothing; the schema, the fields and the errors do.
"""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts" / "gpu_session"), str(ROOT / "scripts")]  # the session plumbing, gpu_suite

from gpu_suite import floors, reference, table, work  # noqa: E402

RECORD_KEYS = {"point", "kind", "grid", "n", "rows", "n_beta", "n_t", "impl", "fields", "equal_work", "status",
               "time_ms", "kernel_time", "error_vs_float64", "floors", "peak_extra_bytes", "first_call_s"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke run of every part, in a child process (it chooses TRITON_INTERPRET before importing triton)."""
    out = tmp_path_factory.mktemp("gpu-smoke")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_results.py"), "--smoke", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_smoke_bench_has_every_declared_point_with_its_reference_error(smoke):
    """Every (point, implementation) of the table is recorded, ran, returned its declared fields and carries
    a float64 error; a dropped point, a missing error or a failed implementation fails here."""
    data = json.loads((smoke / "kernels_bench.json").read_text())
    assert data["schema"] == "critscale-bench/2"
    assert data["errors"] == []
    sizes = table.SIZES["smoke"]
    want = {(f"{b.kind}/{b.grid}/n=2^{int(np.log2(n))}", i) for b in table.BLOCKS for n, impls in table.points(b, sizes)
            for i in impls}
    got = {(r["point"], r["impl"]) for r in data["records"]}
    assert got == want
    for r in data["records"]:
        assert RECORD_KEYS <= set(r), (r["point"], r["impl"], RECORD_KEYS - set(r))
        assert r["status"] == "ok"
        assert set(r["fields"]) == set(table.IMPLS[r["impl"]].fields)
        err = r["error_vs_float64"]
        assert err["reference_rows"] >= 1
        assert {f for f in r["fields"] if f in table.SOFTMAX_FIELDS} <= set(err)
    provenance = data["provenance"]
    assert {"device", "driver", "versions", "commit", "date_utc", "wall_time_s", "device_state"} <= set(provenance)
    assert {b["point"] for b in data["blocks"]} == {p for p, _ in want}
    assert all({"device_before", "device_after"} <= set(b) for b in data["blocks"])


def test_smoke_kernel_and_full_baselines_agree_with_float64(smoke):
    """At every smoke point of stored and generated scores, the kernel and each full baseline stay within
    the fp32 budget of critscale.kernels.testing (relative 1e-5 on the softmax fields), count exactly,
    find the same order statistics and bracket kappa.  A baseline that drops a term (e.g. the maximum's
    multiplicity) or returns a field it did not compute fails here.  The qk points are left out: their
    fp32 logits differ from the float64 reference by the product rounding that tests/test_kernels_qk.py
    bounds and checks."""
    data = json.loads((smoke / "kernels_bench.json").read_text())
    full = [r for r in data["records"] if r["equal_work"] and r["kind"] != "qk"]
    assert {r["impl"] for r in full} == {"kernel", "eager", "compile", "compile-ladder", "compile-max-autotune",
                                         "compile-beta-loop"}
    for r in full:
        err = r["error_vs_float64"]
        for f in ("log_z", "entropy", "max_weight", "collision"):
            assert err[f]["max_rel"] <= 1e-5, (r["point"], r["impl"], f, err[f])
        assert err["counts_mismatch"] == 0 and err["kappa_bracket_violations"] == 0, (r["point"], r["impl"])
        assert err["top"] == 0 and err["m0"] == 0 and err["n_valid"] == 0 and err["delta2"] == 0, (r["point"], r["impl"])


def test_smoke_writes_the_files_the_chapters_read(smoke):
    """The Monte-Carlo file has the fields chapter 6 reads and the generator version of the kernels in its
    setup, in every result and in every CSV line (a record of another generator version gives other rows for
    the same seeds: without the version it could be mistaken for this one); the run file names every part."""
    import csv

    from critscale.kernels import GENERATOR_VERSION

    mc = json.loads((smoke / "kernels_montecarlo.json").read_text())
    assert mc["results"] and not mc["errors"]
    assert mc["setup"]["generator_version"] == GENERATOR_VERSION
    for rec in mc["results"]:
        assert {"family", "n", "rows", "c", "mean_collision", "se_collision", "mean_entropy", "se_entropy"} <= set(rec)
        assert rec["generator_version"] == GENERATOR_VERSION
        assert len(rec["mean_collision"]) == len(rec["c"])
        assert all(0 < v <= 1 for v in rec["mean_collision"])
    with open(smoke / "kernels_montecarlo.csv") as f:
        lines = list(csv.DictReader(f))
    assert lines and {int(line["generator_version"]) for line in lines} == {GENERATOR_VERSION}
    run = json.loads((smoke / "kernels_run.json").read_text())
    assert run["parts"]["tests"]["status"].startswith("skipped: the smoke run has no CUDA device")
    assert run["parts"]["bench"]["status"] == "done" and run["parts"]["mc"]["status"] == "done"


def test_smoke_files_pass_the_import_and_a_changed_csv_value_does_not(smoke, tmp_path, capsys):
    """The import's CSV check holds the suite's real files (pandas' numbers of every record against their
    JSON): the smoke run's benchmark and Monte-Carlo, given a GPU provenance, are imported; the same files
    with one number of the benchmark CSV changed are refused (exit 2) and the destination is left alone."""
    import gpu_import
    import gpu_tarballs

    files = gpu_tarballs.results_files()
    for name in ("kernels_bench.json", "kernels_bench.csv", "kernels_montecarlo.json", "kernels_montecarlo.csv",
                 "kernels_run.json"):
        files[name] = (smoke / name).read_bytes()
        if name.endswith(".json"):
            gpu_tarballs.with_provenance(files, name, **gpu_tarballs.provenance())
    header, first, *rest = files["kernels_bench.csv"].decode().splitlines(keepends=True)
    col = header.rstrip("\n").split(",").index("first_call_s")
    cells = first.split(",")
    cells[col] = repr(float(cells[col]) * 1.5)
    changed = header + ",".join(cells) + "".join(rest)
    for case, csv_text in (("ok", files["kernels_bench.csv"]), ("changed", changed.encode())):
        folder = tmp_path / case
        gpu_tarballs.pack({**files, "kernels_bench.csv": csv_text}, folder / "session" / "gpu_results.tar.gz")
        rc = gpu_import.main([str(folder / "session"), "--dest", str(folder / "dest")])
        err = capsys.readouterr().err
        if case == "ok":
            assert rc == 0, err
            assert (folder / "dest" / "kernels_bench.csv").read_bytes() == files["kernels_bench.csv"]
        else:
            assert rc == 2 and "kernels_bench.csv: line 2, column first_call_s" in err, err
            assert not (folder / "dest").exists()


def test_smoke_bench_times_every_kernel_point_before_any_baseline(smoke):
    """A time budget drops the least important work: every kernel record comes before the first baseline,
    and the autotuned compile (minutes of compilation) comes last; a loop that timed point by point again,
    all implementations of a point together, fails here."""
    from gpu_suite.bench import PHASES, phase_of

    data = json.loads((smoke / "kernels_bench.json").read_text())
    order = [PHASES.index(phase_of(r["impl"])) for r in data["records"]]
    assert order == sorted(order) and order[0] == 0 and max(order) == len(PHASES) - 1
    assert phase_of("compile-max-autotune") == "autotuned" and phase_of("compile") == "baselines"


def test_benchmark_grid_is_a_doubling_grid_that_the_ladder_serves_with_eight_exponentials():
    """grid32 is 0.05 * 2^(k/8), k < 32: 8 chains of the beta ladder, so 8 exp2 per score for its 32 betas
    and their sums of p^2 (a geometric grid without doubling pairs, like grid32-geo, needs 32)."""
    from critscale.kernels import ladder

    beta = np.asarray(table.GRIDS["grid32"].beta)
    assert np.allclose(beta, 0.05 * 2.0 ** (np.arange(32) / 8), rtol=1e-15)
    assert ladder.beta_plan(beta).exp2_per_score == 8
    assert ladder.beta_plan(np.asarray(table.GRIDS["grid32-geo"].beta)).exp2_per_score == 32
    assert table.BLOCKS[-1].grid == "grid32-geo" and table.BLOCKS[-1].impls == ("kernel",)


def test_smoke_bench_renders_in_the_kernels_chapter(smoke, tmp_path):
    """Chapter 12 reads a schema-2 file: run its recorded-results code on the smoke file (the chapter's
    own cells, extracted from the MyST source) and check the glued summaries. A chapter that still
    expected schema 1 fields (integer kinds, 'targets'), dropped rows from the full table or lost the
    summary's kernel row of a kind fails here."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    source = (ROOT / "notebooks" / "12_kernels.md").read_text()
    recorded = source.split("## Recorded GPU run", 1)[1].split("## What it shows", 1)[0]
    cells = re.findall(r"```\{code-cell\} ipython3\n(?::tags:[^\n]*\n)?\n?(.*?)```", recorded, flags=re.S)
    glued = {}
    bench = json.loads((smoke / "kernels_bench.json").read_text())

    from critscale.page import gpu_results

    class GpuResults:  # the page's view of results/gpu, pointed at the smoke run
        bench_rows = staticmethod(gpu_results.bench_rows)

        @staticmethod
        def load(name):
            path = smoke / f"{name}.json"
            return gpu_results.upgrade(name, json.loads(path.read_text())) if path.exists() else None

        @staticmethod
        def show_gpu_result_note(data, what, **kw):
            pass

    import critscale as cs_real
    from types import SimpleNamespace

    cs = SimpleNamespace(gpu_results=GpuResults, record=lambda k, v, **kw: glued.__setitem__(k, v),
                         record_figure=lambda k, fig: glued.__setitem__(k, fig), plotting=cs_real.plotting,
                         tables=cs_real.tables)
    import math

    import matplotlib.pyplot as plt
    import pandas as pd

    from critscale.kernels import GENERATOR_VERSION

    scope = {"cs": cs, "np": np, "pd": pd, "plt": plt, "math": math, "profile": "test",
             "bench_name": "kernels_bench", "tests_name": "kernels_tests", "mc_name": "kernels_montecarlo"}
    for cell in cells:
        exec(cell, scope)
    assert glued["bench_what"].startswith(f"All {len(bench['records'])} rows of the recorded benchmark (mode")
    assert "schema" not in glued["bench_what"] and bench["provenance"]["commit"] not in glued["bench_what"]
    assert "holds no hardware counters" in glued["bench_bound"]
    shown = glued["bench_table"]
    assert len(shown) == len(bench["records"])
    assert any(v.endswith("(all fields)") for v in shown["implementation"])
    assert any(v.endswith("(only lse)") for v in shown["implementation"])
    summary = glued["bench_summary"]
    assert set(summary["kind"]) == {"scores", "qk", "sampled"}
    assert summary["kernel (ms)"].notna().all() and summary["fastest baseline (ms)"].notna().any()
    assert glued["mc_generator"] == f"version {GENERATOR_VERSION}"


def test_full_baselines_return_every_kernel_field():
    """Equal work: each full baseline returns exactly RowStats.FIELDS and the same values as the float64
    reference on an input with a masked prefix and a tied maximum; a baseline that skipped the counts, the
    kappa bracket or the multiplicity of the maximum would fail one of these checks."""
    from critscale.kernels import RowStats

    assert tuple(RowStats.FIELDS) == table.ALL_FIELDS
    beta, t = table.grid_values("grid32", "smoke")
    inp = work.make_inputs("scores", 6, 40, 8, beta, t, "cpu", seed=3)
    inp.x[1, :20] = float("-inf")
    inp.x[2, 7] = inp.x[2].max()
    rows = np.arange(6)
    ref = reference.reference_fields(inp.x.double().numpy(), beta, t)
    for impl in ("eager", "compile", "compile-beta-loop", "compile-ladder"):
        out = work.build(impl, inp, smoke=True)()
        assert set(out) == set(RowStats.FIELDS), impl
        err = reference.errors(out, ref, rows)
        assert err["counts_mismatch"] == 0 and err["kappa_bracket_violations"] == 0, (impl, err)
        assert max(err[f]["max_rel"] for f in ("log_z", "entropy", "collision", "max_weight")) < 1e-5, (impl, err)
        assert err["m0"] == 0 and err["delta2"] == 0 and err["range"] == 0, (impl, err)
        assert np.isinf(out["kappa_lower"][2].item())  # the tied maximum: kappa = inf, as the kernels say


def test_partial_routes_are_declared_as_less_work():
    """Only the log-sum-exp and attention routes declare fewer fields than the kernel; a baseline quietly
    declared with fewer fields (and then compared as if equal) fails here."""
    partial = {name for name, impl in table.IMPLS.items() if not set(impl.fields) >= set(table.ALL_FIELDS)}
    assert partial == {"logsumexp", "sdpa-lse", "sdpa-route"}
    assert all(set(i.fields) == set(table.ALL_FIELDS) for n, i in table.IMPLS.items() if n not in partial)


def test_sdpa_log_sum_exp_is_natural_and_scaled():
    """The flash-attention route's lse equals log sum_j exp(scale q.k_j) of the bf16 inputs in float64,
    to fp32 accumulation error (at most (d + n) 2^-24 relative); a log2 base or a missed scale is off by
    far more."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(7, 16, generator=g).to(torch.bfloat16)
    k = torch.randn(50, 16, generator=g).to(torch.bfloat16)
    scale = 0.7 / 4.0
    _, lse = work.flash_forward(q, k, scale)
    want = torch.logsumexp(scale * (q.double() @ k.double().T), dim=1)
    assert torch.allclose(lse.double(), want, rtol=(16 + 50) * 2.0 ** -24, atol=0)


def test_fma_floor_counts_one_instruction_per_ffma_and_counting_cost_is_flat_in_thresholds():
    """The FMA floor divides FMA-pipe instructions by the FFMA instruction rate (half the flop rate); the
    ladder's FMA count of 32 betas of ratio 2^{1/8} is 8 roots x (1 + 5 + 4 - 1) + 32 B sums = 104 per score
    (the last squaring of a chain fused with its add);
    doubling the thresholds changes no floor (the counting cost per score is the rank and one word)."""
    ceil = {"exp2_per_s": 1e12, "ffma_per_s": 5e12, "alu_per_s": 2e12, "issue_warp_instr_per_s": 1e11,
            "copy_bandwidth_Bps": 4e12, "bf16_matmul_flops": 8e14}
    beta32 = 0.05 * 2.0 ** (np.arange(32) / 8)
    w1 = floors.work_model("scores", 100, 1000, beta32, 64, 64)
    w2 = floors.work_model("scores", 100, 1000, beta32, 128, 64)
    f1, f2 = floors.floors(w1, ceil)["seconds"], floors.floors(w2, ceil)["seconds"]
    assert f1["fma"] == pytest.approx(104 * 100 * 1000 / 5e12)
    assert f1["alu"] == pytest.approx(100 * 1000 * floors.COUNT_ALU / 2e12)
    assert f2 == f1
    assert floors.work_model("sampled", 10, 10, [1.0], 4, 8)["mufu_instr"] == 100 * (1 + 2 * floors.GENERATION_MUFU)


def test_mufu_floor_is_the_ladders_ex2_count():
    """One ex2 per score and ladder root: 8 for the 32-value doubling grid (not one per beta, 32, which made
    the MUFU floor 4x too long), 32 for 32 betas of ratio 1.25 (no doubling pairs), 1 for one beta."""
    assert floors.ladder_instructions(0.05 * 2.0 ** (np.arange(32) / 8))["ex2"] == 8
    assert floors.ladder_instructions(np.geomspace(0.05, 50.0, 32))["ex2"] == 32
    assert floors.ladder_instructions([1.0])["ex2"] == 1


def test_floors_never_exceed_the_recorded_compiled_code():
    """frac_of_floor = floor / measured time cannot exceed 1 when every pipe's floor is at most what the
    compiled code issues: per score, summed over a call's launches, the model's MUFU, FMA-pipe and ALU counts
    are at most the recorded SASS counts (results/sass/kernels_sass.json) of every kind and grid."""
    rec = json.loads((ROOT / "results" / "sass" / "kernels_sass.json").read_text())
    for kind, grids in rec["kinds"].items():
        for grid, entry in grids.items():
            g = rec["grids"][grid]
            model = floors.work_model(kind, 1, 1, g["beta"], len(g["t"]), 64)
            sass = {"MUFU": 0.0, "FMA": 0.0, "ALU": 0.0}
            for k in entry["kernels"]:
                ps = k["per_score"]
                sass["MUFU"] += ps.get("MUFU", 0.0)
                sass["FMA"] += ps.get("FMA", 0.0) + ps.get("FMAHEAVY", 0.0)
                sass["ALU"] += ps.get("ALU", 0.0)
            for pipe, key in (("MUFU", "mufu_instr"), ("FMA", "fma_instr"), ("ALU", "alu_instr")):
                assert model[key] <= sass[pipe] + 1e-9, (kind, grid, pipe, model[key], sass[pipe])


NCU_RAW = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","gpu__time_duration.sum","sm__inst_executed.sum","sm__inst_executed_pipe_alu.sum","sm__inst_executed_pipe_fma.sum","sm__inst_executed_pipe_xu.sum","sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active","sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active","sm__inst_issued.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","byte","nsecond","inst","inst","inst","inst","%","%","%","%"
"0","101","python3","h","_scores_pass1","1","7","(128, 1, 1)","(528, 1, 1)","0","9.0","16,777,216","52,000","1,000,000","300,000","200,000","0","40.5","20.1","0","55.2"
"1","101","python3","h","_scores_pass2","1","7","(128, 1, 1)","(528, 4, 1)","0","9.0","33,554,432","2,100,000","64,000,000","4,000,000","30,000,000","8,000,000","12.0","61.0","88.4","75.0"
'''


def test_ncu_raw_csv_is_parsed_per_kernel_with_its_bound():
    """Two kernels, the units row skipped, thousands separators read, per-score counts = 32 x warp
    instructions / scores, and the bound is the largest utilisation (the MUFU pipe for pass 2)."""
    from gpu_suite import counters

    kernels = counters.parse_raw_csv(NCU_RAW)
    assert [k["name"] for k in kernels] == ["_scores_pass1", "_scores_pass2"]
    s = counters.summarize_kernel(kernels[1], scores=2**20)
    assert s["time_ms"] == pytest.approx(2.1)
    assert s["thread_instructions_per_score"]["xu"] == pytest.approx(32 * 8e6 / 2**20)
    assert s["bound"] == {"by": "xu (MUFU) pipe", "pct_of_peak": 88.4}
    assert counters.summarize_kernel(kernels[0], scores=2**20)["bound"]["by"] == "issue slots"


def test_make_renders_the_gpu_profile_from_recorded_notebooks_without_a_gpu():
    """Without a GPU, `make book PROFILE=gpu` copies the recorded notebooks and executes none; the cpu
    profile still executes (a rule that leaked into the other profiles, or a gpu build that tried to
    execute, fails here)."""
    def dry(*args):
        return subprocess.run(["make", "-n", *args, "TRITON_INTERPRET=1"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120).stdout

    gpu = dry("notebooks", "PROFILE=gpu", "GPU_BOOK_DIR=build/none")
    assert "critscale.bookbuild notebook" not in gpu
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))
    assert all(f"build/none/executed/{nb}.ipynb build/executed/gpu/{nb}.ipynb" in gpu for nb in names)
    assert "critscale.bookbuild notebook 01_definitions" in dry("notebook", "NB=01_definitions", "PROFILE=cpu", "-B")
    assert "critscale.bookbuild notebook 01_definitions" in dry("notebook", "NB=01_definitions", "PROFILE=gpu",
                                                                "GPU_BOOK=execute", "-B")


def _staged_book(tmp_path: Path, *, drop: str | None = None, status: str = "ok", output: str | None = None) -> Path:
    """A valid book tarball (tests/gpu_tarballs.py) without notebook ``drop``, with the first notebook's
    status ``status`` and a stream output ``output`` in every notebook."""
    import gpu_tarballs

    files = gpu_tarballs.book_files()
    names = gpu_tarballs.book_names()
    if drop:
        del files[f"executed/{drop}.ipynb"]
    if output:
        from nbformat import v4

        for nb in names:
            files[f"executed/{nb}.ipynb"] = gpu_tarballs.notebook(nb, [v4.new_output("stream", name="stderr",
                                                                                      text=output)])
    gpu_tarballs.edit_json(files, "provenance.json", lambda p: p["notebooks"][names[0]].update(status=status))
    return gpu_tarballs.pack(files, tmp_path / "gpu_book.tar.gz")


@pytest.mark.parametrize("case", ["ok", "missing", "failed", "machine-path"])
def test_gpu_book_import_refuses_incomplete_runs(tmp_path, case):
    """The import takes a complete, successful gpu run only: a missing notebook, a failed one or an
    absolute machine path in a notebook makes it refuse (exit 2) and leave the destination alone."""
    kwargs = {"missing": {"drop": "05_ladder"}, "failed": {"status": "failed (exit 1)"},
              "machine-path": {"output": "see /root/repo/src/critscale/a.py"}}.get(case, {})
    tar_path = _staged_book(tmp_path, **kwargs)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep").write_text("earlier")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_session" / "gpu_book.py"), "import", str(tar_path),
                           "--dest", str(dest)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if case == "ok":
        assert proc.returncode == 0, proc.stderr
        assert not (dest / "keep").exists() and (dest / "provenance.json").exists()
        assert len(list((dest / "executed").glob("*.ipynb"))) == len(list((ROOT / "notebooks").glob("*.md")))
    else:
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (dest / "keep").exists()


def test_wheelhouse_names_are_pinned_and_not_provided_by_the_gpu_image():
    """Every wheel the GPU machine needs has a version in constraints.txt (the wheelhouse script refuses
    otherwise), and none of them is one the wheelhouse file says the image already has."""
    import re

    lines = (ROOT / "scripts" / "gpu_session" / "gpu_wheelhouse.txt").read_text().splitlines()
    names = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    image = " ".join(ln for ln in lines if ln.startswith("#")).split("image has them", 1)[1]
    pins = {re.sub(r"[-_.]+", "-", ln.split("==")[0]).lower() for ln in (ROOT / "constraints.txt").read_text().splitlines()
            if "==" in ln}
    norm = [re.sub(r"[-_.]+", "-", n).lower() for n in names]
    assert {"papermill", "jupytext", "ipykernel", "nbclient", "nbformat"} <= set(norm)
    assert set(norm) <= pins, set(norm) - pins
    assert not any(re.search(rf"[\s,:]{re.escape(n)}[,.]", image) for n in norm)


def _session_default(name: str) -> int:
    match = re.search(rf"\$\{{{name}:-(\d+)\}}", (ROOT / "scripts" / "gpu_session" / "gpu_session.sh").read_text())
    assert match, f"scripts/gpu_session/gpu_session.sh has no default for {name}"
    return int(match.group(1))


def test_gpu_params_state_an_estimate_that_fits_the_device_command():
    """Every gpu parameter file states its wall-time estimate (scripts/gpu_session/gpu_book.py schedules by it), and
    every chapter's estimate fits the book's window in one device command: the session's deadline, less
    the results part (its budget and 30 s to finish its last point and pack) and the reserve for the last
    notebook; a gpu profile raised past what one command can run fails here."""
    import gpu_book

    window = (_session_default("GPU_SESSION_S") - _session_default("GPU_RESULTS_BUDGET_S") - 30
              - gpu_book.DEADLINE_RESERVE_S)
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))
    estimates = {nb: gpu_book.estimate_s("gpu", nb) for nb in names}
    assert all(v is not None for v in estimates.values()), [nb for nb, v in estimates.items() if v is None]
    assert max(v for nb, v in estimates.items() if nb != gpu_book.LAST) <= window
    assert estimates[gpu_book.LAST] <= gpu_book.DEADLINE_RESERVE_S - 10
    assert _session_default("GPU_BOOK_MIN_S") <= window + gpu_book.DEADLINE_RESERVE_S


def test_session_fits_a_device_session_with_a_retry_of_the_results():
    """The session's command ends by its deadline (under the 600-s limit of a command), and a failed results
    part ends it early, so a rerun of the results (each stopped at its own limit) fits the 15 minutes of device
    time with a 90-s start, a minute of transfers and at least 3 minutes to spare; the earlier default
    budget of 270 s left 2.5 minutes and fails here."""
    session, results = _session_default("GPU_SESSION_S"), _session_default("GPU_RESULTS_BUDGET_S")
    text = (ROOT / "scripts" / "gpu_session" / "gpu_session.sh").read_text()
    assert "RESULTS_LIMIT_S=${GPU_RESULTS_LIMIT_S:-$(( BUDGET_S + 30 ))}" in text
    limit = results + 30
    assert session + 20 <= 600
    start, transfers, margin = 90, 60, 180
    assert start + session + transfers <= 900  # the normal path: results and book in one command
    assert start + 2 * limit + transfers + margin <= 900  # the results failed, then a rerun


def _session(tmp_path, env, *args, timeout=60):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPU_")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_session" / "gpu_session.sh"), *args],
                          env=dict(base, CRITSCALE_COMMIT="abcdef1234567", **env), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("parts, env, message", [
    ("results,book", {"GPU_WHEELS": "no-such-wheelhouse"}, "no .whl file in no-such-wheelhouse"),
    ("gpt2", {"GPU_SMOL": "no-such-smol"}, "no-such-smol/a/gguf.part is missing"),
])
def test_session_refuses_to_start_when_a_carried_file_is_missing(tmp_path, parts, env, message):
    """A book part without its wheelhouse or a gpt2 part without both halves of the model used to run the
    results part (minutes of device time) or start the machine's work first; now the command ends at once,
    with exit 2, one line per missing file, and nothing run or packed."""
    out = tmp_path / "out"
    proc = _session(tmp_path, dict(env, GPU_SESSION_PARTS=parts, GPU_RESULTS_CMD="false"), str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stdout and "nothing was run" in proc.stdout
    assert not out.exists()
    check = _session(tmp_path, dict(env, GPU_SESSION_PARTS=parts), "--check")
    assert check.returncode == 2 and message in check.stdout


def test_session_check_passes_when_the_carried_files_are_there(tmp_path):
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "x-1.0-py3-none-any.whl").write_bytes(b"")
    proc = _session(tmp_path, {"GPU_WHEELS": str(wheels)}, "--check")
    assert proc.returncode == 2 and "no critscale-*.whl in" in proc.stdout, proc.stdout + proc.stderr
    (wheels / "critscale-0.1.0-py3-none-any.whl").write_bytes(b"")
    proc = _session(tmp_path, {"GPU_WHEELS": str(wheels)}, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every file the parts results,book need is here" in proc.stdout


@pytest.fixture(scope="module")
def critscale_wheel(tmp_path_factory):
    """critscale's wheel built from this tree, as `make gpu-wheelhouse` builds it."""
    import gpu_critscale_wheel

    return gpu_critscale_wheel.build(tmp_path_factory.mktemp("wheel"))


FAKE_RESULTS = """import sys, time, pathlib
out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
(out / "kernels_tests.json").write_text('{"part": "tests"}')
print("fake results: tests written, now the benchmark", flush=True)
time.sleep(120)
(out / "kernels_bench.json").write_text('{"part": "bench"}')
"""


@pytest.mark.slow
def test_results_part_is_stopped_at_its_limit_with_its_written_files_packed(tmp_path, critscale_wheel):
    """A results part that overruns is stopped at its own limit, the files it wrote before are packed while
    it runs (a command killed at 600 s still returns them), files older than the session are not packed,
    and the book does not run after a stopped results part.  The earlier script waited for the part without a
    limit and packed only at its end."""
    import tarfile

    results = tmp_path / "results"
    results.mkdir()
    (results / "kernels_montecarlo.json").write_text("{}")  # a file of an earlier run
    os.utime(results / "kernels_montecarlo.json", (1e9, 1e9))
    fake = tmp_path / "fake_results.py"
    fake.write_text(FAKE_RESULTS)
    out = tmp_path / "out"
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "x-1.0-py3-none-any.whl").write_bytes(b"")
    (wheels / critscale_wheel.name).write_bytes(critscale_wheel.read_bytes())
    env = {"GPU_RESULTS_CMD": f"{sys.executable} {fake}", "GPU_RESULTS_DIR": str(results), "GPU_RESULTS_LIMIT_S": "4",
           "GPU_PACK_EVERY_S": "1", "GPU_WHEELS": str(wheels)}
    proc = _session(tmp_path, env, str(out), timeout=40)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopped at its limit of 4 s" in proc.stdout
    assert "book not run" in proc.stdout
    with tarfile.open(out / "gpu_results.tar.gz") as tar:
        assert tar.getnames() == ["kernels_tests.json"]


def test_session_refuses_a_commit_that_is_not_a_sha(tmp_path):
    """Results recorded at 'unknown' or '<sha>+dirty' fail the book's schema check after the whole session;
    the script refuses them before anything runs (exit 2)."""
    for commit in ("unknown", "1f03a07d5d3f+dirty"):
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_session" / "gpu_session.sh"), str(tmp_path / "out")],
                              env=dict(os.environ, CRITSCALE_COMMIT=commit), capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "not a commit sha" in proc.stdout
        assert not (tmp_path / "out" / "gpu_results.tar.gz").exists()


def _results_tarball(tmp_path: Path, bench_schema, generator) -> Path:
    """A session folder with a valid results tarball (tests/gpu_tarballs.py) of benchmark schema
    ``bench_schema`` and Monte-Carlo generator version ``generator``."""
    import gpu_tarballs

    files = gpu_tarballs.results_files(generator)
    gpu_tarballs.edit_json(files, "kernels_bench.json", lambda d: d.update(schema=bench_schema))
    folder = tmp_path / "session"
    gpu_tarballs.pack(files, folder / "gpu_results.tar.gz")
    return folder


@pytest.mark.parametrize("case", ["ok", "schema-1", "old-generator"])
def test_gpu_import_refuses_results_of_another_protocol_or_generator(tmp_path, case):
    """The import takes a session's results only when the benchmark is of schema 2 and the Monte-Carlo of the
    kernels' generator version; otherwise it exits 2 and leaves the destination as it was."""
    from critscale.kernels import GENERATOR_VERSION

    folder = _results_tarball(tmp_path, None if case == "schema-1" else "critscale-bench/2",
                              GENERATOR_VERSION - 1 if case == "old-generator" else GENERATOR_VERSION)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "kernels_bench.json").write_text("earlier")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_session" / "gpu_import.py"), str(folder), "--dest", str(dest)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    if case == "ok":
        assert proc.returncode == 0, proc.stderr
        assert json.loads((dest / "kernels_bench.json").read_text())["schema"] == "critscale-bench/2"
    else:
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (dest / "kernels_bench.json").read_text() == "earlier"


@pytest.mark.slow
def test_gpu_book_runs_notebooks_through_the_build_driver(tmp_path):
    """scripts/gpu_session/gpu_book.py executes a notebook the way the Makefile does (python -m critscale.bookbuild
    notebook): the packed notebook has the driver's single parameter box with this build's values and no
    papermill copy, which a jupytext | papermill pipe would not give; the provenance names the notebook ok."""
    env = dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1", CRITSCALE_COMMIT="0123456789ab")
    env.pop("MPLBACKEND", None)
    site = tmp_path / "site"
    site.mkdir()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_session" / "gpu_book.py"), "run", "--out", str(tmp_path),
                           "--profile", "ci", "--site", str(site), "01_definitions"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(tmp_path / "gpu_book.tar.gz") as tar:
        prov = json.load(tar.extractfile("provenance.json"))
        nb = json.load(tar.extractfile("executed/01_definitions.ipynb"))
    assert prov["notebooks"]["01_definitions"]["status"] == "ok" and prov["profile"] == "ci"
    tags = [c["metadata"].get("tags", []) for c in nb["cells"] if c["cell_type"] == "code"]
    assert sum("parameters" in t for t in tags) == 1 and not any("injected-parameters" in t for t in tags)
    box = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    assert "The parameters of this build (params/ci/01_definitions.yaml)" in "".join(box["source"])
