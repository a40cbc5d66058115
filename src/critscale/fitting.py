"""Least-squares slopes, percentile-bootstrap intervals for growth exponents, and the book's one interval and
standard error of a sample median.

The ladder (``prop-05-ladder``) fits the exponent of a scale as the least-squares slope of the median of
:math:`\\log\\kappa_{16}` over rows against a coordinate (:math:`\\log\\log n` or :math:`\\log n`), with a 95%
interval from resampling the rows at each length; the drifts of chapter 04 are ratios of bootstrapped
medians.  :func:`slope`, :func:`bootstrap_medians` and :func:`bootstrap_slope` are those computations.
:func:`median_rank_interval` and :func:`median_se` are the distribution-free interval and standard error of a median
from its order statistics, which chapters 05, 07 and 11 state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ._validate import as_integer, as_number

MEDIAN_SE_LEVEL = 0.95  # the interval whose order statistics median_se reads

__all__ = ["slope", "bootstrap_medians", "SlopeFit", "bootstrap_slope", "median_ranks", "median_rank_interval",
           "median_se"]


def slope(x: Any, y: Any) -> Any:
    """Least-squares slopes of ``y`` on ``x``: :math:`\\sum_j (x_j - \\bar x)(y_j - \\bar y)/\\sum_j (x_j - \\bar x)^2`.

    ``x`` is ``(m,)``; ``y`` is ``(..., m)`` and the slope is taken along its last axis, so many
    curves (bootstrap replicates) are fitted at once.  Returns a float for a 1-D ``y``, else ``(...)``.
    Needs ``m >= 2`` distinct abscissae.

    Test: ``tests/test_fitting.py::test_slope`` (``numpy.polyfit`` on random data; the reversed
    regression of ``x`` on ``y``, a plausible slip, gives the reciprocal-like value and fails).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or y.ndim < 1 or y.shape[-1] != x.shape[0]:
        raise ValueError(f"slope needs x of shape (m,) and y of shape (..., m), got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.ptp(x) > 0):
        raise ValueError("slope needs finite x with at least two distinct values")
    xc = x - x.mean()  # (m,)
    out = ((y - y.mean(axis=-1, keepdims=True)) @ xc) / (xc @ xc)  # (...)
    return float(out) if np.ndim(out) == 0 else out


def _generator(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def bootstrap_medians(values: Any, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` resamples (with replacement) of a 1-D sample: ``(resamples,)``.

    One draw ``rng.integers(0, len(values), size=(resamples, len(values)))`` picks every resample, so
    the result depends only on the generator's state (chapters 04 and 05 rely on this order).

    Test: ``tests/test_fitting.py::test_bootstrap_medians`` (equals the chapters' own expression for
    the same generator state, and the spread of the medians matches the asymptotic standard error
    of a normal median, :math:`\\sqrt{\\pi/2}\\,\\sigma/\\sqrt r`, within its sampling error).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D sample, got shape {values.shape}")
    resamples = as_integer(resamples, "resamples", 1)
    index = _generator(rng).integers(0, len(values), size=(resamples, len(values)))  # (B, r)
    return np.median(values[index], axis=1)  # (B,)


@dataclass(frozen=True)
class SlopeFit:
    """A fitted slope of group medians with its percentile-bootstrap interval.

    Attributes
    ----------
    slope:
        the least-squares slope of the group medians on ``x``.
    low, high:
        the percentile interval of the bootstrap slopes (``interval`` of :func:`bootstrap_slope`).
    replicates:
        the bootstrap slopes, ``(resamples,)``.
    """

    slope: float
    low: float
    high: float
    replicates: np.ndarray


def bootstrap_slope(x: Any, samples: Sequence[Any], resamples: int, rng: np.random.Generator,
                    interval: tuple[float, float] = (0.025, 0.975)) -> SlopeFit:
    """Slope of the medians of ``samples`` against ``x``, with a percentile-bootstrap interval.

    ``samples[j]`` is the 1-D sample (e.g. :math:`\\log\\kappa_{16}` of every row) observed at abscissa
    ``x[j]``.  Each group is resampled independently (:func:`bootstrap_medians`, groups in order, from
    one generator), the slope is refitted to every replicate, and the interval is the pair of
    ``interval`` quantiles of the replicate slopes (default: the central 95%).  The abscissae stay
    fixed: they are the design of the experiment.

    Test: ``tests/test_fitting.py::test_bootstrap_slope_covers_the_true_slope`` (on 300 simulated
    designs with a known slope the 95% interval covers it at the nominal rate within 4 binomial
    standard errors; an interval of plus or minus one bootstrap standard deviation, about 68%, fails)
    and ``test_bootstrap_slope_reproduces_the_ladder_code`` (bit-identical to chapter 05).
    """
    x = np.asarray(x, dtype=np.float64)
    if len(samples) != len(x):
        raise ValueError(f"need one sample per abscissa, got {len(samples)} samples and {len(x)} abscissae")
    low_q, high_q = (as_number(q, "interval", minimum=0) for q in interval)
    if not low_q < high_q <= 1:
        raise ValueError(f"interval must be two quantiles 0 <= low < high <= 1, got {interval}")
    samples = [np.asarray(s, dtype=np.float64) for s in samples]
    medians = np.array([np.median(s) for s in samples])  # (m,)
    replicated = np.stack([bootstrap_medians(s, resamples, rng) for s in samples], axis=1)  # (B, m)
    replicates = slope(x, replicated)  # (B,)
    return SlopeFit(slope=slope(x, medians), low=float(np.quantile(replicates, low_q)),
                    high=float(np.quantile(replicates, high_q)), replicates=replicates)


def median_ranks(r: int, level: float) -> tuple[int, int]:
    """The ranks ``(j, k)``, counted from 1, of the order statistics that bound the median of ``r`` draws at
    ``level``: :math:`j` is the ``(1 - level)/2`` quantile of Binomial(r, 1/2) and :math:`k = r + 1 - j`.

    The number :math:`B` of draws below the median :math:`m` of a continuous law is Binomial(r, 1/2), and
    :math:`X_{(j)} \\le m < X_{(k)}` exactly when :math:`j \\le B \\le k - 1`; by the symmetry of :math:`B` this
    has probability :math:`1 - 2P(B \\le j - 1) \\ge` ``level``, whatever the law.  A ``ValueError`` when ``r`` is
    too small for any pair of order statistics to reach ``level``.
    """
    r = as_integer(r, "r", 1)
    level = as_number(level, "level", minimum=0, strict=True)
    if not level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    j = int(stats.binom.ppf((1 - level) / 2, r, 0.5))
    if j < 1:
        raise ValueError(f"{r} draws are too few for a {level:.0%} interval of their median "
                         f"(its lowest order statistic covers only {1 - 2 * 0.5 ** r:.1%})")
    return j, r + 1 - j


def _sorted_sample(values: Any) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D sample, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite: a sample with inf or NaN has no order statistics to read")
    return np.sort(values)


def median_rank_interval(values: Any, level: float = MEDIAN_SE_LEVEL) -> tuple[float, float, float]:
    """The median of a 1-D sample and its distribution-free interval at ``level``: ``(median, low, high)``, where
    ``low`` and ``high`` are the order statistics of :func:`median_ranks` (coverage at least ``level`` for any
    continuous law).

    Test: ``tests/test_fitting.py::test_median_rank_interval_covers_a_known_median`` (uniform draws: the interval covers
    1/2 at the binomial rate within 4 binomial standard errors; ranks at :math:`r/2 \\pm \\sqrt r`, a 95%
    interval used at 99%, fail).
    """
    v = _sorted_sample(values)
    j, k = median_ranks(v.size, level)
    return float(np.median(v)), float(v[j - 1]), float(v[k - 1])


def median_se(values: Any) -> float:
    """The distribution-free standard error of the median of a 1-D sample of ``r`` draws, from two order statistics.

    The median of ``r`` draws from a law with density :math:`f` at its median :math:`m` is asymptotically normal
    with standard deviation :math:`1/(2f(m)\\sqrt r)`.  The order statistic of rank :math:`i` sits near
    :math:`F^{-1}(i/r)`, so two ranks :math:`j < k` around :math:`r/2` are
    :math:`X_{(k)} - X_{(j)} \\approx (k - j)/(r f(m))` apart, and the unknown density cancels:

    .. math:: \\mathrm{se} = \\frac{\\sqrt r\\,(X_{(k)} - X_{(j)})}{2(k - j)}.

    The ranks are those of the 95% interval of :func:`median_rank_interval` (:data:`MEDIAN_SE_LEVEL`), about
    :math:`r/2 \\pm 0.98\\sqrt r` (half the normal quantile 1.96 times the standard deviation
    :math:`\\sqrt r/2` of the binomial count), so that median :math:`\\pm 1.96` se is that interval up to the
    rounding of the ranks.

    Test: ``tests/test_fitting.py::test_median_se_is_the_spread_of_the_median`` (uniform draws, whose median has
    the exact standard deviation :math:`1/(2\\sqrt{r+2})`: the mean estimate matches it within 1.5%; ranks at
    :math:`r/2 \\pm \\sqrt r` over :math:`2 \\times 1.96`, 4% high, fail, and so does any wrong constant).
    """
    v = _sorted_sample(values)
    j, k = median_ranks(v.size, MEDIAN_SE_LEVEL)
    return float(np.sqrt(v.size) * (v[k - 1] - v[j - 1]) / (2 * (k - j)))
