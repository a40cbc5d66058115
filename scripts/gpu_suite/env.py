"""Where the suite runs: ``critscale`` imported from the tree, the device, and the time budget.

A GPU machine gets a copy of the tree without an installed package, so ``critscale`` and
``critscale.kernels`` are made importable from ``src/`` and ``kernels/`` when they are not installed.
The smoke mode (``--smoke``) runs everything at tiny sizes on the CPU with Triton's interpreter, which
must be chosen before anything imports triton; the CUDA-only parts say why they are skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def choose_interpreter(smoke: bool) -> None:
    """Set ``TRITON_INTERPRET`` for this process and its children (before triton is imported)."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != ("1" if smoke else "0"):
        raise RuntimeError("triton was imported before the suite chose TRITON_INTERPRET; import gpu_suite first")
    os.environ["TRITON_INTERPRET"] = "1" if smoke else "0"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def ensure_importable() -> str:
    """Make ``critscale.kernels`` importable; return how it was found."""
    try:
        importlib.import_module("critscale.kernels")
        return "installed package"
    except ImportError:
        pass
    for name in [m for m in sys.modules if m == "critscale" or m.startswith("critscale.")]:
        del sys.modules[name]
    sys.path.insert(0, str(ROOT / "src"))
    os.environ.setdefault("CRITSCALE_ROOT", str(ROOT))
    import critscale

    spec = importlib.util.spec_from_file_location("critscale.kernels", ROOT / "kernels" / "__init__.py",
                                                  submodule_search_locations=[str(ROOT / "kernels")])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["critscale.kernels"] = mod
    spec.loader.exec_module(mod)
    critscale.kernels = mod
    return "source tree (src/ and kernels/ on the path)"


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
