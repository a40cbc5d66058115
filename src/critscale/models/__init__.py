"""Transformer language models for the attention diagnostic: loading, and q/k capture.

- :mod:`.load`: load a model and its tokenizer from a hub name or a local directory, offline-safe;
- :mod:`.capture`: q and k of every layer and head (by hooks), and the causal logit rows.

Nothing here imports transformers at import time; the heavy imports happen inside the functions.
"""

from .load import ENV_VAR, ByteTokenizer, LoadedModel, ModelNotFoundError, NotGPT2LikeError, load_model

__all__ = ["ENV_VAR", "ByteTokenizer", "LoadedModel", "ModelNotFoundError", "NotGPT2LikeError", "load_model"]
