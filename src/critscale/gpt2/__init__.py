"""The paper's diagnostic on GPT-2 attention rows (theory.md §6 P-13).

Modules, one idea each:

- :mod:`.stats`: per-row statistics (kappa, kappa_16, beta_1/2, entropy, sinks) from the critscale
  API, or from the fused q·k kernel on CUDA;
- :mod:`.classify`: the law of log N(t), the exponent gamma, sinks;
- :mod:`.diagnose`: the whole diagnostic per layer and head, its tables and summary;
- :mod:`.figures`: its figures;
- :mod:`.corpus` and :mod:`.train`: a GPT-2-architecture model trained on the Python docs, for
  machines without pretrained weights.

Loading models and capturing q and k live in :mod:`critscale.models`.
Nothing here imports transformers at import time; the heavy imports happen inside the functions.
"""
