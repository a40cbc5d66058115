"""softmax_stats against float64 loops and scipy (logsumexp, entropy) (theory.md §3.1)."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import entropy as scipy_entropy

import critscale
from critscale import _validate, families
from checks import peak_bytes


def example_rows(seed: int = 0) -> list[np.ndarray]:
    """Rows of every family plus ties, masks, n = 1, huge and tiny scales (all float64)."""
    rng = np.random.default_rng(seed)
    rows = [families.get(name).sample(n, 1, rng)[0] for name in families.names() for n in (2, 9, 40)]
    base = rng.standard_normal(25)
    masked = np.where(rng.random(25) < 0.4, -np.inf, base)
    masked[3] = 0.5
    rows += [np.array([0.3]), np.array([1.0, 1.0]), np.round(base, 1), np.concatenate([[3.0, 3.0], base]),
             masked, np.array([-np.inf, 5.0, -np.inf]), 1e150 * base, 1e-150 * base]
    return rows


def loop_stats(row: np.ndarray, beta: float) -> tuple[float, float, float, float]:
    """Explicit float64 loops over the entries: log Z, H, p_max, sum p^2 of softmax(beta * s)."""
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    weights = [math.exp(-beta * (top - x)) for x in valid]
    z = sum(weights)
    probs = [w / z for w in weights]
    h = -sum(p * math.log(p) for p in probs if p > 0)
    return math.log(z), h, max(probs), sum(p * p for p in probs)


@pytest.mark.parametrize("row_index", range(len(example_rows())))
def test_against_loops_and_scipy(row_index):
    row = example_rows()[row_index]
    valid = row[np.isfinite(row)]
    spread = max(np.ptp(valid), 1e-300)
    betas = np.array([0.0, 0.5, 3.0, 0.1 / spread, 1.0 / spread, 10.0 / spread])
    stats = critscale.softmax_stats(row, betas)
    for j, beta in enumerate(betas):
        log_z, h, p_max, collision = loop_stats(row, beta)
        assert stats.log_z[j] == pytest.approx(log_z, rel=1e-12, abs=1e-14)
        assert stats.entropy[j] == pytest.approx(h, rel=1e-10, abs=1e-13)
        assert stats.max_weight[j] == pytest.approx(p_max, rel=1e-12)
        assert stats.collision[j] == pytest.approx(collision, rel=1e-12)
        # scipy on the shifted logits beta (s - max s): log Z = logsumexp; entropy of the normalised weights
        logits = beta * (valid - valid.max())
        assert stats.log_z[j] == pytest.approx(logsumexp(logits) - logits.max(), rel=1e-12, abs=1e-13)
        probs = np.exp(logits - logsumexp(logits))
        assert stats.entropy[j] == pytest.approx(scipy_entropy(probs), rel=1e-10, abs=1e-13)


def test_shapes_scalar_beta_and_batches():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((2, 3, 10))
    stats = critscale.softmax_stats(scores, [0.0, 1.0])
    assert isinstance(stats, critscale.SoftmaxStats)
    assert all(field.shape == (2, 3, 2) for field in stats)
    scalar = critscale.softmax_stats(scores, 1.0)
    assert all(field.shape == (2, 3) for field in scalar)
    assert np.allclose(scalar.entropy, stats.entropy[..., 1], rtol=1e-14, atol=0)
    assert np.allclose(stats.max_weight, np.exp(-stats.log_z), rtol=0, atol=0)


def test_beta_zero_with_masks_is_uniform_over_valid_entries():
    row = np.array([0.2, -np.inf, -3.0, -np.inf, 7.0])
    stats = critscale.softmax_stats(row, 0.0)
    assert stats.log_z == pytest.approx(math.log(3), rel=1e-15)
    assert stats.entropy == pytest.approx(math.log(3), rel=1e-15)
    assert stats.collision == pytest.approx(1 / 3, rel=1e-15)
    assert not np.isnan([*stats]).any()


def test_no_overflow_at_large_beta_times_gap():
    row = np.array([0.0, -1.0, -2.0])
    stats = critscale.softmax_stats(row, [1e6, 1e300])
    assert np.all(stats.log_z == 0.0) and np.all(stats.entropy == 0.0)
    assert np.all(stats.max_weight == 1.0) and np.all(stats.collision == 1.0)
    tied = critscale.softmax_stats(np.array([2.0, 2.0, -1e6]), 1e6)
    assert tied.max_weight == 0.5 and tied.entropy == pytest.approx(math.log(2), rel=1e-15)


def test_collapsed_row_keeps_relative_precision():
    """log Z = log1p(Z - 1) when Z - 1 is tiny: exact to rounding, not 0."""
    gap = 50.0
    stats = critscale.softmax_stats(np.array([0.0, -gap]), 1.0)
    tail = math.exp(-gap)
    assert stats.log_z == pytest.approx(math.log1p(tail), rel=1e-14)
    expected_h = math.log1p(tail) + gap * tail / (1 + tail)
    assert stats.entropy == pytest.approx(expected_h, rel=1e-14)


def test_blocking_over_rows_columns_and_betas(monkeypatch):
    rng = np.random.default_rng(2)
    scores = rng.standard_normal((5, 300))
    scores[1, ::3] = -np.inf
    betas = np.linspace(0, 4, 7)
    reference = critscale.softmax_stats(scores, betas)
    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 7 * 40)  # forces column blocks of 40 entries
    blocked = critscale.softmax_stats(scores, betas)
    for a, b in zip(reference, blocked):
        assert np.allclose(a, b, rtol=1e-13, atol=0)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    scores = torch.randn(4, 16, dtype=torch.float64)
    stats = critscale.softmax_stats(scores, torch.tensor([0.5, 2.0]))
    assert all(isinstance(f, torch.Tensor) and f.dtype == torch.float64 for f in stats)
    reference = critscale.softmax_stats(scores.numpy(), [0.5, 2.0])
    probs = torch.softmax(2.0 * scores, dim=-1)
    assert torch.allclose(stats.collision[:, 1], (probs**2).sum(-1), rtol=1e-12, atol=0)
    assert np.array_equal(stats.entropy.numpy(), reference.entropy)


def test_scalar_beta_is_one_column_of_a_beta_array():
    """softmax_stats(s, 1.0) equals the first column of softmax_stats(s, [1, 1]) bit for bit, so chapter 03's
    stats_at_one work-around (two betas, one column kept) can become a plain scalar call without changing a
    recorded number; a different summation order for one beta would break the equality."""
    rng = np.random.default_rng(6)
    scores = np.concatenate([families.get(name).sample(300, 7, rng) for name in ("gauss", "unif", "planted")])
    scores[2, :50] = -np.inf
    single = critscale.softmax_stats(scores, 1.0)
    pair = critscale.softmax_stats(scores, np.array([1.0, 1.0]))
    for a, b in zip(single, pair):
        assert np.array_equal(a, b[:, 0])


def broadcast_stats(scores: np.ndarray, betas: np.ndarray) -> critscale.SoftmaxStats:
    """The fields from the (rows, beta, cols) broadcast that softmax_stats summed before it was blocked."""
    from critscale import softmax

    values = np.asarray(scores, dtype=np.float64).reshape(-1, np.shape(scores)[-1])
    return softmax._stats_from_sums(softmax._gap_sums_broadcast(softmax._gaps_unsorted(values), betas), betas)


def blocking_cases() -> list[tuple[str, np.ndarray]]:
    """Score arrays with masks, ties (also at the maximum), constant rows and rows of length 1."""
    rng = np.random.default_rng(11)
    masked = rng.standard_normal((7, 300))
    masked[rng.random(masked.shape) < 0.3] = -np.inf
    masked[3, 1:] = -np.inf  # one valid entry
    masked[3, 0] = 0.7
    ties = np.round(rng.standard_normal((5, 257)), 1)
    ties[1, :40] = ties[1].max()  # the maximum forty times: more zero gaps than the far stand-in takes
    constant = np.full((3, 70), 2.5)  # every gap zero
    plain = rng.standard_normal((4, 1000))  # no mask, one zero gap per row
    collapsed = np.array([[0.0, -1.0, -1.05, -3.0], [0.0, -0.5, -1.0, -np.inf]])  # at beta = 700: weights near 1e-305
    return [("masked", masked), ("ties", ties), ("constant", constant), ("length 1", rng.standard_normal((50, 1))),
            ("plain", plain), ("scaled", 1e-150 * plain), ("collapsed", collapsed)]


BETA_SETS = {"one": np.array([1.0]), "grid32": 0.05 * 2.0 ** (np.arange(32) / 8),
             "extremes": np.array([0.0, 1e-310, 1e-299, 1e-3, 1.0, 40.0, 700.0, 1e3, 1e6, 1e300])}


@pytest.mark.parametrize("cache", [2**16, 100])
@pytest.mark.parametrize("betas", BETA_SETS.values(), ids=BETA_SETS.keys())
@pytest.mark.parametrize("name,scores", blocking_cases(), ids=[c[0] for c in blocking_cases()])
def test_blocked_sums_equal_the_broadcast_route(monkeypatch, cache, betas, name, scores):
    """softmax_stats sums cache-sized blocks, one beta (or a group for short rows) at a time, with a far stand-in
    at the zero gaps or a 0/1 mask; every field equals the broadcast of the definitions within 1e-14.  A block of
    100 values splits the rows of 257, 300 and 1000 into pieces that are not a multiple of anything, and the
    betas reach the zero weights of the underflow path, the tiny betas below the stand-in's reach and overflow."""
    monkeypatch.setattr(_validate, "CACHE_ELEMENTS", cache)
    new = critscale.softmax_stats(scores, betas)
    old = broadcast_stats(scores, betas)
    for field, a, b in zip(critscale.SoftmaxStats._fields, new, old):
        assert np.all(np.isfinite(a)), field
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0, err_msg=field)


def test_gap_sums_of_stored_gaps_leave_them_unchanged():
    """limits.py hands _gap_sums its own gaps; the blocks overwrite copies, never the caller's array."""
    from critscale import softmax

    gaps = np.abs(np.random.default_rng(3).standard_normal((6, 500)))
    gaps[:, 0] = 0.0
    gaps[2, 7:20] = np.inf
    kept = gaps.copy()
    betas = np.array([0.0, 0.5, 2.0])
    sums = softmax._gap_sums(gaps, betas)
    assert np.array_equal(gaps, kept)
    for a, b in zip(sums, softmax._gap_sums_broadcast(gaps, betas)):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


def test_temporaries_are_blocks_not_rows_times_betas():
    """At 32 betas the broadcast held (rows, beta, cols) weights of up to 2**22 values (32 MiB) and their
    products; the blocked loop holds a few blocks of 2**16 values whatever the number of betas."""
    scores = np.random.default_rng(5).standard_normal((64, 4096))  # 2 MiB
    betas = BETA_SETS["grid32"]
    assert peak_bytes(lambda: critscale.softmax_stats(scores, betas)) < 6 * 2**20
    assert peak_bytes(lambda: broadcast_stats(scores, betas)) > 32 * 2**20  # what the test would catch


def test_an_empty_beta_array_gives_empty_fields():
    """beta = [] gave fields of shape (..., 0) from the broadcast; the blocked loop divided its block by zero betas."""
    stats = critscale.softmax_stats(np.arange(12.0).reshape(3, 4), [])
    assert all(field.shape == (3, 0) for field in stats)


def test_benchmark_routes_return_the_same_fields():
    """scripts/bench_cpu.py times equal work: its old, naive numpy and scipy routes return the library's four
    fields (and its old accumulation_scale the library's kappa), or its ratios would compare different things."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_cpu.py"
    spec = importlib.util.spec_from_file_location("bench_cpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(9)
    scores = rng.standard_normal((6, 300))
    scores[2, ::4] = -np.inf
    betas = bench.GRID32[::7]
    lib = critscale.softmax_stats(scores, betas)
    for a, b in zip(lib, bench.old_softmax_stats(scores, betas)):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)
    for route in (bench.naive_numpy, bench.scipy_route):
        for j, fields in enumerate(route(scores, betas)):
            for a, b in zip(lib, fields):
                np.testing.assert_allclose(a[:, j], b, rtol=1e-11, atol=0)
    np.testing.assert_allclose(bench.old_accumulation_scale(scores), critscale.accumulation_scale(scores), rtol=1e-14)
