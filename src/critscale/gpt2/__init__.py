"""The paper's diagnostic on GPT-2 attention rows (theory.md §6 P-13).

Modules, one idea each:

- :mod:`.load`: load a GPT-2-family model from a hub name or a local directory, offline-safe;
- :mod:`.capture`: q and k of every layer and head by hooks, and the causal logit rows;
- :mod:`.stats`: per-row statistics (kappa, kappa_16, beta_1/2, entropy, sinks) from the critscale
  API, or from the fused q·k kernel on CUDA;
- :mod:`.classify`: the law of log N(t), the exponent gamma, sinks;
- :mod:`.diagnose`: the whole diagnostic per layer and head, its tables and summary;
- :mod:`.figures`: its figures;
- :mod:`.corpus` and :mod:`.train`: a GPT-2-architecture model trained on the Python docs, for
  machines without pretrained weights.

Nothing here imports transformers at import time; the heavy imports happen inside the functions.
"""

from .load import ENV_VAR, ByteTokenizer, LoadedModel, ModelNotFoundError, NotGPT2LikeError, load_model

__all__ = ["ENV_VAR", "ByteTokenizer", "LoadedModel", "ModelNotFoundError", "NotGPT2LikeError", "load_model"]
