"""Micro-kernels that measure the arithmetic ceilings the benchmark compares against.

The row-statistics kernels spend, per score, one ``exp2`` per chain of the beta ladder (the GPU's
special-function units) and a few fp32 operations per beta and threshold, so their floors are the exp2
throughput and the FMA throughput of the device, measured here with independent chains (no memory traffic
to speak of), next to the copy bandwidth and the tensor-core rate that ``scripts/gpu_results.py`` measures
with PyTorch.  :mod:`critscale.kernels.sass` gives the instructions per score of the compiled kernels.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["exp2_chains", "fma_chains"]


@triton.jit
def exp2_chains(x_ptr, o_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """Four independent chains of ``a <- 2^-a`` per element: ``4 ITERS`` exp2 per element."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    a0 = x
    a1 = x + 1.0
    a2 = x + 2.0
    a3 = x + 3.0
    for _ in range(ITERS):
        a0 = tl.exp2(-a0)
        a1 = tl.exp2(-a1)
        a2 = tl.exp2(-a2)
        a3 = tl.exp2(-a3)
    tl.store(o_ptr + offs, a0 + a1 + a2 + a3)


@triton.jit
def fma_chains(x_ptr, o_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """Four independent chains of ``a <- 0.999 a + 0.001`` per element: ``8 ITERS`` flops per element."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    a0 = x
    a1 = x + 1.0
    a2 = x + 2.0
    a3 = x + 3.0
    for _ in range(ITERS):
        a0 = a0 * 0.999 + 0.001
        a1 = a1 * 0.999 + 0.001
        a2 = a2 * 0.999 + 0.001
        a3 = a3 * 0.999 + 0.001
    tl.store(o_ptr + offs, a0 + a1 + a2 + a3)
