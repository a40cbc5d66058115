"""Property tests (hypothesis): invariances, monotonicity, Lemma 0, Theorems 1-3 and Corollaries 4-5 on every row.

Rows are drawn from every family (with random scale, masked entries and rounding that creates ties)
and from a coarse dyadic grid (exact arithmetic, many ties).  theory.md §3.1-§3.2.  The bounds are the
library's own (critscale.bounds); tests/test_bounds.py shows on exact rows that each can fail.
"""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import critscale
from critscale import bounds, families

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
SLACK = 1e-9  # relative slack for inequalities (roots are solved to ~1e-13)


@st.composite
def rows(draw):
    """One float64 row with at least one valid (finite) entry; -inf entries are masked."""
    n = draw(st.integers(1, 40))
    if draw(st.booleans()):
        family = families.get(draw(st.sampled_from(families.names())))
        seed = draw(st.integers(0, 2**32 - 1))
        row = family.sample(max(n, family.min_n), 1, np.random.default_rng(seed))[0]
        row = row * draw(st.sampled_from([1.0, 1e-100, 1e100, 0.37]))
        digits = draw(st.sampled_from([None, 1, 3]))
        if digits is not None and abs(row).max() < 1e50 and abs(row).max() > 1e-50:
            row = np.round(row, digits)  # ties
    else:
        row = np.array(draw(st.lists(st.integers(-40, 40), min_size=n, max_size=n)), dtype=np.float64) / 4
    mask = np.array(draw(st.lists(st.booleans(), min_size=len(row), max_size=len(row))))
    mask[draw(st.integers(0, len(row) - 1))] = False  # keep one valid entry
    return np.where(mask & (np.arange(len(row)) % 2 == 0), -np.inf, row)


def valid_count(row):
    return int(np.isfinite(row).sum())


def spread(row):
    valid = row[np.isfinite(row)]
    return max(float(valid.max() - valid.min()), 1e-300)


def beta_grid(row):
    return np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 13) / spread(row)])


@SETTINGS
@given(rows(), st.integers(-8, 8), st.integers(-3, 3))
def test_shift_invariance_and_dyadic_scale_covariance(row, shift, log2_scale):
    """kappa_K(a s + b) = kappa_K(s)/a, exactly for a = 2^j and an integer b on the dyadic grid."""
    a = 2.0**log2_scale
    grid_row = np.round(row * 4) / 4 if np.all(np.abs(row[np.isfinite(row)]) < 1e6) else row
    moved = a * grid_row + shift
    for K in (2, 3):
        assert np.array_equal(critscale.accumulation_scale(moved, K=K), critscale.accumulation_scale(grid_row, K=K) / a)


@SETTINGS
@given(rows(), st.floats(0.01, 100.0))
def test_scale_covariance_of_kappa_and_softmax(row, a):
    """kappa(a s) = kappa(s)/a, and softmax(beta * a s) = softmax(a beta * s)."""
    kappa = critscale.accumulation_scale(row, K=2)
    scaled = critscale.accumulation_scale(a * row, K=2)
    if np.isfinite(kappa):
        assert math.isclose(scaled, kappa / a, rel_tol=1e-9)
    else:
        assert scaled == kappa
    betas = beta_grid(row)
    left = critscale.softmax_stats(a * row, betas / a)
    right = critscale.softmax_stats(row, betas)
    assert np.allclose(left.entropy, right.entropy, rtol=1e-8, atol=1e-12)
    assert np.allclose(left.collision, right.collision, rtol=1e-8, atol=1e-14)


@SETTINGS
@given(rows())
def test_entropy_non_increasing_and_max_weight_non_decreasing(row):
    """dH/dbeta = -beta Var(Delta) <= 0 and p_max non-decreasing (theory.md §3.1)."""
    betas = np.sort(np.concatenate([beta_grid(row), np.linspace(0, 20, 41) / spread(row)]))
    stats = critscale.softmax_stats(row, betas)
    assert np.all(np.diff(stats.entropy) <= 1e-12 * np.maximum(1.0, stats.entropy[:-1]))
    assert np.all(np.diff(stats.max_weight) >= -1e-15)
    assert math.isclose(stats.entropy[0], math.log(valid_count(row)), rel_tol=1e-12, abs_tol=1e-15)
    # the identity dH/dbeta = -beta Var_beta(Delta), by a central difference at one beta
    beta = 1.0 / spread(row)
    gaps = critscale.sorted_gaps(row)
    gaps = gaps[np.isfinite(gaps)] * beta  # measure gaps in units of 1/beta
    weights = np.exp(-gaps) / np.exp(-gaps).sum()
    variance = float(weights @ gaps**2 - (weights @ gaps) ** 2)  # Var(beta Delta) at beta
    step = 1e-4 * beta
    h_plus, h_minus = critscale.softmax_stats(row, [beta + step, beta - step]).entropy
    derivative = (h_plus - h_minus) / (2 * step) * beta  # beta dH/dbeta = -Var(beta Delta)
    assert math.isclose(derivative, -variance, rel_tol=1e-5, abs_tol=1e-9)


@SETTINGS
@given(rows())
def test_laplace_stieltjes_identity(row):
    """Lemma 0: Z(beta) = beta int_0^inf e^{-beta t} N(t) dt and Z - N(0) = beta int e^{-beta t}(N(t) - N(0)) dt.

    N is a right-continuous step function, so the integral is exact: the sum over its jumps t_k of
    N(t_k) (e^{-beta t_k} - e^{-beta t_{k+1}}), with t_{m+1} = inf.
    """
    gaps = critscale.sorted_gaps(row)
    jumps = np.unique(gaps[np.isfinite(gaps)])  # (m,) distinct gap values, jumps[0] = 0
    counts = critscale.gap_counts(row, jumps)  # (m,)
    for beta in beta_grid(row)[1:]:
        decay = np.exp(-beta * np.append(jumps, np.inf))  # (m+1,)
        integral = float(np.sum(counts * (decay[:-1] - decay[1:])))
        excess = float(np.sum((counts - counts[0]) * (decay[:-1] - decay[1:])))
        z = math.exp(critscale.softmax_stats(row, beta).log_z)
        assert math.isclose(integral, z, rel_tol=1e-12)
        assert math.isclose(excess, z - counts[0], rel_tol=1e-9, abs_tol=1e-12 * z)


@SETTINGS
@given(rows())
def test_theorem1_free_energy_sandwich(row):
    """thm-02-sandwich (critscale.bounds.free_energy_bounds): Lambda(beta) <= log Z <= Lambda(theta beta) +
    log 1/(1-theta), and H >= log Z, on every drawn row."""
    betas = beta_grid(row)
    stats = critscale.softmax_stats(row, betas)
    assert np.all(stats.entropy >= stats.log_z * (1 - SLACK) - 1e-15)
    for theta in (0.1, 0.5, 0.9):
        sandwich = bounds.free_energy_bounds(row, betas, theta=theta)
        assert np.all(sandwich.lower <= stats.log_z * (1 + SLACK) + 1e-15)
        assert np.all(stats.log_z <= sandwich.upper * (1 + SLACK))


@SETTINGS
@given(rows())
def test_theorem2_supercritical_collapse(row):
    """thm-03-collapse (critscale.bounds.collapse_bounds) for a unique maximum at beta/kappa from 1.01 to 1e4."""
    kappa = float(critscale.accumulation_scale(row))
    if not (np.isfinite(kappa) and kappa > 0):
        return  # tied maximum (kappa = inf) or a single valid entry (kappa = 0): nothing to bound
    ratios = np.array([1.01, 1.5, 2.5, 4.0, 10.0, 100.0, 1e4])
    betas = ratios * kappa
    stats = critscale.softmax_stats(row, betas)
    collapse = bounds.collapse_bounds(kappa, betas)
    assert np.all(np.expm1(stats.log_z) <= collapse.z_minus_one * (1 + SLACK))
    assert np.all(-np.expm1(-stats.log_z) <= collapse.outside * (1 + SLACK) + 1e-15)
    assert np.all(stats.entropy <= collapse.entropy * (1 + SLACK))
    assert np.all(stats.entropy <= collapse.entropy_simple * (1 + SLACK))
    assert np.all(np.isfinite(collapse.entropy[ratios > 2])) and np.all(np.isfinite(collapse.entropy_simple[ratios >= 4]))


@SETTINGS
@given(rows())
def test_theorem3_subcritical_spreading(row):
    """thm-03-spreading (critscale.bounds.spreading_bounds) for beta < kappa_K, K in {2, 3, 5, n}, and its
    dispersion case cor-03-dispersion (critscale.bounds.dispersion_bounds)."""
    for K in sorted({2, 3, 5, valid_count(row)}):
        if K < 2:
            continue
        kappa_k = float(critscale.accumulation_scale(row, K=K))
        if not (np.isfinite(kappa_k) and kappa_k > 0):
            continue  # too short for K (0) or maximum of multiplicity >= K (inf)
        fractions = np.array([0.0, 0.1, 0.5, 0.9, 0.999])
        betas = fractions * kappa_k
        stats = critscale.softmax_stats(row, betas)
        legendre_bound = np.exp(-critscale.legendre_transform(row, betas))
        spread = bounds.spreading_bounds(kappa_k, betas, K)
        assert np.all(stats.max_weight <= legendre_bound * (1 + SLACK))
        assert np.all(legendre_bound <= spread.max_weight * (1 + SLACK))
        assert np.all(stats.entropy >= spread.entropy * (1 - SLACK))
        if K == valid_count(row):
            dispersion = bounds.dispersion_bounds(row, betas)
            assert np.all(stats.max_weight <= dispersion.max_weight * (1 + 1e-9))
            assert np.all(stats.entropy >= dispersion.entropy - 1e-9 * np.abs(dispersion.entropy))


@SETTINGS
@given(rows())
def test_corollaries_4_and_5(row):
    """cor-04-brackets (bounds.beta_half_bracket, bounds.beta_entropy_bracket) and cor-04-critical-scale
    (bounds.critical_scale_bounds) on every drawn row with a unique maximum."""
    n_valid = valid_count(row)
    kappa = float(critscale.accumulation_scale(row))
    if n_valid < 2 or not np.isfinite(kappa):
        return  # no root exists (single entry) or the maximum is tied (checked in test_roots)
    beta_half = float(critscale.beta_at_max_weight(row, 0.5))
    targets = [h for h in (0.3, 1.0) if h < math.log(n_valid)]
    beta_h = {h: float(critscale.beta_at_entropy(row, h)) for h in targets}
    for K in range(2, n_valid + 1):
        kappa_k = float(critscale.accumulation_scale(row, K=K))
        half = bounds.beta_half_bracket(kappa, kappa_k, K)
        assert half.lower <= beta_half * (1 + SLACK) and beta_half <= half.upper * (1 + SLACK)
        for h, b in beta_h.items():
            bracket = bounds.beta_entropy_bracket(kappa, kappa_k, K, h)
            assert b <= bracket.upper * (1 + SLACK)
            if h < math.log(K):
                assert bracket.lower <= b * (1 + SLACK)
        betas = np.array([0.1, 0.5, 4.0, 20.0]) * kappa
        stats = critscale.softmax_stats(row, betas)
        critical = bounds.critical_scale_bounds(kappa, kappa_k, K, betas)
        assert np.all(critical.max_weight_low <= stats.max_weight * (1 + SLACK))
        assert np.all(stats.entropy <= critical.entropy_high * (1 + SLACK) + 1e-15)
        assert np.all(stats.max_weight <= critical.max_weight_high * (1 + SLACK))
        assert np.all(critical.entropy_low <= stats.entropy * (1 + SLACK))


@SETTINGS
@given(rows())
def test_blocked_library_equals_the_direct_routes(row):
    """softmax_stats (cache blocks, one beta at a time) equals the (rows, beta, cols) broadcast, and
    accumulation_scale (sorted scores, scan stopped early) the full sorted-gaps route, within 1e-14 on every row."""
    from critscale import softmax

    betas = np.concatenate([beta_grid(row), [1e3 / spread(row)]])
    values = row[None, :]
    old = softmax._stats_from_sums(softmax._gap_sums_broadcast(softmax._gaps_unsorted(values), betas), betas)
    for a, b in zip(critscale.softmax_stats(row, betas), old):
        np.testing.assert_allclose(a, b[0], rtol=1e-14, atol=0)
    gaps = np.sort(row.max() - row)
    for K in (2, 3):
        with np.errstate(divide="ignore"):
            want = (np.log(np.arange(1.0, len(row) + 1)[K - 1:]) / gaps[K - 1:]).max() if len(row) >= K else 0.0
        got = critscale.accumulation_scale(row, K=K)
        assert got == want or math.isclose(got, want, rel_tol=1e-14)
