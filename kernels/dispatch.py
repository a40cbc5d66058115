"""Which backend runs, and the argument checks every entry point shares (the library's own rules).

Backends: ``"triton-cuda"`` (a CUDA device), ``"triton-interpreter"`` (Triton's CPU interpreter,
``TRITON_INTERPRET=1``, small inputs only) and ``"reference"`` (the float64 critscale functions).
The checks are those of :mod:`critscale._validate`, so a bad ``K``, ``beta`` or ``t`` raises the same
``ValueError`` here as in :func:`critscale.accumulation_scale` or :func:`critscale.softmax_stats`.
One rule is the kernels' own: they compute in float32, so finite scores outside float32's finite range
(``|s| > 3.4e38``) are refused, on every backend, instead of becoming ``+-inf`` (a ``-inf`` would be
read as a masked entry).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from critscale._validate import as_beta, as_K, as_thresholds

__all__ = ["BACKENDS", "FP32_MAX", "INTERPRETER_MAX_SCORES", "beta_grid", "check_K", "cuda_usable",
           "interpreter_active", "pick_backend", "threshold_grid"]

BACKENDS = ("triton-cuda", "triton-interpreter", "reference")

# Largest problem (rows * n scores) the automatic dispatcher sends to the interpreter; above it the
# CPU float64 reference runs.  The interpreter runs each program serially with numpy.
INTERPRETER_MAX_SCORES = 1 << 16

FP32_MAX = float(np.finfo(np.float32).max)


def interpreter_active() -> bool:
    """True when Triton runs kernels in its CPU interpreter in this process."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def cuda_usable() -> bool:
    """True when kernels can run on a CUDA device (and the interpreter is not forced)."""
    return torch.cuda.is_available() and not interpreter_active()


def pick_backend(requested: str, scores_count: int) -> str:
    """The backend that runs: ``requested`` if given, else CUDA, else the interpreter for small sizes."""
    if requested not in ("auto",) + BACKENDS:
        raise ValueError(f"backend must be 'auto' or one of {BACKENDS}, got {requested!r}")
    if requested == "triton-cuda":
        if not cuda_usable():
            raise ValueError("backend 'triton-cuda' needs a CUDA device (and TRITON_INTERPRET unset)")
        return requested
    if requested == "triton-interpreter":
        if not interpreter_active():
            raise ValueError("backend 'triton-interpreter' needs TRITON_INTERPRET=1 set before triton was imported")
        return requested
    if requested == "reference":
        return requested
    if cuda_usable():
        return "triton-cuda"
    if interpreter_active() and scores_count <= INTERPRETER_MAX_SCORES:
        return "triton-interpreter"
    return "reference"


def check_K(K: Any) -> int:
    """``K`` as :func:`critscale.accumulation_scale` accepts it: an integer ``>= 2`` (not a bool)."""
    return as_K(K)


def beta_grid(beta: Any) -> np.ndarray:
    """A non-empty 1-D float64 grid of finite ``beta >= 0`` (the library's rules, :func:`as_beta`)."""
    arr, _ = as_beta(beta.detach().cpu() if torch.is_tensor(beta) else beta)
    if arr.size == 0:
        raise ValueError("beta must hold at least one value")
    return arr


def threshold_grid(t: Any) -> np.ndarray:
    """A non-empty 1-D float64 grid of sorted thresholds ``>= 0`` (``+inf`` allowed; :func:`as_thresholds`)."""
    arr, _ = as_thresholds(t.detach().cpu() if torch.is_tensor(t) else t)
    if arr.size == 0:
        raise ValueError("thresholds t must hold at least one value")
    return arr


def fp32_overflow_message(what: str) -> str:
    return (f"{what} contain finite values outside float32's range (|s| > {FP32_MAX:.4g}); the kernels compute "
            "in float32, where they would become +-inf (and -inf marks a masked entry): rescale the scores")
