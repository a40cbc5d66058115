"""The two-pass launch, written once for the three kinds: split, buffers, pass 1, combine, check, pass 2, finish.

Why two passes and not one online pass: the softmax sums could be kept online (rescaled when the running
maximum grows, as in flash attention), but the counts ``N(t_j)`` compare every gap with the *final*
maximum, and no finite summary of the entries below a running maximum gives them exactly.  With ``M``
known, every exponent is ``-beta Delta <= 0``, nothing is rescaled, and partial sums over column chunks
simply add, so one row is split over many programs (the split heuristic below).  The second read costs
bytes (kind ``scores``) or a recomputed tile (kinds ``qk`` and ``sampled``), not exactness.

Every kind's kernels take their own leading arguments, then ``(R, n, tiles, SPLIT)``, the result buffers,
and the compile-time block; the grid is ``(1, row blocks, batch * SPLIT)``, and pass 2 is launched once
per chunk of its compiled-in grid.
Pass 2 runs all betas and thresholds of a chunk on one tile, the chunk's grid compiled in (one
compilation per grid and chunk); with the default blocks a grid of up to 8 ladder roots (e.g. 32 betas
of ratio ``2^{1/8}``) and 64 thresholds is one chunk, so each tile is read or made once per pass.
Where a kind has a kernel running both passes (``Launch.fused``) and every program holds whole rows (``SPLIT =
1``, snap 0), that one launch runs pass 1 and then pass 2 of the first chunk in each program, taking the maxima
it found itself, so that its second read overlaps other programs' arithmetic; the other chunks follow as
pass-2 launches.  Nothing here waits for the device: the pass-1 checks become a flag read once,
after pass 2 is queued and the result assembled (:func:`critscale.kernels.rowstats.raise_problems`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import triton

from .counting import planes_for
from .ladder import beta_plan, chunks, device_grids
from .rowstats import RowStats, combine_pass1, finish, pass1_problems, raise_problems

__all__ = ["COUNT_EXACT_LIMIT", "Launch", "choose_split", "pow2", "run_two_pass"]

# float32 counts are exact integers up to 2^24: the most entries one lane may count in one program
COUNT_EXACT_LIMIT = 1 << 24


def pow2(x: int, lo: int = 1) -> int:
    """Smallest power of two ``>= max(x, lo)``."""
    return max(lo, 1 << max(0, int(x) - 1).bit_length())


def choose_split(work_items: int, n_tiles: int, target_programs: int) -> int:
    """Number of column chunks per row so that about ``target_programs`` programs run."""
    want = max(1, -(-target_programs // max(1, work_items)))
    return int(max(1, min(want, n_tiles)))


@dataclass
class Launch:
    """What a kind hands to :func:`run_two_pass`.

    ``args`` are the kind's leading kernel arguments, ``constexprs`` its compile-time ones; ``R`` rows per
    batch entry, ``n`` columns, ``batch`` entries; ``lanes`` the ``L`` axis of its tile (elements per lane
    per tile = ``BN / lanes``); the snap distance of :mod:`.tiles` is ``snap + snap_relative * |top|`` per row
(``snap`` ``(batch * R,)`` fp32 on ``device``, or ``None`` for 0); ``precheck`` an optional
    device bool (one element) raising ``precheck_message``; ``what`` and ``bad_meaning`` name the scores
    and what a bad entry is, in the error messages.
    """

    kind: str
    pass1: Any
    pass2: Any
    args: tuple
    R: int
    n: int
    batch: int
    lanes: int
    device: torch.device
    what: str
    bad_meaning: str
    snap: torch.Tensor | None = None
    snap_relative: float = 0.0
    constexprs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    precheck: torch.Tensor | None = None
    precheck_message: str = ""
    gather: bool = False  # word tables held on chip (the qk kind's pipelined loop: kernels.counting)
    fused: Any = None  # both passes in one program (pass 1's outputs, then pass 2's), used when a program holds whole rows


def m0_mode(index: int, part) -> int:
    """Where chunk ``index`` gets ``m0`` (:func:`critscale.kernels.tiles.fold_pass2`): ``2`` from its count at
    the threshold ``+0`` (the first chunk, when ``+0`` is one of its thresholds), ``1`` counted on its own (the
    first chunk otherwise), ``0`` not at all (the host reads ``m0`` of the first chunk only)."""
    if index > 0:
        return 0
    return 2 if part.tcut and part.tcut[0] == 0.0 else 1


def table_constexprs(part) -> dict:
    """The compile-time bucket-table parameters of a chunk (any valid values for a chunk without thresholds)."""
    tab = part.table
    return dict(SHIFT=tab.shift, BLO=tab.blo, NBK=tab.nbk) if tab is not None else dict(SHIFT=1, BLO=0, NBK=1)


_TABLES: dict = {}


def count_tables(parts, device: torch.device) -> list[torch.Tensor]:
    """Each chunk's word table as an int64 tensor on ``device`` (uploaded once per table and device)."""
    out = []
    for part in parts:
        entries = part.table.entries if part.table is not None else (0, 0, 0x7F800000)
        key = (entries, str(device))
        if key not in _TABLES:
            if len(_TABLES) > 256:
                _TABLES.clear()
            _TABLES[key] = torch.tensor(entries, dtype=torch.int64, device=device)
        out.append(_TABLES[key])
    return out


def run_two_pass(launch: Launch, beta: np.ndarray, t: np.ndarray, K: int, backend: str,
                 block: tuple[int, int, int, int, int], split: int | None) -> RowStats:
    """Run both passes of ``launch`` on block ``(BM, BN, roots per chunk, thresholds per chunk, num_warps)``."""
    BM, BN, NRC, NTC, warps = block
    dev = launch.device
    interpret = backend == "triton-interpreter"
    plan = beta_plan(beta)
    parts = chunks(plan, t, NRC, NTC, launch.gather)
    a_slot, c_slot, beta_dev, t_dev = device_grids(plan, t, dev)
    levels = plan.levels
    NS = pow2(min(NRC, len(plan.roots)) * levels)
    NTP = pow2(min(NTC, len(t)))
    rows = launch.batch * launch.R
    row_blocks = triton.cdiv(launch.R, BM)
    if row_blocks > 65535 or launch.batch > 65535:  # CUDA limit of grid axes 1 and 2
        raise ValueError(f"{launch.what}: at most {65535 * BM} rows and 65535 batch entries per call, "
                         f"got {launch.R} and {launch.batch}")
    n_tiles = triton.cdiv(launch.n, BN)
    if split is None:
        target = 1 if interpret else 4 * torch.cuda.get_device_properties(dev).multi_processor_count
        split = choose_split(row_blocks * launch.batch, n_tiles, target)
    per_tile = BN // launch.lanes  # entries one lane counts per tile and row
    exact_split = triton.cdiv(n_tiles * per_tile, COUNT_EXACT_LIMIT)  # fewest chunks keeping float32 counts exact
    split = int(max(1, min(split, n_tiles, 65535 // launch.batch), exact_split))
    tiles = triton.cdiv(n_tiles, split)
    split = triton.cdiv(n_tiles, tiles)
    if tiles * per_tile > COUNT_EXACT_LIMIT or launch.batch * split > 65535:
        raise ValueError(f"{launch.what}: rows of {launch.n} entries in {launch.batch} batch entries cannot be split "
                         "into enough column chunks for exact float32 counts (CUDA grid limit)")
    f32 = dict(dtype=torch.float32, device=dev)
    i32 = dict(dtype=torch.int32, device=dev)
    shape = (launch.R, launch.n, tiles, split)
    grid = (1, row_blocks, launch.batch * split)
    kw = dict(BM=BM, BN=BN, num_warps=warps, **launch.constexprs, **launch.options)
    top1, top2, low = (torch.empty(rows, split, **f32) for _ in range(3))
    count, bad = (torch.empty(rows, split, **i32) for _ in range(2))
    nch = len(parts)
    m0 = torch.empty(nch, rows * split, **f32)
    a, b = (torch.empty(nch, rows * split, NS, **f32) for _ in range(2))
    cnt = torch.empty(nch, rows * split, NTP, **i32)
    NPL = planes_for(tiles * per_tile)  # count planes: no lane counts more than tiles * per_tile scores
    tabs = count_tables(parts, dev)
    # one launch for both passes and the first chunk when each program holds whole rows (and snap is 0)
    snap0 = launch.snap is None and launch.snap_relative == 0.0  # every gap is top - s itself
    fused = launch.fused is not None and split == 1 and snap0

    def chunk_args(c):
        part = parts[c]
        return (tabs[c], m0[c], a[c], b[c], cnt[c]), dict(
            ROOTS2=part.roots2, NR=len(part.roots2), LVR=levels, NS=NS, BNEED=part.bneed, NT=len(part.tcut), NTP=NTP,
            **table_constexprs(part), NPL=NPL, NPLP=pow2(NPL), M0=m0_mode(c, part),
            SNAP0=snap0, **kw)

    with np.errstate(invalid="ignore", over="ignore"):  # interpreter arithmetic on rows that pass 1 flags as bad
        if fused:
            args2, kw2 = chunk_args(0)
            launch.fused[grid](*launch.args, *shape, top1, top2, low, count, bad, *args2, **kw2)
        else:
            launch.pass1[grid](*launch.args, *shape, top1, top2, low, count, bad, **kw)
        p1 = combine_pass1(top1, top2, low, count, bad)
        flags = pass1_problems(p1)  # (3, rows), checked at the end
        top = p1.top.float() + 0.0  # -0 -> +0: with snap 0 every gap top - s is then +0 or positive
        snap = top.abs() * launch.snap_relative
        if launch.snap is not None:
            snap = snap + launch.snap
        for c in range(1 if fused else 0, nch):
            args2, kw2 = chunk_args(c)
            launch.pass2[grid](*launch.args, *shape, top, snap, *args2, **kw2)
    n_roots = len(plan.roots)

    def table(x):  # (nch, rows * split, NS) partials -> (rows, n_roots * levels) float64 sums
        x = x.view(nch, rows, split, NS).double().sum(2)
        return torch.cat([x[c, :, : len(p.roots2) * levels] for c, p in enumerate(parts)], dim=1)

    if m0_mode(0, parts[0]) == 2:  # the count at the threshold +0 (bit 0 of the first chunk's words)
        m0_row = cnt[0].view(rows, split, NTP).double().sum(1)[:, 0]
    else:
        m0_row = m0[0].view(rows, split).double().sum(1)
    outside = (p1.n_valid.double() - m0_row)[:, None]  # beta = 0: A = C = number of positive gaps
    zero = a_slot < 0
    if n_roots:
        tab_a, tab_b = table(a), table(b)
        sum_a = torch.where(zero, outside, tab_a[:, a_slot.clamp(min=0)])
        sum_b = torch.where(zero, 0.0, tab_b[:, a_slot.clamp(min=0)])
        sum_c = torch.where(zero, outside, tab_a[:, c_slot.clamp(min=0)])
    else:  # every beta is 0
        sum_a = sum_c = outside.expand(rows, len(beta))
        sum_b = torch.zeros_like(sum_a)
    counts = torch.cat([cnt[c].view(rows, split, NTP).double().sum(1)[:, list(p.t_index)]
                        for c, p in enumerate(parts) if p.t_index], dim=1)
    out = finish(p1, m0_row, sum_a, sum_b, sum_c, counts, beta_dev, t_dev, backend, K=K)
    out.beta, out.t = beta, t  # the host grids
    checks = flags.any(dim=-1)
    if launch.precheck is not None:
        checks = torch.cat([launch.precheck.reshape(1), checks])
    checks = checks.cpu()  # the one host synchronisation of the call
    if launch.precheck is not None:
        if bool(checks[0]):
            raise ValueError(launch.precheck_message)
        checks = checks[1:]
    if bool(checks.any()):
        raise_problems(flags, launch.what, launch.bad_meaning)
    out.notes.update(kind=launch.kind, split=split, block=(BM, BN, NRC, NTC, warps), chunks=nch,
                     exp2_per_score=n_roots, levels=levels, fused=fused)
    return out
