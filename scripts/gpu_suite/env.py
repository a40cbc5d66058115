"""Where the suite runs: the installed ``critscale``, the device, and the time budget.

``critscale`` (with ``critscale.kernels``) is imported as installed: on a GPU machine the session scripts
install the wheel carried with the tree, checked against it (``scripts/gpu_session/gpu_critscale_wheel.py``).
The smoke mode (``--smoke``) runs everything at tiny sizes on the CPU with Triton's interpreter, which
must be chosen before anything imports triton; the CUDA-only parts say why they are skipped.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def choose_interpreter(smoke: bool) -> None:
    """Triton's interpreter for the smoke mode, CUDA otherwise, for this process and its children."""
    from critscale.triton_backend import choose

    choose(interpreter=smoke)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def ensure_importable() -> str:
    """Import ``critscale.kernels`` as installed; return where it was found.

    Raises :class:`ImportError` with what to do when critscale is not installed: on a GPU machine the session
    scripts install the carried wheel (``scripts/gpu_session/gpu_critscale_wheel.py``), elsewhere ``pip install .``.
    """
    try:
        kernels = importlib.import_module("critscale.kernels")
    except ImportError as err:
        raise ImportError(f"critscale.kernels cannot be imported ({err}): install critscale (`pip install .`, "
                          "or `python3 scripts/gpu_session/gpu_critscale_wheel.py install .whl SITE` with SITE on PYTHONPATH)"
                          ) from None
    return f"installed package ({Path(kernels.__file__).parents[1]})"


@dataclass
class Run:
    """One invocation of the suite: device, mode, output folder and time budget."""

    out: Path
    smoke: bool = False
    quick: bool = False
    budget_s: float = 420.0
    reserve_s: float = 0.0  # the end of the budget kept for a later part
    started: float = field(default_factory=time.time)

    @property
    def device(self) -> str:
        return "cpu" if self.smoke else "cuda"

    @property
    def mode(self) -> str:
        return "smoke" if self.smoke else ("quick" if self.quick else "full")

    def elapsed(self) -> float:
        return time.time() - self.started

    def over_budget(self) -> bool:
        return self.elapsed() > self.budget_s - self.reserve_s

    def sync(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()

    def empty_cache(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.empty_cache()
