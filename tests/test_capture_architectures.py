"""One capture for any architecture: the function registered with transformers' AttentionInterface reads what
each model's attention multiplies.

Tiny random checkpoints of eight architectures (gpt2, llama, qwen3, gemma3_text, phi3, gpt_neox, bert, and gemma2
for its soft-cap) are saved with ``save_pretrained`` and reloaded through :func:`critscale.models.load_model` with
``attn_implementation="eager"``.  A batch of two sequences, the second left-padded, runs once with eager attention
(``output_attentions=True``) and once through the capture; ``softmax(scaling * q . k^T [soft-capped] + mask)`` of
the recorded calls must equal the eager probabilities on every unpadded query row.  Tolerance 1e-6: both sides
start from the same float32 q and k; the model rounds its scores and softmax in float32 (relative error of order
d_h * 2^-24, about 1e-7 on probabilities of order 1), we compute in float64.  A capture before the rotary
embedding or QK-norm, without the grouped heads, at another scale, or without the mask moves probabilities by
1e-2 or more (the margins of a 1.25 x scale and of a dropped mask are measured on each model below).

Before this capture, only gpt2, llama, mistral and qwen2 were read (by hand-written hooks), so each test of
another architecture fails on the old code with "which the q/k capture does not support".
"""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from critscale.models import SequenceTooLongError, UnsupportedModelError
from critscale.models.capture import capture_qk
from critscale.models.interface import NAME, calls_of, recording
from critscale.models.load import load_model

TOLERANCE = 1e-6
T = 12
COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, vocab_size=256, intermediate_size=64,
              max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=0)
ARCHITECTURES = {  # model_type -> config fields (GQA where the architecture has it)
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, vocab_size=256, n_positions=64, bos_token_id=None,
                 eos_token_id=None, scale_attn_by_inverse_layer_idx=True),
    "llama": dict(COMMON, num_key_value_heads=2),
    "qwen3": dict(COMMON, num_key_value_heads=2, head_dim=8),
    "gemma3_text": dict(COMMON, num_key_value_heads=1, head_dim=8, sliding_window=5,
                        layer_types=["sliding_attention", "full_attention"]),
    "phi3": dict(COMMON, num_key_value_heads=2),
    "gpt_neox": dict(COMMON),
    "bert": dict(COMMON),
    "gemma2": dict(COMMON, num_key_value_heads=2, head_dim=8, attn_logit_softcapping=5.0, query_pre_attn_scalar=1),
}
PROJECTIONS = ("q_proj", "k_proj", "query.", "key.", "c_attn", "query_key_value", "qkv_proj")


def save_tiny(path, model_type, **overrides):
    """A tiny random checkpoint of ``model_type``, its q and k (projections, QK-norm gains) enlarged so rows are far
    from uniform."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **{**ARCHITECTURES[model_type], **overrides})
    model = (AutoModel if model_type == "bert" else AutoModelForCausalLM).from_config(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 and any(s in name for s in PROJECTIONS):
                p.mul_(12.0)
            if p.ndim == 1 and any(s in name for s in ("q_norm", "k_norm")):  # QK-norm undoes the line above
                p.fill_(1.5)
    model.save_pretrained(path)
    return path


def _batch():
    ids = torch.randint(1, 256, (2, T), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding of the second sequence
    return ids, mask


def _differences(model, ids, mask):
    """Max |dP| of the captured rows against eager over unpadded query rows; the same at 1.25 x the scale and with
    the mask dropped; the largest difference of the outputs; the largest eager weight of rows with 6 or more keys."""
    with torch.no_grad():
        eager = model(ids, attention_mask=mask, output_attentions=True)
        with recording(model) as calls:
            captured = model(ids, attention_mask=mask)
    calls = calls_of(calls, model.config.num_hidden_layers, model.config.model_type)
    real = mask.bool()[:, None, :, None]  # (B, 1, T, 1): rows of real (unpadded) queries
    worst = rescaled = unmasked = 0.0
    for call, probs in zip(calls, eager.attentions):
        worst = max(worst, float(((torch.softmax(call.logits(), -1) - probs.double()).abs() * real).max()))
        call.scaling *= 1.25
        rescaled = max(rescaled, float(((torch.softmax(call.logits(), -1) - probs.double()).abs() * real).max()))
        call.scaling /= 1.25
        call.mask = None
        unmasked = max(unmasked, float(((torch.softmax(call.logits(), -1) - probs.double()).abs() * real).max()))
    output = eager[0] if not hasattr(eager, "logits") else eager.logits
    same = captured[0] if not hasattr(captured, "logits") else captured.logits
    peak = max(float(p[0, :, 6:].max()) for p in eager.attentions)  # unpadded sequence, rows of 7 to T keys
    return worst, rescaled, unmasked, float((output - same).abs().max()), peak


@pytest.mark.parametrize("model_type", list(ARCHITECTURES))
def test_captured_rows_reproduce_eager_attention(tmp_path, model_type):
    loaded = load_model(save_tiny(tmp_path / model_type, model_type), attn_implementation="eager")
    ids, mask = _batch()
    worst, rescaled, unmasked, output, peak = _differences(loaded.model, ids, mask)
    assert worst < TOLERANCE, f"{model_type}: max |dP| {worst:.2e}"
    assert rescaled > 1e-2, "the scale matters on this input: at 1.25 x the comparison would fail"
    assert unmasked > 1e-2, "the mask matters on this input: without it the comparison would fail"
    assert output < 1e-5, "the capture computes the model's own forward (fused attention, eager where soft-capped)"
    assert peak > 0.5, "rows far from uniform (1/7 or less if uniform): the comparison has teeth"
    assert loaded.model.config._attn_implementation == "eager", "the previous implementation is put back"


def test_the_mask_function_must_be_registered_under_the_same_name(tmp_path):
    """Registered without its mask function, the attention receives attention_mask=None: the causal mask is lost."""
    from transformers import AttentionInterface

    from critscale.models.interface import capture_attention

    loaded = load_model(save_tiny(tmp_path / "llama", "llama"), attn_implementation="eager")
    AttentionInterface.register("critscale_nomask", capture_attention)
    ids, _ = _batch()
    loaded.model.set_attn_implementation("critscale_nomask")
    with torch.no_grad():
        probs = loaded.model(ids, output_attentions=True).attentions
    loaded.model.set_attn_implementation("eager")
    assert float(probs[0][:, :, 0, 1:].abs().max()) > 1e-2, "without eager_mask the first query sees the future"
    with torch.no_grad():
        probs = loaded.model(ids, output_attentions=True).attentions
    assert float(probs[0][:, :, 0, 1:].abs().max()) == 0.0


def test_gemma3_sliding_window_is_read_from_the_mask(tmp_path):
    """Gemma 3's sliding layer (window 5 < T): its rows hold at most 5 keys; capture_qk refuses longer sequences."""
    loaded = load_model(save_tiny(tmp_path / "g", "gemma3_text"), attn_implementation="eager")
    ids, mask = _batch()
    with torch.no_grad(), recording(loaded.model) as calls:
        loaded.model(ids, attention_mask=mask)
    assert int(calls[0].visible()[0].sum(-1).max()) == 5 and int(calls[1].visible()[0].sum(-1).max()) == T
    assert loaded.context == 5
    assert capture_qk(loaded.model, ids[0, :5]).causal
    with pytest.raises(SequenceTooLongError, match=r"sliding window of layers 0..0.*5 tokens"):
        capture_qk(loaded.model, ids[0])


def test_gemma2_softcap_is_applied_in_the_forward_and_refused_for_rows(tmp_path):
    """The recorded soft-cap is the model's (rows without it miss the eager weights); capture_qk refuses the rows."""
    loaded = load_model(save_tiny(tmp_path / "g", "gemma2"), attn_implementation="eager")
    ids, mask = _batch()
    with torch.no_grad():
        eager = loaded.model(ids, attention_mask=mask, output_attentions=True).attentions
        with recording(loaded.model) as calls:
            loaded.model(ids, attention_mask=mask)
    assert [call.softcap for call in calls] == [5.0, 5.0]
    real = mask.bool()[:, None, :, None]
    calls[0].softcap = None
    assert float(((torch.softmax(calls[0].logits(), -1) - eager[0].double()).abs() * real).max()) > 1e-2
    with pytest.raises(UnsupportedModelError, match=r"'gemma2' model soft-caps its attention logits \(softcap 5"):
        capture_qk(loaded.model, torch.arange(1, 9))


@pytest.mark.parametrize("model_type, causal", [("gpt2", True), ("phi3", True), ("bert", False)])
def test_capture_reads_causal_and_bidirectional_rows(tmp_path, model_type, causal):
    loaded = load_model(save_tiny(tmp_path / model_type, model_type))
    captured = capture_qk(loaded.model, torch.arange(1, 11))
    assert captured.causal is causal
    assert captured.q.shape == (2, 4, 10, 8) and captured.k.shape == (2, 4, 10, 8)
    assert loaded.model.config._attn_implementation == "sdpa"


def _not_routed(tmp_path, model_type):
    from transformers import BloomConfig, FalconConfig, MptConfig

    config = {"falcon": lambda: FalconConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                             vocab_size=256),
              "bloom": lambda: BloomConfig(hidden_size=32, n_layer=1, n_head=4, vocab_size=256),
              "mpt": lambda: MptConfig(d_model=32, n_layers=1, n_heads=4, vocab_size=256)}[model_type]()
    path = tmp_path / model_type
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config.to_dict()))
    return path, config


@pytest.mark.parametrize("model_type", ["falcon", "bloom", "mpt"])
def test_architectures_outside_the_interface_are_refused_by_name(tmp_path, model_type):
    """Refused from config.json alone (no weights are needed: the model is never built), and in memory."""
    from transformers import AutoModelForCausalLM

    path, config = _not_routed(tmp_path, model_type)
    with pytest.raises(UnsupportedModelError, match=rf"'{model_type}' model.*not through transformers' "
                                                    "AttentionInterface"):
        load_model(path)
    if model_type != "falcon":  # falcon's own init refuses an unknown implementation name
        model = AutoModelForCausalLM.from_config(config)
        with pytest.raises(UnsupportedModelError, match=rf"'{model_type}' model"):
            capture_qk(model, torch.arange(1, 9))


def test_a_model_that_never_calls_the_capture_is_refused(tmp_path, monkeypatch):
    """The backstop behind the name list: a forward that records no call is refused, never read as empty."""
    from transformers import AutoModelForCausalLM

    from critscale.models import interface

    _, config = _not_routed(tmp_path, "bloom")
    model = AutoModelForCausalLM.from_config(config)
    monkeypatch.setattr(interface, "NOT_ROUTED", {})
    monkeypatch.setattr(interface, "routes_through_interface", lambda model_type: None)
    with pytest.raises(UnsupportedModelError, match="never called the capture"):
        with recording(model) as calls, torch.no_grad():
            model(torch.arange(1, 9)[None])
        calls_of(calls, 1, "bloom")


@pytest.mark.parametrize("architecture, message", [
    ("falcon", r"'falcon' model.*AttentionInterface"),
    ("rwkv6", r"'rwkv6' model, which transformers' GGUF loader does not read"),
    ("mamba", r"'mamba' model \(a state-space model without attention\)"),
])
def test_gguf_architecture_is_refused_from_the_header(tmp_path, architecture, message):
    """Before: the whole file was dequantised (3 min 53 s for Gemma 3) before the architecture was refused."""
    import gguf

    from critscale.models.gguf_cache import dequantised_directory

    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    builds = []
    with pytest.raises(UnsupportedModelError, match=message):
        dequantised_directory(path, tmp_path / "cache", build=lambda *a: builds.append(a))
    assert builds == [] and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("design", ["prefix", "suffix"])
def test_encoder_levels_are_their_own_forwards(tmp_path, design):
    """BERT: the rows of level n are those of a fresh n-token forward, every key visible; not the first n keys of
    one T-token forward (the old prefix reading), whose keys have seen all T tokens and differ."""
    from critscale.diagnostic.design import make_design
    from critscale.diagnostic.windows import ModelSource

    loaded = load_model(save_tiny(tmp_path / "bert", "bert", max_position_embeddings=160))
    ids = np.random.default_rng(0).integers(1, 256, size=(1, 128))
    plan = make_design(design, 128, queries=4, causal=False)
    forwards = []
    source = ModelSource(loaded, ids, causal=False, on_forward=lambda: forwards.append(1))
    full = capture_qk(loaded.model, ids[0])
    assert not full.causal
    for block in source.blocks(plan):
        assert block.causal is False
        tokens = ids[0, :block.n] if design == "prefix" else ids[0, 128 - block.n:]
        fresh = capture_qk(loaded.model, tokens)
        torch.testing.assert_close(block.q[:, :, 0], fresh.q[:, :, block.n - 4:])
        torch.testing.assert_close(block.k[:, :, 0], fresh.k)
        if design == "prefix" and block.n < 128:
            assert float((block.k[:, :, 0] - full.k[:, :, :block.n]).abs().max()) > 1e-3
    assert len(forwards) == len(plan.levels) == source.forwards_per_window(plan)
    assert plan.row_lengths(64).tolist() == [64] * 4


def _texts(count=3, length=300):
    rng = np.random.default_rng(5)
    return ["".join(chr(c) for c in rng.integers(97, 123, size=length)) for _ in range(count)]


QUICK = dict(max_len=128, max_windows=2, nulls=("gauss_qk",), null_windows=4)


@pytest.mark.parametrize("model_type", ["gpt2", "bert"])
def test_diagnose_takes_a_loaded_model_and_texts(tmp_path, model_type):
    """critscale.diagnose(model, tokenizer, texts) returns what diagnose_model returns for the same windows."""
    import critscale
    from critscale.diagnostic import diagnose, diagnose_model
    from critscale.models import ByteTokenizer

    assert critscale.diagnose is diagnose
    overrides = {"n_positions": 160} if model_type == "gpt2" else {"max_position_embeddings": 160}
    loaded = load_model(save_tiny(tmp_path / model_type, model_type, **overrides))
    texts = _texts()
    diag = critscale.diagnose(loaded.model, ByteTokenizer(), texts, **QUICK)
    tokens = np.frombuffer(texts[0].encode(), dtype=np.uint8).astype(np.int64)  # two windows of 128 from text 0
    expected = diagnose_model(loaded, tokens, **QUICK)
    assert diag.meta["causal"] is (model_type == "gpt2") and diag.meta["windows"] == 2
    assert list(diag.heads["unit"]) == list(expected.heads["unit"]) and len(diag.heads) == 8
    assert np.isfinite(diag.heads["p_max"]).all()
    pd.testing.assert_frame_equal(diag.heads, expected.heads, check_exact=False, rtol=1e-9)
    other = diagnose_model(loaded, tokens[128:], max_len=128, max_windows=2, nulls=("gauss_qk",), null_windows=4)
    assert not np.allclose(other.heads["p_max"], expected.heads["p_max"]), "other windows give other heads"
    assert loaded.model.config._attn_implementation == "sdpa" and not loaded.model.training
    # the count of null replicates reaches the pipeline from every model entry (1 is refused there)
    for entry, data in ((critscale.diagnose, (loaded.model, ByteTokenizer(), texts)), (diagnose_model, (loaded, tokens))):
        with pytest.raises(ValueError, match="null_replicates must be an integer >= 2"):
            entry(*data, null_replicates=1, **QUICK)


def test_diagnose_refuses_bad_input_in_one_line(tmp_path):
    import critscale
    from critscale.models import ByteTokenizer

    loaded = load_model(save_tiny(tmp_path / "gpt2", "gpt2", n_positions=160))
    with pytest.raises(ValueError, match="texts are too short: the longest has 5 tokens, one window needs 128"):
        critscale.diagnose(loaded.model, ByteTokenizer(), ["short"], **QUICK)
    with pytest.raises(ValueError, match="model must be a transformers PreTrainedModel, got str"):
        critscale.diagnose("gpt2", ByteTokenizer(), _texts(), **QUICK)


def test_an_encoder_saved_with_its_head_is_built_by_its_own_auto_class(tmp_path):
    """A BERT checkpoint saved from BertForMaskedLM (as most published BERTs are) is built as one, so its
    weights match (read as a base model it would miss the pooler and carry the head's tensors), and read
    bidirectionally through its base model."""
    from transformers import AutoConfig, BertForMaskedLM

    torch.manual_seed(0)
    BertForMaskedLM(AutoConfig.for_model("bert", **ARCHITECTURES["bert"])).save_pretrained(tmp_path / "mlm")
    loaded = load_model(tmp_path / "mlm")
    assert type(loaded.model).__name__ == "BertForMaskedLM"
    assert capture_qk(loaded.model, torch.arange(1, 9)).causal is False


def test_a_model_run_with_sdpa_is_captured_with_fused_attention(tmp_path, monkeypatch):
    """The capture computes the forward the model ran: a model loaded with sdpa (the loader's default) keeps torch's
    fused attention under the capture (the eager arithmetic materialises every (Tq, Tkv) block twice and cost
    two thirds of a 2048-token SmolLM2 forward), and its output stays the sdpa model's."""
    loaded = load_model(save_tiny(tmp_path / "llama", "llama"))
    assert loaded.model.config._attn_implementation == "sdpa"
    ids, mask = _batch()
    fused_calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        fused_calls.append(1)
        return original(*args, **kwargs)

    with torch.no_grad():
        plain = loaded.model(ids, attention_mask=mask).logits
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
        with recording(loaded.model) as calls:
            captured = loaded.model(ids, attention_mask=mask).logits
    assert len(fused_calls) == loaded.model.config.num_hidden_layers  # one fused call per layer, none eager
    assert len(calls) == loaded.model.config.num_hidden_layers
    real = mask.bool()[:, :, None]  # (B, T, 1)
    assert float(((plain - captured).abs() * real).max()) < 1e-5
