"""The GPT-2 family (``model_type`` ``gpt2``: GPT-2, DistilGPT-2, the book's own byte-level models).

Forward hooks on each block's fused projection ``attn.c_attn`` (output ``[q | k | v]`` of shape
``(B, T, 3 * width)``) record q and k; GPT-2 has learned absolute positions, so q and k need no
further transformation.  Its logit scale is ``1/sqrt(d_h)``, divided by ``l + 1`` when
``config.scale_attn_by_inverse_layer_idx`` is set, and 1 when ``config.scale_attn_weights`` is off.
"""

from __future__ import annotations

import math

from .errors import UnsupportedModelError
from .families import Family, Recorder, Shape


def attention_scale(config, layer: int) -> float:
    """The factor GPT-2 multiplies ``q . k`` by in layer ``layer`` (its inverse temperature)."""
    head_dim = config.n_embd // config.n_head
    scale = 1.0 / math.sqrt(head_dim) if getattr(config, "scale_attn_weights", True) else 1.0
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        scale /= float(layer + 1)
    return scale


class GPT2Family(Family):
    name = "GPT-2"
    model_types = ("gpt2",)
    size_fields = ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")
    optional_size_fields = ("n_inner",)

    def check_config(self, config, source: str) -> None:
        if getattr(config, "add_cross_attention", False):
            raise UnsupportedModelError(f"{source} has cross-attention; only causal self-attention is supported")

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

    def shape(self, config) -> Shape:
        return Shape(n_layers=int(config.n_layer), n_heads=int(config.n_head), n_kv_heads=int(config.n_head),
                     head_dim=int(config.n_embd // config.n_head), width=int(config.n_embd),
                     context=int(config.n_positions), vocab_size=int(config.vocab_size))

    def attention_modules(self, model) -> list:
        try:
            modules = [block.attn for block in model.base_model.h]
            projections = [attn.c_attn for attn in modules]
        except AttributeError as err:
            raise UnsupportedModelError(
                "the model has no transformer.h[i].attn.c_attn (the fused GPT-2 q/k/v projection)") from err
        width = model.config.n_embd
        for i, proj in enumerate(projections):
            out_features = getattr(proj, "nf", None) or getattr(proj, "out_features", None)
            if out_features != 3 * width:
                raise UnsupportedModelError(f"layer {i}'s c_attn has {out_features} outputs, expected 3 x {width}")
        return modules

    def scales(self, model) -> tuple[float, ...]:
        return tuple(attention_scale(model.config, i) for i in range(self.shape(model.config).n_layers))

    def install_hooks(self, model, record: Recorder) -> list:
        shape = self.shape(model.config)

        def hook_for(layer: int):
            def hook(_module, _inputs, output):
                q, k, _v = output.split(shape.width, dim=2)  # each (1, T, width)
                T = q.shape[1]
                record(layer, q[0].reshape(T, shape.n_heads, shape.head_dim).transpose(0, 1),  # (heads, T, d_h)
                       k[0].reshape(T, shape.n_heads, shape.head_dim).transpose(0, 1))
            return hook

        return [attn.c_attn.register_forward_hook(hook_for(i)) for i, attn in enumerate(self.attention_modules(model))]
