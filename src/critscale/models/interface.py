"""The capturing attention function, registered with transformers' ``AttentionInterface``.

Every model of transformers whose attention module calls ``ALL_ATTENTION_FUNCTIONS.get_interface(...)``
hands its attention function the query ``(B, Hq, Tq, D)`` and key ``(B, Hkv, Tkv, D)`` after every
position encoding (rotary embedding, QK-norm), its own logit ``scaling``, its mask and, for Gemma 2, its
logit ``softcap``.  :func:`capture_attention` is such a function under the name :data:`NAME`: it records
what it is given (:class:`AttentionCall`, keys expanded to the query heads they serve, as ``repeat_kv``
does) while a :func:`recording` is active, and computes the attention output itself, so the forward is the
model's own: with torch's fused ``scaled_dot_product_attention`` under the model's mask and scale when the model
ran a fused implementation (sdpa, the loader's default) before the capture, with the eager arithmetic (scores,
soft-cap, mask, softmax in float32, dropout) when it ran eager, soft-caps its logits or is asked for the weights.

The mask function :func:`transformers.masking_utils.eager_mask` is registered under the same name
(``AttentionMaskInterface``): without it every layer would receive ``attention_mask=None`` and the causal
mask would be lost.  ``eager_mask`` gives additive float masks (0 or the dtype's minimum) for causal,
sliding-window and padded inputs, and None for an unpadded bidirectional encoder.

Architectures whose attention does not go through the interface (falcon, bloom, mpt in transformers 5)
are refused by name (:func:`check_routed`), before the model is built; logit terms that are not
``scaling * q . k`` (attention sinks, T5's position bias) are refused when they reach the function.
The name avoids ``sdpa`` and ``flex_attention``, which would trigger those backends' checks.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .errors import UnsupportedModelError

NAME = "critscale_capture"

# model_type -> why the capture cannot read it (their attention code never calls the interface)
NOT_ROUTED = {name: "its attention is computed in its own code, not through transformers' AttentionInterface"
              for name in ("bloom", "falcon", "mpt")}
# a keyword argument of the attention call -> the logit term it adds, which the q/k rows cannot hold
UNREADABLE_KWARGS = {"s_aux": "attention sinks (a learned logit in every row)",
                     "position_bias": "an additive position bias (T5's relative attention)"}
INTERFACE_CALL = "ALL_ATTENTION_FUNCTIONS.get_interface("

_ACTIVE: contextvars.ContextVar[list | None] = contextvars.ContextVar("critscale_capture_calls", default=None)
# whether the output is computed by torch's fused attention (the model ran sdpa or another fused kind before the
# capture) or by the eager arithmetic (it ran eager): the forward stays the model's own
_FUSED: contextvars.ContextVar[bool] = contextvars.ContextVar("critscale_capture_fused", default=False)


@dataclass
class AttentionCall:
    """What one attention module was given in one forward (tensors detached, on the module's device)."""

    index: int  # order of the call in the forward: the layer, for a self-attention stack
    module: str  # the attention module's class name
    query: torch.Tensor  # (B, Hq, Tq, D)
    key: torch.Tensor  # (B, Hq, Tkv, D), key/value heads expanded to the query heads (repeat_kv)
    scaling: float  # the factor the module multiplies q . k by
    mask: torch.Tensor | None  # additive (B, 1 or Hq, Tq, Tkv): 0 visible, the dtype's minimum hidden
    softcap: float | None  # Gemma 2: scores -> softcap * tanh(scores / softcap), before the mask
    sliding_window: int | None  # as the module passed it (None on full-attention layers)

    def logits(self, dtype=torch.float64) -> torch.Tensor:
        """The scores the module's softmax reads: ``scaling * q . k`` (soft-capped), plus the mask; ``(B, Hq, Tq, Tkv)``."""
        scores = self.scaling * (self.query.to(dtype) @ self.key.to(dtype).transpose(-1, -2))
        if self.softcap is not None:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        return scores if self.mask is None else scores + self.mask.to(dtype)

    def visible(self) -> torch.Tensor:
        """Which keys each query sees: bool ``(B, 1 or Hq, Tq, Tkv)`` (all True without a mask)."""
        B, _, Tq, _ = self.query.shape
        if self.mask is None:
            return torch.ones(B, 1, Tq, self.key.shape[-2], dtype=torch.bool, device=self.query.device)
        return self.mask > torch.finfo(self.mask.dtype).min / 2


def repeat_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    """``(B, Hkv, T, D)`` -> ``(B, Hkv * groups, T, D)``: query head h reads key/value head ``h // groups``."""
    return states if groups == 1 else states.repeat_interleave(groups, dim=1)


def _groups(module, query: torch.Tensor, key: torch.Tensor) -> int:
    hq, hkv = query.shape[1], key.shape[1]
    declared = getattr(module, "num_key_value_groups", None)
    if hq % hkv or (declared is not None and int(declared) != hq // hkv):
        raise UnsupportedModelError(f"{type(module).__name__} passes {hq} query heads and {hkv} key/value heads "
                                    f"(num_key_value_groups {declared}): they do not group evenly")
    return hq // hkv


def _additive(mask: torch.Tensor | None, dtype: torch.dtype, tkv: int) -> torch.Tensor | None:
    if mask is None:
        return None
    mask = mask[..., :tkv]
    if mask.dtype == torch.bool:  # a user's 4-D mask, True = attend
        return torch.zeros((), dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)
    return mask


def capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                      sliding_window=None, **kwargs):
    """The attention of ``module`` (fused, or eager with a soft-cap), recorded while a :func:`recording` is active.

    Returns ``(output (B, Tq, Hq, D), weights (B, Hq, Tq, Tkv))``, the contract of transformers' attention functions.
    """
    for name, what in UNREADABLE_KWARGS.items():
        if kwargs.get(name) is not None:
            raise UnsupportedModelError(f"{type(module).__name__} adds {what} to its logits ({name}), which the "
                                        "q/k capture cannot read")
    groups = _groups(module, query, key)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    if scaling is None:
        scaling = getattr(module, "scaling", None) or query.shape[-1] ** -0.5
    mask = _additive(attention_mask, query.dtype, key.shape[-2])
    if _FUSED.get() and softcap is None and not kwargs.get("output_attentions"):
        # the output through torch's fused attention: the recorded q and k are the same, and it costs a
        # fraction of the eager arithmetic (which materialises (B, H, Tq, Tkv) twice) on long rows
        output = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=dropout if module.training else 0.0, scale=scaling,
            is_causal=False)  # (B, Hq, Tq, D); the mask (causal, sliding, padding) is explicit
        output, weights = output.transpose(1, 2).contiguous(), None
    else:
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        if mask is not None:
            scores = scores + mask
        weights = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
        output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    calls = _ACTIVE.get()
    if calls is not None:
        calls.append(AttentionCall(len(calls), type(module).__name__, query.detach(), key.detach(), float(scaling),
                                   None if mask is None else mask.detach(),
                                   None if softcap is None else float(softcap), sliding_window))
    return output, weights


def register() -> None:
    """Register :func:`capture_attention` and ``eager_mask`` under :data:`NAME` (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(NAME, capture_attention)
    AttentionMaskInterface.register(NAME, eager_mask)


@functools.lru_cache(maxsize=None)
def routes_through_interface(model_type: str) -> bool | None:
    """Whether transformers' modeling file of ``model_type`` calls the attention interface; None when unknown.

    The same test transformers applies before it switches a model's attention (``_can_set_attn_implementation``):
    a file that defines an ``*Attention*`` module must call ``ALL_ATTENTION_FUNCTIONS.get_interface(``.
    """
    import re

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    try:
        module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        code = inspect.getsource(module)
    except (ImportError, OSError, TypeError):
        return None
    if not re.search(r"^class \w*Attention\w*\(nn\.Module\):", code, re.MULTILINE):
        return None
    return INTERFACE_CALL in code


def check_routed(model_type, source: str = "the model") -> None:
    """Refuse, by name, an architecture whose attention does not call the interface."""
    reason = NOT_ROUTED.get(model_type)
    if reason is None and isinstance(model_type, str) and routes_through_interface(model_type) is False:
        reason = "its modeling code never calls transformers' AttentionInterface"
    if reason is not None:
        raise UnsupportedModelError(f"{source} is a {model_type!r} model, which the q/k capture cannot read: "
                                    f"{reason}")


@contextmanager
def recording(model):
    """Run ``model`` with :func:`capture_attention` inside the block; yields the list of its :class:`AttentionCall` s.

    The model's attention implementation is switched to :data:`NAME` (``set_attn_implementation``) and put
    back after the block.  A model whose attention never calls the function leaves the list empty
    (:func:`calls_of` refuses that).
    """
    check_routed(getattr(model.config, "model_type", None))
    register()
    calls: list[AttentionCall] = []
    token = _ACTIVE.set(calls)
    fused = _FUSED.set(model.config._attn_implementation not in ("eager", NAME))
    try:
        with switched(model, NAME):
            yield calls
    finally:
        _ACTIVE.reset(token)
        _FUSED.reset(fused)


@contextmanager
def switched(model, name: str):
    """The model's attention implementation set to ``name`` inside the block and put back after it."""
    before = model.config._attn_implementation
    try:
        if before != name:
            model.set_attn_implementation(name)
        yield model
    finally:
        if before != name and model.config._attn_implementation != before:
            model.set_attn_implementation(before)


def calls_of(calls: list[AttentionCall], n_layers: int, model_type) -> list[AttentionCall]:
    """The calls of a forward, one self-attention per layer; :class:`UnsupportedModelError` otherwise."""
    if not calls:
        raise UnsupportedModelError(f"{model_type!r} model: its attention never called the capture (it does not "
                                    "go through transformers' AttentionInterface)")
    if len(calls) != n_layers or any(c.query.shape[-2] != c.key.shape[-2] for c in calls):
        raise UnsupportedModelError(f"{model_type!r} model: {len(calls)} attention calls in one forward for "
                                    f"{n_layers} layers (cross-attention or shared layers are not read)")
    return calls
