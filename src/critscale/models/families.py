"""The architecture families the loader and the q/k capture support, as one registry.

A family adapter (:class:`Family`) knows, for the models of its ``model_types``:

- their shape (:class:`Shape`: layers, query heads, key/value heads, head dimension, context),
- the longest sequence whose attention rows are full causal prefixes (:meth:`Family.max_tokens`),
- the logit scale each layer applies to ``q . k`` (:meth:`Family.scales`),
- how to record q and k of every layer, after any position encoding (:meth:`Family.install_hooks`).

Everything else (loading, the forward pass, stacking, moving to one device, expanding grouped
key/value heads) is shared by :mod:`.load` and :mod:`.capture`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from .errors import UnsupportedModelError

# record(layer, q, k): q of shape (heads, T, d_h), k of shape (kv_heads, T, d_h), position encoding applied
Recorder = Callable[[int, object, object], None]


@dataclass(frozen=True)
class Shape:
    """The sizes of a model that the diagnostic reads (never ``config.n_*`` directly)."""

    n_layers: int
    n_heads: int  # query heads: the diagnostic's heads
    n_kv_heads: int  # key/value heads (fewer than n_heads under grouped-query attention)
    head_dim: int
    width: int
    context: int  # trained context (position embeddings)
    vocab_size: int


class Family(ABC):
    """One architecture family; subclasses fill in the methods (see the module docstring)."""

    name: str = ""
    model_types: tuple[str, ...] = ()

    # the configuration fields that size the model (as config.json names them), each a positive integer;
    # those of optional_size_fields may be absent or null (the family then derives them)
    size_fields: tuple[str, ...] = ()
    optional_size_fields: tuple[str, ...] = ()

    def check_config(self, config, source: str) -> None:
        """Raise :class:`UnsupportedModelError` for a configuration the capture cannot reproduce."""

    def size_problem(self, config) -> str | None:
        """What makes the (positive) sizes inconsistent, e.g. a width that is not a multiple of the heads; else None."""
        return None

    @abstractmethod
    def parameter_terms(self, config) -> list[tuple[str, int]]:
        """The model's parameter count as terms, each with the fields (and values) that make it."""

    @abstractmethod
    def shape(self, config) -> Shape:
        """The model's sizes, from its configuration."""

    def max_tokens(self, config) -> tuple[int, str]:
        """The longest sequence whose rows are full causal prefixes, and what sets it (for messages)."""
        return self.shape(config).context, "the model's context"

    @abstractmethod
    def attention_modules(self, model) -> list:
        """Each layer's attention module; :class:`UnsupportedModelError` when the structure is not the family's."""

    @abstractmethod
    def scales(self, model) -> tuple[float, ...]:
        """The factor each layer multiplies ``q . k`` by: the model's own inverse temperature."""

    @abstractmethod
    def install_hooks(self, model, record: Recorder) -> list:
        """Register hooks that call ``record`` once per layer during a forward pass; return the handles."""


def _families() -> tuple[Family, ...]:
    from .gpt2_family import GPT2Family
    from .llama_family import LlamaFamily

    return GPT2Family(), LlamaFamily()


def supported() -> str:
    """The supported families and their ``model_type`` values, for messages."""
    return "; ".join(f"{f.name} ({', '.join(f.model_types)})" for f in _families())


def family_named(model_type, source: str = "the model") -> Family:
    """The family adapter of ``model_type``; :class:`UnsupportedModelError` naming the supported ones if none."""
    for family in _families():
        if model_type in family.model_types:
            return family
    raise UnsupportedModelError(f"{source} is a {model_type!r} model, which the q/k capture does not support; "
                                f"supported model_type values: {supported()}")


def family_of(config, source: str = "the model") -> Family:
    """The family adapter for a transformers ``config``, after the family's own configuration checks."""
    family = family_named(getattr(config, "model_type", None), source)
    family.check_config(config, source)
    return family
