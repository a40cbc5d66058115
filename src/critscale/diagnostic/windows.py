"""Stage 2: the queries and keys that each level of the design reads, from a model or from arrays.

A source yields :class:`QKBlock` s: for one context length ``n`` and a batch of windows, the ``m``
kept query rows and the ``n`` keys they see, for every layer and head (:mod:`.design`).  The model
source runs the model (through :func:`critscale.models.capture.capture_qk`, which returns keys
already expanded to the query heads and position encodings applied), one forward for every row set
the model computes (an encoder's level ``n`` is its own forward of ``n`` tokens); the array source slices
arrays held in memory (a ``--qk`` file, or a null head of :mod:`.nulls`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch

from .design import Design

BLOCK_ELEMENTS = 1 << 24  # keys per block of an array source (layers x heads x windows x n x d_head)


@dataclass
class QKBlock:
    """One level of the design for a batch of windows."""

    windows: np.ndarray  # (B,) window indices
    n: int  # context length: keys per forward
    q: torch.Tensor  # (L, H, B, m, d_h) the kept queries, positions n - m .. n - 1 of the forward
    k: torch.Tensor  # (L, H, B, n, d_h) the keys of the forward
    scales: np.ndarray  # (L,) logit scale per layer
    causal: bool


class ArraySource:
    """Queries and keys in memory, ``(L, H, W, T, d_h)`` each (numpy or torch).

    ``first_key`` (``(L, H, d_h)``), when given, replaces the key at position 0 of every forward: a
    planted key that every query aligns with (the sink null of :mod:`.nulls`), also under the suffix
    design, where position 0 of a forward is a different token at each level.
    """

    def __init__(self, q, k, scales, *, causal: bool = True, first_key=None):
        self.q = torch.as_tensor(q)  # (L, H, W, T, d_h)
        self.k = torch.as_tensor(k)  # (L, H, W, T, d_h)
        if self.q.shape != self.k.shape or self.q.ndim != 5:
            raise ValueError(f"q {tuple(self.q.shape)} and k {tuple(self.k.shape)} must share a 5-D shape")
        self.scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), (self.q.shape[0],)).copy()  # (L,)
        self.causal = bool(causal)
        self.first_key = None if first_key is None else torch.as_tensor(first_key)  # (L, H, d_h)
        self.n_layers, self.n_heads, self.n_windows, self.window_length, self.head_dim = self.q.shape

    def blocks(self, design: Design, *, block_elements: int = BLOCK_ELEMENTS) -> Iterator[QKBlock]:
        L, H, W, T, d = self.q.shape
        m = design.queries
        for n in design.levels:
            q_slice = slice(n - m, n) if design.kind == "prefix" else slice(T - m, T)
            k_slice = slice(0, n) if design.kind == "prefix" else slice(T - n, T)
            step = max(1, block_elements // (L * H * n * d))
            for w0 in range(0, W, step):
                w1 = min(W, w0 + step)
                k = self.k[:, :, w0:w1, k_slice]  # (L, H, B, n, d_h)
                if self.first_key is not None:
                    k = k.clone()
                    k[:, :, :, 0] = self.first_key[:, :, None, :].to(k.dtype)
                yield QKBlock(np.arange(w0, w1), n, self.q[:, :, w0:w1, q_slice], k, self.scales, self.causal)


def utf8_bytes(tokenizer, ids) -> int:
    """UTF-8 bytes of the text that token ids ``ids`` stand for (one per token for a byte vocabulary)."""
    from critscale.models import ByteTokenizer

    if isinstance(tokenizer, ByteTokenizer):
        return len(ids)
    return len(tokenizer.decode([int(i) for i in ids]).encode("utf-8"))


@dataclass
class TextLoss:
    """Next-token cross-entropy of the windows read, summed over their predicted tokens."""

    nats: float = 0.0
    tokens: int = 0  # predicted tokens: T - 1 per window
    bytes: int = 0  # UTF-8 bytes of those tokens (decoded by the model's tokenizer)

    def as_dict(self) -> dict:
        per_token = self.nats / self.tokens if self.tokens else float("nan")
        per_byte = self.nats / self.bytes / np.log(2) if self.bytes else float("nan")
        return {"nats_per_token": per_token, "bits_per_byte": per_byte, "tokens": self.tokens, "bytes": self.bytes}


class ModelSource:
    """A loaded model (:class:`critscale.models.LoadedModel`) run on windows of token ids ``(W, T)``.

    Every row read is a row the model computes:

    * a decoder (causal rows), suffix design: one forward per level on the window's last ``n`` tokens;
      prefix design: one forward per window, sliced at every level (row ``i`` of a causal forward is
      the same whatever follows it);
    * an encoder (``causal=False``: every key visible), either design: one forward per level of ``n``
      tokens (the last ``n`` of the window, or the first ``n``), its kept queries seeing all ``n`` keys.
      The first ``n`` keys of one ``T``-token forward would be rows the encoder never computes: its
      keys there have seen all ``T`` tokens.

    ``causal`` is what the model's masks say (:func:`critscale.models.capture.rows_are_causal`).
    ``on_forward`` is called after each forward.  The forward of a whole window (the longest level)
    of a decoder with a language-model head also scores the model's next-token predictions on it:
    :attr:`loss` is the held-out loss of the text the diagnostic read (empty for an encoder).
    """

    def __init__(self, loaded, windows: np.ndarray, *, causal: bool = True,
                 on_forward: Callable[[], None] | None = None):
        self.loaded = loaded
        self.windows = np.asarray(windows, dtype=np.int64)  # (W, T)
        self.n_layers, self.n_heads = loaded.n_layers, loaded.n_heads
        self.n_windows, self.window_length = self.windows.shape
        self.head_dim = loaded.head_dim
        self.causal = bool(causal)
        self.on_forward = on_forward
        self.loss = TextLoss()

    def forwards_per_window(self, design: Design) -> int:
        return 1 if design.kind == "prefix" and self.causal else len(design.levels)

    def _scores_loss(self) -> bool:
        return self.causal and self.loaded.model.get_output_embeddings() is not None

    def _capture(self, ids: np.ndarray):
        from critscale.models.capture import capture_qk, next_token_nats

        whole = len(ids) == self.window_length and self._scores_loss()
        captured = capture_qk(self.loaded.model, ids, hidden=whole)
        if captured.causal != self.causal:
            raise ValueError(f"the model's rows are {'causal' if captured.causal else 'bidirectional'} at "
                             f"{len(ids)} tokens, unlike the design's")
        if whole:
            nats, count = next_token_nats(self.loaded.model, captured.hidden, ids)
            self.loss.nats += nats
            self.loss.tokens += count
            self.loss.bytes += utf8_bytes(self.loaded.tokenizer, ids[1:])
        if self.on_forward is not None:
            self.on_forward()
        return captured

    def _forward_ids(self, ids: np.ndarray, n: int, design: Design) -> np.ndarray:
        """The tokens of the forward of level ``n``: the window's last ``n`` (suffix) or first ``n`` (prefix)."""
        return ids[:n] if design.kind == "prefix" else ids[self.window_length - n:]

    def blocks(self, design: Design) -> Iterator[QKBlock]:
        m = design.queries
        self.loss = TextLoss()
        for w, ids in enumerate(self.windows):
            full = self._capture(ids) if design.kind == "prefix" and self.causal else None
            for n in design.levels:
                cap = full if full is not None else self._capture(self._forward_ids(ids, n, design))
                q = cap.q[:, :, None, n - m:n]  # (L, H, 1, m, d_h)
                k = cap.k[:, :, None, :n]  # (L, H, 1, n, d_h)
                yield QKBlock(np.array([w]), n, q, k, np.asarray(cap.scales, dtype=np.float64), self.causal)
