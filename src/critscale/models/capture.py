"""Capture q and k of every layer and head, and form the causal logit rows.

Forward hooks on each block's fused projection ``attn.c_attn`` (output
``[q | k | v]`` of shape ``(B, T, 3 * width)``) record q and k; the model itself never
needs to materialise an n x n attention matrix (use ``attn_implementation="sdpa"``).
The causal logit rows are (theory.md §6 P-13)

    s_ij = scale_l * q_i . k_j,   j <= i,   so row i has n = i + 1 entries,

at the model's own temperature: ``scale_l = 1/sqrt(d_h)`` for GPT-2, divided by
``l + 1`` when ``config.scale_attn_by_inverse_layer_idx`` is set, and 1 when
``config.scale_attn_weights`` is off.  A head's rows are stored as a ``(T, T)`` matrix
with ``-inf`` above the diagonal, the masked entries of the critscale row API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class CapturedQK:
    """Queries and keys of one sequence: ``q``, ``k`` of shape ``(layers, heads, T, d_h)``."""

    q: torch.Tensor  # (layers, heads, T, d_h)
    k: torch.Tensor  # (layers, heads, T, d_h)
    scales: tuple[float, ...]  # the model's logit scale per layer

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.q.shape)


def attention_scale(config, layer: int) -> float:
    """The factor GPT-2 multiplies ``q . k`` by in layer ``layer`` (its inverse temperature)."""
    head_dim = config.n_embd // config.n_head
    scale = 1.0 / math.sqrt(head_dim) if getattr(config, "scale_attn_weights", True) else 1.0
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        scale /= float(layer + 1)
    return scale


def _as_batch(input_ids) -> torch.Tensor:
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None, :]  # (1, T)
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise ValueError(f"input_ids must be one sequence, shape (T,) or (1, T); got {tuple(ids.shape)}")
    if ids.shape[1] < 1:
        raise ValueError("input_ids is empty")
    return ids


@torch.no_grad()
def capture_qk(model, input_ids) -> CapturedQK:
    """Run ``model`` on one sequence and return the q and k of every layer and head."""
    config = model.config
    ids = _as_batch(input_ids)
    if ids.shape[1] > config.n_positions:
        raise ValueError(f"sequence of {ids.shape[1]} tokens exceeds the model's context {config.n_positions}")
    width, heads = config.n_embd, config.n_head
    head_dim = width // heads
    captured: dict[int, torch.Tensor] = {}

    def hook_for(layer: int):
        def hook(_module, _inputs, output):
            q, k, _v = output.split(width, dim=2)  # each (1, T, width)
            T = q.shape[1]
            captured[layer] = torch.stack([
                q.reshape(T, heads, head_dim).transpose(0, 1),  # (heads, T, d_h)
                k.reshape(T, heads, head_dim).transpose(0, 1),
            ]).detach()
        return hook

    handles = [block.attn.c_attn.register_forward_hook(hook_for(i))
               for i, block in enumerate(model.transformer.h)]
    try:
        model(ids.to(next(model.parameters()).device))
    finally:
        for handle in handles:
            handle.remove()
    stacked = torch.stack([captured[i] for i in range(len(model.transformer.h))])  # (layers, 2, heads, T, d_h)
    scales = tuple(attention_scale(config, i) for i in range(config.n_layer))
    return CapturedQK(q=stacked[:, 0].float(), k=stacked[:, 1].float(), scales=scales)


def causal_logits(q: torch.Tensor, k: torch.Tensor, scale: float, dtype=torch.float64) -> torch.Tensor:
    """Causal logit rows ``scale * q_i . k_j`` (j <= i), ``-inf`` above the diagonal.

    ``q``, ``k``: ``(..., T, d_h)``; returns ``(..., T, T)`` in ``dtype`` (float64 by default,
    for the critscale reference), on the device of ``q``.
    """
    if q.shape != k.shape:
        raise ValueError(f"q and k shapes differ: {tuple(q.shape)} vs {tuple(k.shape)}")
    T = q.shape[-2]
    logits = scale * (q.to(dtype) @ k.to(dtype).transpose(-1, -2))  # (..., T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)  # (T, T), True above diagonal
    return logits.masked_fill(future, float("-inf"))
