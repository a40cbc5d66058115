"""A per-layer, per-length logit temperature applied inside the attention function (critscale.models.temperature).

Three things must hold for a rescaling experiment to mean what it says:
a factor of exactly 1 leaves the model's sdpa forward unchanged bit for bit (an arm "none" is the model);
a factor multiplies the logits of exactly the query rows it names (checked against a float64 softmax written
out by hand, so a factor applied to the keys, to the output or to every row would fail);
and only the layers it names (a constant factor on one layer equals that layer's own ``scaling`` multiplied).
"""

import pytest
import torch

from critscale.models import UnsupportedModelError
from critscale.models.temperature import context_lengths, tempered, tempered_attention

from test_capture_architectures import save_tiny


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    path = save_tiny(tmp_path_factory.mktemp("llama"), "llama")
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa").eval()
    return model


def _ids(model, t=12):
    return torch.randint(1, model.config.vocab_size, (2, t), generator=torch.Generator().manual_seed(3))


def test_factor_one_is_the_model_bit_for_bit(llama):
    ids = _ids(llama)
    with torch.no_grad():
        plain = llama(ids).logits
        with tempered(llama, lambda layer, n: torch.ones_like(n, dtype=torch.float32)):
            same = llama(ids).logits
    assert torch.equal(plain, same)  # the same float32 arithmetic in one process
    assert llama.config._attn_implementation == "sdpa"  # switched back after the block


def test_constant_factor_on_one_layer_is_that_layer_scaling(llama):
    ids = _ids(llama)
    layer = 1
    with torch.no_grad():
        with tempered(llama, lambda l, n: torch.full(n.shape, 1.7 if l == layer else 1.0)):
            tempered_logits = llama(ids).logits
        attention = llama.model.layers[layer].self_attn
        before = attention.scaling
        attention.scaling = before * 1.7
        try:
            scaled = llama(ids).logits
        finally:
            attention.scaling = before
        plain = llama(ids).logits
    assert torch.allclose(tempered_logits, scaled, atol=1e-5, rtol=1e-5)  # float32 rounding of q*f vs scale*f
    assert (tempered_logits - plain).abs().max() > 1e-2  # the factor does act (a no-op would fail above)


def test_factor_multiplies_exactly_the_rows_it_names():
    torch.manual_seed(0)
    b, h, t, d = 1, 2, 9, 8
    q, k, v = (torch.randn(b, h, t, d, dtype=torch.float64) for _ in range(3))
    module = torch.nn.Module()
    module.layer_idx, module.is_causal = 0, True
    factor = lambda layer, n: torch.where(n > 4, 2.0, 1.0)  # rows of context length 5..9 doubled
    with _active(factor):
        out, _ = tempered_attention(module, q, k, v, None, scaling=d ** -0.5)
    n = torch.arange(1, t + 1, dtype=torch.float64)
    f = torch.where(n > 4, 2.0, 1.0)  # (T,)
    logits = (q @ k.transpose(-1, -2)) * d ** -0.5 * f[:, None]  # (B, H, T, T)
    logits = logits.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    want = (logits.softmax(-1) @ v).transpose(1, 2)  # (B, T, H, D)
    assert torch.allclose(out, want, atol=1e-12)


def test_context_length_follows_position_ids():
    q = torch.zeros(1, 1, 3, 4)
    k = torch.zeros(1, 1, 10, 4)
    assert context_lengths(q, k, None).tolist() == [[8, 9, 10]]  # the last three of ten keys (a cache)
    assert context_lengths(q, k, torch.tensor([[4, 5, 6]])).tolist() == [[5, 6, 7]]


def test_module_without_layer_index_is_refused():
    module = torch.nn.Module()
    q = torch.zeros(1, 1, 2, 4)
    with _active(lambda l, n: torch.ones(n.shape)), pytest.raises(UnsupportedModelError, match="layer_idx"):
        tempered_attention(module, q, q, q, None, scaling=0.5)


def test_factor_must_be_callable(llama):
    with pytest.raises(TypeError, match="callable"):
        with tempered(llama, 1.5):
            pass


def _active(factor):
    from critscale.models import temperature

    class _Set:
        def __enter__(self):
            self.token = temperature._ACTIVE.set(factor)

        def __exit__(self, *exc):
            temperature._ACTIVE.reset(self.token)

    return _Set()
