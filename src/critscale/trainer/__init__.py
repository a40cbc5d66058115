"""The book's own GPT-2: a GPT-2-architecture model trained on text every Python installation carries.

- :mod:`.corpus`: the deterministic corpus (CPython documentation and standard library);
- :mod:`.train`: training it (or, with ``steps=0``, saving its seeded initialisation), cached.

The diagnostic that reads its attention lives in :mod:`critscale.diagnostic`; loading models and
capturing q and k in :mod:`critscale.models`.  Nothing here imports transformers at import time.
"""
