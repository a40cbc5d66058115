"""Seeded, batched, memory-bounded Monte-Carlo over rows of a score family (theory.md §5).

:func:`run` draws ``rows`` rows of length ``n`` from a family, applies a statistic to them chunk by
chunk and returns per-statistic means with standard errors.

Determinism.  Rows come in fixed *blocks* of ``block_rows(n)`` rows; block ``b`` is drawn with
``numpy.random.default_rng([*seed, b])``.  A chunk is a whole number of blocks, sized so that the
score array of a chunk stays within ``max_bytes``.  The rows therefore depend only on
``(family, seed, n)`` and the row index, never on ``max_bytes``; and, since the built-in samplers
draw row after row from their generator, the first ``r`` rows of a run with ``rows > r`` are the
rows of the run with ``rows = r``.

Memory.  At any time the runner holds one chunk of scores (``<= max_bytes``, or a single block when
one block is larger) plus the statistic's temporaries and the per-row outputs (which are kept,
since they are small: one value per row and statistic column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from ._validate import as_integer, as_seed
from .families import STANDARD, Family, get

__all__ = ["Estimate", "MonteCarloResult", "run", "run_standard", "block_rows"]

Seed = Union[int, Sequence[int]]

_BLOCK_SCORES = 2**16  # target number of scores per block


def block_rows(n: int) -> int:
    """Rows per seeded block for rows of length ``n``: about 65536 scores per block, at least 1 row."""
    return max(1, _BLOCK_SCORES // int(n))


@dataclass(frozen=True)
class Estimate:
    """Monte-Carlo estimate of one statistic.

    Attributes
    ----------
    values:
        per-row values, ``(rows, ...)``.
    mean:
        ``values.mean(axis=0)``.
    sem:
        standard error ``values.std(axis=0, ddof=1) / sqrt(rows)`` (``nan`` for a single row; ``nan``
        where a value is infinite, e.g. :math:`\\kappa` of a row with a tied maximum).
    """

    values: np.ndarray
    mean: np.ndarray
    sem: np.ndarray

    @property
    def median(self) -> np.ndarray:
        """Per-column median over rows (robust summary for heavy-tailed statistics, theory.md §7)."""
        return np.median(self.values, axis=0)


@dataclass(frozen=True)
class MonteCarloResult:
    """Result of :func:`run`: one :class:`Estimate` per statistic, plus the run's parameters.

    Estimates are reached as ``result["name"]`` or ``result.name``.
    """

    family: str
    n: int
    rows: int
    seed: tuple[int, ...]
    estimates: Mapping[str, Estimate]

    def __getitem__(self, key: str) -> Estimate:
        return self.estimates[key]

    def __getattr__(self, key: str) -> Estimate:
        estimates = object.__getattribute__(self, "estimates")
        if key in estimates:
            return estimates[key]
        raise AttributeError(key)

    def keys(self):
        return self.estimates.keys()


def _estimate(values: np.ndarray) -> Estimate:
    rows = values.shape[0]
    mean = values.mean(axis=0)
    if rows > 1:
        with np.errstate(invalid="ignore"):
            sem = values.std(axis=0, ddof=1) / np.sqrt(rows)
    else:
        sem = np.full_like(mean, np.nan)
    return Estimate(values=values, mean=mean, sem=sem)


def run(family: Union[str, Family], n: int, rows: int,
        statistic: Callable[[np.ndarray], Mapping[str, Any]],
        seed: Seed, max_bytes: int = 2**28) -> MonteCarloResult:
    """Apply ``statistic`` to ``rows`` seeded rows of ``family`` at length ``n``; means with standard errors.

    Parameters
    ----------
    family:
        a :class:`~critscale.families.Family` or a name accepted by :func:`critscale.families.get`.
    n, rows:
        row length (``>= 1``) and number of rows (``>= 1``).
    statistic:
        ``statistic(scores)`` with ``scores`` of shape ``(chunk, n)`` returns a dict of arrays whose
        leading dimension is ``chunk`` (e.g. ``{"kappa": accumulation_scale(scores)}`` or a
        ``(chunk, len(beta))`` array).
    seed:
        an integer or a sequence of integers; block ``b`` uses ``default_rng([*seed, b])``.
    max_bytes:
        bound on the bytes of one chunk of scores (float64).  Results do not depend on it.

    Returns
    -------
    :class:`MonteCarloResult` with ``result[name].mean``, ``.sem``, ``.values`` for each statistic.
    """
    fam = get(family)
    n = as_integer(n, "n", 1)
    rows = as_integer(rows, "rows", 1)
    max_bytes = as_integer(max_bytes, "max_bytes", 8)
    seeds = as_seed(seed)
    per_block = block_rows(n)
    n_blocks = -(-rows // per_block)
    blocks_per_chunk = max(1, max_bytes // (per_block * n * 8))

    collected: dict[str, list[np.ndarray]] = {}
    for first in range(0, n_blocks, blocks_per_chunk):
        block_ids = range(first, min(n_blocks, first + blocks_per_chunk))
        parts = []
        for b in block_ids:
            size = min(per_block, rows - b * per_block)
            parts.append(fam.sample(n, size, np.random.default_rng([*seeds, b])))  # (size, n)
        scores = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]  # (chunk, n)
        result = statistic(scores)
        if not isinstance(result, Mapping) or not result:
            raise ValueError("statistic must return a non-empty dict of arrays")
        if collected and set(result) != set(collected):
            raise ValueError(f"statistic returned keys {sorted(result)} after {sorted(collected)}")
        for key, value in result.items():
            arr = np.asarray(value.cpu().numpy() if hasattr(value, "cpu") else value, dtype=np.float64)
            if arr.ndim == 0 or arr.shape[0] != scores.shape[0]:
                raise ValueError(f"statistic {key!r} has shape {arr.shape}; its leading dimension must be "
                                 f"the chunk's row count {scores.shape[0]}")
            collected.setdefault(key, []).append(arr)
    estimates = {key: _estimate(np.concatenate(parts, axis=0)) for key, parts in collected.items()}
    return MonteCarloResult(family=fam.name, n=n, rows=rows, seed=seeds, estimates=estimates)


def run_standard(name: str, n: int, rows: int, statistic_for: Callable[[Family], Callable], seed: Sequence[int],
                 max_bytes: int = 2**25) -> MonteCarloResult:
    """:func:`run` for a family of :data:`critscale.families.STANDARD`, seeded as the chapters seed it.

    ``statistic_for(family)`` makes the statistic; the rows are drawn with seed ``[*seed, f, n]``, ``f`` the
    family's position in ``STANDARD`` (docs/theory.md §B), so a family keeps its rows whatever else a page runs.
    """
    if name not in STANDARD:
        raise ValueError(f"family {name!r} is not one of critscale.families.STANDARD: {', '.join(STANDARD)}")
    family = get(name)
    return run(family, n, rows, statistic_for(family), seed=[*seed, STANDARD.index(name), n], max_bytes=max_bytes)
