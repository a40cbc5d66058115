"""Test helpers for the kernel tests (``tests/test_kernels_*.py``): backends and derived tolerances.

Each test runs once per backend: ``"triton-interpreter"`` (CPU, ``TRITON_INTERPRET=1``) and
``"triton-cuda"`` (marked ``gpu``).  A backend that cannot run in this process is *skipped with its
reason*, which ``pytest -ra`` prints in the summary, never silently.

Tolerances (fp32 kernels against the float64 critscale reference on the same fp32 scores):

- ``log Z`` and ``H``: relative ``1e-5``.  Gaps near the maximum are exact in fp32 (Sterbenz), the product
  ``beta log2(e) Delta`` is rounded once (relative ``2^-24``), so a term ``e^{-beta Delta}`` carries a
  relative error of at most about ``1.2e-7 beta Delta``; terms with ``beta Delta > 87`` are below fp32's
  normal range (flushed to zero on the GPU), which gives the absolute floor ``n 2^-126`` (times the
  largest ``beta Delta e^{-beta Delta}`` factor, ``<= 88``, for the entropy).  Below that range the
  relative error is ``<= 87 * 1.2e-7 = 1.0e-5``.
- the beta ladder (:mod:`critscale.kernels.ladder`): a term reached by ``l`` squarings carries at most
  ``(2^l - 1)(eps + u)`` more relative error than one exp2 (``eps`` the exp2 error, ``u = 2^-24``); with the
  GPU's ``eps = 2^-22`` that is ``2.1e-6`` for three squarings.  :func:`check_softmax_fields` adds it for the
  deepest level of the result's plan (``notes["levels"]``; ``C`` sits one level above ``A``).
- counts: exact when no gap lies within ``1e-6 (1 + |M|)`` of a threshold (fp32 rounding of ``M - s``
  and of ``t``); tests use dyadic scores for exactness and a band check otherwise.
- logits ``q.k`` (kind ``qk``): the fp32 dot product has error ``|ds| <= gamma_d scale sum_k |q_k k_k|`` with
  ``gamma_d = d 2^-24 / (1 - d 2^-24)`` (Higham, Thm 3.1); ``log Z`` relative to the maximum is
  ``2 beta``-Lipschitz in the sup norm of the scores, so ``|d log Z| <= 2 beta |ds|_inf``; the entropy
  has ``sum_i |dH/ds_i| = beta sum_i p_i |log p_i + H| <= 2 beta H``, so ``|dH| <= 2 beta |ds|_inf (2H + 1)``
  (the ``+1`` covers the change of ``H`` along the path).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .dispatch import cuda_usable, interpreter_active

FP32_REL = 1e-5
UNDERFLOW = 2.0 ** -126


def backend_params() -> list:
    """``pytest.param`` for each backend, the CUDA one marked ``gpu``."""
    return [pytest.param("triton-interpreter", id="interpreter"),
            pytest.param("triton-cuda", id="cuda", marks=pytest.mark.gpu)]


def require(backend: str) -> None:
    """Skip (with the reason, reported by ``-ra``) when ``backend`` cannot run in this process."""
    if backend == "triton-cuda" and not cuda_usable():
        pytest.skip("GPU test: no CUDA device here (or TRITON_INTERPRET=1); it runs in scripts/gpu_results.py")
    if backend == "triton-interpreter" and not interpreter_active():
        pytest.skip("interpreter test: TRITON_INTERPRET is not 1 in this process (a CUDA run); "
                    "the same case runs under the 'cuda' parameter")


def device_of(backend: str) -> torch.device:
    return torch.device("cuda") if backend == "triton-cuda" else torch.device("cpu")


def assert_close_rel(got, want, rel: float, atol, what: str) -> None:
    """``|got - want| <= rel |want| + atol`` elementwise (``inf`` must match ``inf``)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    both_inf = np.isinf(got) & np.isinf(want) & (np.sign(got) == np.sign(want))
    err = np.where(both_inf, 0.0, np.abs(got - want))
    bound = rel * np.abs(np.where(np.isinf(want), 0.0, want)) + np.broadcast_to(atol, want.shape)
    bad = ~(err <= bound)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {bad.sum()} entries out of tolerance; first at {i}: got {got[i]!r}, "
                             f"want {want[i]!r}, |err| {err[i]:.3e} > bound {np.broadcast_to(bound, want.shape)[i]:.3e}")


def check_softmax_fields(res, ref_stats, n_valid, rel: float = FP32_REL, extra_logz=0.0, extra_h=0.0) -> None:
    """Compare ``log Z``, ``H``, ``p_max``, ``sum p^2`` of a kernel result with a :class:`SoftmaxStats`."""
    from .ladder import EX2_REL_GPU, U32

    levels = getattr(res, "notes", {}).get("levels", 1)
    rel = rel + (2.0 ** (levels - 1) - 1) * (EX2_REL_GPU + U32)
    floor = np.asarray(n_valid, dtype=np.float64)[..., None] * UNDERFLOW
    assert_close_rel(res.log_z, ref_stats.log_z, rel, floor + extra_logz, "log Z")
    assert_close_rel(res.entropy, ref_stats.entropy, rel, 88 * floor + extra_h, "entropy")
    assert_close_rel(res.max_weight, ref_stats.max_weight, rel, floor + extra_logz, "p_max")
    assert_close_rel(res.collision, ref_stats.collision, 2 * rel, 2 * floor + 4 * extra_logz, "sum p^2")
