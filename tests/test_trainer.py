"""The corpus is deterministic; training is seeded, learns, and is cached by config + corpus + seed."""

import json

import numpy as np
import pytest

from critscale.trainer.corpus import build_corpus, byte_tokens
from critscale.trainer.train import TrainConfig, cache_key, train_model, train_or_load

TINY = dict(n_layer=1, n_head=2, n_embd=32, n_positions=32, batch_size=4, steps=8, lr=1e-2,
            warmup_steps=2, log_every=2, eval_batches=2)


def test_corpus_is_deterministic_and_split():
    a, b = build_corpus("topics"), build_corpus("topics")
    assert a.sha256 == b.sha256 and a.train == b.train
    assert len(a.train) > 300_000 and len(a.heldout) > 5_000
    assert a.heldout not in a.train
    tokens = byte_tokens(a.train[:1000])
    assert tokens.dtype == np.int64 and tokens.max() < 256
    with pytest.raises(ValueError, match="unknown corpus source"):
        build_corpus("wikipedia")


def test_code_corpus_is_larger_and_holds_code():
    code = build_corpus("topics+code")
    topics = build_corpus("topics")
    assert len(code.train) > 10 * len(topics.train)
    assert b"\ndef " in code.train and b"\ndef " in code.heldout
    assert code.sha256 != topics.sha256


def test_config_validation():
    with pytest.raises(ValueError, match="exactly one"):
        TrainConfig(steps=10, minutes=1.0)
    with pytest.raises(ValueError, match="divisible"):
        TrainConfig(n_embd=30, n_head=4)


def test_training_is_seeded_and_learns():
    corpus = build_corpus("topics")
    config = TrainConfig(**TINY)
    _, log_a = train_model(config, corpus, progress=False)
    _, log_b = train_model(config, corpus, progress=False)
    assert [p["loss"] for p in log_a["loss_curve"]] == [p["loss"] for p in log_b["loss_curve"]]
    first, last = log_a["loss_curve"][0]["loss"], log_a["loss_curve"][-1]["loss"]
    assert first > 5.0  # ~log 256 = 5.55 at initialisation
    assert last < first - 1.0  # byte frequencies alone are learnt within a few steps
    assert log_a["steps"] == 8


def test_cache_skips_training(tmp_path):
    corpus = build_corpus("topics")
    config = TrainConfig(**{**TINY, "steps": 3})
    directory, log = train_or_load(config, corpus, cache_root=tmp_path, progress=False)
    assert not log["cached"] and (directory / "config.json").is_file()
    assert directory.name == cache_key(config, corpus)
    again, log2 = train_or_load(config, corpus, cache_root=tmp_path, progress=False)
    assert again == directory and log2["cached"]
    assert json.loads((directory / "train_log.json").read_text())["steps"] == 3
    other = TrainConfig(**{**TINY, "steps": 3, "seed": 1})
    assert cache_key(other, corpus) != cache_key(config, corpus)


def test_step_zero_model_is_the_seeded_initialisation(tmp_path):
    """``steps=0`` saves the untrained model of the same shape and seed (the step-0 reference of the
    diagnostic): its weights equal those every trained run with that seed starts from, nothing was
    updated, and its held-out loss is that of a near-uniform next-byte guess, log 256 nats.  Rejects
    the old ``steps >= 1`` refusal, a step-0 model drawn from another seed, and a silent training step."""
    import math

    import torch
    from transformers import GPT2LMHeadModel

    from critscale.trainer.train import gpt2_config

    corpus = build_corpus("topics")
    config = TrainConfig(**{**TINY, "steps": 0})
    model, log = train_model(config, corpus, progress=True)
    torch.manual_seed(config.seed)
    init = GPT2LMHeadModel(gpt2_config(config))
    for (name, p), (_, p0) in zip(model.named_parameters(), init.named_parameters()):
        assert torch.equal(p.detach(), p0.detach()), name
    assert log["steps"] == 0 and log["loss_curve"] == [] and log["final_train_loss"] is None
    # GPT-2's initial logits have standard deviation ~0.02 * sqrt(width) = 0.1 here: loss within 0.05 of log 256
    assert log["heldout_loss_nats_per_byte"] == pytest.approx(math.log(256), abs=0.05)
    directory, cached = train_or_load(config, corpus, cache_root=tmp_path, progress=False)
    assert (directory / "config.json").is_file() and not cached["cached"]
    with pytest.raises(ValueError, match="integer >= 0"):
        TrainConfig(steps=-1)


def test_gpt2_cache_keys_are_those_of_before_the_llama_architecture():
    """Keys computed by the trainer before it knew ``architecture`` (commit e4a6779), for a fixed corpus hash:
    a key that hashed the new field for GPT-2 runs would move every cached model and chapter 13's numbers."""
    from critscale.trainer.corpus import Corpus

    corpus = Corpus("topics", b"a", b"b", 2, "0" * 64)
    assert cache_key(TrainConfig(), corpus) == "f69b9c84e6c4cba5"
    assert cache_key(TrainConfig(n_layer=2, steps=20, extra={"x": 1}), corpus) == "7fefa5fccc0e7d94"
    assert cache_key(TrainConfig(architecture="llama"), corpus) != "f69b9c84e6c4cba5"


def test_llama_architecture_trains_a_rotary_model_and_caches_it(tmp_path):
    """``architecture="llama"`` trains a LlamaForCausalLM with rotary positions at n_positions (no position table),
    seeded and cached under its own key; an unknown architecture is refused by name."""
    from transformers import AutoModelForCausalLM

    corpus = build_corpus("topics")
    config = TrainConfig(**{**TINY, "steps": 6, "architecture": "llama"})
    directory, log = train_or_load(config, corpus, cache_root=tmp_path, progress=False)
    model = AutoModelForCausalLM.from_pretrained(directory)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.max_position_embeddings == TINY["n_positions"]
    assert model.config.rope_parameters["rope_type"] == "default"
    assert log["loss_curve"][-1]["loss"] < log["loss_curve"][0]["loss"] - 0.5
    _, again = train_model(config, corpus, progress=False)
    assert [p["loss"] for p in again["loss_curve"]] == [p["loss"] for p in log["loss_curve"]]
    with pytest.raises(ValueError, match="architecture must be one of gpt2, llama"):
        TrainConfig(architecture="bert")


def test_llama_training_flushes_subnormals_and_gpt2_training_does_not(monkeypatch):
    """The Llama run trains with subnormals flushed to zero (seven times faster on a CPU: its Adam moments and
    rotary products fall into the subnormal range) and switches the setting off afterwards; GPT-2 runs keep
    IEEE subnormals so their cached models do not move.  The Llama key says so, so a model cached before the
    change is not read as one trained after it."""
    import torch

    from critscale.trainer.corpus import Corpus

    calls = []
    monkeypatch.setattr(torch, "set_flush_denormal", lambda on: calls.append(on) or True)
    corpus = build_corpus("topics")
    train_model(TrainConfig(**{**TINY, "steps": 2, "architecture": "llama"}), corpus, progress=False)
    assert calls == [True, False]
    calls.clear()
    train_model(TrainConfig(**{**TINY, "steps": 2}), corpus, progress=False)
    assert calls == []
    key = TrainConfig(architecture="llama").key_dict()
    assert key["subnormals"] == "flushed" and "subnormals" not in TrainConfig().key_dict()
    assert cache_key(TrainConfig(), Corpus("topics", b"a", b"b", 2, "0" * 64)) == "f69b9c84e6c4cba5"
