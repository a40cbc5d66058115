"""Memory the diagnostic will need, estimated from its sizes before anything is allocated.

Every size-like input (the windows, layers and heads of the input, the null windows, the length of
the windows, a ``--qk`` file's declared shapes) is turned into bytes here and set against what this
machine can hold (:func:`memory_limit`), so that a small input asking for a huge array is refused
with one line that names it, instead of failing (or swapping) in the allocation.

The estimates count the large arrays of each stage, not every Python object:

* every row read keeps :data:`ROW_BYTES` of statistics (labels, kappas, the temperature grids, the
  smallest gaps), held up to three times while chunks are joined and split into heads;
* a block of logits is held with about :data:`BLOCK_COPIES` float64 temporaries of its size;
* a row null holds its rows of one level, ``(windows, queries, n)`` float64, with the same temporaries,
  in up to as many threads as there are row nulls and CPUs;
* a q/k null draws ``(windows, T, d_head)`` float64 normals for its queries and keys, kept as float32;
* a model's forward of T tokens captures every layer's queries and keys as float32, twice while they
  are stacked (:func:`critscale.models.capture.capture_qk`; the model's own activations are not counted).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

ROW_BYTES = 3 * 8 * 62  # statistics of one row (62 values), held up to three times
KEPT_ROW_BYTES = 512  # one line of the rows table (keep_rows), while it is built and joined
BLOCK_COPIES = 9  # a block of float64 logits and the temporaries of its row statistics
QK_NULL_BYTES = 8 + 2 * 4  # per element of (windows, T, d_head): float64 normals, float32 q and k
FALLBACK_LIMIT = 16 * 2**30  # when the machine does not report its memory
CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


class MemoryBudgetError(ValueError):
    """A size-like input asks for more memory than this machine can hold; the message names it."""


def memory_limit() -> int:
    """Bytes this process can hold: the machine's physical memory, or a smaller cgroup limit."""
    try:
        limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        limit = FALLBACK_LIMIT
    for path in CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limit = min(limit, int(text))
    return int(limit)


def human(size: int | float) -> str:
    """A byte count in binary units: ``7.45 TiB``."""
    size = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def block_bytes(layers: int, heads: int, windows: int, queries: int, n: int, head_dim: int,
                block_elements: int) -> int:
    """Largest working set of one block of an array source at context length ``n`` (:mod:`.windows`)."""
    batch = min(int(windows), max(1, block_elements // (layers * heads * n * head_dim)))
    logits = layers * heads * batch * queries * n
    keys = layers * heads * batch * n * head_dim  # the float64 copies of the block's queries and keys
    return 8 * (BLOCK_COPIES * logits + 2 * keys)


def capture_bytes(layers: int, heads: int, length: int, head_dim: int) -> int:
    """Queries and keys captured from one forward of ``length`` tokens: float32, held twice while stacked."""
    return 2 * 2 * 4 * int(layers) * int(heads) * int(length) * int(head_dim)


def rows_read(layers: int, heads: int, windows: int, queries: int, levels) -> int:
    """Rows the design reads: ``queries`` per level, window, head and layer."""
    return int(layers) * int(heads) * int(windows) * int(queries) * len(tuple(levels))


def heads_bytes(layers: int, heads: int, windows: int, head_dim: int, design, *, keep_rows: bool,
                block_elements: int) -> int:
    """Memory of reading every head of the input over ``design`` (the input's own arrays not counted)."""
    rows = rows_read(layers, heads, windows, design.queries, design.levels)
    per_row = ROW_BYTES + (KEPT_ROW_BYTES if keep_rows else 0)
    block = block_bytes(layers, heads, windows, design.queries, design.window_length, head_dim, block_elements)
    return rows * per_row + block


def nulls_bytes(kinds, windows: int, head_dim: int, design, *, keep_rows: bool, block_elements: int,
                workers: int) -> int:
    """Memory of the null heads: ``kinds`` lists ``"qk"`` or ``"rows"`` per null, each over ``windows``."""
    kinds = list(kinds)
    T, m = design.window_length, design.queries
    per_row = ROW_BYTES + (KEPT_ROW_BYTES if keep_rows else 0)
    total = len(kinds) * rows_read(1, 1, windows, m, design.levels) * per_row
    if "qk" in kinds:  # one q/k null at a time, in the calling thread
        total += QK_NULL_BYTES * int(windows) * T * int(head_dim) + block_bytes(1, 1, windows, m, T, head_dim,
                                                                               block_elements)
    row_nulls = kinds.count("rows")
    if row_nulls:
        total += min(row_nulls, max(1, workers)) * (1 + BLOCK_COPIES) * 8 * int(windows) * m * T
    return total


def replicates_bytes(count: int, windows: int, head_dim: int, design, *, chunk: int, block_elements: int) -> int:
    """Memory of ``count`` Gaussian null replicates of ``windows`` windows, drawn ``chunk`` at a time."""
    T, m = design.window_length, design.queries
    rows = rows_read(1, count, windows, m, design.levels) * ROW_BYTES
    draw = QK_NULL_BYTES * int(chunk) * int(windows) * T * int(head_dim)
    return rows + draw + block_bytes(1, chunk, windows, m, T, head_dim, block_elements)


def check(need: int, what: str, remedy: str, *, beside: int = 0, beside_what: str = "") -> None:
    """Refuse with one line when ``need`` (plus ``beside``) bytes exceed :func:`memory_limit`."""
    limit = memory_limit()
    if need + beside <= limit:
        return
    also = f" beside {human(beside)} for {beside_what}" if beside else ""
    raise MemoryBudgetError(f"{what} needs about {human(need)} of memory{also}; this machine can hold "
                            f"{human(limit)} ({remedy})")


def npy_bytes(shape, itemsize: int) -> int:
    """Bytes of an array of ``shape`` and ``itemsize`` (exact, Python integers: no overflow)."""
    return math.prod(int(s) for s in shape) * int(itemsize)
