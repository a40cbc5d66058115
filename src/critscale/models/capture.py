"""Capture q and k of every layer and head, and form the causal logit rows.

Forward hooks (set by the model's family adapter, :mod:`.families`) record q and k of every
layer during one forward pass of the model's base (no language-model head, no key/value cache);
the model itself never needs to materialise an n x n attention matrix (use
``attn_implementation="sdpa"``).  q and k are taken after any position encoding (the rotary
embedding of the Llama family), and grouped key/value heads are expanded to the query heads they
serve, so head ``h`` of ``k`` is the key of query head ``h``.  The causal logit rows are
(theory.md §6 P-13)

    s_ij = scale_l * q_i . k_j,   j <= i,   so row i has n = i + 1 entries,

at the model's own temperature ``scale_l`` (GPT-2: :func:`attention_scale`; Llama family: the
attention module's ``scaling``).  A head's rows are stored as a ``(T, T)`` matrix with ``-inf``
above the diagonal, the masked entries of the critscale row API.

A model spread over several devices (``load_model(..., device_map=...)``) is supported: the
captured tensors are moved to the device of the input embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import SequenceTooLongError
from .families import family_of
from .gpt2_family import attention_scale

__all__ = ["CapturedQK", "attention_scale", "capture_qk", "causal_logits", "expand_kv_heads", "input_device"]


@dataclass
class CapturedQK:
    """Queries and keys of one sequence: ``q``, ``k`` of shape ``(layers, heads, T, d_h)``."""

    q: torch.Tensor  # (layers, heads, T, d_h)
    k: torch.Tensor  # (layers, heads, T, d_h), key/value heads expanded to the query heads
    scales: tuple[float, ...]  # the model's logit scale per layer

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.q.shape)


def _as_batch(input_ids) -> torch.Tensor:
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None, :]  # (1, T)
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise ValueError(f"input_ids must be one sequence, shape (T,) or (1, T); got {tuple(ids.shape)}")
    if ids.shape[1] < 1:
        raise ValueError("input_ids is empty")
    return ids


def input_device(model) -> torch.device:
    """Where the model's input ids go: the device of its input embedding (the first of a device map)."""
    return model.get_input_embeddings().weight.device


def expand_kv_heads(k: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Keys of ``kv`` key/value heads ``(kv, T, d_h)`` -> ``(n_heads, T, d_h)``, one per query head.

    Query head h reads key/value head ``h // (n_heads / kv)``: the grouping of transformers' ``repeat_kv``
    (grouped-query attention).
    """
    kv = k.shape[0]
    if n_heads % kv:
        raise ValueError(f"{n_heads} query heads cannot share {kv} key/value heads evenly")
    return k.repeat_interleave(n_heads // kv, dim=0)  # (n_heads, T, d_h)


@torch.no_grad()
def capture_qk(model, input_ids) -> CapturedQK:
    """Run ``model`` on one sequence and return the q and k of every layer and head."""
    family = family_of(model.config)
    shape = family.shape(model.config)
    ids = _as_batch(input_ids)
    limit, what = family.max_tokens(model.config)
    if ids.shape[1] > limit:
        raise SequenceTooLongError(f"sequence of {ids.shape[1]} tokens exceeds {what}: {limit} tokens")
    captured: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def record(layer, q, k):
        captured[layer] = (q.detach(), k.detach())

    device = input_device(model)
    handles = family.install_hooks(model, record)
    try:
        model.base_model(input_ids=ids.to(device), use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    q = torch.stack([captured[i][0].to(device, torch.float32) for i in range(shape.n_layers)])  # (L, H, T, d_h)
    k = torch.stack([expand_kv_heads(captured[i][1].to(device, torch.float32), shape.n_heads)
                     for i in range(shape.n_layers)])  # (L, H, T, d_h)
    return CapturedQK(q=q, k=k, scales=family.scales(model))


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
