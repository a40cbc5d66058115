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


# ----------------------------------------------------------------------------- the median's interval and se

def _uniform_samples(r=401, replicates=4000, seed=20261201):
    return np.sort(np.random.default_rng(seed).random((replicates, r)), axis=1)  # (replicates, r), median 1/2


def test_median_rank_interval_covers_a_known_median():
    """Uniform draws (median 1/2): the 95% and 99% intervals cover it at their exact binomial rate within 4 binomial
    standard errors.  Ranks r/2 -+ sqrt(r) (chapter 11's former 95% interval) used for 99% cover about 95.5% and
    fail; so would ranks one step too narrow on either side."""
    from scipy import stats

    x = _uniform_samples()
    r = x.shape[1]
    for level in (0.95, 0.99):
        j, k = fitting.median_ranks(r, level)
        exact = 1 - 2 * stats.binom.cdf(j - 1, r, 0.5)
        assert level <= exact < level + 0.01
        by_function = [lo <= 0.5 < hi for _, lo, hi in (fitting.median_rank_interval(row, level) for row in x[:300])]
        covered = np.mean(by_function + list((x[300:, j - 1] <= 0.5) & (0.5 < x[300:, k - 1])))
        assert abs(covered - exact) < 4 * math.sqrt(exact * (1 - exact) / len(x)), (level, covered, exact)
    wide = (x[:, int(np.floor(r / 2 - np.sqrt(r)))] <= 0.5) & (0.5 < x[:, int(np.ceil(r / 2 + np.sqrt(r)))])
    assert abs(wide.mean() - 0.99) > 4 * math.sqrt(0.99 * 0.01 / len(x))  # the former ranks do not give 99%


def test_median_rank_interval_is_chapter_07s_order_statistics():
    """Chapter 07 read its 99% interval at the ranks max(1, binom.ppf(0.005)) and min(r, binom.ppf(0.995) + 1):
    the library's ranks are the same for every sample size the book uses, so its recorded intervals stay."""
    from scipy import stats

    for r in range(10, 3001):
        lo, hi = int(max(1, stats.binom.ppf(0.005, r, 0.5))), int(min(r, stats.binom.ppf(0.995, r, 0.5) + 1))
        assert fitting.median_ranks(r, 0.99) == (lo, hi), r
    sample = np.random.default_rng(3).standard_normal(257)
    med, low, high = fitting.median_rank_interval(sample, 0.99)
    s = np.sort(sample)
    j, k = fitting.median_ranks(257, 0.99)
    assert (med, low, high) == (float(np.median(s)), float(s[j - 1]), float(s[k - 1]))


def test_median_se_is_the_spread_of_the_median():
    """The median of r uniform draws (r odd) is Beta((r+1)/2, (r+1)/2), of standard deviation 1/(2 sqrt(r+2)):
    the mean of the estimates matches it within 1.5% (the sampling error of that mean is 0.25%).  Chapter 11's
    former estimate (ranks r/2 -+ sqrt(r), floor and ceiling, over 2 x 1.96) is 4% high and fails; half or twice
    the constant fails by far."""
    x = _uniform_samples()
    r = x.shape[1]
    exact = 1 / (2 * math.sqrt(r + 2))
    estimates = np.array([fitting.median_se(row) for row in x])
    assert estimates.mean() == pytest.approx(exact, rel=0.015)
    lo, hi = int(np.floor(r / 2 - np.sqrt(r))), int(np.ceil(r / 2 + np.sqrt(r)))
    former = (x[:, hi] - x[:, lo]) / (2 * 1.96)
    assert former.mean() != pytest.approx(exact, rel=0.015)
    z = (x[:, r // 2] - 0.5) / estimates  # median -+ 1.96 se: near 95% (the estimate's own noise costs ~1%)
    assert 0.93 < np.mean(np.abs(z) <= 1.96) < 0.96


@pytest.mark.parametrize("call, words", [
    (lambda: fitting.median_se([1.0, 2.0, 3.0]), "3 draws are too few for a 95% interval"),
    (lambda: fitting.median_rank_interval(np.ones((3, 3))), "non-empty 1-D sample"),
    (lambda: fitting.median_rank_interval([1.0, np.nan] * 10), "must be finite"),
    (lambda: fitting.median_ranks(100, 1.0), "strictly between 0 and 1"),
])
def test_median_rank_interval_refuses_bad_input_in_one_line(call, words):
    with pytest.raises(ValueError, match=words) as err:
        call()
    assert "\n" not in str(err.value)
