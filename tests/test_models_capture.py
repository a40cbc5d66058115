"""q/k capture on a real GPT2LMHeadModel: the causal logit rows reproduce the model's attention.

A tiny randomly initialised GPT-2 is saved and reloaded from a local directory (offline), run with
``attn_implementation="eager"`` (the only implementation that returns attention probabilities), and
the softmax of our rows is compared with ``output_attentions``.  Tolerance: the model computes in
float32, we in float64 from the same float32 q and k, so the difference is float32 rounding of
O(n * eps32) in probabilities of order 1: 1e-5 is a safe bound and far below any real mismatch
(a wrong scale or mask changes probabilities by O(1e-2) or more, which the test would catch).
"""

import numpy as np
import pytest
import torch

from critscale.models.capture import attention_scale, capture_qk, causal_logits
from critscale.models.load import load_model


def _tiny_dir(path, **overrides):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, vocab_size=256,
                        bos_token_id=None, eos_token_id=None, **overrides)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # larger weights than the init, so rows are far from uniform
        for p in model.parameters():
            p.mul_(8.0)
    model.save_pretrained(path)
    return path


@pytest.mark.parametrize("overrides", [{}, {"scale_attn_by_inverse_layer_idx": True}])
def test_rows_reproduce_model_attention(tmp_path, overrides):
    directory = _tiny_dir(tmp_path / "tiny", **overrides)
    loaded = load_model(directory, attn_implementation="eager")
    ids = torch.randint(0, 256, (50,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        attentions = loaded.model(ids[None], output_attentions=True).attentions
    assert len(attentions) == 2, "eager attention must return one probability tensor per layer"
    captured = capture_qk(loaded.model, ids)
    assert captured.shape == (2, 4, 50, 8)
    worst = 0.0
    for layer in range(2):
        logits = causal_logits(captured.q[layer], captured.k[layer], captured.scales[layer])  # (4, 50, 50)
        probs = torch.softmax(logits, dim=-1)
        model_probs = attentions[layer][0].double()
        worst = max(worst, float((probs - model_probs).abs().max()))
        assert float(model_probs.max()) > 0.9  # rows are far from uniform, so the check has teeth
    assert worst < 1e-5


def test_scale_follows_config():
    from transformers import GPT2Config

    plain = GPT2Config(n_embd=64, n_head=4)
    assert attention_scale(plain, 3) == pytest.approx(1 / 4)
    inverse = GPT2Config(n_embd=64, n_head=4, scale_attn_by_inverse_layer_idx=True)
    assert attention_scale(inverse, 3) == pytest.approx(1 / 16)
    unscaled = GPT2Config(n_embd=64, n_head=4, scale_attn_weights=False)
    assert attention_scale(unscaled, 0) == 1.0


def test_causal_logits_mask_and_values():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 5, 3, generator=g)
    k = torch.randn(2, 5, 3, generator=g)
    logits = causal_logits(q, k, 0.5)  # (2, 5, 5)
    assert logits.dtype == torch.float64
    for h in range(2):
        for i in range(5):
            for j in range(5):
                expected = 0.5 * sum(float(q[h, i, d]) * float(k[h, j, d]) for d in range(3))
                if j <= i:
                    assert float(logits[h, i, j]) == pytest.approx(expected, rel=1e-12, abs=1e-12)
                else:
                    assert float(logits[h, i, j]) == -np.inf


def test_capture_rejects_bad_input(tmp_path):
    loaded = load_model(_tiny_dir(tmp_path / "tiny"))
    with pytest.raises(ValueError, match="exceeds the model's context"):
        capture_qk(loaded.model, torch.zeros(65, dtype=torch.long))
    with pytest.raises(ValueError, match="one sequence"):
        capture_qk(loaded.model, torch.zeros(2, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="shapes differ"):
        causal_logits(torch.zeros(3, 2), torch.zeros(4, 2), 1.0)


def test_attention_check_is_float32_rounding_and_restores_the_implementation(tmp_path):
    """Chapter 13's check: the captured rows against the model's eager attention, the model left as it was."""
    from critscale.models.capture import attention_check

    loaded = load_model(_tiny_dir(tmp_path / "tiny"))
    ids = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(2))
    assert attention_check(loaded.model, ids) < 1e-5  # the tolerance of the module docstring (weights x 8)
    assert loaded.model.config._attn_implementation == "sdpa"
