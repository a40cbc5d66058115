"""Transformer language models for the attention diagnostic: loading, and q/k capture.

- :mod:`.load`: load a model and its tokenizer from a hub name, a local directory or a GGUF file, offline-safe;
- :mod:`.interface`: the capturing attention function, registered with transformers' ``AttentionInterface``, which
  reads any architecture whose attention goes through it (falcon, bloom, mpt do not: refused by name);
- :mod:`.architectures`: what the capture reads of a configuration (sizes, context, sliding windows), and the size
  checks per architecture (:mod:`.gpt2`, :mod:`.llama`, any other), the one that applies picked by :mod:`.registry`;
- :mod:`.gguf_cache`: GGUF files, dequantised once to float32 and cached (:mod:`.gguf_header` checks their
  header, :mod:`.verified_cache` the cache's files against their recorded hashes);
- :mod:`.model_size`: a configuration's sizes, checked against this machine's memory before a model is built;
- :mod:`.capture`: q and k of every layer and head (through :mod:`.interface`), and the rows the model computes.

Nothing here imports transformers at import time; the heavy imports happen inside the functions.
"""

from .errors import CacheError, InvalidCheckpointError, ModelNotFoundError, SequenceTooLongError, UnsupportedModelError
from .load import ENV_VAR, ByteTokenizer, LoadedModel, load_model

__all__ = ["ENV_VAR", "ByteTokenizer", "CacheError", "InvalidCheckpointError", "LoadedModel", "ModelNotFoundError",
           "SequenceTooLongError", "UnsupportedModelError", "load_model"]
