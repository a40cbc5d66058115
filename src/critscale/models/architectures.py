"""The configuration side of the supported architectures: sizes, context, sliding windows, refusals.

The q/k capture reads any architecture whose attention goes through transformers' ``AttentionInterface``
(:mod:`.interface`); what it needs of a configuration is architecture-neutral and read here:

- :func:`shape_of`: layers, query heads, key/value heads, head dimension, width, position table, vocabulary
  (from the standard names ``num_hidden_layers``, ``num_attention_heads``, ..., which GPT-2's configuration
  maps onto its ``n_layer``, ``n_head``, ...);
- :func:`context_limit`: the longest sequence whose rows are full (causal prefixes or, for an encoder, all
  keys): the position table, or a smaller sliding window;
- :func:`check_config`: refuses, by name, what the capture cannot read (architectures outside the interface,
  encoder-decoders, cross-attention).

:class:`Architecture` holds the size checks of :mod:`.model_size` (the fields that size a model, their
consistency and the parameter count): GPT-2 (:mod:`.gpt2`) and the Llama family
(:mod:`.llama`) name their own fields; any other architecture uses :class:`GenericArchitecture`.
:mod:`.registry` picks the one that applies to a configuration.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from .errors import UnsupportedModelError
from .interface import check_routed


@dataclass(frozen=True)
class Shape:
    """The sizes of a model that the diagnostic reads (never ``config.n_*`` directly)."""

    n_layers: int
    n_heads: int  # query heads: the diagnostic's heads
    n_kv_heads: int  # key/value heads (fewer than n_heads under grouped-query attention)
    head_dim: int
    width: int
    context: int  # the position table (max_position_embeddings): the longest sequence the model reads
    vocab_size: int


def text_config(config):
    """The configuration of the language model (the text part of a multimodal configuration)."""
    getter = getattr(config, "get_text_config", None)
    return getter() if callable(getter) else config


def shape_of(config) -> Shape:
    """The model's sizes from its configuration, under transformers' standard attribute names."""
    c = text_config(config)
    heads = int(c.num_attention_heads)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    return Shape(n_layers=int(c.num_hidden_layers), n_heads=heads,
                 n_kv_heads=int(getattr(c, "num_key_value_heads", None) or heads), head_dim=int(head_dim),
                 width=int(c.hidden_size), context=int(c.max_position_embeddings), vocab_size=int(c.vocab_size))


def sliding_windows(config) -> list:
    """Each layer's sliding window as the configuration declares it (None: the layer sees every key).

    A configuration with ``layer_types`` windows its ``sliding_attention`` layers; one without applies
    ``sliding_window`` (when set) to every layer.  The capture checks each layer's mask as well.
    """
    c = text_config(config)
    window = getattr(c, "sliding_window", None)
    kinds = getattr(c, "layer_types", None)
    if kinds:
        return [window if kind == "sliding_attention" else None for kind in kinds]
    return [window] * int(c.num_hidden_layers)


def context_limit(config) -> tuple[int, str]:
    """The longest sequence whose rows are full, and what sets it (for messages)."""
    context = shape_of(config).context
    sliding = [(w, layer) for layer, w in enumerate(sliding_windows(config)) if w is not None and w < context]
    if not sliding:
        return context, "the model's context"
    window = min(w for w, _ in sliding)
    layers = [layer for w, layer in sliding if w == window]
    return window, (f"the sliding window of layers {layers[0]}..{layers[-1]} (a longer row is a window, "
                    "not the full row the diagnostic reads)")


def check_config(config, source: str = "the model") -> None:
    """Refuse, in one line naming it, a configuration whose attention the capture cannot read."""
    model_type = getattr(config, "model_type", None)
    check_routed(model_type, source)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(f"{source} is a {model_type!r} encoder-decoder; the q/k capture reads "
                                    "decoders and encoders with self-attention only")
    if getattr(text_config(config), "add_cross_attention", False):
        raise UnsupportedModelError(f"{source} has cross-attention; only self-attention is supported")


class Architecture(ABC):
    """The size checks of one architecture's configuration (see the module docstring)."""

    name: str = ""
    model_types: tuple[str, ...] = ()

    # the configuration fields that size the model (as config.json names them), each a positive integer;
    # those of optional_size_fields may be absent or null (the architecture then derives them)
    size_fields: tuple[str, ...] = ()
    optional_size_fields: tuple[str, ...] = ()

    def size_problem(self, config) -> str | None:
        """What makes the (positive) sizes inconsistent, e.g. a width that is not a multiple of the heads; else None."""
        return None

    @abstractmethod
    def parameter_terms(self, config) -> list[tuple[str, int]]:
        """The model's parameter count as terms, each with the fields (and values) that make it."""

    def shape(self, config) -> Shape:
        """The model's sizes, from its configuration."""
        return shape_of(config)


class GenericArchitecture(Architecture):
    """Any architecture routed through the interface, sized by transformers' standard field names."""

    name = "any architecture through transformers' AttentionInterface"
    size_fields = ("num_hidden_layers", "num_attention_heads", "hidden_size", "max_position_embeddings",
                   "vocab_size")
    optional_size_fields = ("num_key_value_heads", "head_dim", "intermediate_size")

    def size_problem(self, config) -> str | None:
        c = text_config(config)
        heads = c.num_attention_heads
        kv_heads = getattr(c, "num_key_value_heads", None) or heads
        if heads % kv_heads:
            return f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}"
        if not getattr(c, "head_dim", None) and c.hidden_size % heads:
            return f"hidden_size {c.hidden_size} is not a multiple of num_attention_heads {heads}"
        return None

    def parameter_terms(self, config) -> list[tuple[str, int]]:
        c, s = text_config(config), shape_of(config)
        inner = getattr(c, "intermediate_size", None) or 4 * s.width
        attention = s.width * s.head_dim * (2 * s.n_heads + 2 * s.n_kv_heads)  # q, k, v, o projections
        block = attention + 3 * s.width * inner  # at most three MLP matrices (gated or not)
        return [(f"vocab_size {s.vocab_size} x hidden_size {s.width}", 2 * s.vocab_size * s.width),
                (f"num_hidden_layers {s.n_layers} x hidden_size {s.width} (intermediate_size {inner}, "
                 f"{s.n_heads} heads of {s.head_dim})", s.n_layers * block)]


def check_config_type(model_type, source: str = "the model") -> None:
    """Refuse a ``model_type`` that is missing, unknown to transformers, or not routed through the interface."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if not isinstance(model_type, str) or not model_type:
        raise UnsupportedModelError(f"{source} names no model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise UnsupportedModelError(f"{source} is a {model_type!r} model, which this transformers does not know")
    check_routed(model_type, source)
