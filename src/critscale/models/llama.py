"""The size checks of the Llama family (``model_type`` ``llama``, ``mistral``, ``qwen2``).

Their parameter count has the gated MLP (gate, up and down projections) and, under grouped-query
attention, key/value projections of ``num_key_value_heads`` heads; input and output embeddings are
counted twice unless tied.
"""

from __future__ import annotations

from .architectures import Architecture, GenericArchitecture


class LlamaArchitecture(GenericArchitecture):
    name = "Llama family"
    model_types = ("llama", "mistral", "qwen2")
    size_fields = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                   "max_position_embeddings", "vocab_size")
    optional_size_fields = ("num_key_value_heads", "head_dim")

    def parameter_terms(self, config) -> list[tuple[str, int]]:
        s = self.shape(config)
        embeddings = 1 if getattr(config, "tie_word_embeddings", False) else 2  # input and output embeddings
        attention = s.width * s.head_dim * (2 * s.n_heads + 2 * s.n_kv_heads)  # q, k, v, o projections
        block = attention + 3 * s.width * config.intermediate_size  # gate, up and down projections
        return [(f"vocab_size {s.vocab_size} x hidden_size {s.width}", embeddings * s.vocab_size * s.width),
                (f"num_hidden_layers {s.n_layers} x hidden_size {s.width} (intermediate_size "
                 f"{config.intermediate_size}, {s.n_heads} heads of {s.head_dim})", s.n_layers * block)]
