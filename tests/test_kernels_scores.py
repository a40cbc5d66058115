"""Kind ``scores`` (stored scores): the Triton kernels against the critscale float64 reference.

Every case runs under the interpreter on CPU and, marked ``gpu``, on CUDA (skips are reported).
Tolerances are derived in :mod:`critscale.kernels.testing`; the beta ladder's error bound in
:mod:`critscale.kernels.ladder`.
"""

import math

import numpy as np
import pytest
import torch

import critscale
from critscale.kernels import kappa_bounds, scores_row_stats as row_stats
from critscale.kernels.ladder import EX2_REL_GPU, EX2_REL_INTERPRETER, beta_plan, term_error_bound
from critscale.kernels.scores import torch_reference
from critscale.kernels.testing import (assert_close_rel, backend_params, check_softmax_fields, device_of,
                                       require)

BETA = np.array([0.0, 0.3, 1.0, 2.5, 10.0, 80.0, 1e3, 1e6])


def irregular_scores(rows: int, n: int, seed: int) -> torch.Tensor:
    """fp32 scores with the awkward cases: masked prefixes, a tied maximum, n-wide ties, a one-entry row."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(rows, n, generator=g) * 2.0
    s[1, : n // 2] = float("-inf")  # masked prefix
    s[2, : n - 1] = float("-inf")  # one valid entry
    s[3, 5 % n] = s[3].max()  # tied maximum
    s[4] = 0.25  # every entry tied
    s[5] = torch.round(s[5] * 4) / 4  # many ties at dyadic values
    s[6] = s[6] * 1e4  # huge gaps: beta * Delta up to 1e10
    return s


def grid_t(scores: torch.Tensor) -> np.ndarray:
    return np.array([0.0, 0.01, 0.1, 0.3, 1.0, 3.0, 10.0, np.inf])


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("rows,n,split", [(9, 1, None), (19, 173, 3), (33, 300, None)])
def test_softmax_fields_match_reference(backend, rows, n, split):
    require(backend)
    s = irregular_scores(rows, n, seed=rows * 1000 + n) if n > 8 else torch.randn(rows, n)
    res = row_stats(s.to(device_of(backend)), BETA, grid_t(s), backend=backend, split=split).to_numpy()
    assert res.backend == backend
    ref = critscale.softmax_stats(s.double().numpy(), BETA)
    valid = np.isfinite(s.numpy()).sum(axis=1)
    check_softmax_fields(res, ref, valid)
    np.testing.assert_array_equal(res.n_valid, valid)
    np.testing.assert_array_equal(res.top, s.double().numpy().max(axis=1))


@pytest.mark.parametrize("backend", backend_params())
def test_geometric_grid_by_squaring_matches_reference(backend):
    """24 betas of ratio 2^{1/4} on the irregular rows: chains are cut after four squarings (4 roots of 5
    levels, then 4 more roots for the last octave and C), and the sums agree with the float64 reference within
    the derived tolerance (which includes the squarings' share)."""
    require(backend)
    beta = 0.05 * 2.0 ** (np.arange(24) / 4)
    s = irregular_scores(9, 150, seed=17)
    res = row_stats(s.to(device_of(backend)), beta, grid_t(s), backend=backend).to_numpy()
    assert res.notes["exp2_per_score"] == 8 and res.notes["levels"] == 5
    check_softmax_fields(res, critscale.softmax_stats(s.double().numpy(), beta), np.isfinite(s.numpy()).sum(axis=1))


@pytest.mark.parametrize("backend", backend_params())
def test_counts_exact_on_dyadic_scores(backend):
    """Scores k/64 and thresholds at half-grid points: every gap and threshold is exact in fp32."""
    require(backend)
    g = torch.Generator().manual_seed(5)
    s = torch.randint(-300, 300, (21, 257), generator=g).float() / 64.0  # (21, 257)
    s[0, :100] = float("-inf")
    t = (np.arange(0, 40) + 0.5) / 64.0
    t = np.concatenate([[0.0], t, [np.inf]])
    res = row_stats(s.to(device_of(backend)), [1.0], t, backend=backend).to_numpy()
    want = critscale.gap_counts(s.double().numpy(), t)
    np.testing.assert_array_equal(res.counts, want)
    np.testing.assert_array_equal(res.m0, want[:, 0])


@pytest.mark.parametrize("backend", backend_params())
def test_counts_random_scores_band(backend):
    """Random scores: N_ref(t - eps) <= N(t) <= N_ref(t + eps) with eps the fp32 rounding of gaps and t."""
    require(backend)
    s = irregular_scores(17, 211, seed=11)
    t = np.array([0.0, 0.05, 0.2, 0.7, 1.5, 4.0])
    res = row_stats(s.to(device_of(backend)), [1.0], t, backend=backend).to_numpy()
    s64 = s.double().numpy()
    eps = 1e-6 * (1 + np.abs(np.max(s64, axis=1)))[:, None]  # (rows, 1)
    lo = np.stack([critscale.gap_counts(s64[i:i + 1], np.maximum(t - eps[i], 0))[0] for i in range(len(s64))])
    hi = np.stack([critscale.gap_counts(s64[i:i + 1], t + eps[i])[0] for i in range(len(s64))])
    assert ((lo <= res.counts) & (res.counts <= hi)).all()


@pytest.mark.parametrize("backend", backend_params())
def test_kappa_bracket_contains_exact_and_grid_factor(backend):
    """kappa_lower <= kappa <= kappa_upper always; <= r kappa_lower on a covering geometric grid."""
    require(backend)
    g = torch.Generator().manual_seed(3)
    s = torch.randn(24, 150, generator=g)
    s[0, 3] = s[0].max()  # tie -> inf
    s64 = s.double().numpy()
    exact = critscale.accumulation_scale(s64)
    srt = -np.sort(-s64, axis=1)
    d2 = srt[:, 0] - srt[:, 1]
    rng = srt[:, 0] - srt[:, -1]
    r = 1.25
    t1 = d2[d2 > 0].min() * 0.999
    J = int(np.ceil(np.log(rng.max() / t1) / np.log(r))) + 1
    t = t1 * r ** np.arange(J + 1)
    res = row_stats(s.to(device_of(backend)), [1.0], t, backend=backend).to_numpy()
    assert np.isinf(res.kappa_lower[0]) and np.isinf(res.kappa_upper[0]) and np.isinf(exact[0])
    fin = np.isfinite(exact)
    assert (res.kappa_lower[fin] <= exact[fin] * (1 + 1e-9)).all()
    assert (res.kappa_upper[fin] >= exact[fin] * (1 - 1e-9)).all()
    assert (res.kappa_upper[fin] <= r * res.kappa_lower[fin] * (1 + 1e-9)).all()
    assert_close_rel(res.delta2[fin], d2[fin], 0, 0, "second gap")
    assert_close_rel(res.range, rng, 0, 0, "range")


def test_kappa_bounds_brute_force():
    """The bracket formula against a brute-force sup of log N(t)/t over a fine t grid (float64 only)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        s = rng.standard_normal(n)
        d = np.sort(s.max() - s)
        exact = critscale.accumulation_scale(s[None, :])[0]
        t = np.sort(rng.uniform(0, d[-1] * 1.5, size=int(rng.integers(1, 12))))
        counts = torch.as_tensor(critscale.gap_counts(s[None, :], t))
        lo, hi = kappa_bounds(counts, t, torch.tensor([float(n)]), torch.tensor([d[1]]), torch.tensor([d[-1]]),
                              torch.tensor([1.0]))
        assert lo.item() <= exact * (1 + 1e-12) <= hi.item() * (1 + 1e-12) + 1e-300
        # no value of log N(t)/t on any t exceeds the upper bound
        tt = np.linspace(d[1], d[-1] * 2, 4000)
        vals = np.log(np.searchsorted(d, tt, side="right")) / tt
        assert vals.max() <= hi.item() * (1 + 1e-12)


@pytest.mark.parametrize("backend", backend_params())
def test_half_precision_inputs(backend):
    """bf16/fp16 scores are read as stored: same tolerance against the reference on the rounded values."""
    require(backend)
    s = irregular_scores(12, 130, seed=2)
    for dt in (torch.bfloat16, torch.float16):
        x = s.clamp(-6e4, 6e4).to(dt)
        res = row_stats(x.to(device_of(backend)), BETA, [0.0, 1.0], backend=backend).to_numpy()
        ref = critscale.softmax_stats(x.double().numpy(), BETA)
        check_softmax_fields(res, ref, np.isfinite(x.double().numpy()).sum(axis=1))


@pytest.mark.parametrize("backend", backend_params())
def test_split_invariance_and_batch_shape(backend):
    """Any number of column chunks gives the same counts and (to fp32 rounding) the same sums."""
    require(backend)
    # at least 3 column tiles for every block width used (GPU: 512); the interpreter's tiles are 128 wide, so there
    # 700 columns make 6 tiles, the last one partial: split 3 gives 3 chunks of 2 tiles each (a middle chunk, a loop
    # over tiles inside each chunk, the tail in the last), as 1500 did with 12 tiles, at under half the time
    n = 700 if backend == "triton-interpreter" else 1500
    s = irregular_scores(10, n, seed=9).reshape(2, 5, n)
    a = row_stats(s.to(device_of(backend)), [0.5, 2.0], [0.0, 0.5, 2.0], backend=backend, split=1)
    b = row_stats(s.to(device_of(backend)), [0.5, 2.0], [0.0, 0.5, 2.0], backend=backend, split=3)
    assert a.log_z.shape == (2, 5, 2) and a.counts.shape == (2, 5, 3) and a.kappa_lower.shape == (2, 5)
    # the launcher rounds the split to whole tiles per chunk: cdiv(tiles, cdiv(tiles, 3))
    tiles = -(-n // b.notes["block"][1])
    assert a.notes["split"] == 1 and b.notes["split"] == -(-tiles // -(-tiles // 3)) >= 2
    torch.testing.assert_close(a.counts, b.counts, rtol=0, atol=0)
    torch.testing.assert_close(a.log_z, b.log_z, rtol=1e-6, atol=1e-30)


def test_tutorial_reference_agrees_with_critscale():
    """The in-file torch reference (tutorial style) equals the critscale reference."""
    s = irregular_scores(9, 40, seed=1)
    ref = torch_reference(s, BETA, [0.0, 0.5, np.inf])
    crit = critscale.softmax_stats(s.double().numpy(), BETA)
    assert_close_rel(ref.log_z.numpy(), crit.log_z, 1e-12, 1e-300, "log Z")
    assert_close_rel(ref.entropy.numpy(), crit.entropy, 1e-12, 1e-300, "entropy")


def test_dispatch_and_errors():
    """Auto dispatch names what ran; bad input raises ValueError naming the problem."""
    s = torch.randn(4, 50)
    auto = row_stats(s, [1.0], [0.5])
    if torch.cuda.is_available() and auto.backend == "triton-cuda":
        pass
    else:
        assert auto.backend in ("triton-interpreter", "reference")
    ref = row_stats(s.numpy(), [1.0], [0.5], backend="reference")
    assert ref.backend == "reference" and isinstance(ref.log_z, np.ndarray)
    assert_close_rel(np.asarray(auto.log_z.cpu()), ref.log_z, 1e-5, 1e-30, "auto vs reference")
    big = row_stats(torch.randn(2, 40000), [1.0], [0.5])
    if not torch.cuda.is_available():
        assert big.backend == "reference"
    bad = s.clone()
    bad[1, 3] = float("nan")
    for backend in ("reference", "auto"):
        with pytest.raises(ValueError, match="NaN"):
            row_stats(bad, [1.0], [0.5], backend=backend)
    bad[1, 3] = float("inf")
    with pytest.raises(ValueError, match=r"\+inf"):
        row_stats(bad, [1.0], [0.5])
    empty = s.clone()
    empty[2] = float("-inf")
    with pytest.raises(ValueError, match="empty"):
        row_stats(empty, [1.0], [0.5])
    with pytest.raises(ValueError, match=">= 0"):
        row_stats(s, [-1.0], [0.5])
    with pytest.raises(ValueError, match="sorted"):
        row_stats(s, [1.0], [0.5, 0.1])
    with pytest.raises(ValueError, match="length 0"):
        row_stats(torch.zeros(3, 0), [1.0], [0.5])
    with pytest.raises(ValueError, match="backend"):
        row_stats(s, [1.0], [0.5], backend="magic")


def test_large_beta_gap_no_overflow_reference_consistency():
    """beta * Delta = 1e6 .. 1e10 underflows cleanly: log Z = log m0, H = log m0, p_max = 1/m0."""
    s = torch.tensor([[0.0, -1.0, -2.0, 0.0], [5.0, 4.0, -1e4, 3.0]])
    backend = "triton-interpreter" if not torch.cuda.is_available() else "auto"
    res = row_stats(s, [1e6, 1e10], [0.0], backend=backend).to_numpy()
    np.testing.assert_allclose(res.log_z, [[math.log(2)] * 2, [0.0, 0.0]], rtol=1e-7, atol=0)
    np.testing.assert_allclose(res.entropy, [[math.log(2)] * 2, [0.0, 0.0]], rtol=1e-7, atol=0)
    assert np.isfinite(res.entropy).all()


@pytest.mark.parametrize("block", ["gpu", "alt0", "alt1", "alt2"])
def test_gpu_tile_shapes_run_in_interpreter(block):
    """The GPU tile shapes (the default and every alternative the benchmark may pick) run here too."""
    from critscale.kernels import scores as mod

    require("triton-interpreter")
    shape = mod.GPU_BLOCK if block == "gpu" else mod.GPU_BLOCK_ALTERNATIVES[int(block[3:])]
    s = irregular_scores(7, 600, seed=4)  # 7 rows: the awkward ones of irregular_scores
    t = grid_t(s)
    res = row_stats(s, BETA, t, backend="triton-interpreter", block=shape, split=2).to_numpy()
    assert res.notes["block"] == shape and res.notes["kind"] == "scores"
    check_softmax_fields(res, critscale.softmax_stats(s.double().numpy(), BETA), np.isfinite(s.numpy()).sum(axis=1))
    np.testing.assert_array_equal(res.counts, critscale.gap_counts(s.double().numpy(), t))


def test_float32_counts_stay_below_the_exact_limit(monkeypatch):
    """Counts are float32 sums, exact while one lane counts at most 2^24 entries per program; the launcher
    splits rows so that it does.  With the limit lowered to 8 (4 entries per lane and tile in the interpreter
    block), a 1000-column row needs at least 4 column chunks, and its counts stay exact."""
    from critscale.kernels import twopass

    require("triton-interpreter")
    monkeypatch.setattr(twopass, "COUNT_EXACT_LIMIT", 8)
    s = (torch.randint(-300, 300, (2, 1000), generator=torch.Generator().manual_seed(3)).float() / 64)
    t = np.array([0.0, 0.5 / 64, 1.0, 3.0, np.inf])
    res = row_stats(s, [1.0], t, backend="triton-interpreter", split=1).to_numpy()
    assert res.notes["block"][1] == 128  # 8 tiles of 128 columns (the last partial), 4 entries per lane and tile
    assert res.notes["split"] == 4  # asked for 1: at most 8 / 4 = 2 tiles per chunk
    np.testing.assert_array_equal(res.counts, critscale.gap_counts(s.double().numpy(), t))


@pytest.mark.gpu
def test_one_host_synchronisation_per_call():
    """On CUDA a call waits for the device once, at its end (the input check); grids are uploaded once.
    torch's sync debug mode warns at every synchronising operation: the second call (grids cached) warns once."""
    require("triton-cuda")
    import warnings

    s = torch.randn(64, 4096, device="cuda")
    beta = 0.05 * 2.0 ** (np.arange(32) / 8)
    t = np.linspace(0, 3, 64)
    row_stats(s, beta, t)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            row_stats(s, beta, t)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) == 1, [str(w.message) for w in syncs]


def test_check_block_refuses_shapes_that_cannot_launch():
    from critscale.kernels.scores import check_block

    assert check_block((1, 512, 8, 64, 4)) == (1, 512, 8, 64, 4)
    for bad in ((1, 100, 8, 64, 4), (1, 2, 8, 64, 4), (3, 512, 8, 64, 4), (1, 512, 0, 64, 4)):
        with pytest.raises(ValueError, match="power of two"):
            check_block(bad)


# ----------------------------------------------------------------------------------------------
# The beta ladder (one exp2 per chain of doubling betas) and its error bound
# ----------------------------------------------------------------------------------------------


def test_ladder_plan_geometric_and_arbitrary_grids():
    """A geometric grid of ratio 2^{1/8} (32 values) is 8 chains of 5 levels (4 for beta, one more for
    C(beta) = A(2 beta)); a grid without doublings has one chain per beta, of 2 levels; beta = 0 needs none.
    Each requested beta (and 2 beta) is found at root * 2^level to the stated tolerance."""
    geo = 0.05 * 2.0 ** (np.arange(32) / 8)
    plan = beta_plan(geo)
    assert len(plan.roots) == 8 and plan.levels == 5 and plan.exp2_per_score == 8
    arbitrary = np.array([0.0, 0.3, 0.7, 1.1, 5.0])
    plan2 = beta_plan(arbitrary)
    assert len(plan2.roots) == 4 and plan2.levels == 2 and plan2.a_slot[0] == -1
    for p, grid in ((plan, geo), (plan2, arbitrary)):
        pos = grid > 0
        value = p.roots[p.a_slot[pos] // p.levels] * 2.0 ** (p.a_slot[pos] % p.levels)
        np.testing.assert_allclose(value, grid[pos], rtol=2.0 ** -30)
        value2 = p.roots[p.c_slot[pos] // p.levels] * 2.0 ** (p.c_slot[pos] % p.levels)
        np.testing.assert_allclose(value2, 2 * grid[pos], rtol=2.0 ** -30)


def _squaring_pipeline(root: float, d: np.ndarray, levels: int) -> list[np.ndarray]:
    """The kernel's float32 operations for one term: b = fl(root log2 e), x = fl(b d), w = exp2(-x), w <- w^2."""
    b = np.float32(root * 1.4426950408889634)
    w = np.exp2(-(b * d.astype(np.float32)))
    out = [w]
    for _ in range(levels - 1):
        w = w * w
        out.append(w)
    return out


@pytest.mark.parametrize("backend", backend_params())
def test_squaring_error_bound_on_adversarial_gaps(backend):
    """Terms made by squaring obey ``ladder.term_error_bound``, and need its squaring part.

    Rows ``[0, -d]`` have ``A(beta) = e^{-beta d}`` exactly one term, read back as ``expm1(log Z)``.  The beta
    grid ``2^l``, ``l = 0..4``, is one chain: level ``l`` is ``l`` squarings of one exp2.  The gaps ``d`` are the
    48 (of 20000) whose float32 pipeline errs most at level 4.  Fails if the bound is too small (any error
    above it), or if it were the bound of a directly evaluated exp2 (``level = 0``): some level-4 errors
    exceed that (by about 4x in the interpreter), so the squarings' ``(2^l - 1)(eps + u)`` is needed.
    """
    require(backend)
    eps = EX2_REL_INTERPRETER if backend == "triton-interpreter" else EX2_REL_GPU
    rng = np.random.default_rng(7)
    # beta d at level 4 in (0.03, 1): there the exponent's rounding (3 u beta d) is small and the squarings'
    # share shows; at large beta d the first term dominates both bounds
    d = rng.uniform(0.002, 0.06, 20000).astype(np.float32)
    beta = 2.0 ** np.arange(5)
    exact = np.exp(-beta[None, :] * d.astype(np.float64)[:, None])  # (rows, levels)
    mirror = np.stack(_squaring_pipeline(1.0, d, 5), axis=1).astype(np.float64)
    worst = np.argsort(-np.abs(mirror[:, 4] / exact[:, 4] - 1))[:48]
    d = d[worst]
    s = torch.zeros(len(d), 2)
    s[:, 1] = -torch.from_numpy(d)
    res = row_stats(s.to(device_of(backend)), beta, [0.0], backend=backend).to_numpy()
    assert res.notes["exp2_per_score"] == 2 and res.notes["levels"] == 5  # C(16) = A(32): a second root
    got = np.expm1(res.log_z)  # (rows, levels): the single term
    want = np.exp(-beta[None, :] * d.astype(np.float64)[:, None])
    err = np.abs(got / want - 1)
    bd = beta[None, :] * d.astype(np.float64)[:, None]
    bound = term_error_bound(np.arange(5)[None, :], bd, eps) + 4e-16  # + the float64 log1p/expm1 round trip
    assert (err <= bound).all(), f"max err/bound {np.max(err / bound):.3f}"
    direct = term_error_bound(0, bd[:, 4], eps)  # per row: the bound of one exp2 at beta = 16
    assert (err[:, 4] > direct).any(), np.max(err[:, 4] / direct)


def test_ceiling_microkernels_compute_what_they_claim():
    """The benchmark's exp2/FMA micro-kernels: the chains give the values a numpy loop gives."""
    from critscale.kernels.ceilings import exp2_chains, fma_chains

    require("triton-interpreter")
    x = torch.rand(64)
    o = torch.empty_like(x)
    exp2_chains[(1,)](x, o, ITERS=3, BLOCK=64)
    a = [x.double().numpy() + k for k in range(4)]
    for _ in range(3):
        a = [2.0 ** -v for v in a]
    np.testing.assert_allclose(o.numpy(), sum(a), rtol=1e-5)
    fma_chains[(1,)](x, o, ITERS=3, BLOCK=64)
    a = [x.double().numpy() + k for k in range(4)]
    for _ in range(3):
        a = [0.999 * v + 0.001 for v in a]
    np.testing.assert_allclose(o.numpy(), sum(a), rtol=1e-5)


@pytest.mark.parametrize("backend", backend_params())
def test_one_launch_of_both_passes_equals_two_launches(backend, monkeypatch):
    """With one column chunk per row the kind runs both passes in one launch (``notes["fused"]``), and its results
    are those of the two launches bit for bit, on rows that need every part of the path: a maximum of -0 beside
    +0 (gaps from an unnormalised -0 maximum would be -0 and miss every count), masked prefixes, ties, a partial
    row block (19 rows), full blocks of pass 2 without a mask and the masked tail after them (n = 2092 in the
    interpreter: one block of 14 tiles of 128 and 300 columns).  A fused kernel that kept -0, skipped the tail,
    read rows past the last or took its maximum from other columns than pass 1 fails here."""
    require(backend)
    from critscale.kernels import scores as kind

    n = 2092 if backend == "triton-interpreter" else 40000
    s = irregular_scores(19, n, seed=4)
    s[7] = -s[7].abs() - 1.0
    s[7, 3], s[7, 10] = -0.0, 0.0  # the maximum is a zero of either sign
    x = s.to(device_of(backend))
    beta, t = [0.5, 4.0], [0.0, 0.3, 3.0]
    one = row_stats(x, beta, t, backend=backend, split=1)
    monkeypatch.setattr(kind, "_scores_fused", None)
    two = row_stats(x, beta, t, backend=backend, split=1)
    assert one.notes["fused"] and not two.notes["fused"] and one.notes["split"] == two.notes["split"] == 1
    for name in one.FIELDS:
        torch.testing.assert_close(getattr(one, name), getattr(two, name), rtol=0, atol=0, equal_nan=True)
    assert float(one.m0[7]) == 2 and float(one.counts[7, 0]) == 2  # both zeros are the maximum: gap +0
    ref = critscale.gap_counts(s.double().numpy(), np.asarray(t))
    np.testing.assert_array_equal(one.counts.cpu().numpy(), ref)
