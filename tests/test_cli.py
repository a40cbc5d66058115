"""`python -m critscale diagnose`: end to end on a tiny GPT-2, and every documented input error."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from critscale.cli import main
from critscale.gpt2.corpus import build_corpus

TEXT = build_corpus("topics").heldout.decode("utf-8")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=128, vocab_size=256,
                        bos_token_id=None, eos_token_id=None)
    directory = tmp_path_factory.mktemp("model") / "tiny"
    GPT2LMHeadModel(config).save_pretrained(directory)
    return directory


def _write(tmp_path, text, name="text.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_diagnose_end_to_end(tiny_model, tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["diagnose", "--model", str(tiny_model), "--text", str(_write(tmp_path, TEXT)),
                   "--max-len", "128", "--max-windows", "2", "--out", str(out), "--no-progress"])
    assert status == 0
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 4 and set(heads["layer"]) == {0, 1} and set(heads["head"]) == {0, 1}
    for column in ("law", "gamma", "gamma_low", "gamma_high", "sink", "c_median", "best_rule", "beta_half_median"):
        assert column in heads.columns
    assert set(heads["law"]) <= {"linear", "power", "step", "undefined"}
    bins = pd.read_csv(out / "bins.csv")
    assert set(bins["log2_n_bin"]) == {4, 5, 6}  # n = 16..127 for a 128-token window
    for figure in ("kappa_vs_n", "head_maps", "profiles", "entropy_curves", "operating_points"):
        assert (out / f"{figure}.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "heads per law" in printed and "sink heads" in printed and str(tiny_model.resolve()) in printed


@pytest.mark.parametrize("case, text, extra, message", [
    ("empty", "   \n", [], "text is empty"),
    ("short", "too short", [], "too short: 9 tokens"),
    ("long max-len", TEXT, ["--max-len", "4096"], "exceeds the model's context"),
    ("small max-len", TEXT, ["--max-len", "64"], "below the minimum"),
])
def test_bad_text_and_lengths(tiny_model, tmp_path, capsys, case, text, extra, message):
    status = main(["diagnose", "--model", str(tiny_model), "--text", str(_write(tmp_path, text)),
                   "--out", str(tmp_path / "out"), "--no-progress", "--no-figures", *extra])
    assert status == 2
    assert message in capsys.readouterr().err


def test_missing_text_file(tmp_path, capsys):
    status = main(["diagnose", "--model", str(tmp_path), "--text", str(tmp_path / "none.txt"),
                   "--out", str(tmp_path / "out")])
    assert status == 2
    assert "does not exist" in capsys.readouterr().err


def test_missing_model(tmp_path, capsys):
    status = main(["diagnose", "--model", str(tmp_path / "no-model"), "--text", str(_write(tmp_path, TEXT)),
                   "--out", str(tmp_path / "out")])
    assert status == 2
    assert "does not exist" in capsys.readouterr().err


def test_model_that_is_not_gpt2_like(tmp_path, capsys):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    status = main(["diagnose", "--model", str(tmp_path / "bert"), "--text", str(_write(tmp_path, TEXT)),
                   "--out", str(tmp_path / "out")])
    assert status == 2
    assert "'bert' model, which the q/k capture does not support" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    result = subprocess.run([sys.executable, "-m", "critscale", "diagnose", "--text", str(tmp_path / "none.txt"),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "does not exist" in result.stderr
