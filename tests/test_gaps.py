"""Gaps, gap counts, accumulation scale and Legendre transform against float64 brute force (theory.md §3.1)."""

import math

import numpy as np
import pytest

import critscale
from critscale import _validate, families


def example_rows(seed: int = 0) -> list[np.ndarray]:
    """Rows of every family plus ties, masks, n = 1, huge and tiny scales (all float64)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in families.names():
        for n in (2, 7, 33):
            rows.append(families.get(name).sample(n, 1, rng)[0])
    base = rng.standard_normal(20)
    rows += [
        np.array([0.3]),  # n = 1
        np.array([1.0, 1.0]),  # tied pair
        np.round(base, 1),  # ties in the bulk
        np.concatenate([[2.0, 2.0, 2.0], base]),  # triple maximum
        np.where(rng.random(20) < 0.4, -np.inf, base),  # masked entries
        np.array([-np.inf, 5.0, -np.inf]),  # one valid entry among masked ones
        1e150 * base,  # huge scale
        1e-150 * base,  # tiny scale
        np.array([0.0, -1.0, -1.0, -1.0, -3.0, -3.0]),  # planted-like with tied bulk
    ]
    rows[-5][0] = 1.0  # keep the masked row non-empty
    return rows


def brute_counts(row: np.ndarray, t: float) -> int:
    top = max(x for x in row if x > -math.inf)
    return sum(1 for x in row if x > -math.inf and top - x <= t)


def brute_kappa(row: np.ndarray, K: int) -> float:
    top = max(x for x in row if x > -math.inf)
    gaps = [top - x for x in row if x > -math.inf]
    best = 0.0
    for t in gaps:
        count = sum(1 for d in gaps if d <= t)
        if count < K:
            continue
        value = math.inf if t == 0 else math.log(count) / t
        best = max(best, value)
    return best


def brute_legendre(row: np.ndarray, beta: float) -> float:
    top = max(x for x in row if x > -math.inf)
    gaps = [top - x for x in row if x > -math.inf]
    return max(math.log(sum(1 for d in gaps if d <= t)) - beta * t for t in gaps)


@pytest.mark.parametrize("row_index", range(len(example_rows())))
def test_against_brute_force(row_index):
    row = example_rows()[row_index]
    valid = row[np.isfinite(row)]
    top = valid.max()
    distinct = sorted(set((top - valid).tolist()))
    thresholds = sorted(set(distinct + [d * 1.5 for d in distinct] + [math.inf]))
    counts = critscale.gap_counts(row, thresholds)
    assert counts.tolist() == [brute_counts(row, t) for t in thresholds]
    for K in (2, 3, 5):
        expected = brute_kappa(row, K)
        got = critscale.accumulation_scale(row, K=K)
        assert got == pytest.approx(expected, rel=1e-13) or (math.isinf(expected) and got == expected)
    for beta in (0.0, 0.3, 2.0, 1e3):
        scaled = beta / max(distinct[-1], 1e-300)  # a beta comparable with the row's scale
        for b in (beta, scaled):
            assert critscale.legendre_transform(row, b) == pytest.approx(brute_legendre(row, b), rel=1e-12, abs=1e-12)


def test_sorted_gaps_layout():
    row = np.array([1.0, -np.inf, 3.0, 2.0, -np.inf])
    gaps = critscale.sorted_gaps(row)
    assert gaps.tolist() == [0.0, 1.0, 2.0, math.inf, math.inf]
    batch = np.stack([row, row[::-1]])
    assert critscale.sorted_gaps(batch).shape == (2, 5)


def test_batch_shapes_and_scalar_threshold():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((2, 3, 9))
    assert critscale.gap_counts(scores, [0.0, 1.0]).shape == (2, 3, 2)
    assert critscale.gap_counts(scores, 0.0).shape == (2, 3)
    assert np.all(critscale.gap_counts(scores, 0.0) == 1)
    assert critscale.accumulation_scale(scores).shape == (2, 3)
    assert critscale.legendre_transform(scores, [0.0, 1.0, 2.0]).shape == (2, 3, 3)
    flat = critscale.accumulation_scale(scores.reshape(6, 9))
    assert np.array_equal(critscale.accumulation_scale(scores).reshape(6), flat)


def test_documented_conventions():
    assert critscale.accumulation_scale(np.array([4.0])) == 0.0  # single entry
    assert critscale.accumulation_scale(np.array([1.0, 1.0, 0.0])) == math.inf  # tied maximum, K = 2
    assert critscale.accumulation_scale(np.array([1.0, 1.0, 0.0]), K=3) == pytest.approx(math.log(3))
    # rows shorter than K give 0; rows of length >= K give a positive value
    short = np.array([[0.0, -1.0, -np.inf], [0.0, -1.0, -2.0]])
    assert critscale.accumulation_scale(short, K=3).tolist() == [0.0, pytest.approx(math.log(3) / 2)]
    # beta = 0 with masked entries: Lambda(0) = log n_valid, no NaN from 0 * inf
    assert critscale.legendre_transform(np.array([0.0, -np.inf, -1.0]), 0.0) == pytest.approx(math.log(2))


def test_elementary_bounds_on_family_rows():
    """kappa >= log 2/Delta_(2), kappa >= log n/Delta_(n); kappa_K non-increasing in K (theory.md §3.1)."""
    rng = np.random.default_rng(2)
    for name in families.STANDARD:
        scores = families.get(name).sample(64, 20, rng)
        gaps = critscale.sorted_gaps(scores)
        kappa = critscale.accumulation_scale(scores)
        assert np.all(kappa >= np.log(2) / gaps[:, 1] * (1 - 1e-12))
        assert np.all(kappa >= np.log(64) / gaps[:, -1] * (1 - 1e-12))
        previous = kappa
        for K in (3, 8, 16, 64):
            current = critscale.accumulation_scale(scores, K=K)
            assert np.all(current <= previous)
            previous = current
        assert np.allclose(previous, np.log(64) / gaps[:, -1], rtol=1e-13)  # K = n is the range bound


def test_lemma1_legendre_vanishes_exactly_above_kappa():
    """Lemma 1 (theory.md §3.2): Lambda(beta) = 0 iff beta >= kappa, for a unique maximum."""
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((50, 40))
    kappa = critscale.accumulation_scale(scores)
    above = np.array([critscale.legendre_transform(s, k * (1 + 1e-9)) for s, k in zip(scores, kappa)])
    below = np.array([critscale.legendre_transform(s, k * (1 - 1e-6)) for s, k in zip(scores, kappa)])
    assert np.all(above == 0.0)
    assert np.all(below > 0.0)


def test_memory_blocks_do_not_change_results(monkeypatch):
    rng = np.random.default_rng(4)
    scores = rng.standard_normal((7, 50))
    scores[2, :10] = -np.inf
    beta = np.linspace(0, 5, 9)
    reference = (critscale.accumulation_scale(scores, K=4), critscale.legendre_transform(scores, beta),
                 critscale.gap_counts(scores, [0.0, 0.5, 1.0]))
    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 64)  # forces one row (and one beta) per block
    small = (critscale.accumulation_scale(scores, K=4), critscale.legendre_transform(scores, beta),
             critscale.gap_counts(scores, [0.0, 0.5, 1.0]))
    for a, b in zip(reference, small):
        assert np.array_equal(a, b)


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    scores = torch.randn(3, 11, dtype=torch.float32)
    scores[1, 4] = -float("inf")
    kappa = critscale.accumulation_scale(scores)
    assert isinstance(kappa, torch.Tensor) and kappa.dtype == torch.float64 and kappa.device == scores.device
    assert np.array_equal(kappa.numpy(), critscale.accumulation_scale(scores.double().numpy()))
    counts = critscale.gap_counts(scores, torch.tensor([0.0, 1.0]))
    assert isinstance(counts, torch.Tensor) and counts.shape == (3, 2)
    assert isinstance(critscale.sorted_gaps(scores), torch.Tensor)


def test_in_units_rescales_kappa_and_softmax():
    """in_units(s, kappa) has kappa = 1 and softmax at x equal to the row's at x kappa; it is chapters 02/03's
    expression bit for bit.  Scaling without the shift would keep kappa but lose the rounding guarantee;
    dividing by the scale would give kappa = kappa^2."""
    rng = np.random.default_rng(4)
    scores = np.concatenate([families.get(name).sample(50, 4, rng) for name in ("gauss", "unif", "planted")])
    scores[0, :5] = -np.inf  # masked entries stay masked
    kappa = critscale.accumulation_scale(scores)
    unit = critscale.in_units(scores, kappa)
    assert np.array_equal(unit, (scores - scores.max(axis=-1, keepdims=True)) * kappa[:, None])
    assert np.allclose(critscale.accumulation_scale(unit), 1.0, rtol=1e-14)
    assert np.all(np.isneginf(unit[0, :5]))
    x = np.array([0.3, 1.0, 4.0])
    for row, k, u in zip(scores, kappa, unit):
        assert np.allclose(critscale.softmax_stats(u, x).entropy, critscale.softmax_stats(row, x * k).entropy,
                           rtol=1e-12, atol=1e-14)
    assert critscale.in_units(scores[:2], 2.0).shape == (2, 50)  # a scalar scale applies to every row
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        critscale.in_units(scores[:2], np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="does not match the batch shape"):
        critscale.in_units(scores[:2], np.ones(3))


def sorted_gaps_route(scores: np.ndarray, K: int) -> np.ndarray:
    """kappa_K as it was computed before: sort the gaps, divide log(k+1) by each, take the maximum."""
    values = np.asarray(scores, dtype=np.float64).reshape(-1, np.shape(scores)[-1])
    n = values.shape[1]
    if n < K:
        return np.zeros(values.shape[0])
    gaps = np.sort(values.max(axis=-1, keepdims=True) - values, axis=-1)
    with np.errstate(divide="ignore"):
        return (np.log(np.arange(1.0, n + 1)[K - 1:]) / gaps[:, K - 1:]).max(axis=-1)


def kappa_cases() -> list[tuple[str, np.ndarray]]:
    """Rows where the best ratio sits near the maximum (the scan stops early), deep in the row (it cannot), masks,
    ties at the maximum and rows with fewer valid entries than K."""
    rng = np.random.default_rng(12)
    gauss = rng.standard_normal((6, 3001))
    deep = np.concatenate([[0.0], -10.0 - 1e-3 * rng.random(3000)])[None, :]  # kappa_n at the far end
    masked = rng.standard_normal((5, 2000))
    masked[rng.random(masked.shape) < 0.5] = -np.inf
    masked[4, 3:] = -np.inf  # at most three valid entries
    tied = np.round(rng.standard_normal((3, 1500)), 1)
    tied[0, :20] = 9.0  # the maximum twenty times
    return [("gauss", gauss), ("deep", deep), ("masked", masked), ("tied", tied), ("uniform", rng.random((4, 999)))]


@pytest.mark.parametrize("cache", [2**16, 64])
@pytest.mark.parametrize("K", [2, 3, 16, 999])
@pytest.mark.parametrize("name,scores", kappa_cases(), ids=[c[0] for c in kappa_cases()])
def test_accumulation_scale_equals_the_sorted_gaps_route(monkeypatch, cache, K, name, scores):
    """Sorting the scores (not the gaps), checking them on the sorted rows and reading each row from the smallest
    gaps only until log(n)/gap cannot beat the best ratio gives kappa_K of the full sorted-gaps route, within 1e-14
    (inf and 0 exactly); pieces of 256 columns (cache 64) make the scan stop at many places."""
    monkeypatch.setattr(_validate, "CACHE_ELEMENTS", cache)
    new = critscale.accumulation_scale(scores, K=K)
    old = sorted_gaps_route(scores, K)
    assert np.array_equal(np.isinf(new), np.isinf(old)) and np.array_equal(new == 0, old == 0)
    finite = np.isfinite(old)
    np.testing.assert_allclose(new[finite], old[finite], rtol=1e-14, atol=0)
