"""Where critscale keeps what it computes once and reuses: the user's cache directory, never the working one.

:func:`cache_root` is ``$CRITSCALE_CACHE`` when set, else ``$XDG_CACHE_HOME/critscale`` (the XDG base
directory rule: an absolute ``$XDG_CACHE_HOME`` only), else ``~/.cache/critscale``.
An empty variable counts as unset, and a relative ``$CRITSCALE_CACHE`` is taken from the working directory
at the call and returned absolute.
The float32 copies of GGUF files live in ``<root>/models/`` (:mod:`critscale.models.gguf_cache`).
The book's ``Makefile`` sets ``CRITSCALE_CACHE`` inside its own ``build/`` so a build stays self-contained.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "CRITSCALE_CACHE"


def cache_root() -> Path:
    """The absolute cache directory of this process (read from the environment at each call)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        return Path(chosen).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "critscale"
    return Path.home() / ".cache" / "critscale"


def models_cache() -> Path:
    """The directory of the float32 copies of GGUF files: ``<cache_root()>/models``."""
    return cache_root() / "models"
