"""Capture q and k of every layer and head, and form the logit rows the model computes.

One forward of the model's base (no language-model head, no key/value cache) runs with the capturing
attention function of :mod:`.interface`, registered with transformers' ``AttentionInterface``: q and k
are recorded as the model's attention receives them, after every position encoding (rotary embedding,
QK-norm), with the module's own ``scaling`` and mask, and grouped key/value heads expanded to the query
heads they serve (head ``h`` of ``k`` is the key of query head ``h``).  Any architecture whose attention
goes through the interface is read this way (GPT-2, the Llama family, Qwen3, Gemma 3, Phi-3, GPT-NeoX,
BERT, ...); the others are refused by name (:func:`.interface.check_routed`).

The rows are (theory.md §6 P-13)

    s_ij = scale_l * q_i . k_j   for the keys j that query i sees,

at the model's own temperature ``scale_l``.  The capture checks each layer's mask: a decoder's rows are
causal prefixes (``j <= i``, stored as a ``(T, T)`` matrix with ``-inf`` above the diagonal by
:func:`causal_logits`), an encoder's rows hold every key (:attr:`CapturedQK.causal` False).  A mask that
hides keys inside a row (a sliding window shorter than the sequence) is refused: such rows are not what
the diagnostic reads.  Logit soft-capping (Gemma 2) is applied in the forward but refused for the rows,
which are then not ``scale * q . k``.

A model spread over several devices (``device_map=...``) is supported: the captured tensors are moved
to the device of the input embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import SequenceTooLongError, UnsupportedModelError
from .architectures import check_config, context_limit, shape_of
from .gpt2 import attention_scale
from .interface import calls_of, recording

__all__ = ["CapturedQK", "attention_check", "attention_scale", "capture_qk", "causal_logits", "expand_kv_heads",
           "input_device", "next_token_nats", "rows_are_causal"]


@dataclass
class CapturedQK:
    """Queries and keys of one sequence: ``q``, ``k`` of shape ``(layers, heads, T, d_h)``."""

    q: torch.Tensor  # (layers, heads, T, d_h)
    k: torch.Tensor  # (layers, heads, T, d_h), key/value heads expanded to the query heads
    scales: tuple[float, ...]  # the model's logit scale per layer
    hidden: torch.Tensor | None = None  # (T, width) the base model's last hidden state, when asked for
    causal: bool = True  # rows are causal prefixes (decoder); False: every key visible (encoder)

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


def _mask_kind(call, layer: int, T: int, model_type) -> bool:
    """Whether layer ``layer``'s rows are causal prefixes (True) or hold every key (False); else refused."""
    visible = call.visible()[0]  # (1 or H, T, T)
    if bool(visible.all()):
        return False
    causal = torch.ones(T, T, dtype=torch.bool, device=visible.device).tril()
    if bool((visible == causal).all()):
        return True
    if call.sliding_window is not None and bool((visible <= causal).all()):
        raise SequenceTooLongError(f"sequence of {T} tokens exceeds the sliding window of layer {layer} "
                                   f"({call.sliding_window} tokens): its rows are windows, not full prefixes")
    raise UnsupportedModelError(f"{model_type!r} model: layer {layer}'s attention mask is neither causal nor "
                                "bidirectional, so its rows are not full")


@torch.no_grad()
def capture_qk(model, input_ids, *, hidden: bool = False) -> CapturedQK:
    """Run ``model`` on one sequence and return the q and k of every layer and head.

    ``hidden=True`` also keeps the base model's last hidden state (final norm applied), from which
    the language-model head gives the next-token logits (:func:`next_token_nats`).
    """
    config = model.config
    model_type = getattr(config, "model_type", None)
    check_config(config)
    shape = shape_of(config)
    ids = _as_batch(input_ids)
    limit, what = context_limit(config)
    if ids.shape[1] > limit:
        raise SequenceTooLongError(f"sequence of {ids.shape[1]} tokens exceeds {what}: {limit} tokens")
    device = input_device(model)
    with recording(model) as calls:
        out = model.base_model(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device),
                               use_cache=False)
    calls = calls_of(calls, shape.n_layers, model_type)
    T = ids.shape[1]
    kinds = {_mask_kind(call, layer, T, model_type) for layer, call in enumerate(calls)}
    if len(kinds) > 1:
        raise UnsupportedModelError(f"{model_type!r} model mixes causal and bidirectional layers")
    capped = [(layer, call.softcap) for layer, call in enumerate(calls) if call.softcap is not None]
    if capped:
        raise UnsupportedModelError(f"{model_type!r} model soft-caps its attention logits (softcap {capped[0][1]:g}"
                                    f" in layer {capped[0][0]}): its rows are c * tanh(s / c), not scale * q . k")
    q = torch.stack([call.query[0].to(device, torch.float32) for call in calls])  # (L, H, T, d_h)
    k = torch.stack([call.key[0].to(device, torch.float32) for call in calls])  # (L, H, T, d_h)
    last = out.last_hidden_state[0].to(device) if hidden else None  # (T, width)
    return CapturedQK(q=q, k=k, scales=tuple(call.scaling for call in calls), hidden=last, causal=kinds.pop())


PROBE_TOKENS = 16  # tokens of the forward that tells a decoder's causal rows from an encoder's


def rows_are_causal(model, input_ids) -> bool:
    """Whether ``model``'s rows are causal prefixes (a decoder) or hold every key (an encoder), from its masks.

    One forward of the first :data:`PROBE_TOKENS` tokens of ``input_ids`` through the capture.
    """
    ids = _as_batch(input_ids)[:, :PROBE_TOKENS]
    return capture_qk(model, ids).causal


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
    logit scale, mask): float32 rounding gives about 1e-7.  The model runs once with transformers' eager
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
    with recording(model) as calls:
        model(ids.to(device), use_cache=False)
    calls = calls_of(calls, len(attentions), getattr(model.config, "model_type", None))
    return max(float((torch.softmax(call.logits().to(device), -1) - attention.to(device, torch.float64)).abs().max())
               for call, attention in zip(calls, attentions))


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
