"""beta_at_max_weight / beta_at_entropy against scipy's brentq on float64 loops (Corollary 5, theory.md §3.2)."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq

import critscale
from critscale import families


def loop_max_weight(row: np.ndarray, beta: float) -> float:
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    return 1.0 / sum(math.exp(-beta * (top - x)) for x in valid)


def loop_entropy(row: np.ndarray, beta: float) -> float:
    valid = [x for x in row if x > -math.inf]
    top = max(valid)
    weights = [math.exp(-beta * (top - x)) for x in valid]
    z = sum(weights)
    return -sum((w / z) * math.log(w / z) for w in weights if w > 0)


def family_rows(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [families.get(name).sample(30, 2, rng) for name in families.names()]
    return np.concatenate(rows, axis=0)  # (28, 30)


def reference_root(function, target: float) -> float:
    """brentq in log beta on a float64 loop; the function is monotone in beta."""
    return math.exp(brentq(lambda u: function(math.exp(u)) - target, -60.0, 60.0, xtol=1e-14, rtol=1e-14))


def test_max_weight_root_matches_brentq():
    rows = family_rows()
    for p in (0.1, 0.5, 0.9):
        beta = critscale.beta_at_max_weight(rows, p)
        assert beta.shape == (rows.shape[0],)
        for row, b in zip(rows, beta):
            expected = reference_root(lambda x, row=row: -loop_max_weight(row, x), -p)
            assert b == pytest.approx(expected, rel=1e-9)
        achieved = np.array([critscale.softmax_stats(row, b).max_weight for row, b in zip(rows, beta)])
        assert np.allclose(achieved, p, rtol=1e-11, atol=0)


def test_entropy_root_matches_brentq():
    rows = family_rows(1)
    for h in (0.05, 1.0, 2.5):
        beta = critscale.beta_at_entropy(rows, h)
        for row, b in zip(rows, beta):
            expected = reference_root(lambda x, row=row: loop_entropy(row, x), h)
            assert b == pytest.approx(expected, rel=1e-8)
        achieved = np.array([critscale.softmax_stats(row, b).entropy for row, b in zip(rows, beta)])
        assert np.allclose(achieved, h, rtol=1e-11, atol=0)


def test_ties_masks_and_boundary_values():
    rows = np.array([
        [1.0, 1.0, 0.0, -1.0, -np.inf],  # maximum of multiplicity 2, one masked entry
        [0.0, -0.5, -np.inf, -2.0, -3.0],
    ])
    beta = critscale.beta_at_max_weight(rows, 0.4)
    for row, b in zip(rows, beta):
        assert loop_max_weight(row, b) == pytest.approx(0.4, rel=1e-12)
    # the value at beta = 0 gives 0: p = 1/n_valid, h = log n_valid
    assert np.all(critscale.beta_at_max_weight(rows, 0.25) == 0.0)
    assert np.all(critscale.beta_at_entropy(rows, math.log(4)) == 0.0)
    h = critscale.beta_at_entropy(rows, 0.8)
    for row, b in zip(rows, h):
        assert loop_entropy(row, b) == pytest.approx(0.8, rel=1e-12)


def test_per_row_targets_and_batch_shape():
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((2, 3, 40))
    p = np.array([[0.2], [0.6]])  # broadcasts over the second batch axis
    beta = critscale.beta_at_max_weight(scores, p)
    assert beta.shape == (2, 3)
    achieved = critscale.softmax_stats(scores[1, 2], beta[1, 2]).max_weight
    assert achieved == pytest.approx(0.6, rel=1e-11)


def test_no_solution_names_the_rows():
    rows = np.array([[0.0, -1.0, -2.0], [1.0, 1.0, 0.0], [0.0, -1.0, -2.0]])
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        critscale.beta_at_max_weight(rows, 0.5)  # tied maximum: p_max < 1/2 for every beta
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_max_weight(rows, 0.2)  # p < 1/n_valid
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_entropy(rows, 2.0)  # h > log n_valid
    with pytest.raises(ValueError, match=r"rows \[0, 1, 2\]"):
        critscale.beta_at_entropy(rows, 0.0)  # H -> 0 only as beta -> inf
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        critscale.beta_at_entropy(rows, math.log(2))  # H > log 2 for every beta when the max is tied


def test_wide_gap_ranges_converge():
    """A row with gaps spanning 12 decades, and beta * gap far beyond 1e6."""
    row = np.array([0.0, -1e-6, -1.0, -1e6, -1e6])
    for p in (0.3, 0.5, 0.7):
        b = critscale.beta_at_max_weight(row, p)
        assert loop_max_weight(row, b) == pytest.approx(p, rel=1e-11)
    for h in (1e-8, 0.5, 1.5):
        b = critscale.beta_at_entropy(row, h)
        assert loop_entropy(row, b) == pytest.approx(h, rel=1e-9)


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    scores = torch.randn(5, 20)
    beta = critscale.beta_at_entropy(scores, 1.0)
    assert isinstance(beta, torch.Tensor) and beta.dtype == torch.float64 and beta.shape == (5,)
    assert np.allclose(beta.numpy(), critscale.beta_at_entropy(scores.double().numpy(), 1.0), rtol=0, atol=0)


# ---------------------------------------------------------------- near-ties and extreme gaps (issue 14)

def mp_gaps(row):
    """The float64 gaps of a row as exact mpmath numbers (the library computes the same float gaps)."""
    mpmath = pytest.importorskip("mpmath")
    row = np.asarray(row, dtype=np.float64)
    top = row[np.isfinite(row)].max()
    return [mpmath.mpf(float(top - x)) for x in row if np.isfinite(x)]


def mp_root(function, beta, mpmath):
    """Bisection in log beta at 40 digits on a bracket around ``beta`` that is checked to contain a sign change."""
    lo, hi = mpmath.log(mpmath.mpf(beta) / 2), mpmath.log(mpmath.mpf(beta) * 2)
    assert function(mpmath.exp(lo)) > 0 > function(mpmath.exp(hi)), "reference bracket does not contain the root"
    for _ in range(160):
        mid = (lo + hi) / 2
        if function(mpmath.exp(mid)) > 0:
            lo = mid
        else:
            hi = mid
    return float(mpmath.exp((lo + hi) / 2))


def mp_max_weight_root(row, p, beta):
    mpmath = pytest.importorskip("mpmath")
    gaps = mp_gaps(row)
    with mpmath.workdps(40):
        return mp_root(lambda b: mpmath.fsum(mpmath.exp(-b * d) for d in gaps) - 1 / mpmath.mpf(p), beta, mpmath)


def mp_entropy_root(row, h, beta):
    mpmath = pytest.importorskip("mpmath")
    gaps = mp_gaps(row)

    def excess(b):
        weights = [mpmath.exp(-b * d) for d in gaps]
        z = mpmath.fsum(weights)
        return mpmath.log(z) + b * mpmath.fsum(d * w for d, w in zip(gaps, weights)) / z - mpmath.mpf(h)

    with mpmath.workdps(40):
        return mp_root(excess, beta, mpmath)


NEAR_TIES = [
    [1.0, 1.0 - 1e-15, 0.0, -1.0],
    [0.0, -1e-15, -3e-15, -0.5, -2.0],
    [0.0, -1e-12, -1e-12, -3.0, -4.0],
    [0.0, -1e-9, -2.0, -5.0],
    [0.0, -1e-6, -1e-6 * (1 + 2**-20), -1.0, -1.0, -np.inf, -7.0],
]
EXTREME = [[0.0, -1e-300, -2e-300, -1e300], [0.0, -1e300, -1e-300, -3e-300], [5e299, 0.0, -5e299]]
ROOT_RTOL = 1e-14  # 10 x BETA_RTOL: the iteration's tolerance plus the rounding of one evaluation


def test_near_tie_at_half_is_the_high_precision_root():
    """Issue 14 case: [1, 1 - 1e-15, 0, -1] at p = 1/2 is 31.10 (mpmath), not 151.04, although p_max(151.04)
    is within 4e-14 of 1/2: the solver must stop on beta, not on the residual."""
    row = np.array([[1.0, 1.0 - 1e-15, 0.0, -1.0]])
    beta = float(critscale.beta_at_max_weight(row, 0.5)[0])
    assert beta == pytest.approx(mp_max_weight_root(row[0], 0.5, 31.1), rel=ROOT_RTOL)
    assert 31.10 < beta < 31.11


@pytest.mark.parametrize("row", NEAR_TIES + EXTREME, ids=lambda r: str(r[:3]))
def test_roots_agree_with_mpmath_on_near_ties_and_extreme_gaps(row):
    """Gaps from 1e-15 (near-ties, where p_max and H are flat over decades of beta) to 1e300, and targets on
    the plateau log 2 of a near-tied pair: beta to 1e-14 relative against a 40-digit reference, and no
    floating-point warning (the old solver gave 151.04 for 31.10 and 50-150 overflow warnings per call)."""
    row = np.asarray(row, dtype=np.float64)
    n_valid = int(np.isfinite(row).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for p in (0.3, 0.45, 0.5, 0.7, 0.9):
            if not 1 / n_valid < p < 1:
                continue
            beta = float(critscale.beta_at_max_weight(row, p))
            assert beta == pytest.approx(mp_max_weight_root(row, p, beta), rel=ROOT_RTOL), p
        for h in (0.01, 0.5, 0.69, math.log(2), 0.6931471805599, 1.0):
            if not 0 < h < math.log(n_valid):
                continue
            beta = float(critscale.beta_at_entropy(row, h))
            assert beta == pytest.approx(mp_entropy_root(row, h, beta), rel=ROOT_RTOL), h


def test_coarse_stage_only_chooses_the_start(monkeypatch):
    """Rows longer than 3072 are first solved on a compressed copy; the answer must be the exact equation's
    root all the same (compared with the solve without the coarse stage), also with masks and ties."""
    from critscale import roots

    rng = np.random.default_rng(17)
    rows = np.concatenate([families.get(name).sample(5000, 3, rng) for name in
                           ("gauss", "unif", "planted", "ptail1", "sphere5", "pareto1")])  # (18, 5000)
    rows[0, ::3] = -np.inf
    rows[1, :40] = rows[1].max()  # 40-fold maximum
    p = np.where(np.arange(len(rows)) == 1, 0.02, 0.5)  # the 40-fold maximum has p_max <= 1/40
    h = np.where(np.arange(len(rows)) == 1, 4.0, 1.3)  # and H >= log 40
    with_stage = (critscale.beta_at_max_weight(rows, p), critscale.beta_at_entropy(rows, h))
    monkeypatch.setattr(roots, "_coarse_columns", lambda n: None)
    without = (critscale.beta_at_max_weight(rows, p), critscale.beta_at_entropy(rows, h))
    for a, b in zip(with_stage, without):
        assert np.allclose(a, b, rtol=ROOT_RTOL, atol=0)
