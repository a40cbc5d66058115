"""The Llama family of transformers (``model_type`` ``llama``, ``mistral``, ``qwen2``).

These models rotate q and k by the rotary position embedding inside the attention module, after
the projections ``q_proj`` and ``k_proj``, and may share one key/value head among several query
heads (grouped-query attention).  The capture records, per layer:

- the rotary ``(cos, sin)`` the decoder layer passes to its attention (a forward pre-hook),
- the outputs of ``q_proj`` and ``k_proj`` (forward hooks; any projection bias included),

and, once the attention module has run, applies the model's own ``apply_rotary_pos_emb`` (the
function of the module that defines the attention class) to them.  So q and k are exactly what
the model's attention multiplies; keys are returned per key/value head, and
:mod:`.capture` expands them to the query heads.  The logit scale is the attention module's own
``scaling`` attribute (``head_dim ** -0.5`` in transformers 5, the value its attention uses).

Sliding windows (Mistral's ``sliding_window``, Qwen2's layers of type ``sliding_attention``): a
row longer than the window is not a causal prefix but a window of it.  Such sequences are refused
(:meth:`LlamaFamily.max_tokens` is the smallest window), so every captured row is the full
causal prefix ``j <= i``.
"""

from __future__ import annotations

import sys

from .errors import UnsupportedModelError
from .families import Family, Recorder, Shape


def _no_windows(config) -> list:
    return [None] * config.num_hidden_layers


def _mistral_windows(config) -> list:
    return [getattr(config, "sliding_window", None)] * config.num_hidden_layers


def _qwen2_windows(config) -> list:
    window = getattr(config, "sliding_window", None)
    return [window if kind == "sliding_attention" else None for kind in config.layer_types]


# model_type -> the sliding window of each layer (None: full causal attention), as its attention code reads it
SLIDING_WINDOWS = {"llama": _no_windows, "mistral": _mistral_windows, "qwen2": _qwen2_windows}


class LlamaFamily(Family):
    name = "Llama family"
    model_types = tuple(SLIDING_WINDOWS)
    size_fields = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                   "max_position_embeddings", "vocab_size")
    optional_size_fields = ("num_key_value_heads", "head_dim")

    def size_problem(self, config) -> str | None:
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        if heads % kv_heads:
            return f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}"
        if not getattr(config, "head_dim", None) and config.hidden_size % heads:
            return f"hidden_size {config.hidden_size} is not a multiple of num_attention_heads {heads}"
        return None

    def parameter_terms(self, config) -> list[tuple[str, int]]:
        s = self.shape(config)
        embeddings = 1 if getattr(config, "tie_word_embeddings", False) else 2  # input and output embeddings
        attention = s.width * s.head_dim * (2 * s.n_heads + 2 * s.n_kv_heads)  # q, k, v, o projections
        block = attention + 3 * s.width * config.intermediate_size  # gate, up and down projections
        return [(f"vocab_size {s.vocab_size} x hidden_size {s.width}", embeddings * s.vocab_size * s.width),
                (f"num_hidden_layers {s.n_layers} x hidden_size {s.width} (intermediate_size "
                 f"{config.intermediate_size}, {s.n_heads} heads of {s.head_dim})", s.n_layers * block)]

    def shape(self, config) -> Shape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return Shape(n_layers=int(config.num_hidden_layers), n_heads=heads,
                     n_kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
                     head_dim=int(head_dim), width=int(config.hidden_size),
                     context=int(config.max_position_embeddings), vocab_size=int(config.vocab_size))

    def max_tokens(self, config) -> tuple[int, str]:
        context = self.shape(config).context
        windows = SLIDING_WINDOWS[config.model_type](config)
        sliding = [(w, layer) for layer, w in enumerate(windows) if w is not None and w < context]
        if not sliding:
            return context, "the model's context"
        window = min(w for w, _ in sliding)
        layers = [layer for w, layer in sliding if w == window]
        return window, (f"the sliding window of layers {layers[0]}..{layers[-1]} (a longer row is a window, "
                        "not the causal prefix the diagnostic reads)")

    def attention_modules(self, model) -> list:
        required = ("q_proj", "k_proj", "scaling", "head_dim")
        modules = [getattr(layer, "self_attn", None) for layer in getattr(model.base_model, "layers", [None])]
        if any(attn is None or not all(hasattr(attn, a) for a in required) for attn in modules):
            raise UnsupportedModelError("the model has no model.layers[i].self_attn with q_proj, k_proj, scaling "
                                        "and head_dim (the Llama-family attention)")
        for attn in modules:
            if not callable(getattr(sys.modules[type(attn).__module__], "apply_rotary_pos_emb", None)):
                raise UnsupportedModelError(f"{type(attn).__name__}'s module has no apply_rotary_pos_emb")
        return modules

    def scales(self, model) -> tuple[float, ...]:
        return tuple(float(attn.scaling) for attn in self.attention_modules(model))

    def install_hooks(self, model, record: Recorder) -> list:
        handles = []
        for layer, attn in enumerate(self.attention_modules(model)):
            rotate = sys.modules[type(attn).__module__].apply_rotary_pos_emb
            seen: dict = {}

            def before(_module, _args, kwargs, seen=seen):
                if "position_embeddings" not in kwargs:
                    raise UnsupportedModelError(f"{type(_module).__name__} was called without position_embeddings")
                seen["cos_sin"] = kwargs["position_embeddings"]

            def keep(name, seen=seen):
                def hook(_module, _inputs, output):
                    seen[name] = output  # (1, T, heads * d_h) or (1, T, kv_heads * d_h)
                return hook

            def after(module, _inputs, _output, seen=seen, layer=layer, rotate=rotate):
                q, k = seen.pop("q"), seen.pop("k")
                cos, sin = (t.to(q.device) for t in seen.pop("cos_sin"))
                T = q.shape[1]
                q = q.view(1, T, -1, module.head_dim).transpose(1, 2)  # (1, heads, T, d_h)
                k = k.view(1, T, -1, module.head_dim).transpose(1, 2)  # (1, kv_heads, T, d_h)
                q, k = rotate(q, k, cos, sin)
                record(layer, q[0], k[0])

            handles += [attn.register_forward_pre_hook(before, with_kwargs=True),
                        attn.q_proj.register_forward_hook(keep("q")),
                        attn.k_proj.register_forward_hook(keep("k")),
                        attn.register_forward_hook(after)]
        return handles
