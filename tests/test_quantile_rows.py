"""The quantile row of a family and its accumulation scale (critscale.quantile_rows, rem-05-quantile-row)."""

import math

import numpy as np
import pytest
from scipy import stats

import critscale as cs
from critscale.quantile_rows import quantile_row, quantile_row_scale


def test_quantile_row_entries():
    """Entries F^{-1}(1 - k/(n+1)), descending; planted rows keep their top and take the bulk quantiles.

    Wrong answers rejected: the plotting position (k - 1/2)/n (Gaussian entry 1 would be
    isf(1/(2n)) = 3.10 at n = 1000, not isf(1/1001) = 3.09) and an ascending row.
    """
    n = 1000
    row = quantile_row("gauss", n)
    k = np.arange(1, n + 1)
    np.testing.assert_allclose(row, stats.norm.isf(k / (n + 1)), rtol=1e-12)
    assert abs(row[0] - stats.norm.isf(0.5 / n)) > 1e-3
    assert np.all(np.diff(row) < 0)
    np.testing.assert_allclose(quantile_row("unif", n), 1 - k / (n + 1), rtol=1e-12)
    planted = quantile_row("planted", n)
    assert planted[0] == 1.0 and planted.shape == (n,)
    np.testing.assert_allclose(planted[1:], -np.arange(1, n) / n, rtol=1e-12)
    shrink = quantile_row("planted_shrink", n)
    assert shrink[0] == pytest.approx(1 / math.log(n), rel=1e-15)
    simplex = quantile_row("simplex", n)
    assert simplex[0] == 1.0 and simplex[1:].max() < 0.55 and simplex[1:].min() > 0.45


def test_quantile_row_scale_closed_forms():
    """Exponential scores: gaps log k, so 1 exactly; edge: L (L - log K) with L = log(n+1); uniform:
    gaps (k-1)/(n+1), so (n+1) log K/(K-1).

    Wrong answers rejected: the leading-order (log n)^2 for edge (L (L - log K) is 23% below it at
    n = 2^14, K = 16), and kappa_K read from position K + 1 (uniform: (n+1) log 17/16, 6% off).
    """
    lengths = np.array([2.0**8, 2.0**14, 2.0**20])
    np.testing.assert_allclose(quantile_row_scale("ptail1", lengths), 1.0, rtol=1e-12)
    for K in (2, 16, 64):
        L = np.log(lengths + 1)
        np.testing.assert_allclose(quantile_row_scale("edge", lengths, K=K), L * (L - np.log(K)), rtol=1e-10)
        np.testing.assert_allclose(quantile_row_scale("unif", lengths, K=K), (lengths + 1) * np.log(K) / (K - 1),
                                   rtol=1e-10)
    assert quantile_row_scale("edge", 2**14) < 0.8 * math.log(2**14) ** 2
    assert isinstance(quantile_row_scale("gauss", 1024), float)


def test_quantile_row_scale_of_planted_rows_against_brute_force():
    """planted(g, w): max over bulk positions k of log(k+1)/(g + w k/n), the definition evaluated by hand."""
    fam = cs.families.planted(g=0.7, w=2.0)
    n, K = 5000, 16
    k = np.arange(K - 1, n)  # 0-based sorted positions with N >= K
    gaps = np.concatenate([[0.0], 0.7 + 2.0 * np.arange(1, n) / n])
    assert quantile_row_scale(fam, n, K=K) == pytest.approx(np.max(np.log(k + 1) / gaps[k]), rel=1e-14)


def test_quantile_row_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="n must be an integer"):
        quantile_row("gauss", 1)
    with pytest.raises(ValueError, match="one length or a 1-D sequence"):
        quantile_row_scale("gauss", [[1024, 2048]])
    with pytest.raises(ValueError, match="unknown family"):
        quantile_row("cauchy", 100)


@pytest.mark.parametrize("family", cs.families.STANDARD)
def test_quantile_row_scale_equals_the_whole_row(family):
    """The certified prefix gives kappa_K of the whole quantile row bit for bit (a prefix stopped without
    the certificate would miss the supremum of the Gumbel-class rows, which sits deep in the row)."""
    for n in (5000, 2**16):
        for K in (2, 16):
            whole = cs.accumulation_scale(quantile_row(family, n)[None, :], K=K)[0]
            assert quantile_row_scale(family, n, K=K) == whole, (n, K)
