"""Kind ``sampled`` (scores generated in the kernel): generator identity, laws, and statistics.

- The interpreter's scores equal the numpy mirror bit for bit; on the GPU the uniforms are identical and
  the transcendental functions agree to fp32 rounding (tolerance below).
- The generated scores follow the :mod:`critscale.families` laws (Kolmogorov–Smirnov on 20000 draws of a
  fixed seed: the test fails if the transform or the uniforms are wrong; p-value threshold 1e-3).
- The statistics match the critscale float64 reference on the same scores.
"""

import numpy as np
import pytest
import torch
from scipy import stats

import critscale
from critscale.kernels import GENERATOR_VERSION, sample_scores, sampled_row_stats
from critscale.kernels.sampled import family_code, philox_numpy, sample_scores_numpy
from critscale.kernels.testing import assert_close_rel, backend_params, check_softmax_fields, require

FAMILIES = ["gauss", "ptail1", "ptail3", "logexp", "edge", "unif", "sphere3", "sphere5", "planted", "simplex",
            "planted_shrink", "pareto2"]
BETA = np.array([0.0, 0.5, 2.0, 8.0, 100.0])
T = np.array([0.0, 0.05, 0.3, 1.0, 4.0, np.inf])


def test_philox_known_answer():
    """Philox-4x32-10 known-answer vectors of Salmon et al. (Random123 kat_vectors), counter and key zero / ones."""
    # counter (0,0,0,0), key (0,0) -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
    out = philox_numpy(0, np.array([0], dtype=np.uint32), np.array([0], dtype=np.uint32))
    assert [int(v[0]) for v in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


@pytest.mark.parametrize("backend", backend_params())
def test_generator_matches_numpy_mirror(backend):
    require(backend)
    for fam in FAMILIES:
        got, which = sample_scores(fam, 97, 19, seed=12345, row0=5, backend=backend)
        assert which == backend
        got = got.cpu().numpy()
        want = sample_scores_numpy(family_code(fam, 97), 12345, 19, 97, row0=5)
        if backend == "triton-interpreter":
            np.testing.assert_array_equal(got, want, err_msg=fam)
        else:  # GPU libm vs numpy: a few fp32 ulps of the transcendental steps
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=fam)


def test_rows_do_not_depend_on_the_call():
    """Row r of a call with row0 = a is global row a + r: any way of cutting the rows gives the same scores."""
    fc = family_code("gauss", 50)
    whole = sample_scores_numpy(fc, 3, 10, 50)
    part = sample_scores_numpy(fc, 3, 4, 50, row0=6)
    np.testing.assert_array_equal(whole[6:], part)
    longer = sample_scores_numpy(fc, 3, 10, 80)
    np.testing.assert_array_equal(whole, longer[:, :50])  # score (row, j) does not depend on n
    other = sample_scores_numpy(fc, 4, 10, 50)
    assert not np.array_equal(whole, other)


@pytest.mark.parametrize("fam", FAMILIES)
def test_generated_law_matches_family(fam):
    """KS test of 20000 generated scores (planted/simplex: the bulk) against the family's law."""
    family = critscale.families.get(fam)
    fc = family_code(fam, 2001)
    s = sample_scores_numpy(fc, 99, 10, 2001).astype(np.float64) + fc.shift  # the family's own scores
    if fam in ("planted", "simplex", "planted_shrink"):
        assert (s[:, 0] == np.float32(family_code(fam, 2001).top)).all()
        bulk = s[:, 1:].ravel()
        if fam == "simplex":
            rho, eta = family.params["rho"], family.params["eta"]
            cdf = stats.uniform(rho - eta, 2 * eta).cdf
        else:
            w = family.params["w"]
            cdf = stats.uniform(-w, w).cdf
        p = stats.kstest(bulk, cdf).pvalue
    else:
        p = stats.kstest(s.ravel(), lambda x: 1.0 - family.sf(x)).pvalue
    assert p > 1e-3, f"{fam}: KS p-value {p:.2e}"


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("fam", ["gauss", "logexp", "edge", "planted", "sphere5"])
def test_stats_match_reference_on_same_scores(backend, fam):
    require(backend)
    rows, n = 13, 170
    res = sampled_row_stats(fam, n, rows, BETA, T, seed=21, backend=backend, split=2).to_numpy()
    assert res.backend == backend
    if backend == "triton-interpreter":
        scores = sample_scores_numpy(family_code(fam, n), 21, rows, n).astype(np.float64)
        extra = 0.0
    else:
        gpu_scores, _ = sample_scores(fam, n, rows, seed=21, backend=backend)
        scores = gpu_scores.double().cpu().numpy()
        extra = 2 * BETA[None, :] * 1e-6 * (1 + np.abs(scores).max())  # in case two compilations round differently
    ref = critscale.softmax_stats(scores, BETA)
    check_softmax_fields(res, ref, np.full(rows, n), extra_logz=extra, extra_h=extra * 10)
    if backend == "triton-interpreter":
        np.testing.assert_array_equal(res.counts, critscale.gap_counts(scores, T))
        exact = critscale.accumulation_scale(scores)
        assert (res.kappa_lower <= exact * (1 + 1e-9)).all() and (res.kappa_upper >= exact * (1 - 1e-9)).all()


def test_backends_agree_and_reference_path():
    """The CPU reference path (numpy mirror + critscale) equals the interpreter on the same seed."""
    require("triton-interpreter")
    a = sampled_row_stats("gauss", 150, 6, BETA, T, seed=8, backend="reference").to_numpy()
    assert a.backend == "reference"
    b = sampled_row_stats("gauss", 150, 6, BETA, T, seed=8, backend="triton-interpreter").to_numpy()
    assert_close_rel(b.log_z, a.log_z, 1e-5, 150 * 2.0 ** -126, "log Z")
    np.testing.assert_array_equal(a.counts, b.counts)
    c = sampled_row_stats("gauss", 150, 3, BETA, T, seed=8, row0=3, backend="reference").to_numpy()
    np.testing.assert_array_equal(c.log_z, a.log_z[3:])
    auto = sampled_row_stats("gauss", 1 << 15, 4, [1.0], [0.5], seed=1)
    if not torch.cuda.is_available():
        assert auto.backend == "reference"  # too big for the interpreter: the reference, and it says so


def test_errors():
    with pytest.raises(ValueError, match="sphere9"):
        sampled_row_stats("sphere9", 100, 2, [1.0], [0.5])
    with pytest.raises(ValueError, match="unknown family"):
        sampled_row_stats("nope", 100, 2, [1.0], [0.5])
    with pytest.raises(ValueError, match="n must be"):
        sampled_row_stats("gauss", 0, 2, [1.0], [0.5])
    with pytest.raises(ValueError, match="seed"):
        sampled_row_stats("gauss", 10, 2, [1.0], [0.5], seed=-1)


def test_gpu_tile_shape_runs_in_interpreter():
    """The GPU tile shapes in the interpreter give the same statistics as the small interpreter tiles."""
    from critscale.kernels import sampled as mod

    require("triton-interpreter")
    base = sampled_row_stats("logexp", 700, 3, BETA, T, seed=2, backend="triton-interpreter").to_numpy()
    for shape in (mod.GPU_BLOCK,) + mod.GPU_BLOCK_ALTERNATIVES:  # 700 columns: 2 tiles of 512, split over 2
        res = sampled_row_stats("logexp", 700, 3, BETA, T, seed=2, backend="triton-interpreter", block=shape,
                                split=2).to_numpy()
        np.testing.assert_array_equal(res.counts, base.counts)
        assert_close_rel(res.log_z, base.log_z, 1e-5, 700 * 2.0 ** -126, "log Z")


@pytest.mark.parametrize("fam", ["unif", "sphere3"])
def test_reflected_families_resolve_top_gaps(fam):
    """unif and sphere3 are generated as ``score - 1``: near the top the fp32 values are not on the lattice
    ``2^-24`` that fp32 has near 1 (the old generator's), and the guard passes at n = 2^26 (it fails for a
    top held near 1)."""
    fc = family_code(fam, 1 << 16)
    assert fc.shift == 1.0
    s = sample_scores_numpy(fc, 5, 8, 1 << 16).astype(np.float64)  # (8, 2^16), reduced scores <= 0
    assert (s < 0).all()
    top2 = -np.sort(-s, axis=1)[:, :2]
    gaps = top2[:, 0] - top2[:, 1]
    assert (gaps > 0).all()
    on_lattice = np.abs(gaps * 2.0 ** 24 - np.round(gaps * 2.0 ** 24)) < 1e-6
    assert not on_lattice.all(), "top gaps on the fp32 lattice of 1: the reflection is lost"
    kb = critscale.families.get(fam).kappa_bar(1 << 26)
    from critscale.kernels.sampled import FP32_GAP_LIMIT, fp32_gap_ratio

    top_family = top2[:, 0] + fc.shift
    assert (fp32_gap_ratio(top_family, fc.shift, kb) < FP32_GAP_LIMIT).all()
    assert (fp32_gap_ratio(top_family, 0.0, kb) >= FP32_GAP_LIMIT).all()  # held near 1 in fp32: unresolved


def test_uniform_fine_is_uniform_near_zero():
    """The two-word uniform: values below 2^-20 occur with probability 2^-20 (binomial check on 2^22 draws)
    and are not confined to the 2^-32 lattice of the one-word uniform."""
    from critscale.kernels.sampled import _uniform_fine_numpy

    x0, x1, _, _ = philox_numpy(77, np.arange(1 << 22, dtype=np.uint32), np.zeros(1 << 22, dtype=np.uint32))
    u = _uniform_fine_numpy(x0, x1).astype(np.float64)
    assert (u > 0).all() and (u < 1).all()
    small = u[u < 2.0 ** -20]
    assert 0 <= len(small) <= 16  # mean 4: P(count > 16) < 1e-5
    tiny = np.sort(u)[:3]
    frac = tiny * 2.0 ** 32 - np.floor(tiny * 2.0 ** 32)
    assert not np.allclose(frac, 0.5), tiny  # the one-word uniform sits at (x + 1/2) 2^-32
    p = stats.kstest(u[:200000], "uniform").pvalue
    assert p > 1e-3


def unif_words(seed: int, rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The two words of each unif score in generator version 2, from the stream's definition: column
    ``4 g + v`` uses block ``2 g + v // 2`` (counter ``(2 g + v // 2, row, 0, 0)``), words ``2 (v % 2)`` and
    ``2 (v % 2) + 1``."""
    j = np.arange(n)
    g, v = j // 4, j % 4
    c0 = np.broadcast_to((2 * g + v // 2).astype(np.uint32)[None, :], (rows, n))
    c1 = np.broadcast_to(np.arange(rows, dtype=np.uint32)[:, None], (rows, n))
    words = philox_numpy(seed, c0, c1)
    first = np.where((v % 2 == 0)[None, :], words[0], words[2])
    second = np.where((v % 2 == 0)[None, :], words[1], words[3])
    return first, second


def test_generator_v2_four_gaussians_per_philox_block():
    """Known answer of the version-2 stream, from its definition (not from the mirror's code): the Gaussian
    columns 4g..4g+3 of row r are Box-Muller of the four words of Philox block (g, r), computed in float64.
    Fails for version 1 (one block per column) or any other word assignment."""
    assert GENERATOR_VERSION == 2
    s = sample_scores_numpy(family_code("gauss", 40), 9, 3, 40).astype(np.float64)  # (3, 40)
    g = np.arange(10)
    for r in range(3):
        w = [x.astype(np.float64) for x in philox_numpy(9, g.astype(np.uint32), np.full(10, r, dtype=np.uint32))]
        u = [np.minimum((x + 0.5) * 2.0 ** -32, 1 - 2.0 ** -24) for x in w]
        want = []
        for a, b in ((u[0], u[1]), (u[2], u[3])):
            rad, theta = np.sqrt(-2 * np.log(a)), 2 * np.pi * (b - 0.5)
            want += [rad * np.cos(theta), rad * np.sin(theta)]
        np.testing.assert_allclose(s[r], np.stack(want, axis=1).ravel(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["triton-interpreter", "reference"])
def test_generator_version_is_recorded(backend):
    if backend == "triton-interpreter":
        require(backend)
    res = sampled_row_stats("gauss", 64, 2, [1.0], [0.5], seed=3, backend=backend)
    assert res.notes["generator"] == GENERATOR_VERSION and res.notes["kind"] == "sampled"


def test_sampled_top_is_the_family_top():
    """``RowStats.top`` adds the shift back: the top of the family's own scores, float64."""
    require("triton-interpreter")
    res = sampled_row_stats("unif", 300, 3, [1.0], [0.1], seed=4, backend="triton-interpreter").to_numpy()
    s = sample_scores_numpy(family_code("unif", 300), 4, 3, 300).astype(np.float64) + 1.0
    np.testing.assert_array_equal(res.top, s.max(axis=1))
    assert (res.top < 1.0).all() and (res.top > 0.9).all()
    ref = sampled_row_stats("unif", 300, 3, [1.0], [0.1], seed=4, backend="reference").to_numpy()
    np.testing.assert_array_equal(ref.top, res.top)


def test_reflected_unif_statistics_match_float64_generation():
    """At n = 2^18 and beta = 2 kappa_bar = 2n (gaps ~ 4e-6), sum p^2 of the fp32 reflected unif scores equals
    that of the same uniforms formed in float64 to 1e-5 relative.  Holding the top near 1 in fp32 (spacing
    6e-8, as before the reflection) changes it by ~1e-2: the check below would fail."""
    n, rows = 1 << 18, 2
    fc = family_code("unif", n)
    s32 = sample_scores_numpy(fc, 31, rows, n).astype(np.float64)  # (rows, n), = -U' rounded to fp32
    x0, x1 = unif_words(31, rows, n)
    s64 = -(x0.astype(np.float64) * 2.0 ** -32 + (x1.astype(np.float64) + 0.5) * 2.0 ** -64)
    beta = [2.0 * critscale.families.get("unif").kappa_bar(n)]
    exact = critscale.softmax_stats(s64, beta).collision
    got = critscale.softmax_stats(s32, beta).collision
    np.testing.assert_allclose(got, exact, rtol=1e-5)
    held_near_one = critscale.softmax_stats((1.0 + s64).astype(np.float32).astype(np.float64), beta).collision
    assert np.abs(held_near_one / exact - 1).max() > 1e-3  # the test can fail: fp32 near 1 does not resolve


def extreme_words(count: int) -> list[np.ndarray]:
    """``count`` uint32 word arrays whose consecutive pairs run over every pair of a pool of 256 words: the
    extremes ``0, 1, 2^31 - 1, 2^31, 2^32 - 2, 2^32 - 1`` and 250 random ones (each family's transform is
    monotone in each uniform, so the extremes bound its range)."""
    ends = np.array([0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1], dtype=np.uint64)
    rand = np.random.default_rng(0).integers(0, 2 ** 32, 250, dtype=np.uint64)
    pool = np.concatenate([ends, rand]).astype(np.uint32)
    i = np.arange(256 * 256)
    return [pool[(i // 256 ** (k % 2)) % 256] for k in range(count)]


FINITE_FAMILIES = {"gauss", "logexp", "unif", "sphere3", "sphere5"}


@pytest.mark.parametrize("fam", FAMILIES + ["ptail0.5", "pareto1", "sphere5"])
def test_finite_flag_is_the_family_property(fam):
    """The families flagged finite (the kernels check none of their entries) make finite scores from the
    extreme words and 250 random ones, in every pair; every other family is flagged, and makes an infinity
    for some parameters (the next test), so a flag on it would hide an overflow."""
    fc = family_code(fam, 1000)
    assert fc.finite == (fam in FINITE_FAMILIES), fam
    if fc.finite:
        from critscale.kernels.sampled import group_scores_numpy

        parts = group_scores_numpy(fc, extreme_words(4 * fc.words))
        assert all(np.isfinite(p).all() for p in parts), fam


def test_unflagged_families_overflow_for_some_parameters():
    """ptail, edge, pareto (small parameters) and planted, simplex (parameters beyond float32's range) make
    infinities from valid words: they must keep the checks."""
    from critscale.kernels import sampled as mod

    overflowing = [family_code("ptail0.01", 1000), family_code("pareto0.1", 1000),
                   mod.FamilyCode("edge", mod.EDGE.value, p0=1.0, p1=100.0),
                   mod.FamilyCode("planted", mod.PLANTED.value, p1=1e39),
                   mod.FamilyCode("simplex", mod.SIMPLEX.value, p0=3e38, p1=3e38)]
    for fc in overflowing:
        parts = mod.group_scores_numpy(fc, extreme_words(4 * fc.words))
        assert not all(np.isfinite(p).all() for p in parts), fc.name
    assert [fc.name for fc in overflowing if fc.finite] == []


def test_checked_family_kernel_refuses_its_infinities():
    """The kernel of pareto0.1 (u^-10 at u = 2^-33 is 2^330) checks its entries and refuses the rows (with the
    family flagged finite it would count the infinities as valid scores)."""
    require("triton-interpreter")
    with pytest.raises(ValueError, match="NaN or infinities"):
        sampled_row_stats("pareto0.1", 3000, 2, [1.0], [0.5], seed=1, backend="triton-interpreter")


@pytest.mark.parametrize("fam", ["gauss", "pareto2"])
@pytest.mark.parametrize("n, split", [(37, 1), (192, 1), (256, 2), (323, 1), (323, 3)])
def test_full_tiles_and_the_masked_tail_are_exact(fam, n, split):
    """The passes run the full tiles without masks (pass 2: pairs of them) and mask one tile (pass 1) or one
    pair (pass 2) at the end of each program.  With tiles of 64 columns: n below one tile, an odd number of full
    tiles (the last pair half empty), whole pairs over two programs, and partial tiles in one or three
    programs; gauss is checked by nothing, pareto2 entry by entry.  The counts equal the float64 reference on
    the same scores, the sums agree within the derived tolerances, and the order statistics are exact."""
    require("triton-interpreter")
    rows = 5
    res = sampled_row_stats(fam, n, rows, BETA, T, seed=13, backend="triton-interpreter", split=split).to_numpy()
    assert res.notes["split"] == split
    scores = sample_scores_numpy(family_code(fam, n), 13, rows, n).astype(np.float64)
    np.testing.assert_array_equal(res.counts, critscale.gap_counts(scores, T))
    np.testing.assert_array_equal(res.top, scores.max(axis=1))
    check_softmax_fields(res, critscale.softmax_stats(scores, BETA), np.full(rows, n))


def test_gpu_block_full_pairs_and_tail_are_exact():
    """The GPU block (one row, 512 columns, top and snap loaded as scalars): of 1541 columns in two programs,
    the first runs one pair of full tiles, the second a full and a partial tile in its masked pair."""
    from critscale.kernels import sampled as mod

    require("triton-interpreter")
    n, rows = 1541, 3
    res = sampled_row_stats("gauss", n, rows, BETA, T, seed=17, backend="triton-interpreter", block=mod.GPU_BLOCK,
                            split=2).to_numpy()
    assert res.notes["split"] == 2
    scores = sample_scores_numpy(family_code("gauss", n), 17, rows, n).astype(np.float64)
    np.testing.assert_array_equal(res.counts, critscale.gap_counts(scores, T))
    np.testing.assert_array_equal(res.top, scores.max(axis=1))
    check_softmax_fields(res, critscale.softmax_stats(scores, BETA), np.full(rows, n))
