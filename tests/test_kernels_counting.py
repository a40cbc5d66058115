"""``critscale.kernels.counting``: exact gap counts at a cost per score that does not grow with the thresholds.

The bucket table must give the exact rank of every float32 gap (checked against ``searchsorted`` on all
bit patterns next to each threshold and on random ones); the kernels' counts must equal the float32
comparison ``Delta <= t_j`` on gaps placed exactly at, one ulp below and one ulp above each threshold; and
the recorded compiled code must show the counting cost flat in the number of thresholds.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from critscale.kernels import counting, ladder
from critscale.kernels.testing import backend_params, require

ROOT = Path(__file__).resolve().parents[1]


def table_words(table: counting.CountTable, u: np.ndarray) -> np.ndarray:
    """The kernel's word formula (:func:`counting.thermometer_words`) in numpy: uint64 thermometer words."""
    e = np.asarray(table.entries, dtype=np.int64).reshape(2, table.nbk, 2)
    below, above, inner = e[0, :, 0].view(np.uint64), e[0, :, 1].view(np.uint64), (e[1, :, 0] % (1 << 32)).astype(np.uint32)
    if table.blo == 0 and table.nbk << table.shift >= 1 << 31:  # the kernel masks: every u < 2^31 is in the table
        bk = (u >> table.shift) & (table.nbk - 1)
    else:
        bk = np.clip(u >> table.shift, table.blo, table.blo + table.nbk - 1) - table.blo
    gap, t_inner = u.astype(np.uint32).view(np.float32), inner[bk].view(np.float32)
    return np.where(gap > t_inner, above[bk], below[bk])


def table_rank(table: counting.CountTable, u: np.ndarray) -> np.ndarray:
    """The rank ``#{j : T_j < u}`` a thermometer word encodes (its lowest set bit; 64 for the word 0)."""
    w = table_words(table, u)
    low = w & (~w + np.uint64(1))
    return np.where(w == 0, 64, np.log2(np.where(w == 0, 1, low).astype(np.float64)).astype(np.int64))


GRIDS = {
    "benchmark": (0.0,) + tuple(np.geomspace(1e-3, 20.0, 63)),
    "live": (0.0, 0.01, 0.1, 0.3, 1.0, 3.0, 10.0),
    "one": (1.0,),
    "duplicates and inf": (0.0, 0.0, 0.5, 0.5, 2.0, float("inf"), float("inf")),
    "close pair over a wide range": (0.0, 1e-6, 1.0, float(np.nextafter(np.float32(1.0), np.float32(2.0))), 1e6),
    "tiny": (1e-45, 3e-45, 1e-38),
}


@pytest.mark.parametrize("name", list(GRIDS))
def test_table_rank_is_exact_next_to_every_threshold(name):
    t = GRIDS[name]
    groups = counting.threshold_groups(t, 64)
    bits = counting.threshold_bits(t)
    assert [i for g in groups for i in range(g.first, g.first + len(g.index))] == list(range(len(t)))
    rng = np.random.default_rng(3)
    for g in groups:
        T = np.asarray(sorted(set(bits[g.first:g.first + len(g.index)].tolist())), dtype=np.int64)
        assert len(T) <= 64 and g.table.nbk <= counting.TABLE_MAX
        near = np.concatenate([T + d for d in (-2, -1, 0, 1, 2)] + [[0, 0x7F800000, 0x7F7FFFFF]])
        u = np.unique(np.clip(np.concatenate([near, rng.integers(0, 0x7F800001, 20000)]), 0, 0x7F800000))
        assert np.array_equal(table_rank(g.table, u), np.searchsorted(T, u, side="left")), name


def test_close_thresholds_far_apart_are_split_into_groups_not_refused():
    """Two thresholds one ulp apart next to thresholds six decades away need more buckets than one table
    holds: the grid becomes several pass-2 chunks, each exact."""
    groups = counting.threshold_groups(GRIDS["close pair over a wide range"], 64)
    assert len(groups) >= 2
    plan = ladder.beta_plan(np.array([1.0]))
    parts = ladder.chunks(plan, np.array(GRIDS["close pair over a wide range"]), 8, 64)
    assert sum(len(p.t_index) for p in parts) == len(GRIDS["close pair over a wide range"])


def edge_scores(t: np.ndarray, top: float = 0.0) -> torch.Tensor:
    """One row whose float32 gaps to ``top`` are each threshold, one ulp below and one ulp above it."""
    t32 = np.minimum(t, np.finfo(np.float32).max).astype(np.float32)
    gaps = np.concatenate([t32, np.nextafter(t32, np.float32(0)), np.nextafter(t32, np.float32(np.inf))])
    gaps = gaps[np.isfinite(gaps)]
    s = np.float32(top) - gaps
    ok = (np.float32(top) - s) == gaps  # keep the gaps that the subtraction reproduces exactly
    return torch.from_numpy(np.concatenate([[np.float32(top)], s[ok]]).astype(np.float32))[None, :]


TWO_ULP = float(np.uint32(0x3F000002).view(np.float32))  # 0.5 plus two ulps
EDGE_GRIDS = {
    # one table from bucket 0 holding every bucket below 2^31: the kernel masks the bucket
    "masked": (0.0, 1e-3, 0.01, 0.1, 0.25, 0.3, 1.0, 1.0, 3.0, 10.0, 20.0),
    # a table of buckets two ulps wide starting far above bucket 0 (the kernel clamps), then a masked one
    "clamped": (0.5, TWO_ULP, 1.0, 2.0),
}


def test_edge_grids_take_both_bucket_paths():
    """The kernel's two ways to a bucket (mask, clamp) are both run by the edge test below."""
    tables = [[g.table for g in counting.threshold_groups(EDGE_GRIDS[name], 64)] for name in EDGE_GRIDS]
    covers = [[tb.blo == 0 and tb.nbk << tb.shift >= 1 << 31 for tb in grid] for grid in tables]
    assert covers[0] == [True]
    assert covers[1][0] is False and tables[1][0].blo > 0 and True in covers[1]


def test_only_tables_read_from_memory_grow_to_every_bucket():
    """A table from bucket 0 grows to every bucket below 2^31 (the kernel then masks, not clamps); one held on chip
    (``compact``, the qk kind's gather) keeps its own size, which a gather loads into every program."""
    t = (0.0, float(np.uint32(1 << 20).view(np.float32)))  # buckets 0 and 1 at shift 20
    wide, = counting.threshold_groups(t, 64)
    small, = counting.threshold_groups(t, 64, compact=True)
    assert (wide.table.shift, wide.table.blo, wide.table.nbk) == (20, 0, 2048)
    assert (small.table.shift, small.table.blo, small.table.nbk) == (20, 0, 2)
    u = np.array([0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 0x3F800000, 0x7F800000])
    for g in (wide, small):
        assert np.array_equal(table_rank(g.table, u), np.searchsorted([0, 1 << 20], u, side="left"))


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("grid", list(EDGE_GRIDS))
def test_counts_exact_at_and_next_to_every_threshold(backend, grid):
    """Gaps at, one ulp below and one ulp above every threshold: a bucket edge off by one (a word of the wrong
    bucket, a pair read one entry off, the inner threshold of the next bucket) changes some count."""
    import critscale.kernels as ck

    require(backend)
    dev = torch.device("cuda") if backend == "triton-cuda" else torch.device("cpu")
    t = np.array(EDGE_GRIDS[grid])
    top = 1.0 if grid == "clamped" else 0.0  # gaps of 0.5 + 1 ulp need a top whose ulp is as fine: 1.0 - 0.5
    x = edge_scores(t, top).to(dev)
    res = ck.scores_row_stats(x, [1.0], t, backend=backend)
    d = (x.max(dim=1, keepdim=True).values - x).cpu()
    t32 = torch.from_numpy(t.astype(np.float32))
    want = (d[:, :, None] <= t32).sum(dim=1).double()
    assert torch.equal(res.counts.cpu(), want)


def test_recorded_counting_cost_is_flat_in_the_thresholds():
    """In the recorded compiled code one threshold more costs (almost) nothing per score: the per-threshold
    compare and add of the earlier kernels cost 2.0 instructions per score and threshold.  The recorded marginal
    compares 64 thresholds (one 64-bit word) with 32 (one 32-bit word): the word size is all that changes."""
    rec = json.loads((ROOT / "results" / "sass" / "kernels_sass.json").read_text())
    for kind in ("scores", "qk", "sampled"):
        m = rec["kinds"][kind]["grid32"]["marginal"]
        assert abs(m["per_threshold"]) < 0.5, (kind, m)


def test_sass_record_hashes_the_counting_module():
    """The compiled pass 2 depends on kernels/counting.py: a change to it must make the record stale."""
    rec = json.loads((ROOT / "results" / "sass" / "kernels_sass.json").read_text())
    assert "kernels/counting.py" in rec["provenance"]["sources"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", backend_params())
def test_counts_exact_across_block_flushes(backend):
    """One program per row (``split = 1``) over tiles of the interpreter's block, 4 words per lane and tile,
    so that the first lanes count ``BLOCK_WORDS + 1 = 2^NLOW`` words: the block counter takes ``KB`` tiles
    (``4 KB <= BLOCK_WORDS`` words, ``PASS2_TILES`` per iteration, their carries parked and added in phases) and is
    flushed, the last block short (its last iteration's tiles past the row).  A block of one iteration more
    (``4 (KB + PASS2_TILES) > BLOCK_WORDS`` words) would wrap its planes and lose ``2^NLOW`` from the counts of the
    last row, one value throughout (every word all ones); a parked carry that was dropped or added twice, or a
    flush that dropped a block, would change the counts of every row."""
    import critscale.kernels as ck
    from critscale.kernels.scores import BLOCK_WORDS, NLOW, PASS2_TILES

    require(backend)
    dev = torch.device("cuda") if backend == "triton-cuda" else torch.device("cpu")
    assert BLOCK_WORDS.value == 2 ** NLOW.value - 1
    KB = BLOCK_WORDS.value // 4 // PASS2_TILES * PASS2_TILES  # tiles per block, as the kernel sets them
    tiles = (BLOCK_WORDS.value + 1) // 4  # 4 words per lane and tile
    assert KB < tiles < 2 * KB and 4 * (KB + PASS2_TILES) > BLOCK_WORDS.value
    rng = np.random.default_rng(5)
    n = 128 * (tiles - 1) + 37  # the last tile partial: lanes 0 .. 9 count 4 tiles' words more than KB tiles
    x = (-rng.integers(0, 96, size=(4, n)) / 8.0).astype(np.float32)  # dyadic gaps
    x[3] = -2.5  # one value: every gap +0, every word all ones
    x = torch.from_numpy(x).to(dev)
    t = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 7.0, 11.875])
    res = ck.scores_row_stats(x, [1.0], t, backend=backend, split=1)
    d = (x.max(dim=1, keepdim=True).values - x).cpu()
    want = (d[:, :, None] <= torch.from_numpy(t.astype(np.float32))).sum(dim=1).double()
    assert torch.equal(res.counts.cpu(), want)
    assert res.counts.cpu()[3].tolist() == [float(n)] * len(t)


@pytest.mark.parametrize("backend", backend_params())
def test_m0_from_the_count_at_zero_and_counted_on_its_own(backend):
    """Three maxima tied: ``m0 = 3`` when ``+0`` is a threshold (m0 is its count, mode 2) and when it is not
    (m0 counted on its own, mode 1); a chunk after the first does not count it (mode 0)."""
    import critscale.kernels as ck
    from critscale.kernels.twopass import m0_mode

    require(backend)
    dev = torch.device("cuda") if backend == "triton-cuda" else torch.device("cpu")
    row = np.array([2.0, 1.5, 2.0, -np.inf, 0.25, 2.0, 1.0], dtype=np.float32)
    x = torch.from_numpy(np.tile(row, (2, 40))).to(dev)
    plan = ladder.beta_plan(np.array([1.0]))
    for t, mode in (([0.0, 0.5, 1.0], 2), ([0.5, 1.0], 1)):
        assert m0_mode(0, ladder.chunks(plan, np.array(t), 8, 64)[0]) == mode
        res = ck.scores_row_stats(x, [1.0], t, backend=backend)
        assert res.m0.cpu().tolist() == [120.0, 120.0], t
    parts = ladder.chunks(plan, np.geomspace(1e-3, 1.0, 70), 8, 64)
    assert len(parts) == 2 and m0_mode(1, parts[1]) == 0


def test_recorded_pass2_of_stored_scores_spends_little_beyond_the_ladder():
    """Pass 2 of stored scores on the 32-value grid: beyond the ladder's FMA-pipe arithmetic and its 8 ex2, the
    gaps, the counts of 64 thresholds and the loop (with the block counter's flush spread over its block) take at
    most 24 instructions per score in the recorded code.  The counting by rank, shifted 64-bit words and a
    ripple through every plane per tile took 38.6."""
    rec = json.loads((ROOT / "results" / "sass" / "kernels_sass.json").read_text())
    k = rec["kinds"]["scores"]["grid32"]["kernels"][1]
    ps = k["per_score"]
    assert k["scores_per_block"] > 0 and k["block_instructions"] > 0  # the flush is counted
    assert ps["total"] - ps.get("FMA", 0.0) - ps.get("MUFU", 0.0) <= 24.0, ps
