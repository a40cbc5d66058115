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

__all__ = ["CapturedQK", "attention_check", "attention_scale", "capture_qk", "causal_logits", "expand_kv_heads",
           "input_device", "next_token_nats"]


@dataclass
class CapturedQK:
    """Queries and keys of one sequence: ``q``, ``k`` of shape ``(layers, heads, T, d_h)``."""

    q: torch.Tensor  # (layers, heads, T, d_h)
    k: torch.Tensor  # (layers, heads, T, d_h), key/value heads expanded to the query heads
    scales: tuple[float, ...]  # the model's logit scale per layer
    hidden: torch.Tensor | None = None  # (T, width) the base model's last hidden state, when asked for

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
def capture_qk(model, input_ids, *, hidden: bool = False) -> CapturedQK:
    """Run ``model`` on one sequence and return the q and k of every layer and head.

    ``hidden=True`` also keeps the base model's last hidden state (final norm applied), from which
    the language-model head gives the next-token logits (:func:`next_token_nats`).
    """
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
        out = model.base_model(input_ids=ids.to(device), use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    q = torch.stack([captured[i][0].to(device, torch.float32) for i in range(shape.n_layers)])  # (L, H, T, d_h)
    k = torch.stack([expand_kv_heads(captured[i][1].to(device, torch.float32), shape.n_heads)
                     for i in range(shape.n_layers)])  # (L, H, T, d_h)
    last = out.last_hidden_state[0].to(device) if hidden else None  # (T, width)
    return CapturedQK(q=q, k=k, scales=family.scales(model), hidden=last)


@torch.no_grad()
def next_token_nats(model, hidden: torch.Tensor, input_ids) -> tuple[float, int]:
    """Summed cross-entropy (nats) of tokens ``1 .. T-1`` of ``input_ids`` given their prefixes, and their count.

    ``hidden`` is :attr:`CapturedQK.hidden` of the same sequence; the model's own output embedding
    (its language-model head) turns it into logits.
    """
    ids = _as_batch(input_ids)[0].to(hidden.device)  # (T,)
    logits = model.get_output_embeddings()(hidden[:-1]).float()  # (T-1, vocab)
    nats = torch.nn.functional.cross_entropy(logits, ids[1:], reduction="sum")
    return float(nats), int(len(ids) - 1)


@torch.no_grad()
def attention_check(model, input_ids) -> float:
    """Largest |softmax of the captured rows - the model's own eager attention probabilities| over all heads.

    The check that the capture reads what the model multiplies (position encodings, grouped heads,
    logit scale): float32 rounding gives about 1e-7.  The model runs once with transformers' eager
    attention (``output_attentions=True``) and is put back to its attention implementation after.
    """
    ids = _as_batch(input_ids)
    device = input_device(model)
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        attentions = model(ids.to(device), output_attentions=True, use_cache=False).attentions  # per layer (1, H, T, T)
    finally:
        model.set_attn_implementation(before)
    captured = capture_qk(model, ids)
    return max(float((torch.softmax(causal_logits(captured.q[l], captured.k[l], captured.scales[l]), -1)
                      - attentions[l][0].to(device, torch.float64)).abs().max())
               for l in range(len(attentions)))


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
