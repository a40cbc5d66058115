"""The size checks of the GPT-2 architecture (``model_type`` ``gpt2``: GPT-2, DistilGPT-2, the book's byte-level models).

GPT-2's configuration names its sizes ``n_layer``, ``n_head``, ``n_embd``, ``n_positions``; messages about
a configuration name those fields.  Its logit scale (:func:`attention_scale`) is ``1/sqrt(d_h)``, divided by
``l + 1`` when ``scale_attn_by_inverse_layer_idx`` is set, and 1 when ``scale_attn_weights`` is off: the
``scaling`` its attention modules pass to the attention function, which the capture records.
"""

from __future__ import annotations

import math

from .architectures import Architecture


def attention_scale(config, layer: int) -> float:
    """The factor GPT-2 multiplies ``q . k`` by in layer ``layer`` (its inverse temperature)."""
    head_dim = config.n_embd // config.n_head
    scale = 1.0 / math.sqrt(head_dim) if getattr(config, "scale_attn_weights", True) else 1.0
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        scale /= float(layer + 1)
    return scale


class GPT2Architecture(Architecture):
    name = "GPT-2"
    model_types = ("gpt2",)
    size_fields = ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")
    optional_size_fields = ("n_inner",)

    def size_problem(self, config) -> str | None:
        if config.n_embd % config.n_head:
            return f"n_embd {config.n_embd} is not a multiple of n_head {config.n_head}"
        return None

    def parameter_terms(self, config) -> list[tuple[str, int]]:
        width, layers = config.n_embd, config.n_layer
        inner = getattr(config, "n_inner", None) or 4 * width
        block = 4 * width * width + 2 * width * inner  # attention c_attn and c_proj, the MLP (biases left out)
        return [(f"vocab_size {config.vocab_size} x n_embd {width}", config.vocab_size * width),
                (f"n_positions {config.n_positions} x n_embd {width}", config.n_positions * width),
                (f"n_layer {layers} x n_embd {width} (n_inner {inner})", layers * block)]
