"""Input checking and array conversion shared by the critscale reference functions.

Every public function of the library funnels its inputs through this module, so the input rules
of the project hold in one place:

- rows are the last axis; any number of leading batch axes is allowed;
- ``-inf`` entries are *masked* positions (excluded from every count and sum), never errors; a numpy
  masked array of scores has its masked entries read as ``-inf``, and a masked array given for any
  other argument is refused when any entry is masked (a mask has no meaning there);
- NaN or ``+inf`` scores, rows that are empty after masking, negative or non-finite ``beta``,
  ``K < 2``, thresholds that are unsorted or negative, and mismatched shapes raise ``ValueError``
  with a message that names the problem;
- nothing is silently clipped;
- lengths, counts, seeds and parameters (:func:`as_real`, :func:`as_number`, :func:`as_integer`,
  :func:`as_seed`) refuse booleans, strings and non-finite or out-of-range values with one line that
  names the argument; :func:`scalar_or_array` turns a 0-d result into a Python float;
- numpy (or lists) in gives numpy out; a ``torch.Tensor`` in gives a ``torch.Tensor`` out on the same
  device.  All computation happens in numpy float64, and outputs are float64 in both cases.

The module also holds the one memory-budget helper (:func:`blocks`) that the vectorised kernels use
to stay within a bounded number of float64 temporaries, whatever the row count and row length, and
the size of the cache-sized blocks (:data:`CACHE_ELEMENTS`) in which the scores are checked in one scan
and :func:`critscale.softmax_stats` sums its exponentials.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

__all__ = [
    "MAX_ELEMENTS",
    "CACHE_ELEMENTS",
    "as_real",
    "as_number",
    "as_integer",
    "as_seed",
    "scalar_or_array",
    "ScoreRows",
    "Converted",
    "as_score_rows",
    "as_scores",
    "check_sorted_block",
    "as_beta",
    "as_thresholds",
    "as_K",
    "as_per_row",
    "blocks",
    "row_blocks",
    "describe_rows",
]

# Largest number of float64 elements one temporary array may hold (2**22 = 32 MiB).
MAX_ELEMENTS = 2**22
# Float64 values of one working block of a single scan (2**16 = 512 KiB, well inside one core's L2 cache).
CACHE_ELEMENTS = 2**16


def _is_torch(x: Any) -> bool:
    """True when ``x`` is a torch tensor (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


@dataclass(frozen=True)
class ScoreRows:
    """Scores converted to float64 rows, plus what is needed to convert results back.

    Only the shape is checked: the entries are checked by :func:`as_scores`, or block by block by
    :func:`check_sorted_block` for rows that are sorted anyway.

    Attributes
    ----------
    values:
        float64 numpy array of shape ``(rows, n)``: the batch axes flattened into one row axis.
    batch_shape:
        the original leading shape ``(...)``.
    device:
        the torch device of the input, or ``None`` when the input was not a tensor.
    """

    values: np.ndarray
    batch_shape: tuple[int, ...]
    device: Any

    @property
    def n(self) -> int:
        return int(self.values.shape[-1])

    def restore(self, out: np.ndarray, trailing: tuple[int, ...] = ()) -> Any:
        """Reshape a ``(rows, *trailing)`` result to ``(*batch_shape, *trailing)`` and convert it back."""
        out = np.asarray(out, dtype=np.float64).reshape(self.batch_shape + tuple(trailing))
        if self.device is None:
            return out
        import torch

        return torch.from_numpy(np.ascontiguousarray(out)).to(self.device)


@dataclass(frozen=True)
class Converted(ScoreRows):
    """Validated score rows (:func:`as_scores`) with their maxima.

    Attributes
    ----------
    top:
        ``(rows,)`` the row maxima (finite: every row has a valid entry).
    """

    top: np.ndarray


def _unmask(x: np.ma.MaskedArray, name: str, masked_value: float | None) -> np.ndarray:
    """The data of a masked array with its masked entries set to ``masked_value``; refused if that is None."""
    mask = np.ma.getmaskarray(x)
    if mask.any() and masked_value is None:
        raise ValueError(f"{name} is a masked array with {int(mask.sum())} masked entries; a mask has no meaning "
                         "for this argument (give a plain array)")
    data = np.asarray(np.ma.getdata(x))
    if not mask.any():
        return data
    if not (np.issubdtype(data.dtype, np.number) or data.dtype == np.bool_) or np.iscomplexobj(data):
        return data  # refused with the dtype's own message below
    return np.where(mask, masked_value, data.astype(np.float64))


def _to_numpy(x: Any, name: str, allow_bool: bool = True,
              masked_value: float | None = None) -> tuple[np.ndarray, Any]:
    """Convert an array-like (numpy, list, torch) to a float64 numpy array; report the torch device.

    A numpy masked array has its masked entries replaced by ``masked_value``; with ``None`` any
    masked entry is refused (never dropped silently, as ``np.asarray`` would).
    """
    device = None
    if isinstance(x, np.ma.MaskedArray):
        x = _unmask(x, name, masked_value)
    if _is_torch(x):
        device = x.device
        if x.is_complex():
            raise ValueError(f"{name} must be real, got a complex tensor")
        if not allow_bool and x.dtype == sys.modules["torch"].bool:
            raise ValueError(f"{name} must be a real number or array, got booleans")
        x = x.detach().to("cpu").double().numpy()
    try:
        arr = np.asarray(x)
    except ValueError:  # numpy refuses ragged nested lists
        raise ValueError(f"{name} must be a rectangular array: its rows have different lengths (ragged input)") from None
    if arr.dtype == object:
        raise ValueError(f"{name} must be a numeric array, got dtype=object (ragged input?)")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real, got dtype={arr.dtype}")
    if arr.dtype == np.bool_ and not allow_bool:
        raise ValueError(f"{name} must be a real number or array, got booleans")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be numeric, got dtype={arr.dtype}")
    return np.asarray(arr, dtype=np.float64), device


def _is_text_or_bool(value: Any) -> bool:
    return isinstance(value, (str, bytes, bool, np.bool_))


def as_real(value: Any, name: str, *, minimum: float = -np.inf, strict: bool = False,
            allow_inf: bool = False) -> np.ndarray:
    """Validate a real scalar or array of values ``>= minimum`` (``> minimum`` when ``strict``).

    Booleans, strings, complex and object arrays are refused, and so are NaN and (unless
    ``allow_inf``) infinite values.  Returns a float64 array of the input's shape (0-d for a scalar).
    """
    if _is_text_or_bool(value):
        raise ValueError(f"{name} must be a real number or array, got {type(value).__name__} {value!r}")
    arr, _ = _to_numpy(value, name, allow_bool=False)
    relation = ">" if strict else ">="
    requirement = f"{'' if allow_inf else 'finite and '}{relation} {minimum:g}"
    bad = np.isnan(arr) | (arr <= minimum if strict else arr < minimum)
    if not allow_inf:
        bad |= np.isinf(arr)
    if bad.any():
        shown = arr if arr.ndim == 0 else arr[bad][:5]
        raise ValueError(f"{name} must be {requirement}, got {shown}")
    return arr


def as_number(value: Any, name: str, *, minimum: float = -np.inf, strict: bool = False,
              allow_inf: bool = False) -> float:
    """Validate one real number (:func:`as_real` restricted to a scalar) and return it as a float."""
    if not _is_text_or_bool(value) and np.ndim(value) != 0:
        raise ValueError(f"{name} must be a single number, got an array of shape {np.shape(value)}")
    return float(as_real(value, name, minimum=minimum, strict=strict, allow_inf=allow_inf))


def as_integer(value: Any, name: str, minimum: int = 0) -> int:
    """Validate one integer ``>= minimum`` (an integral float such as ``4.0`` is accepted) and return it."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    integral = isinstance(value, (int, np.integer)) and not _is_text_or_bool(value)
    if not integral and isinstance(value, (float, np.floating)):
        integral = bool(np.isfinite(value)) and float(value).is_integer()
    if not integral:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_seed(seed: Any, name: str = "seed") -> tuple[int, ...]:
    """Validate a seed: a non-negative integer or a non-empty sequence of them; returns a tuple."""
    if _is_text_or_bool(seed):
        raise ValueError(f"{name} entries must be non-negative integers, got {seed!r}")
    items = (seed,) if np.ndim(seed) == 0 else tuple(np.asarray(seed, dtype=object).ravel())
    if not items:
        raise ValueError(f"{name} must not be empty")
    try:
        return tuple(as_integer(item, name, 0) for item in items)
    except ValueError:
        raise ValueError(f"{name} entries must be non-negative integers, got {seed!r}") from None


def scalar_or_array(arr: np.ndarray) -> Any:
    """A Python float for a 0-d result, the array itself otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr


def describe_rows(bad: np.ndarray, batch_shape: tuple[int, ...], limit: int = 10) -> str:
    """Name the offending rows of a flattened ``(rows,)`` boolean mask by their batch index."""
    flat = np.flatnonzero(bad)
    if len(batch_shape) == 1:
        names = [str(int(i)) for i in flat[:limit]]
    else:
        names = [str(tuple(int(j) for j in np.unravel_index(i, batch_shape))) for i in flat[:limit]]
    more = f" and {len(flat) - limit} more" if len(flat) > limit else ""
    return "[" + ", ".join(names) + "]" + more


def _check_entries(arr: np.ndarray, flat: np.ndarray, name: str, batch_shape: tuple[int, ...]) -> None:
    """Refuse NaN, ``+inf`` and rows with no finite entry, in that order, naming the first offender.

    One check at a time over the whole array: the diagnosis of an input that the single scan of
    :func:`_row_extremes` found bad (and the reference that scan is tested against).
    """
    if np.isnan(flat).any():
        where = np.argwhere(np.isnan(arr))[0]
        raise ValueError(f"{name} contain NaN (first at index {tuple(int(i) for i in where)})")
    if np.isposinf(flat).any():
        where = np.argwhere(np.isposinf(arr))[0]
        raise ValueError(f"{name} contain +inf (first at index {tuple(int(i) for i in where)}); "
                         "only -inf is allowed, and it marks a masked entry")
    empty = ~np.isfinite(flat).any(axis=-1)  # (rows,)
    if empty.any():
        raise ValueError(f"{name}: rows empty after masking (every entry is -inf): rows "
                         f"{describe_rows(empty, batch_shape)}")


def _block_extremes(block: np.ndarray, scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row maxima and minima over the finite entries of an ``(r, c)`` block (``scratch`` of the same shape).

    The maximum is NaN for a row with a NaN and ``+inf`` for a row with ``+inf``.  Rows with a
    ``-inf`` entry get their minimum from ``block + 0 * block``, which is the block with ``-inf`` read
    as NaN, through the NaN-ignoring ``fmin``; a row with no finite entry gets ``+inf``.
    """
    top = block.max(axis=-1)  # (r,)
    low = block.min(axis=-1)  # (r,)
    masked = low == -np.inf  # (r,)
    if masked.any():
        sub = block[masked] if not masked.all() else block  # (r', c)
        out = scratch[: sub.shape[0]]
        with np.errstate(invalid="ignore"):
            np.multiply(sub, 0.0, out=out)
            np.add(sub, out, out=out)  # -inf -> NaN, finite entries unchanged
        finite_low = np.fmin.reduce(out, axis=-1)  # (r',) NaN where no entry is finite
        low[masked] = np.where(np.isnan(finite_low), np.inf, finite_low)
    return top, low


def _row_extremes(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row maxima (NaN or ``+inf`` flag a bad row) and minima over the finite entries, in one scan.

    The array is read once, in blocks of :data:`CACHE_ELEMENTS` values, and every reduction of a
    block runs while the block is in cache.
    """
    rows, n = flat.shape
    top = np.full(rows, -np.inf)  # (rows,)
    low = np.full(rows, np.inf)  # (rows,)
    scratch = np.empty(min(CACHE_ELEMENTS, rows * n))
    for rs, cs in blocks(rows, n, max_elements=min(CACHE_ELEMENTS, MAX_ELEMENTS)):
        block = flat[rs, cs]
        block_top, block_low = _block_extremes(block, scratch[: block.size].reshape(block.shape))
        top[rs] = np.maximum(top[rs], block_top)  # NaN propagates
        low[rs] = np.minimum(low[rs], block_low)
    return top, low


def as_score_rows(scores: Any, name: str = "scores") -> ScoreRows:
    """Convert a score array ``(..., n)`` to float64 rows and check its shape, not its entries.

    A numpy masked array has its masked entries read as ``-inf``.  Refuses a scalar and rows of
    length zero; the entries are left to :func:`as_scores` or :func:`check_sorted_block`.
    """
    arr, device = _to_numpy(scores, name, masked_value=-np.inf)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (rows are the last axis), got a scalar")
    n = arr.shape[-1]
    if n == 0:
        raise ValueError(f"{name} has rows of length 0: every row needs at least one entry")
    return ScoreRows(values=arr.reshape(-1, n), batch_shape=tuple(arr.shape[:-1]), device=device)


def _refuse_bad_rows(rows: ScoreRows, top: np.ndarray, low: np.ndarray, name: str) -> None:
    """Raise the one-line error of :func:`as_scores` when ``top`` or ``top - low`` is not finite for every row."""
    if not np.isfinite(top).all():
        _check_entries(rows.values.reshape(rows.batch_shape + (rows.n,)), rows.values, name, rows.batch_shape)
        raise AssertionError(f"{name}: a row maximum is not finite, yet no entry is NaN or +inf")
    with np.errstate(over="ignore"):
        span = top - low  # (rows,)
    if not np.isfinite(span).all():
        raise ValueError(f"{name}: the range max - min of rows {describe_rows(~np.isfinite(span), rows.batch_shape)} "
                         "overflows float64")


def as_scores(scores: Any, name: str = "scores") -> Converted:
    """Validate a score array ``(..., n)`` and flatten its batch axes.

    ``-inf`` entries are masked, and so are the masked entries of a numpy masked array; NaN and
    ``+inf`` raise ``ValueError``, and so does a row whose every entry is masked (or a row of length zero).
    The score range of a row must be representable:
    ``max - min`` has to be finite in float64.
    The array is scanned once (:func:`_row_extremes`); only a bad input is scanned again, to name the problem.
    """
    rows = as_score_rows(scores, name)
    top, low = _row_extremes(rows.values)  # (rows,), (rows,)
    _refuse_bad_rows(rows, top, low, name)
    return Converted(values=rows.values, batch_shape=rows.batch_shape, device=rows.device, top=top)


def _first_valid(ascending: np.ndarray) -> np.ndarray:
    """The first entry above ``-inf`` of each row sorted ascending whose last entry is above ``-inf``.

    A bisection over the rows that start with ``-inf``, all at once: ``log2(n)`` gathers, no scan.
    """
    low = ascending[:, 0].copy()  # (r,)
    masked = np.flatnonzero(low == -np.inf)  # (a,)
    lo = np.zeros(masked.size, dtype=np.intp)  # ascending[row, lo] == -inf
    hi = np.full(masked.size, ascending.shape[1] - 1, dtype=np.intp)  # ascending[row, hi] > -inf
    while masked.size and (hi - lo > 1).any():
        mid = (lo + hi) // 2
        below = ascending[masked, mid] == -np.inf
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    low[masked] = ascending[masked, hi]
    return low


def check_sorted_block(rows: ScoreRows, ascending: np.ndarray, name: str = "scores") -> np.ndarray:
    """Validate a block of rows of ``rows`` from their sorted copy ``ascending``; return their maxima.

    ``np.sort`` puts NaN last and ``+inf`` just before, and ``-inf`` first, so the last entry of a row
    is its maximum or flags a bad entry, and the range is that maximum minus the first entry above ``-inf``:
    the checks of :func:`as_scores` at no extra scan.  Any problem is reported by checking the whole of
    ``rows`` as :func:`as_scores` does, so the error is the same, naming the first offender of the array.
    """
    top = ascending[:, -1].copy()  # (r,)
    if not np.isfinite(top).all():
        as_scores(rows.values.reshape(rows.batch_shape + (rows.n,)), name)
        raise AssertionError(f"{name}: a sorted row does not end in a finite maximum, yet the rows are valid")
    with np.errstate(over="ignore"):
        span = top - _first_valid(ascending)  # (r,)
    if not np.isfinite(span).all():
        as_scores(rows.values.reshape(rows.batch_shape + (rows.n,)), name)
        raise AssertionError(f"{name}: a sorted row's range overflows, yet the rows are valid")
    return top


def as_beta(beta: Any, name: str = "beta") -> tuple[np.ndarray, bool]:
    """Validate inverse temperatures: a scalar or a 1-D array of finite values ``>= 0``.

    Returns ``(beta_1d, was_scalar)``; a scalar ``beta`` gives results without the trailing beta axis.
    """
    arr, _ = _to_numpy(beta, name)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)][:5]}")
    if (arr < 0).any():
        raise ValueError(f"{name} must be >= 0, got {arr[arr < 0][:5]}")
    return np.atleast_1d(arr), arr.ndim == 0


def as_thresholds(t: Any, name: str = "t") -> tuple[np.ndarray, bool]:
    """Validate gap thresholds: a scalar or a 1-D array, sorted non-decreasing, ``>= 0``, no NaN.

    ``+inf`` is allowed (``N(inf)`` is the number of valid entries).  Returns ``(t_1d, was_scalar)``.
    """
    arr, _ = _to_numpy(t, name)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"thresholds {name} contain NaN")
    if (arr < 0).any():
        raise ValueError(f"thresholds {name} must be >= 0 (gaps are non-negative), got {arr[arr < 0][:5]}")
    flat = np.atleast_1d(arr)
    if (np.diff(flat) < 0).any():
        raise ValueError(f"thresholds {name} must be sorted in non-decreasing order")
    return flat, arr.ndim == 0


def as_K(K: Any) -> int:
    """Validate the accumulation index ``K``: an integer ``>= 2``."""
    if isinstance(K, (bool, np.bool_)) or not isinstance(K, (int, np.integer)):
        if isinstance(K, (float, np.floating)) and float(K).is_integer():
            K = int(K)
        else:
            raise ValueError(f"K must be an integer >= 2, got {K!r}")
    if K < 2:
        raise ValueError(f"K must be >= 2, got K={K}")
    return int(K)


def as_per_row(value: Any, batch_shape: tuple[int, ...], name: str,
               check: Callable[[np.ndarray], np.ndarray], requirement: str) -> np.ndarray:
    """Broadcast a scalar or per-row target to ``batch_shape`` and flatten it to ``(rows,)``.

    ``check`` returns a boolean mask of acceptable values; ``requirement`` describes it in the error.
    """
    arr, _ = _to_numpy(value, name)
    try:
        arr = np.broadcast_to(arr, batch_shape)
    except ValueError:
        raise ValueError(f"{name} of shape {arr.shape} does not match the batch shape {batch_shape} "
                         "of the scores (one value per row, or a scalar)") from None
    ok = check(arr)
    if not np.all(ok):
        raise ValueError(f"{name} must be {requirement}, got {arr[~ok][:5]}")
    return arr.reshape(-1)


def blocks(rows: int, cols: int, per_cell: int = 1,
           max_elements: int | None = None) -> Iterator[tuple[slice, slice]]:
    """Cover a ``(rows, cols)`` index set with rectangular blocks of bounded size.

    Each block has at most ``max_elements // per_cell`` cells (but at least one column), so a
    temporary of shape ``(per_cell, block_rows, block_cols)`` stays within ``max_elements`` floats.
    Whole rows are preferred; long rows are split along the columns.
    """
    max_elements = MAX_ELEMENTS if max_elements is None else max_elements
    cells = max(1, max_elements // max(1, per_cell))
    if cols == 0 or rows == 0:
        if rows > 0:
            yield slice(0, rows), slice(0, cols)
        return
    if cols <= cells:
        step = max(1, cells // cols)
        for r0 in range(0, rows, step):
            yield slice(r0, min(rows, r0 + step)), slice(0, cols)
    else:
        for r0 in range(rows):
            for c0 in range(0, cols, cells):
                yield slice(r0, r0 + 1), slice(c0, min(cols, c0 + cells))


def row_blocks(rows: int, cols: int, per_cell: int = 1,
               max_elements: int | None = None) -> Iterator[slice]:
    """Split ``rows`` into slices of whole rows holding at most ``max_elements // per_cell`` cells.

    Used where a row cannot be split (a sort).  A row longer than the budget forms a block of its own,
    so the memory held is bounded by a constant times ``max(max_elements, cols)``.
    """
    max_elements = MAX_ELEMENTS if max_elements is None else max_elements
    step = max(1, max(1, max_elements // max(1, per_cell)) // max(1, cols))
    for r0 in range(0, rows, step):
        yield slice(r0, min(rows, r0 + step))
