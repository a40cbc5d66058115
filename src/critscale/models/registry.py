"""Which architecture's size checks apply to a configuration: GPT-2's, the Llama family's, or the generic ones.

:func:`architecture_of` reads a transformers configuration and :func:`architecture_named` a ``model_type``; both
first refuse, by name, what the capture cannot read (:func:`.architectures.check_config`,
:func:`.architectures.check_config_type`).
"""

from __future__ import annotations

from .architectures import Architecture, GenericArchitecture, check_config, check_config_type
from .gpt2 import GPT2Architecture
from .llama import LlamaArchitecture

ARCHITECTURES: tuple[Architecture, ...] = (GPT2Architecture(), LlamaArchitecture())


def architecture_named(model_type, source: str = "the model") -> Architecture:
    """The size checks of ``model_type``; :class:`.errors.UnsupportedModelError` for one the capture cannot read."""
    check_config_type(model_type, source)
    for arch in ARCHITECTURES:
        if model_type in arch.model_types:
            return arch
    return GenericArchitecture()


def architecture_of(config, source: str = "the model") -> Architecture:
    """The size checks for a transformers ``config``, after :func:`check_config`."""
    check_config(config, source)
    return architecture_named(getattr(config, "model_type", None), source)
