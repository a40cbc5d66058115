"""Optional packages: which extra of critscale's install brings each, and one line when one is missing.

The core install (``pip install critscale``) reads ``--qk`` files and models in ``transformers``' own
formats; an extra adds what only some users need (``pyproject.toml`` lists the same packages):
``gguf`` reads GGUF checkpoints (``transformers`` needs ``gguf`` to parse them and ``accelerate`` to load one),
``devicemap`` places a model too large for one device (``device_map=``, through ``accelerate``),
``kernels`` runs the Triton kernels.
"""

from __future__ import annotations

import importlib.util

EXTRAS = {"gguf": ("gguf", "accelerate"), "devicemap": ("accelerate",), "kernels": ("triton",)}


class MissingPackageError(ValueError):
    """A package of an extra is needed for what was asked and is not installed."""


def missing(extra: str) -> list[str]:
    """The packages of ``extra`` that cannot be imported here (looked up, not imported)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, needed_for: str) -> None:
    """Raise :class:`MissingPackageError` naming ``needed_for``, the missing packages and the install line."""
    absent = missing(extra)
    if absent:
        raise MissingPackageError(f"{needed_for} needs {' and '.join(absent)}, not installed here: "
                                  f"pip install 'critscale[{extra}]' (or pip install {' '.join(absent)})")
