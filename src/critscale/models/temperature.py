"""A logit temperature per layer and context length, applied inside the attention function.

A length-dependent rescaling rule multiplies the logits ``scaling * q . k`` of a query that sees a context
of n tokens, in layer l, by a factor f(l, n).
:func:`tempered` applies such a rule to any ``transformers`` model whose attention goes through
``AttentionInterface``: inside the block the model's attention is :func:`tempered_attention`, registered
under :data:`NAME`, which multiplies each query row by its factor (so row i's logits are multiplied by it,
the mask and the keys untouched) and then computes the attention with transformers' own ``sdpa``
function and mask, so that a factor of exactly 1 gives the model's ``sdpa`` forward bit for bit.

The context length of a query is its position plus one: ``position_ids + 1`` when the model passes
position ids to its attention (every decoder tested does), else the query's place among the keys
(``Tkv - Tq + i + 1``, right for one sequence with or without a key/value cache).
It is the length the published rules are written in (log n of the context so far), also on a
sliding-window layer, which sees at most its window.
A rule never reaches the rotary tables: positions are whatever the model's own position treatment makes them.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from contextlib import contextmanager

import torch

from .errors import UnsupportedModelError
from .interface import check_routed, switched

NAME = "critscale_temperature"

# factor(layer, lengths) -> multipliers: lengths is an integer tensor (..., Tq), the result broadcasts against it
Factor = Callable[[int, torch.Tensor], torch.Tensor]

_ACTIVE: contextvars.ContextVar[Factor | None] = contextvars.ContextVar("critscale_temperature", default=None)


def context_lengths(query: torch.Tensor, key: torch.Tensor, position_ids: torch.Tensor | None) -> torch.Tensor:
    """The context length n of each query, ``(B or 1, Tq)``: its position plus one."""
    tq, tkv = query.shape[-2], key.shape[-2]
    if position_ids is not None:
        return position_ids.reshape(-1, tq).to(torch.long) + 1  # (B, Tq)
    return torch.arange(tkv - tq + 1, tkv + 1, device=query.device).unsqueeze(0)  # (1, Tq)


def _layer(module) -> int:
    layer = getattr(module, "layer_idx", None)
    if not isinstance(layer, int):
        raise UnsupportedModelError(f"{type(module).__name__} has no integer layer_idx, so a per-layer temperature "
                                    "cannot tell its layer")
    return layer


def tempered_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' ``sdpa`` attention of ``module`` with query row i multiplied by the active factor.

    ``query`` is ``(B, Hq, Tq, D)``; returns ``(output (B, Tq, Hq, D), None)`` as ``sdpa_attention_forward`` does.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    factor = _ACTIVE.get()
    if factor is not None:
        lengths = context_lengths(query, key, kwargs.get("position_ids"))  # (B or 1, Tq)
        f = torch.as_tensor(factor(_layer(module), lengths), dtype=query.dtype, device=query.device)
        f = torch.broadcast_to(f, lengths.shape)  # (B or 1, Tq)
        query = query * f[:, None, :, None]  # (B, Hq, Tq, D)
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                  **kwargs)


def register() -> None:
    """Register :func:`tempered_attention` and transformers' ``sdpa_mask`` under :data:`NAME` (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, tempered_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


@contextmanager
def tempered(model, factor: Factor):
    """Run ``model`` with layer l's logits at context length n multiplied by ``factor(l, n)`` inside the block.

    The model's attention implementation is switched to :data:`NAME` and put back afterwards.
    """
    if not callable(factor):
        raise TypeError(f"factor must be a callable factor(layer, lengths), not {type(factor).__name__}")
    check_routed(getattr(model.config, "model_type", None))
    register()
    token = _ACTIVE.set(factor)
    try:
        with switched(model, NAME):
            yield model
    finally:
        _ACTIVE.reset(token)
