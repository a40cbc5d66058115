"""`python -m critscale diagnose` refused, interrupted or failing: one line, and a run directory whole or absent.

Every refused input is one line on stderr and exit status 2, with nothing before it; SIGINT is the
one line ``interrupted`` and exit status 130.
A run that fails leaves no directory it created and an existing one as it was; outputs are renamed
into place with ``run.json`` last, so a killed run never leaves a file that looks like a result.
``--force`` replaces only files that the directory's own ``run.json`` records with their SHA-256.
"""

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from critscale.cli import main
from checks import one_line_error

STAGING = ".critscale-staging-"


@pytest.fixture
def qk(tmp_path):
    """A tiny --qk file: one head, two windows of 128 tokens."""
    rng = np.random.default_rng(0)
    path = tmp_path / "qk.npz"
    shape = (1, 1, 2, 128, 8)
    np.savez(path, q=rng.standard_normal(shape).astype(np.float32), k=rng.standard_normal(shape).astype(np.float32))
    return path


def _args(qk, out, *extra):
    return ["diagnose", "--qk", str(qk), "--out", str(out), "--nulls", "gauss_qk", "--null-windows", "2",
            "--no-figures", "--no-progress", *extra]


def _hashes(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir() if p.is_file()}


def _recorded(out):
    return {o["file"]: o["sha256"] for o in json.loads((out / "run.json").read_text())["outputs"]}


@pytest.mark.parametrize("argv, fragment", [
    (["diagnose", "--qk", "x.npz"], "the following arguments are required: --out"),
    (["diagnose", "--text", "t.txt", "--out", "o", "--errors", "xmlcharrefreplace"],
     "argument --errors: invalid choice"),
    (["diagnose", "--qk", "x.npz", "--out", "o", "--seed", "one"], "argument --seed: invalid int value"),
    (["diagnose", "--qk", "x.npz", "--out", "o", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["diagnose", "--out", "o"], "one of the arguments --text --qk is required"),
    ([], "the following arguments are required: command"),
])
def test_usage_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, fragment):
    """The old parser printed a 13-line usage block and raised SystemExit; --errors xmlcharrefreplace
    (an encoding-only handler) passed and failed with a TypeError traceback while decoding."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    line = one_line_error(capsys, fragment, "--help")
    assert line.startswith("critscale diagnose: error: " if argv else "critscale: error: ")
    assert not (tmp_path / "o").exists()


def test_negative_seed_names_the_option(qk, tmp_path, capsys):
    """The old command passed -1 to numpy, whose message does not name --seed."""
    assert main(_args(qk, tmp_path / "out", "--seed", "-1")) == 2
    one_line_error(capsys, "--seed must be >= 0, got -1")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", [["--encoding", "utf-8"], ["--errors", "strict"], ["--max-len", "128"],
                                    ["--max-windows", "4"], ["--device", "cpu"], ["--device-map", "auto"],
                                    ["--design", "suffix"], ["--design", "prefix"]])
def test_options_of_text_are_refused_with_qk(qk, tmp_path, capsys, option):
    """Given explicitly, even at its default value: the old command ignored them (exit 0)."""
    assert main(_args(qk, tmp_path / "out", *option)) == 2
    one_line_error(capsys, f"given: {option[0]}", "do not apply")
    assert not (tmp_path / "out").exists()


def test_out_name_too_long(qk, tmp_path, capsys):
    """The old command raised OSError (ENAMETOOLONG) with a traceback."""
    assert main(_args(qk, tmp_path / ("a" * 300))) == 2
    one_line_error(capsys, "--out", "File name too long")


def test_a_run_that_fails_on_a_fault_leaves_no_directory(qk, tmp_path, monkeypatch):
    """Not an input error: the exception propagates (exit 1, traceback), and the directory it created
    is gone (the old command removed it only on a ValueError)."""
    import critscale.diagnostic

    def fault(*args, **kwargs):
        raise RuntimeError("a fault of the diagnostic")

    monkeypatch.setattr(critscale.diagnostic, "diagnose_qk", fault)
    with pytest.raises(RuntimeError, match="a fault"):
        main(_args(qk, tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_warnings_of_a_successful_run_are_shown_after_it(qk, tmp_path, monkeypatch, capsys):
    """Held back during the run (so that none precedes an error line), not dropped."""
    import warnings

    import critscale.diagnostic

    real = critscale.diagnostic.diagnose_qk

    def warn(*args, **kwargs):
        warnings.warn("a warning of the run", RuntimeWarning)
        return real(*args, **kwargs)

    monkeypatch.setattr(critscale.diagnostic, "diagnose_qk", warn)
    with pytest.warns(RuntimeWarning, match="a warning of the run"):
        assert main(_args(qk, tmp_path / "out")) == 0


def _full_disk_at(monkeypatch, call):
    """``DataFrame.to_csv`` writes part of its file, then fails with ENOSPC, at its ``call``-th call."""
    real, calls = pd.DataFrame.to_csv, []

    def to_csv(self, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == call:
            with open(path, "w") as handle:
                handle.write("layer,head,la")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)


def test_full_disk_leaves_no_directory_it_created(qk, tmp_path, monkeypatch, capsys):
    """The old command left heads.csv, nulls.csv and a truncated bins.csv, no run.json, and a traceback."""
    _full_disk_at(monkeypatch, 3)
    assert main(_args(qk, tmp_path / "out")) == 2
    one_line_error(capsys, "bins.csv", "No space left on device")
    assert not (tmp_path / "out").exists()


def test_full_disk_leaves_an_existing_directory_as_it_was(qk, tmp_path, monkeypatch, capsys):
    """An empty --out given by the user stays, empty: the old command left two tables and a truncated third."""
    out = tmp_path / "out"
    out.mkdir()
    _full_disk_at(monkeypatch, 3)
    assert main(_args(qk, out)) == 2
    one_line_error(capsys, "No space left on device")
    assert out.is_dir() and list(out.iterdir()) == []


def test_full_disk_leaves_an_earlier_run_whole(qk, tmp_path, monkeypatch, capsys):
    """With --force into an earlier run: the old command removed the earlier outputs first, then failed."""
    out = tmp_path / "out"
    assert main(_args(qk, out)) == 0
    before = _hashes(out)
    _full_disk_at(monkeypatch, 3)
    capsys.readouterr()
    assert main(_args(qk, out, "--force")) == 2
    one_line_error(capsys, "No space left on device")
    assert _hashes(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


def test_force_keeps_what_a_forged_record_lists(qk, tmp_path, capsys):
    """A run.json listing important.csv: the old command deleted it by name."""
    out = tmp_path / "out"
    assert main(_args(qk, out)) == 0
    (out / "important.csv").write_text("the user's data\n")
    record = json.loads((out / "run.json").read_text())
    record["outputs"].append({"file": "important.csv", "sha256": hashlib.sha256(b"the user's data\n").hexdigest()})
    record["outputs"].append({"file": "../outside.csv", "sha256": "0" * 64})
    (out / "run.json").write_text(json.dumps(record))
    (tmp_path / "outside.csv").write_text("outside\n")
    assert main(_args(qk, out, "--force")) == 0
    assert (out / "important.csv").read_text() == "the user's data\n"
    assert (tmp_path / "outside.csv").read_text() == "outside\n"
    assert set(_recorded(out)) == {p.name for p in out.iterdir()} - {"run.json", "important.csv"}


def test_force_refuses_an_output_changed_since_its_run(qk, tmp_path, capsys):
    """heads.csv edited after the run no longer has the recorded SHA-256: the old command replaced it."""
    out = tmp_path / "out"
    assert main(_args(qk, out)) == 0
    (out / "heads.csv").write_text("edited by hand\n")
    before = _hashes(out)
    capsys.readouterr()
    assert main(_args(qk, out, "--force")) == 2
    one_line_error(capsys, "heads.csv differs from the SHA-256")
    assert _hashes(out) == before


def test_force_refuses_a_record_that_is_not_a_diagnosis(qk, tmp_path, capsys):
    """A run.json that is not JSON: the old command replaced it with everything named like an output."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text("not a record")
    (out / "summary.txt").write_text("someone's summary")
    assert main(_args(qk, out, "--force")) == 2
    one_line_error(capsys, "run.json is not the manifest of a diagnosis")
    assert (out / "summary.txt").read_text() == "someone's summary" and (out / "run.json").read_text() == "not a record"


def test_symlinked_out_is_refused(qk, tmp_path, capsys):
    """Through a link to another run's directory the old command overwrote that run's summary.txt."""
    other = tmp_path / "other"
    assert main(_args(qk, other, "--seed", "1")) == 0
    before = _hashes(other)
    (tmp_path / "link").symlink_to(other)
    capsys.readouterr()
    assert main(_args(qk, tmp_path / "link", "--force")) == 2
    one_line_error(capsys, "is a symbolic link")
    assert _hashes(other) == before


def test_symlinked_output_inside_out_is_refused(qk, tmp_path, capsys):
    """summary.txt made a link to a file elsewhere: the old command removed the link and went on (exit 0)."""
    out = tmp_path / "out"
    assert main(_args(qk, out)) == 0
    (tmp_path / "elsewhere.txt").write_text("another file\n")
    (out / "summary.txt").unlink()
    (out / "summary.txt").symlink_to(tmp_path / "elsewhere.txt")
    capsys.readouterr()
    assert main(_args(qk, out, "--force")) == 2
    one_line_error(capsys, "summary.txt is a symbolic link")
    assert (out / "summary.txt").is_symlink() and (tmp_path / "elsewhere.txt").read_text() == "another file\n"


CHILD = """
import os, signal, sys, time, warnings
import pandas as pd
import critscale.diagnostic
{patch}
from critscale.cli import main
sys.exit(main({argv!r}))
"""
KILL_AFTER_FIRST_TABLE = """
real = pd.DataFrame.to_csv
def to_csv(self, path, *args, **kwargs):
    real(self, path, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
pd.DataFrame.to_csv = to_csv
"""
INTERRUPT = """
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)
critscale.diagnostic.diagnose_qk = critscale.diagnostic.diagnose_model = interrupted
"""
WARN_THEN_REFUSE = """
def refused(*args, **kwargs):
    warnings.warn("a warning before the error", RuntimeWarning)
    raise ValueError("--qk: a refused input")
critscale.diagnostic.diagnose_qk = refused
"""


def _child(patch, argv):
    env = {**os.environ, "TRITON_INTERPRET": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", CHILD.format(patch=patch, argv=argv)], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.slow
def test_a_run_killed_while_writing_leaves_no_output_that_looks_whole(qk, tmp_path, capsys):
    """SIGKILL after heads.csv is written: the old command left heads.csv in --out with nothing to tell
    the run incomplete.  Now it is in the staging folder; the next run with --force removes it."""
    out = tmp_path / "out"
    killed = _child(KILL_AFTER_FIRST_TABLE, _args(qk, out))
    assert killed.returncode == -signal.SIGKILL
    left = sorted(p.name for p in out.iterdir())
    assert len(left) == 1 and left[0].startswith(STAGING), left
    assert main(_args(qk, out)) == 2
    one_line_error(capsys, "is not empty", "holds no whole run", "--force")
    assert main(_args(qk, out, "--force")) == 0
    assert set(_recorded(out)) == {p.name for p in out.iterdir()} - {"run.json"}


@pytest.mark.slow
def test_sigint_is_one_line_and_exit_130(qk, tmp_path):
    """The old command printed a 52-line traceback and left the directory it created."""
    result = _child(INTERRUPT, _args(qk, tmp_path / "out"))
    assert result.returncode == 130
    assert result.stderr.strip() == "critscale diagnose: interrupted"
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_nothing_precedes_the_error_line(qk, tmp_path):
    """A RuntimeWarning during the run came before the error line in the old command."""
    result = _child(WARN_THEN_REFUSE, _args(qk, tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip() == "critscale diagnose: error: --qk: a refused input"
    assert not (tmp_path / "out").exists()


REFUSE_AFTER_THE_BAR = """
import critscale.diagnostic.pipeline as pipeline
def refused(*args, **kwargs):
    raise ValueError("--nulls: a refused input")
pipeline.diagnose_source = refused
"""


@pytest.mark.slow
def test_no_progress_bar_precedes_the_error_line(tmp_path):
    """stderr is not a terminal: no bar (the old command drew 'diagnose: forwards 0%' before the error)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from critscale.trainer.corpus import build_corpus

    config = GPT2Config(n_layer=1, n_head=1, n_embd=16, n_positions=128, vocab_size=256,
                        bos_token_id=None, eos_token_id=None)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "tiny")
    text = tmp_path / "text.txt"
    text.write_bytes(build_corpus("topics").heldout[:20000])
    result = _child(REFUSE_AFTER_THE_BAR, ["diagnose", "--model", str(tmp_path / "tiny"), "--text", str(text),
                                           "--max-windows", "2", "--out", str(tmp_path / "out"), "--nulls", "gauss_qk",
                                           "--no-figures"])
    assert result.returncode == 2
    assert result.stderr.strip() == "critscale diagnose: error: --nulls: a refused input"
    assert not (tmp_path / "out").exists()


def test_out_of_memory_is_one_line(qk, tmp_path, monkeypatch, capsys):
    """An allocation the machine cannot hold: the old command printed a MemoryError traceback and kept --out."""
    import critscale.diagnostic

    def too_large(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(critscale.diagnostic, "diagnose_qk", too_large)
    assert main(_args(qk, tmp_path / "out")) == 2
    one_line_error(capsys, "out of memory")
    assert not (tmp_path / "out").exists()
