"""Loading GPT-2 models offline: every documented error for its bad input, and the happy paths."""

import json
import time

import pytest
import torch

from critscale.models.load import (ENV_VAR, ByteTokenizer, ModelNotFoundError, UnsupportedModelError, hub_weights_cached,
                                 load_model, resolve_source)


def _save_gpt2(path, vocab_size=256):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=vocab_size,
                        bos_token_id=None, eos_token_id=None)
    GPT2LMHeadModel(config).save_pretrained(path)
    return path


def test_local_directory_loads_with_byte_tokenizer(tmp_path):
    loaded = load_model(_save_gpt2(tmp_path / "m"))
    assert loaded.kind == "directory"
    assert loaded.checkpoint == str((tmp_path / "m").resolve())
    assert isinstance(loaded.tokenizer, ByteTokenizer)
    assert loaded.tokenizer.encode("aé") == [97, 0xC3, 0xA9]
    assert not loaded.model.training
    assert "1 layers x 2 heads" in loaded.describe()


def test_environment_variable_names_the_model(tmp_path, monkeypatch):
    directory = _save_gpt2(tmp_path / "m")
    monkeypatch.setenv(ENV_VAR, str(directory))
    assert resolve_source(None) == str(directory)
    assert load_model().checkpoint == str(directory.resolve())
    assert resolve_source("other") == "other"  # an explicit name wins


def test_no_model_and_no_environment(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ModelNotFoundError, match=ENV_VAR):
        load_model(None)


def test_missing_directory(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_model(tmp_path / "nowhere")


def test_directory_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_model(tmp_path / "empty")


def test_directory_without_weights(tmp_path):
    directory = _save_gpt2(tmp_path / "m")
    (directory / "model.safetensors").unlink()
    with pytest.raises(ModelNotFoundError, match="no weights"):
        load_model(directory)


def test_config_of_another_type_without_weights(tmp_path):
    """An architecture the capture cannot read (falcon: attention outside the interface) is refused from
    config.json alone, before the weights are looked for."""
    (tmp_path / "falcon").mkdir()
    (tmp_path / "falcon" / "config.json").write_text(json.dumps({"model_type": "falcon"}))
    with pytest.raises(UnsupportedModelError, match="'falcon' model.*AttentionInterface"):
        load_model(tmp_path / "falcon")


def test_missing_tokenizer_for_a_bpe_vocabulary(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no tokenizer"):
        load_model(_save_gpt2(tmp_path / "m", vocab_size=300))


def test_offline_hub_name_fails_fast_and_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # "gpt2" itself unless a machine happens to have it cached; then a name no cache holds
    name = "gpt2" if not hub_weights_cached("gpt2") else "critscale-tests/absent-model"
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as info:
        load_model(name)
    assert time.perf_counter() - start < 5.0
    message = str(info.value)
    assert "HF_HUB_OFFLINE" in message and "huggingface-cli download gpt2" in message and ENV_VAR in message
