"""Which size checks a configuration gets: GPT-2's, the Llama family's, or :class:`.families.GenericFamily`.

The one module that imports every family module (:mod:`.gpt2_family`, :mod:`.llama_family`), each of which
imports only the base classes of :mod:`.families`, so the imports run one way.
"""

from __future__ import annotations

from .families import Family, GenericFamily, check_config, check_config_type
from .gpt2_family import GPT2Family
from .llama_family import LlamaFamily

FAMILIES: tuple[Family, ...] = (GPT2Family(), LlamaFamily())


def family_named(model_type, source: str = "the model") -> Family:
    """The size checks of ``model_type``; :class:`UnsupportedModelError` for one the capture cannot read."""
    check_config_type(model_type, source)
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    return GenericFamily()


def family_of(config, source: str = "the model") -> Family:
    """The size checks for a transformers ``config``, after :func:`check_config`."""
    check_config(config, source)
    return family_named(getattr(config, "model_type", None), source)
