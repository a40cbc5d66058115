"""The float32 cache of a GGUF file proves what it holds: verified before use, rebuilt once when it does not match.

A tiny GGUF file (written with gguf's own writer) stands for SmolLM2, and a fake dequantiser that saves a
tiny GPT-2 stands for transformers' (30-60 s on SmolLM2): the cache code around them is the real one.
Before the cache was verified, a cache whose weights were XOR-ed was read with exit 0 and a run.json that
named only the GGUF file; a cache without gguf_source.json was dequantised again and then failed with
``OSError: [Errno 39] Directory not empty``; a killed dequantisation left its staging folder forever; a
cache directory that could not be written failed with a traceback after the dequantisation.  Each test
below asserts the new behaviour, so each fails on the old one.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from critscale.cli import main
from critscale.models import CacheError, InvalidCheckpointError
from critscale.models import gguf_cache
from critscale.models.gguf_cache import SOURCE_FILE, dequantised_directory
from critscale.models.load import load_model, quiet_transformers
from critscale.models.verified_cache import file_sha256

from test_models_gguf_header import _tiny_gguf


class FakeDequantiser:
    """Saves the same tiny GPT-2 (byte vocabulary) each time, and counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, path, staging):
        from transformers import GPT2Config, GPT2LMHeadModel

        quiet_transformers()  # as load_model does: no progress bar on stderr
        self.calls += 1
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=128, vocab_size=256,
                                   bos_token_id=None, eos_token_id=None)).save_pretrained(staging)


@pytest.fixture
def gguf_file(tmp_path):
    return _tiny_gguf(tmp_path / "tiny.gguf")


@pytest.fixture
def fake():
    return FakeDequantiser()


def _xor_words(file, n=100, offset=4096):
    """XOR ``n`` 32-bit words of ``file`` from ``offset`` with 0x5A5A5A5A: the size stays, the content changes."""
    data = bytearray(file.read_bytes())
    for i in range(offset, offset + 4 * n):
        data[i] ^= 0x5A
    file.write_bytes(bytes(data))


def test_the_record_lists_each_file_with_its_hash_and_a_second_call_reads_the_cache(tmp_path, gguf_file, fake):
    directory, record = dequantised_directory(gguf_file, tmp_path / "cache", build=fake)
    assert not record["cached"] and fake.calls == 1
    files = {f.name for f in directory.iterdir()} - {SOURCE_FILE}
    assert set(record["files"]) == files and "model.safetensors" in files
    for name in files:
        assert record["files"][name] == {"bytes": (directory / name).stat().st_size,
                                         "sha256": file_sha256(directory / name)}
    assert json.loads((directory / SOURCE_FILE).read_text())["files"] == record["files"]
    again, record2 = dequantised_directory(gguf_file, tmp_path / "cache", build=fake)
    assert again == directory and record2["cached"] and fake.calls == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [directory.name], "no staging folder is left"


BREAKS = {  # name: (how to break a valid cache directory, what the one line says)
    "weights XOR-ed": (lambda d: _xor_words(d / "model.safetensors"),
                       "holds model.safetensors, whose SHA-256 is not the one its record lists"),
    "weights truncated": (lambda d: (d / "model.safetensors").write_bytes(b"x"),
                          "holds model.safetensors of 1 bytes where its record says"),
    "record deleted": (lambda d: (d / SOURCE_FILE).unlink(), f"has no {SOURCE_FILE}"),
    "record not JSON": (lambda d: (d / SOURCE_FILE).write_text("{"), f"has an unreadable {SOURCE_FILE}"),
    "record of an older version": (lambda d: (d / SOURCE_FILE).write_text(json.dumps({"sha256": "0" * 64})),
                                   "without the hashes of its files (written by an older version)"),
    "a file removed": (lambda d: (d / "config.json").unlink(), "lacks config.json, which its record lists"),
    "a file added": (lambda d: (d / "pytorch_model.bin").write_bytes(b"x"),
                     "holds pytorch_model.bin, which its record does not list"),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_bad_cache_is_rebuilt_once_with_one_line(tmp_path, capsys, gguf_file, fake, case):
    root = tmp_path / "cache"
    directory, first = dequantised_directory(gguf_file, root, build=fake)
    capsys.readouterr()
    BREAKS[case][0](directory)
    again, record = dequantised_directory(gguf_file, root, build=fake)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and BREAKS[case][1] in err[0] and "rebuilding it" in err[0] and str(directory) in err[0]
    assert again == directory and fake.calls == 2 and not record["cached"] and record["rebuilt"]
    assert record["files"] == first["files"], "the rebuilt copy is the same float32 model"
    assert [p.name for p in root.iterdir()] == [directory.name]
    dequantised_directory(gguf_file, root, build=fake)
    assert fake.calls == 2 and capsys.readouterr().err == "", "rebuilt once: the next call reads it silently"


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_staging_folders_of_dead_processes_are_removed_on_the_next_run(tmp_path, capsys, gguf_file, fake):
    """A staging folder is named by its process (pid and start time): kept while it runs, removed once it died."""
    from critscale.models.verified_cache import _start_time

    root = tmp_path / "cache"
    root.mkdir()
    dead = root / f".staging-0123456789abcdef-{_dead_pid()}-0-00000000"
    legacy = root / ".0123456789abcdef-abcd_123"  # mkdtemp's name in earlier versions, an hour old
    live = root / f".staging-0123456789abcdef-{os.getpid()}-{_start_time(os.getpid())}-00000000"
    for folder in (dead, legacy, live):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    os.utime(legacy, (0, 0))
    dequantised_directory(gguf_file, root, build=fake)
    err = capsys.readouterr().err.strip().splitlines()
    assert not dead.exists() and not legacy.exists() and live.exists()
    assert len(err) == 2 and all("an unfinished float32 copy of a GGUF file left by a process" in e for e in err)


def test_a_killed_dequantisation_leaves_a_folder_that_the_next_run_removes(tmp_path, gguf_file):
    """A child process is killed (SIGKILL) while its dequantiser runs: its staging folder is removed next time."""
    root = tmp_path / "cache"
    script = (f"import time\nfrom critscale.models.gguf_cache import dequantised_directory\n"
              f"def hang(path, staging):\n    (staging / 'model.safetensors').write_bytes(b'0' * 10000)\n"
              f"    print('started', flush=True)\n    time.sleep(60)\n"
              f"dequantised_directory({str(gguf_file)!r}, {str(root)!r}, build=hang)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert [p.name.startswith(".staging-") for p in root.iterdir()] == [True]
    fake = FakeDequantiser()
    directory, _ = dequantised_directory(gguf_file, root, build=fake)
    assert [p.name for p in root.iterdir()] == [directory.name]


def test_a_cache_that_cannot_be_written_is_one_line_before_dequantising(tmp_path, gguf_file, fake):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache's parent directory should be")
    with pytest.raises(CacheError, match=r"cannot write the float32 cache of GGUF file .*tiny.gguf in .*blocker/"
                                         r"models: Not a directory"):
        dequantised_directory(gguf_file, blocker / "models", build=fake)
    assert fake.calls == 0


def test_a_model_larger_than_the_memory_is_refused_before_dequantising(tmp_path, gguf_file, fake, monkeypatch):
    monkeypatch.setattr("critscale.models.model_size.physical_memory", lambda: 100)
    with pytest.raises(InvalidCheckpointError, match=r"GGUF file .*tiny.gguf: its 2 tensors as float32: about 160 "
                                                     r"bytes, more than this machine's 100 bytes of memory"):
        dequantised_directory(gguf_file, tmp_path / "cache", build=fake)
    assert fake.calls == 0 and not (tmp_path / "cache").exists()


def _diagnose(tmp_path, gguf_file, out):
    text = tmp_path / "text.txt"
    text.write_text("some text to read, a few times over. " * 80)
    return main(["diagnose", "--model", str(gguf_file), "--text", str(text), "--out", str(tmp_path / out),
                 "--device", "cpu", "--no-progress", "--no-figures", "--max-windows", "2", "--max-len", "128",
                 "--nulls", "gauss_qk", "--null-windows", "2"])


def test_run_json_names_the_cache_files_read_and_a_bad_cache_changes_no_result(tmp_path, capsys, monkeypatch,
                                                                                gguf_file, fake):
    """run.json names the GGUF file and the verified cache files with their hashes; after the cache's weights are
    XOR-ed, the next run says so in one line, rebuilds, and writes the same heads (the old code read the XOR-ed
    weights, exit 0, other heads).  The copy is in $CRITSCALE_CACHE/models, named there by its real path, and
    nothing is written in the working directory (the old code cached under ./build/models)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CRITSCALE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf_cache, "save_float32_copy", fake)
    assert _diagnose(tmp_path, gguf_file, "first") == 0
    capsys.readouterr()
    entry = next(i for i in json.loads((tmp_path / "first" / "run.json").read_text())["inputs"] if i["role"] == "model")
    directory = Path(entry["read_from"]["path"])
    assert entry["sha256"] == file_sha256(gguf_file) and directory.parent == tmp_path / "cache" / "models"
    assert directory.is_dir() and list(work.iterdir()) == [] and "$CRITSCALE_CACHE" in entry["read_from"]["what"]
    listed = {f["file"]: f["sha256"] for f in entry["read_from"]["files"]}
    assert "model.safetensors" in listed
    assert listed == {f.name: file_sha256(f) for f in directory.iterdir() if f.name != SOURCE_FILE}
    _xor_words(directory / "model.safetensors")
    assert _diagnose(tmp_path, gguf_file, "second") == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.safetensors, whose SHA-256 is not the one its record lists" in err[0]
    assert fake.calls == 2
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "first" / "heads.csv"),
                                  pd.read_csv(tmp_path / "second" / "heads.csv"))


def test_load_model_reads_the_verified_copy(tmp_path, monkeypatch, gguf_file, fake):
    monkeypatch.setattr(gguf_cache, "save_float32_copy", fake)
    loaded = load_model(gguf_file, gguf_cache=tmp_path / "cache")
    assert loaded.kind == "gguf" and loaded.n_layers == 1
    assert {f["file"] for f in loaded.record_fields()["read_from"]["files"]} >= {"model.safetensors", "config.json"}
    assert "F32 GGUF, dequantised to float32 (tensors: 2 F32)" in loaded.describe()


@pytest.mark.slow  # transformers' GGUF configuration reader: several seconds of imports
def test_gguf_metadata_of_a_million_layers_is_refused_before_the_model_is_built(tmp_path):
    """transformers builds the model its metadata declares (the old loader spent hours building a million layers);
    the real dequantiser reads the configuration first and refuses it in one line naming the file and the field."""
    import gguf
    import numpy as np

    path = tmp_path / "deep.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(10 ** 6)
    writer.add_context_length(64)
    writer.add_embedding_length(16)
    writer.add_feed_forward_length(32)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(256)
    writer.add_tensor("token_embd.weight", np.ones((256, 16), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(InvalidCheckpointError, match=r"GGUF file .*deep.gguf \(its metadata\): num_hidden_layers "
                                                     r"1000000 is more layers than the loader builds"):
        dequantised_directory(path, tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [], "the staging folder is removed"


def test_a_concurrent_builder_that_finished_first_is_kept(tmp_path, gguf_file, fake):
    """While this build runs, another one installs a valid copy: it is kept, this staging folder removed."""
    root = tmp_path / "cache"
    other = FakeDequantiser()

    def racing(path, staging):
        dequantised_directory(path, root, build=other)  # the other builder, finishing first
        fake(path, staging)

    directory, record = dequantised_directory(gguf_file, root, build=racing)
    assert other.calls == 1 and fake.calls == 1
    assert [p.name for p in root.iterdir()] == [directory.name]
    assert dequantised_directory(gguf_file, root, build=fake)[1]["cached"]
