"""The kernels' entry points check their arguments as the library does (issue: bad K accepted, finite float64
scores outside float32's range silently masked).

Each case fails on the behaviour before the fix: ``K`` in (0, 1, -3, True, 2.5) gave ``kappa = inf`` for every
row instead of the library's ``ValueError``; a score of ``-1e39`` became ``-inf`` (a masked entry) on the Triton
path while the reference backend counted it, so ``n_valid`` depended on the input size.
"""

import numpy as np
import pytest
import torch

import critscale
from critscale.kernels import qk_row_stats, sampled_row_stats, scores_row_stats
from critscale.kernels.testing import backend_params, device_of, require

BAD_K = [0, 1, -3, True, 2.5]
BACKENDS = ["triton-interpreter", "reference"]


def library_message(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def call_each_kind(backend: str, **kwargs) -> list:
    """Run the three entry points on tiny inputs with the given keyword arguments (and the default grids)."""
    beta = kwargs.pop("beta", [1.0])
    t = kwargs.pop("t", [0.5])
    s = torch.randn(3, 20, generator=torch.Generator().manual_seed(0))
    q = torch.randn(1, 4, 8)
    return [lambda: scores_row_stats(s, beta, t, backend=backend, **kwargs),
            lambda: qk_row_stats(q, q, beta, t, backend=backend, **kwargs),
            lambda: sampled_row_stats("gauss", 20, 3, beta, t, backend=backend, **kwargs)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("K", BAD_K, ids=[repr(k) for k in BAD_K])
def test_bad_K_raises_the_library_error(backend, K):
    """Every kind, every CPU backend: the message of ``critscale.accumulation_scale(s, K=K)``."""
    if backend == "triton-interpreter":
        require(backend)
    want = library_message(critscale.accumulation_scale, np.zeros((1, 3)), K=K)
    for run in call_each_kind(backend, K=K):
        with pytest.raises(ValueError) as err:
            run()
        assert str(err.value) == want


def test_integral_float_K_is_accepted_as_the_library_does():
    """``K = 16.0`` is ``K = 16`` for the library; the kernels agree (and ``K`` reaches the bracket)."""
    require("triton-interpreter")
    s = torch.randn(2, 40, generator=torch.Generator().manual_seed(1))
    a = scores_row_stats(s, [1.0], [0.5], K=16.0, backend="triton-interpreter").to_numpy()
    b = scores_row_stats(s, [1.0], [0.5], K=16, backend="triton-interpreter").to_numpy()
    np.testing.assert_array_equal(a.kappa_lower, b.kappa_lower)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["beta_nan", "beta_negative", "beta_inf", "beta_2d", "t_unsorted", "t_negative",
                                  "t_nan"])
def test_bad_grids_raise_the_library_error(backend, case):
    """beta and t: the messages of ``critscale.softmax_stats`` and ``critscale.gap_counts``."""
    if backend == "triton-interpreter":
        require(backend)
    bad = {"beta_nan": ("beta", [1.0, np.nan]), "beta_negative": ("beta", [-1.0]), "beta_inf": ("beta", [np.inf]),
           "beta_2d": ("beta", [[1.0, 2.0]]), "t_unsorted": ("t", [0.5, 0.1]), "t_negative": ("t", [-0.1]),
           "t_nan": ("t", [np.nan])}
    name, value = bad[case]
    row = np.zeros((1, 3))
    want = (library_message(critscale.softmax_stats, row, value) if name == "beta"
            else library_message(critscale.gap_counts, row, value))
    for run in call_each_kind(backend, **{name: value}):
        with pytest.raises(ValueError) as err:
            run()
        assert str(err.value) == want


@pytest.mark.parametrize("backend", ["triton-interpreter", "reference", "auto"])
def test_float64_scores_outside_float32_are_refused(backend):
    """``-1e39`` (finite in float64, ``-inf`` in float32) is refused on every backend, not read as masked;
    so is a finite logit that overflows float32 in ``q.k``."""
    if backend == "triton-interpreter":
        require(backend)
    s = np.array([[1.0, 0.0, -1e39, 2.0]])
    with pytest.raises(ValueError, match="outside float32's range"):
        scores_row_stats(s, [0.0], [1.0], backend=backend)
    with pytest.raises(ValueError, match="outside float32's range"):
        scores_row_stats(torch.from_numpy(s), [0.0], [1.0], backend=backend)
    q = torch.full((1, 2, 2), 3e19, dtype=torch.float64)  # q.k = 1.8e39 * scale: beyond float32
    with pytest.raises(ValueError, match="float32"):
        qk_row_stats(q, q, [1.0], [0.5], scale=1.0, backend=backend)
    with pytest.raises(ValueError, match="outside float32's range"):
        qk_row_stats(q * 1e20, q, [1.0], [0.5], backend=backend)


@pytest.mark.parametrize("backend", backend_params())
def test_rows_near_float32_limits_agree_with_the_reference(backend):
    """Rows at the edges of float32 (near its largest value, a range just below overflow, the smallest normal gaps):
    the Triton path and the reference agree on ``n_valid`` and ``log Z``, and a row whose range overflows
    float32 is refused by both."""
    require(backend)
    big = float(np.finfo(np.float32).max)
    rows = np.array([
        [big, big * 0.999, big * 0.5, -np.inf],  # values near the top of float32, one masked
        [big * 0.49, -big * 0.49, 0.0, 1.0],  # range 0.98 max: representable
        [2e-38, 4e-38, 0.0, -np.inf],  # the smallest normal gaps
        [-big, -big, -big * 0.999, -np.inf],  # at the bottom of float32, two entries tied
    ])
    beta = np.array([0.0, 1e-38, 1.0, 1e38])
    t = np.array([0.0, 1e-38, 1.0, big])
    got = scores_row_stats(torch.from_numpy(rows).to(device_of(backend)), beta, t, backend=backend).to_numpy()
    ref = scores_row_stats(rows, beta, t, backend="reference").to_numpy()
    np.testing.assert_array_equal(got.n_valid, ref.n_valid)
    np.testing.assert_array_equal(got.n_valid, [3, 4, 3, 3])
    np.testing.assert_allclose(got.log_z, ref.log_z, rtol=1e-5, atol=4 * 2.0 ** -126)
    np.testing.assert_array_equal(got.counts, ref.counts)
    over = np.array([[big * 0.6, -big * 0.6, 0.0]])
    for b in (backend, "reference"):
        with pytest.raises(ValueError, match="overflows float32"):
            scores_row_stats(torch.from_numpy(over).to(device_of(backend)) if b == backend else over, [1.0], [0.5],
                             backend=b)


@pytest.mark.parametrize("backend", backend_params())
def test_masks_ties_collapsed_empty_and_tiny_rows(backend):
    """All-masked rows are refused; n = 1, 2, 3 (not a multiple of any block), all-tied rows (m0 = n,
    kappa = inf), collapsed rows (log Z = 1.8e-35, kept to relative precision by the separate m0) match the
    reference (terms below float32's normal range: the absolute floor n 2^-126 of kernels.testing)."""
    require(backend)
    dev = device_of(backend)
    empty = torch.tensor([[0.0, 1.0], [-np.inf, -np.inf]])
    with pytest.raises(ValueError, match="empty after masking"):
        scores_row_stats(empty.to(dev), [1.0], [0.5], backend=backend)
    beta = np.array([0.0, 1.0, 100.0])
    for n in (1, 2, 3):
        s = torch.randn(4, n, generator=torch.Generator().manual_seed(n))
        s[0] = 0.5  # all tied
        res = scores_row_stats(s.to(dev), beta, [0.0, 1.0], backend=backend).to_numpy()
        ref = critscale.softmax_stats(s.double().numpy(), beta)
        np.testing.assert_allclose(res.log_z, ref.log_z, rtol=1e-5, atol=n * 2.0 ** -126)  # fp32 underflow floor
        assert res.m0[0] == n and (np.isinf(res.kappa_lower[0]) if n >= 2 else res.kappa_lower[0] == 0)
    collapsed = torch.tensor([[0.0, -80.0, -90.0, -np.inf]])  # beta = 1: log Z ~ e^{-80}
    res = scores_row_stats(collapsed.to(dev), [1.0], [1.0], backend=backend).to_numpy()
    want = np.log1p(np.exp(-80.0) + np.exp(-90.0))
    # e^-90 lies below float32's normal range, which the GPU flushes to zero: the same floor as above
    np.testing.assert_allclose(res.log_z[0, 0], want, rtol=1e-5, atol=4 * 2.0 ** -126)
