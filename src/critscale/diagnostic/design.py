"""The design of the diagnostic: which attention rows are read, at which context lengths.

Every head is read at the same context lengths ``n`` (the *levels*, a geometric grid from
:data:`N_START` to the window length ``T`` with ratio :data:`RATIO`, ``T`` included), and at each
level only the rows of ``m`` query tokens (:data:`QUERIES` by default) are kept.  A *forward* is one
sequence the model has processed; the rows of level ``n`` are those of the last ``m`` positions of
a forward of length ``n``: query ``j`` (``0 <= j < m``) sits at position ``n - m + j`` and, in a
causal model, sees keys ``0 .. n - m + j`` (``n - m + 1 + j`` entries; ``n`` for the last query).
A non-causal file's query sees the ``n`` keys of the forward.

Two designs differ only in what a forward of length ``n`` is:

* ``"suffix"`` (models): the last ``n`` tokens of the window.  The same ``m`` query tokens, the end
  of the window, are seen with contexts of increasing length, so the row length is not confounded
  with the query token or its position.  It costs one forward per level (about ``3.3 T`` tokens per
  window for T = 1024 and the ratio :data:`RATIO`).
* ``"prefix"`` (``--qk`` files, which hold one forward per window): the first ``n`` tokens of the
  window, i.e. the rows of the queries at positions ``n - m .. n - 1`` of the one forward.  Here the
  row length and the query's position grow together: a trend in ``n`` may be a trend in position.

Both read the same number of rows per level, so their bins, bootstrap units (windows) and row
counts are identical, and so are those of the null heads built for the same design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DESIGNS = ("suffix", "prefix")
N_START = 32  # shortest context read; the fits of kappa_16 and of the law start higher (see .laws)
RATIO = math.sqrt(2.0)
QUERIES = 4
MIN_LENGTH = 128  # three levels with n >= 4 * 16 (64, 91, 128), the least a fit of gamma needs


class DesignError(ValueError):
    """The requested design cannot be built (window too short, bad number of queries)."""


def length_grid(window_length: int, start: int = N_START, ratio: float = RATIO) -> tuple[int, ...]:
    """Context lengths ``round(start * ratio**j)`` up to ``window_length``, which is always the last."""
    if window_length < start:
        raise DesignError(f"window length {window_length} is below the shortest level {start}")
    count = int(math.floor(math.log(window_length / start) / math.log(ratio) + 1e-9)) + 1
    grid = {int(round(start * ratio**j)) for j in range(count)}
    grid = {n for n in grid if n < window_length} | {int(window_length)}
    return tuple(sorted(grid))


@dataclass(frozen=True)
class Design:
    """Which rows are read: ``levels`` (context lengths), ``queries`` per level, the design kind."""

    kind: str  # "suffix" or "prefix"
    window_length: int  # T, tokens per window
    levels: tuple[int, ...]  # context lengths n
    queries: int  # m, query rows kept per forward
    causal: bool = True

    def query_positions(self, n: int) -> np.ndarray:
        """Positions of the kept queries inside a forward of length ``n``: ``n - m .. n - 1``."""
        return np.arange(n - self.queries, n)

    def row_lengths(self, n: int) -> np.ndarray:
        """Entries of each kept row at level ``n``: ``n - m + 1 .. n`` (causal) or ``n`` each."""
        if self.causal:
            return self.query_positions(n) + 1
        return np.full(self.queries, n)

    def describe(self) -> str:
        how = ("the last n tokens of each window (suffix design: fixed query tokens, growing context)"
               if self.kind == "suffix" else
               "the first n tokens of each window (prefix design: row length grows with query position)")
        seen = "" if self.causal else "; each kept query sees all n keys of its forward (not causal)"
        return (f"{self.queries} query rows at each of {len(self.levels)} context lengths n = "
                f"{', '.join(map(str, self.levels))}; a forward of length n is {how}{seen}")


def make_design(kind: str, window_length: int, *, queries: int = QUERIES, causal: bool = True) -> Design:
    """Validate and build a :class:`Design` (:class:`DesignError` on bad values)."""
    if kind not in DESIGNS:
        raise DesignError(f"unknown design {kind!r}; choose one of {DESIGNS}")
    if isinstance(window_length, bool) or int(window_length) != window_length or window_length < MIN_LENGTH:
        raise DesignError(f"windows of {window_length} tokens are too short: the diagnostic needs at least "
                          f"{MIN_LENGTH} (three context lengths n >= 64 for the fit of kappa_16)")
    if isinstance(queries, bool) or int(queries) != queries or not 1 <= queries <= N_START // 2:
        raise DesignError(f"queries per level must be an integer from 1 to {N_START // 2}, got {queries!r}")
    return Design(kind, int(window_length), length_grid(int(window_length)), int(queries), bool(causal))
