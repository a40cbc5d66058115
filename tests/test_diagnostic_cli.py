"""`python -m critscale diagnose`: end to end on a tiny GPT-2, the run directory, and every bad input.

Every bad input ends with exit status 2 and one line on stderr naming the input and the problem;
the output directory and the device are checked before the model is loaded.
"""

import hashlib
import json
import subprocess
import sys

import pandas as pd
import pytest
import torch

from critscale.cli import main
from critscale.trainer.corpus import build_corpus
from checks import one_line_error

TEXT = build_corpus("topics").heldout.decode("utf-8")
QUICK = ["--nulls", "gauss_qk,ptail2", "--null-windows", "8", "--no-progress"]


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
    """Tables, figures and the run manifest: the command, the inputs with SHA-256 hashes (of the bytes
    read for the streamed text), commit and date, in run.json, summary.json, summary.txt and the PNGs."""
    out = tmp_path / "out"
    text = _write(tmp_path, TEXT)
    status = main(["diagnose", "--model", str(tiny_model), "--text", str(text), "--max-windows", "8",
                   "--out", str(out), "--rows", *QUICK])
    assert status == 0
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 4 and set(heads["layer"]) == {0, 1} and set(heads["head"]) == {0, 1}
    for column in ("law", "sink", "best_rule", "gamma", "gamma_low", "gamma_high", "p_max", "entropy",
                   "beta_half", "kappa", "kappa16", "regime", "rows_step", "null_rows_step", "beyond_null"):
        assert column in heads.columns, column
    assert set(pd.read_csv(out / "nulls.csv")["unit"]) == {"gauss_qk", "ptail2"}
    bins = pd.read_csv(out / "bins.csv")
    assert set(bins["level"]) == {32, 45, 64, 91, 128}
    rows = pd.read_csv(out / "rows.csv.gz")
    assert len(rows[rows["layer"] >= 0]) == 4 * 8 * 5 * 4  # heads x windows x levels x queries
    run = json.loads((out / "run.json").read_text())
    assert run["command"].startswith("python -m critscale diagnose --model")
    text_input = run["inputs"][0]
    assert text_input["sha256"] == hashlib.sha256(text.read_bytes()[:text_input["bytes_read"]]).hexdigest()
    assert run["inputs"][1]["sha256"] and run["commit"] and run["date_utc"]
    assert {o["file"] for o in run["outputs"]} == {p.name for p in out.iterdir()} - {"run.json"}
    assert json.loads((out / "summary.json").read_text())["run"]["command"] == run["command"]
    assert run["command"] in (out / "summary.txt").read_text()
    from PIL import Image

    for figure in ("kappa_vs_n", "head_maps", "profiles", "entropy_curves", "operating_points", "law_shares"):
        assert run["commit"] in Image.open(out / f"{figure}.png").info["Description"]
    printed = capsys.readouterr().out
    assert "operating point" in printed and "null heads" in printed and str(tiny_model) in printed
    from critscale.diagnostic.schedule import Schedule

    schedule = Schedule.from_json(out / "schedule.json")  # the verdict and the schedule beside the other outputs
    assert [e["layer"] for e in schedule.layers] == [0, 1] and schedule.read_length == 128
    assert schedule.run["command"] == run["command"] and run["schedule"] == "schedule.json"
    assert run["report"] == "report.html" and "schedule.json" in {o["file"] for o in run["outputs"]}
    import os

    assert run["cache"].endswith(f"(CRITSCALE_CACHE={os.environ['CRITSCALE_CACHE']})")  # the cache of the run
    assert printed.splitlines()[3].startswith("verdict (T = 128")  # after the command and commit lines
    assert (out / "summary.txt").read_text().splitlines()[3].startswith("verdict (T = 128")


def test_out_is_fresh_or_forced(tiny_model, tmp_path, capsys):
    """A second run into the same directory is refused; with --force no file of the first run
    survives (the old command merged runs, keeping rows.csv.gz and figures of the first).
    A file of an output's name that the first run did not record is refused by --force and left as it
    was (the old command deleted it by name)."""
    out = tmp_path / "out"
    args = ["diagnose", "--model", str(tiny_model), "--text", str(_write(tmp_path, TEXT)), "--max-windows", "2",
            "--out", str(out), "--no-figures", *QUICK]  # two windows: what is tested is the output folder
    assert main(args + ["--rows"]) == 0
    (out / "head_maps.png").write_bytes(b"a figure no run.json here records")
    capsys.readouterr()
    assert main(args) == 2
    one_line_error(capsys, "is not empty", "--force")
    assert main(args + ["--force"]) == 2
    one_line_error(capsys, "head_maps.png is not among the outputs that run.json there records")
    assert (out / "head_maps.png").read_bytes() == b"a figure no run.json here records"
    assert (out / "rows.csv.gz").exists()
    (out / "head_maps.png").unlink()
    assert main(args + ["--force"]) == 0
    assert not (out / "rows.csv.gz").exists() and not (out / "head_maps.png").exists()
    assert {o["file"] for o in json.loads((out / "run.json").read_text())["outputs"]} == {
        p.name for p in out.iterdir()} - {"run.json"}


@pytest.mark.parametrize("make, fragment", [
    (lambda t: "", "--out is empty"),
    (lambda t: "/dev/null", "is a character device, not a directory"),
    (lambda t: _write(t, "x", "file.txt"), "is a file, not a directory"),
    (lambda t: t / "missing" / "out", "is not an existing directory"),
    (lambda t: "/proc/critscale-out", "cannot be created"),
])
def test_bad_out_is_refused_before_loading_the_model(tmp_path, capsys, make, fragment):
    """--model names no model at all: the --out error must come first (the old command computed
    everything, then failed on --out)."""
    status = main(["diagnose", "--model", str(tmp_path / "no-model"), "--text", str(_write(tmp_path, TEXT)),
                   "--out", str(make(tmp_path))])
    assert status == 2
    one_line_error(capsys, fragment)


@pytest.mark.parametrize("device, fragment", [
    ("bogus", "is not a torch device"),
    ("cuda", "no CUDA GPU is available"),
    ("meta", "runs on cpu or cuda"),
])
def test_bad_device_is_refused_first(tmp_path, capsys, device, fragment):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    status = main(["diagnose", "--model", str(tmp_path / "no-model"), "--text", str(_write(tmp_path, TEXT)),
                   "--out", str(tmp_path / "out"), "--device", device])
    assert status == 2
    one_line_error(capsys, f"--device {device}", fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case, text, extra, message", [
    ("empty", "   \n", [], "holds only white space"),
    ("short", "too short", [], "too short: 9 tokens, one window needs 128"),
    ("long max-len", TEXT, ["--max-len", "4096"], "exceeds the model's context"),
    ("small max-len", TEXT, ["--max-len", "64"], "too short: the diagnostic needs at least 128"),
    ("windows", TEXT, ["--max-windows", "0"], "--max-windows must be >= 1"),
    ("nulls", TEXT, ["--nulls", "gauss_qk,cauchy"], "unknown null cauchy"),
])
def test_bad_text_and_options(tiny_model, tmp_path, capsys, case, text, extra, message):
    status = main(["diagnose", "--model", str(tiny_model), "--text", str(_write(tmp_path, text)),
                   "--out", str(tmp_path / "out"), "--no-figures", *QUICK, *extra])
    assert status == 2
    one_line_error(capsys, message)
    assert not (tmp_path / "out").exists()  # a failed run leaves no directory it created


def test_text_that_is_not_utf8(tiny_model, tmp_path, capsys):
    """Latin-1 text: an error naming the byte offset (the old command analysed it, exit 0); with
    --encoding latin-1 it runs."""
    path = tmp_path / "latin.txt"
    path.write_bytes(TEXT[:3000].encode("ascii", "replace") + b"caf\xe9" + TEXT[3000:6000].encode("ascii", "replace"))
    args = ["diagnose", "--model", str(tiny_model), "--text", str(path), "--max-windows", "8", "--no-figures", *QUICK]
    assert main(args + ["--out", str(tmp_path / "a")]) == 2
    one_line_error(capsys, "not valid utf-8: byte 0xe9 at offset 3003")
    assert main(args + ["--out", str(tmp_path / "b"), "--encoding", "latin-1"]) == 0


@pytest.mark.parametrize("make, fragment", [
    (lambda t: t, "is a directory, not a file"),
    (lambda t: "/dev/null", "is a character device, not a regular file"),
    (lambda t: t / "none.txt", "does not exist"),
])
def test_text_paths(tmp_path, capsys, make, fragment):
    status = main(["diagnose", "--text", str(make(tmp_path)), "--out", str(tmp_path / "out")])
    assert status == 2
    one_line_error(capsys, fragment)


def test_models_that_cannot_be_loaded(tmp_path, capsys):
    text = str(_write(tmp_path, TEXT))
    assert main(["diagnose", "--model", str(tmp_path / "no-model"), "--text", text, "--out", str(tmp_path / "a")]) == 2
    one_line_error(capsys, "no-model")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    assert main(["diagnose", "--model", str(tmp_path / "bert"), "--text", text, "--out", str(tmp_path / "b")]) == 2
    one_line_error(capsys, "bert")


def test_qk_excludes_model_options(tmp_path, capsys):
    assert main(["diagnose", "--qk", str(tmp_path / "x.npz"), "--model", "gpt2", "--out", str(tmp_path / "o")]) == 2
    one_line_error(capsys, "--model and --design do not apply")


@pytest.mark.parametrize("args, fragment", [
    (["--text", "/dev/null"], "is a character device"),
    (["--text", "TEXT", "--device", "bogus"], "is not a torch device"),
])
def test_module_entry_point_prints_one_line(tmp_path, args, fragment):
    """The installed command, in a fresh interpreter: exit 2, one line, no traceback."""
    args = [str(_write(tmp_path, TEXT)) if a == "TEXT" else a for a in args]
    result = subprocess.run([sys.executable, "-m", "critscale", "diagnose", *args, "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr
