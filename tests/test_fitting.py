"""Least-squares slopes and bootstrap intervals (critscale.fitting), calibrated on designs with a known slope."""

import math

import numpy as np
import pytest

from critscale import fitting


def test_slope():
    """Against numpy.polyfit on random data, batched over leading axes; the reversed regression (x on y) fails."""
    rng = np.random.default_rng(0)
    x = np.log(np.log(2.0 ** np.arange(10, 19, 2)))  # (5,)
    y = rng.standard_normal((7, 3, 5)) + 2.5 * x
    slopes = fitting.slope(x, y)
    assert slopes.shape == (7, 3)
    for index in np.ndindex(7, 3):
        assert slopes[index] == pytest.approx(np.polyfit(x, y[index], 1)[0], rel=1e-12)
    single = fitting.slope(x, y[0, 0])
    assert isinstance(single, float) and single == slopes[0, 0]
    reversed_fit = 1.0 / np.polyfit(y[0, 0], x, 1)[0]
    assert abs(reversed_fit - single) > 1e-3 * abs(single)
    # chapter 05's expression, bit for bit
    xc = x - x.mean()
    assert np.array_equal(slopes, ((y - y.mean(axis=-1, keepdims=True)) @ xc) / (xc @ xc))
    with pytest.raises(ValueError, match="distinct"):
        fitting.slope(np.ones(4), np.arange(4.0))
    with pytest.raises(ValueError, match="shape"):
        fitting.slope(x, np.ones(4))


def test_bootstrap_medians():
    """Equals chapter 04's boot_medians for the same generator state.  Calibration: over 100 normal samples of
    401 values, the mean bootstrap standard deviation of the median matches the asymptotic standard error
    sqrt(pi/2)/sqrt(r) within 4 standard errors of that mean (resampling with the wrong size, r/4, doubles it)."""
    values = np.random.default_rng(1).standard_normal(400)
    boot = np.random.default_rng(81)
    idx = boot.integers(0, len(values), size=(1000, len(values)))
    chapter = np.median(values[idx], axis=1)
    assert np.array_equal(fitting.bootstrap_medians(values, 1000, np.random.default_rng(81)), chapter)
    rng = np.random.default_rng(3)
    estimates = np.array([fitting.bootstrap_medians(rng.standard_normal(401), 300, rng).std(ddof=1)
                          for _ in range(100)])
    standard_error = estimates.std(ddof=1) / math.sqrt(len(estimates))
    assert abs(estimates.mean() - math.sqrt(math.pi / 2) / math.sqrt(401)) <= 4 * standard_error
    with pytest.raises(ValueError, match="rng"):
        fitting.bootstrap_medians(values, 10, 81)
    with pytest.raises(ValueError, match="1-D"):
        fitting.bootstrap_medians(values.reshape(20, 20), 10, np.random.default_rng(0))


def test_bootstrap_slope_reproduces_the_ladder_code():
    """Chapter 05's fit (medians, per-length resampling in order, np.quantile at 2.5% and 97.5%), bit for bit."""
    rng = np.random.default_rng(5)
    fit_n = [2**10, 2**12, 2**14, 2**16]
    log_kappa = {n: 0.6 * np.log(np.log(n)) + rng.standard_normal(r) for n, r in zip(fit_n, (400, 200, 100, 40))}
    x = np.log(np.log(np.asarray(fit_n, dtype=float)))
    boot = np.random.default_rng(91)
    bootstrap = 1000
    medians = np.array([np.median(log_kappa[n]) for n in fit_n])
    resampled = np.stack([np.median(log_kappa[n][boot.integers(0, len(log_kappa[n]),
                                                 size=(bootstrap, len(log_kappa[n])))], axis=1)
                          for n in fit_n], axis=1)
    xc = x - x.mean()
    boot_slopes = ((resampled - resampled.mean(axis=-1, keepdims=True)) @ xc) / (xc @ xc)
    fit = fitting.bootstrap_slope(x, [log_kappa[n] for n in fit_n], bootstrap, np.random.default_rng(91))
    assert fit.slope == float(((medians - medians.mean()) @ xc) / (xc @ xc))
    assert fit.low == float(np.quantile(boot_slopes, 0.025)) and fit.high == float(np.quantile(boot_slopes, 0.975))
    assert np.array_equal(fit.replicates, boot_slopes)


def test_bootstrap_slope_covers_the_true_slope():
    """Null designs with a known slope (5 lengths, 101 normal rows each, medians on a line of slope 0.7): the 95%
    interval covers 0.7 in 300 designs at a rate within 4 binomial standard errors (0.05) of 0.95.  An interval of
    plus or minus one bootstrap standard deviation (about 68%) is outside that band, so the test has power."""
    rng = np.random.default_rng(2024)
    x = np.log(np.log(2.0 ** np.array([10, 12, 14, 16, 18])))
    designs, covered, covered_one_sd = 300, 0, 0
    for _ in range(designs):
        samples = [0.7 * xj + rng.standard_normal(101) for xj in x]
        fit = fitting.bootstrap_slope(x, samples, 400, rng)
        covered += fit.low <= 0.7 <= fit.high
        sd = fit.replicates.std(ddof=1)
        covered_one_sd += abs(fit.slope - 0.7) <= sd
    band = 4 * math.sqrt(0.95 * 0.05 / designs)
    assert abs(covered / designs - 0.95) <= band
    assert abs(covered_one_sd / designs - 0.95) > band
