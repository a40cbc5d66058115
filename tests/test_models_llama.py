"""q/k capture on the Llama family (Llama, Mistral, Qwen2): rotary q and k reproduce the model's eager attention.

Tiny randomly initialised checkpoints are saved and reloaded from local directories (offline), run with
``attn_implementation="eager"`` (the implementation that returns attention probabilities), and the softmax of
``scale * q . k`` under the causal mask is compared with ``output_attentions`` for every layer and head.
Tolerance: the model computes in float32, we in float64 from the same float32 q and k, so the difference is
float32 rounding, O(n * eps32) on probabilities of order 1; 1e-5 bounds it, while each plausible wrong capture
(q and k before the rotary embedding, keys grouped in the wrong order, the scale of hidden/heads instead of the
configured head_dim, a sliding window ignored) moves probabilities by far more; the tests measure that margin
on the same model, so they show they can fail.
"""

import pytest
import torch

from critscale.models import SequenceTooLongError, UnsupportedModelError
from critscale.models.capture import capture_qk, causal_logits
from critscale.models.load import load_model

TOLERANCE = 1e-5
T = 40


def _save(path, model_type, **overrides):
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

    config_class = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config}[model_type]
    options = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=256, max_position_embeddings=128, rope_theta=500.0,
                   bos_token_id=None, eos_token_id=None, pad_token_id=None)
    options.update(overrides)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config_class(**options))
    with torch.no_grad():  # larger projections than the init, so rows are far from uniform
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(6.0)
            layer.self_attn.k_proj.weight.mul_(6.0)
    model.save_pretrained(path)
    return path


def _ids(length=T):
    return torch.randint(0, 256, (length,), generator=torch.Generator().manual_seed(1))


def _eager(loaded, ids):
    with torch.no_grad():
        return [a[0].double() for a in loaded.model(ids[None], output_attentions=True).attentions]  # (H, T, T) each


def _max_difference(q, k, scales, attentions):
    """Largest |softmax(scale * q.k, causal) - model attention| over layers, heads and rows."""
    return max(float((torch.softmax(causal_logits(q[l], k[l], scales[l]), -1) - attentions[l]).abs().max())
               for l in range(len(attentions)))


CASES = {
    "llama-gqa": ("llama", {}),
    "llama-mqa-theta1e6": ("llama", {"num_key_value_heads": 1, "rope_theta": 1e6}),
    "mistral-head_dim16": ("mistral", {"head_dim": 16}),
    "qwen2-bias": ("qwen2", {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_capture_reproduces_eager_attention(tmp_path, case):
    model_type, overrides = CASES[case]
    loaded = load_model(_save(tmp_path / case, model_type, **overrides), attn_implementation="eager")
    shape = loaded.shape
    assert (loaded.n_layers, loaded.n_heads, loaded.n_kv_heads) == (2, 4, overrides.get("num_key_value_heads", 2))
    ids = _ids()
    attentions = _eager(loaded, ids)
    captured = capture_qk(loaded.model, ids)
    assert captured.shape == (2, 4, T, shape.head_dim)
    assert captured.scales == pytest.approx([shape.head_dim ** -0.5] * 2, rel=1e-12)
    assert _max_difference(captured.q, captured.k, captured.scales, attentions) < TOLERANCE
    assert min(float(a.max()) for a in attentions) > 0.9  # rows far from uniform: the comparison has teeth


def test_plausible_wrong_captures_fail(tmp_path):
    """Un-rotated q and k, keys tiled instead of grouped, or the scale hidden/heads: each misses by > 100 x tolerance."""
    loaded = load_model(_save(tmp_path / "m", "mistral", head_dim=16, num_attention_heads=4, num_key_value_heads=2),
                        attn_implementation="eager")
    ids = _ids()
    attentions = _eager(loaded, ids)
    captured = capture_qk(loaded.model, ids)
    raw = {}
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: raw.__setitem__(name, out[0]))
             for name, m in loaded.model.named_modules() if name.endswith(("q_proj", "k_proj"))]
    with torch.no_grad():
        loaded.model(ids[None])
    for hook in hooks:
        hook.remove()
    q_raw = torch.stack([raw[f"model.layers.{l}.self_attn.q_proj"].view(T, 4, 16).transpose(0, 1) for l in range(2)])
    k_raw = torch.stack([raw[f"model.layers.{l}.self_attn.k_proj"].view(T, 2, 16).transpose(0, 1)
                         .repeat_interleave(2, dim=0) for l in range(2)])
    k_tiled = captured.k[:, [0, 2, 1, 3]]  # kv head h % 2 instead of h // 2
    wrong = {"before rotary": (q_raw, k_raw, captured.scales),
             "keys tiled": (captured.q, k_tiled, captured.scales),
             "scale of hidden/heads": (captured.q, captured.k, (8 ** -0.5,) * 2)}
    for name, (q, k, scales) in wrong.items():
        assert _max_difference(q, k, scales, attentions) > 100 * TOLERANCE, name


@pytest.mark.parametrize("model_type, overrides, layers", [
    ("mistral", {"sliding_window": 24}, "0..1"),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 24, "max_window_layers": 1}, "1..1"),
])
def test_sliding_window_rows_are_full_prefixes_or_refused(tmp_path, model_type, overrides, layers):
    """Up to the window every row is a full causal prefix (matches eager); one token more is refused,
    and the model does truncate that row (so capturing it as a prefix would be wrong)."""
    loaded = load_model(_save(tmp_path / model_type, model_type, **overrides), attn_implementation="eager")
    assert loaded.context == 24
    assert "sliding window 24" in loaded.describe()
    ids = _ids(24)
    captured = capture_qk(loaded.model, ids)
    assert _max_difference(captured.q, captured.k, captured.scales, _eager(loaded, ids)) < TOLERANCE
    longer = _ids(25)
    with pytest.raises(SequenceTooLongError, match=f"sliding window of layers {layers}.*24 tokens"):
        capture_qk(loaded.model, longer)
    attentions = _eager(loaded, longer)
    last = int(layers[-1])
    assert float(attentions[last][:, 24, 0].abs().max()) == 0.0  # the model masks the row's first key


def test_device_map_auto_and_offloaded_layer(tmp_path):
    """device_map is transformers' own: "auto" and a map that offloads a layer to disk (run by accelerate's hooks)
    give the same q and k as the plain model."""
    directory = _save(tmp_path / "m", "llama")
    ids = _ids()
    plain = capture_qk(load_model(directory).model, ids)
    auto = load_model(directory, device_map="auto")
    offloaded = load_model(directory, device_map={"model.embed_tokens": "cpu", "model.layers.0": "cpu",
                                                  "model.layers.1": "disk", "model.norm": "cpu",
                                                  "model.rotary_emb": "cpu", "lm_head": "cpu"},
                           offload_folder=tmp_path / "offload")
    assert offloaded.model.hf_device_map["model.layers.1"] == "disk"
    for loaded in (auto, offloaded):
        captured = capture_qk(loaded.model, ids)
        assert captured.q.device == plain.q.device
        assert float((captured.q - plain.q).abs().max()) < 1e-6
        assert float((captured.k - plain.k).abs().max()) < 1e-6


@pytest.mark.gpu
def test_layers_on_two_devices_are_gathered(tmp_path):
    """Layer 0 on the GPU, layer 1 on the CPU: captured tensors end on the input embedding's device."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    directory = _save(tmp_path / "m", "llama")
    ids = _ids()
    plain = capture_qk(load_model(directory).model, ids)
    split = load_model(directory, device_map={"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": "cpu",
                                              "model.norm": "cpu", "model.rotary_emb": 0, "lm_head": "cpu"})
    captured = capture_qk(split.model, ids)
    assert captured.q.device.type == "cuda" and captured.k.device.type == "cuda"
    assert float((captured.q.cpu() - plain.q).abs().max()) < 1e-4


def test_an_architecture_without_an_adapter_is_read_through_the_interface(tmp_path):
    """OPT (no hand-written adapter ever existed for it) pre-scales q and passes scaling 1.0: the capture
    records what the attention function receives, so its rows still reproduce the eager attention."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    OPTForCausalLM(OPTConfig(hidden_size=16, ffn_dim=32, num_hidden_layers=2, num_attention_heads=2, vocab_size=256,
                             word_embed_proj_dim=16, max_position_embeddings=64, bos_token_id=None,
                             eos_token_id=None, pad_token_id=None)).save_pretrained(tmp_path / "opt")
    loaded = load_model(tmp_path / "opt", attn_implementation="eager")
    ids = _ids(30)
    captured = capture_qk(loaded.model, ids)
    assert captured.scales == (1.0, 1.0)
    assert _max_difference(captured.q, captured.k, captured.scales, _eager(loaded, ids)) < TOLERANCE


LLAMA_SIZES = {  # a config.json field and value: the message's key phrase (before: a transformers traceback or
    # an allocation of what the config declares)
    ("num_key_value_heads", 3): r"num_attention_heads 4 is not a multiple of num_key_value_heads 3",
    ("vocab_size", 10 ** 11): r"vocab_size 100000000000 x hidden_size 32 make 6,400,000,000,000 parameters",
    ("num_hidden_layers", -1): r"num_hidden_layers -1 is not a positive integer",
}


@pytest.mark.parametrize("field, value", list(LLAMA_SIZES))
def test_llama_config_sizes_are_checked_before_the_model_is_built(tmp_path, field, value):
    import json

    from critscale.models import InvalidCheckpointError

    directory = _save(tmp_path / "m", "llama")
    config = json.loads((directory / "config.json").read_text())
    config[field] = value
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidCheckpointError, match=LLAMA_SIZES[field, value]) as info:
        load_model(directory)
    assert str(info.value).startswith(f"{directory}/config.json: ")
