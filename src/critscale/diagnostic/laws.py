"""Stage 4's readings of a head's rows: the law of log N(t), the exponent gamma, the law shares.

A top-K statistic (kappa_K) is read only on rows of at least 4K entries (:func:`min_length`, which says why), so
kappa_16 is fitted on n >= 64 and the law on n >= 128 (K = :data:`SHAPE_K`); residual finite-n bias is left to
the nulls, whose slopes the same code measures over the same bins (:mod:`.nulls`).
A row's law of log N(t) is read from the scale-free profile of its K smallest gaps: step, linear or power
(:func:`classify_profiles`); a head's law is that of its median profile and its law shares the fractions of
its rows with each label (:func:`law_shares`).
The exponent gamma of kappa ∝ (log n)^gamma is the slope of the log median statistic on log log n over the
design's levels, with a 95% interval from a bootstrap over windows (:func:`fit_gamma`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from critscale.fitting import slope

SHAPE_K = 32
STEP_THRESHOLD = 0.5
SINK_THRESHOLD = 0.5
LAWS = ("linear", "power", "step")
LAW_DOMAIN = {"linear": "gumbel", "power": "weibull", "step": "step"}
MIN_WINDOWS = 8  # bootstrap intervals need at least this many windows
MIN_BIN_ROWS = 8  # a level enters a fit with at least this many rows
N_BOOT = 400


def min_length(K: int) -> int:
    """Shortest row on which a top-``K`` statistic is read: ``4 K``.

    kappa_K = max over k >= K of :math:`\\log k/\\Delta_{(k)}` (0-based: the k-th smallest gap) only looks at gaps
    of rank K and deeper.  In a row of n entries the rank-K score is the empirical (1 - K/n)-quantile, so for n = K
    the only candidate is the row's range, :math:`\\kappa_K = \\log K/(\\max - \\min)`: a statistic of
    the row's *lowest* entry, which rises with n for every family.  We use a top-K statistic only on rows with

    .. math::  n \\ge 4K,

    where the rank-K score lies in the row's upper quartile, so the candidate :math:`k = K` uses the top
    quarter of the row alone and the range is one candidate among :math:`n - K + 1`.  Measured on
    i.i.d. rows (tests/test_diagnostic_laws.py): the median of :math:`(\\log K/R)/\\kappa_K` is 1 at n = K
    and at most 0.35 at n = 4K for the Gaussian, log-exponential, uniform and sphere (d = 9) families,
    whose :math:`\\log N(t)/t` falls with t.  Exponential rows (flat :math:`\\log N(t)/t`) and planted rows
    (a scale set by the whole row) stay near their range value by construction, not by a finite-n effect.
    Residual finite-n bias is left to the nulls: every slope is compared with the slope the same code
    measures on null heads over the same bins (:mod:`.nulls`), never with an asymptotic exponent.
    kappa_16 is therefore fitted on n >= 64, and the law on n >= 128 (K = :data:`SHAPE_K`).
    """
    return 4 * int(K)


def _fit_sse(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Residual sum of squares of the least-squares line y = a + b x, per row of ``x`` (rows, m)."""
    xc = x - x.mean(axis=-1, keepdims=True)  # (rows, m)
    yc = y - y.mean(axis=-1, keepdims=True)  # (rows, m) or (m,)
    sxx = (xc * xc).sum(axis=-1)  # (rows,)
    sxy = (xc * yc).sum(axis=-1)  # (rows,)
    syy = (yc * yc).sum(axis=-1) * np.ones(len(x))  # (rows,)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sxx > 0, syy - sxy**2 / sxx, syy)


def profile_of_gaps(top_gaps: np.ndarray) -> np.ndarray:
    """Scale-free profiles ``r_k = Delta_(k)/Delta_(K)`` from ``(rows, K)`` smallest sorted gaps.

    Rows whose second gap is 0 (a tied maximum) or whose K-th gap is not finite are NaN.
    """
    top_gaps = np.asarray(top_gaps, dtype=np.float64)  # (rows, K)
    last = top_gaps[:, -1:]  # (rows, 1)
    ok = np.isfinite(last[:, 0]) & (top_gaps[:, 1] > 0)  # (rows,)
    with np.errstate(divide="ignore", invalid="ignore"):
        profile = top_gaps / last  # (rows, K)
    profile[~ok] = np.nan
    return profile


def classify_profiles(profiles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Label each ``(rows, K)`` profile ``linear``/``power``/``step``.

    For a row take its K = :data:`SHAPE_K` smallest gaps
    :math:`0 = \\Delta_{(1)} \\le \\dots \\le \\Delta_{(K)}` and the scale-free profile
    :math:`r_k = \\Delta_{(k)}/\\Delta_{(K)}`.  With :math:`y_k = \\log k` for k = 2..K:

    * **step** (planted / sink) when :math:`r_2 \\ge 1/2`: N stays at 1 over at least half of the range
      that takes it to K, then jumps (one token planted above the rest, Theorem 8);
    * else **linear** (Gumbel-like) when the least-squares line :math:`y = a + b\\,r` leaves a smaller
      residual than :math:`y = a + \\alpha\\log r` (exponential accumulation, Theorem 6);
    * else **power** (Weibull, :math:`N(t) \\approx (t/\\tau)^\\alpha`, Theorem 7).

    A head's law is that of its median profile (over its rows with n >= 4K); its *law shares* are the
    fractions of its rows with each label.  One row's label is noisy: i.i.d. Gaussian rows read
    "power" in about a quarter of the rows, so shares mean something only beside the null's shares.
    Weibull rows with alpha >= 4 (sphere, d >= 9) read linear (the Weibull class tends to the Gumbel
    class as alpha grows); the endpoint family ``edge`` (Gumbel class) can read power at these n.

    Returns ``(labels, sse_linear, sse_power)``; NaN profiles get the label ``"undefined"``.
    """
    profiles = np.atleast_2d(np.asarray(profiles, dtype=np.float64))  # (rows, K)
    rows, K = profiles.shape
    if K < 4:
        raise ValueError(f"profiles need at least 4 gaps, got {K}")
    valid = np.all(np.isfinite(profiles), axis=-1) & (profiles[:, 1] > 0)  # (rows,)
    safe = np.where(valid[:, None], profiles, np.linspace(0.0, 1.0, K))  # (rows, K)
    r = safe[:, 1:]  # (rows, K-1), k = 2..K
    y = np.log(np.arange(2, K + 1, dtype=np.float64))  # (K-1,)
    sse_linear = _fit_sse(r, y)
    sse_power = _fit_sse(np.log(r), y)
    labels = np.where(r[:, 0] >= STEP_THRESHOLD, "step",
                      np.where(sse_linear <= sse_power, "linear", "power")).astype(object)
    labels[~valid] = "undefined"
    return labels, np.where(valid, sse_linear, np.nan), np.where(valid, sse_power, np.nan)


def head_profile(profiles: np.ndarray) -> np.ndarray:
    """Median profile over the rows with a defined profile; NaN when there is none."""
    profiles = np.asarray(profiles, dtype=np.float64)
    good = np.all(np.isfinite(profiles), axis=-1)
    if not good.any():
        return np.full(profiles.shape[-1], np.nan)
    return np.median(profiles[good], axis=0)


def law_of_profile(profile: np.ndarray) -> str:
    """The law of one (median) profile, ``"undefined"`` when it has NaNs."""
    if not np.all(np.isfinite(profile)):
        return "undefined"
    return str(classify_profiles(profile[None, :])[0][0])


def window_weights(windows: np.ndarray, n_boot: int, rng: np.random.Generator,
                   min_windows: int = MIN_WINDOWS) -> tuple[np.ndarray, np.ndarray] | None:
    """Bootstrap weights over windows: ``(B, W)`` multinomial counts and each row's window index.

    ``None`` when there are fewer than ``min_windows`` windows (no interval is given then).
    """
    unique, index = np.unique(windows, return_inverse=True)
    if len(unique) < min_windows:
        return None
    counts = rng.multinomial(len(unique), np.full(len(unique), 1.0 / len(unique)), size=n_boot)  # (B, W)
    return counts.astype(np.float64), index


@dataclass
class GammaFit:
    """statistic ∝ (log n)^gamma over the design's levels, with a window-bootstrap interval."""

    gamma: float
    low: float
    high: float
    levels: np.ndarray  # (bins,) context lengths used
    log_log_n: np.ndarray  # (bins,) median log log n per level
    median: np.ndarray  # (bins,) median statistic per level
    rows_per_level: np.ndarray  # (bins,)
    boot: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (B,) slope per replicate, NaN kept; (0,) without


def _weighted_medians(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Lower weighted median of ``values`` ``(m,)`` under each row of ``weights`` ``(B, m)``."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[:, order], axis=1)  # (B, m)
    total = cumulative[:, -1]  # (B,)
    position = np.argmax(cumulative >= total[:, None] / 2, axis=1)  # (B,)
    return np.where(total > 0, values[order][position], np.nan)


def fit_gamma(levels, n, values, windows, *, min_n: int = 0, n_boot: int = N_BOOT, seed: int = 0,
              min_windows: int = MIN_WINDOWS) -> GammaFit:
    """Fit gamma in ``values ∝ (log n)^gamma`` over the design's ``levels``.

    Per level of the design (:mod:`.design`) the log of the median statistic is regressed on the level's median
    :math:`\\log\\log n` (medians, since kappa has a Cauchy-like right tail, theory.md §7.3).  The 95%
    interval is a percentile bootstrap over *windows* (the rows of one window share their keys and are
    correlated); there is no fallback to resampling rows: with fewer than :data:`MIN_WINDOWS` windows
    the interval is not given (NaN).
    The resampling weights are drawn over every window the head's rows come from (also a window none of
    whose rows enters the fit), from a stream fixed by the seed alone: heads read on the same windows with
    the same seed resample the same windows in replicate b, so a statistic of several heads (the median
    gamma of a layer, :mod:`.schedule`) is bootstrapped by taking it per replicate (:attr:`GammaFit.boot`).

    Rows with non-finite or non-positive values (a tied maximum has kappa = inf) or ``n < min_n`` are
    dropped; a level enters with at least :data:`MIN_BIN_ROWS` rows.  With fewer than 3 levels the
    fit is NaN.  The abscissae stay fixed under the bootstrap: n is the design of the experiment.
    """
    levels, n, values, windows = (np.asarray(a) for a in (levels, n, values, windows))
    every_window = np.unique(windows)  # the bootstrap's units, whether or not their rows are kept
    keep = np.isfinite(values) & (values > 0) & (n >= max(min_n, 3))
    levels, n, log_values, windows = levels[keep], n[keep].astype(np.float64), np.log(values[keep]), windows[keep]
    bins, counts = np.unique(levels, return_counts=True)
    bins, counts = bins[counts >= MIN_BIN_ROWS], counts[counts >= MIN_BIN_ROWS]
    if len(bins) < 3:
        empty = np.zeros(0)
        return GammaFit(np.nan, np.nan, np.nan, bins, empty, empty, counts)
    members = [np.flatnonzero(levels == b) for b in bins]
    x = np.array([np.median(np.log(np.log(n[i]))) for i in members])  # (bins,)
    y = np.array([np.median(log_values[i]) for i in members])  # (bins,)
    gamma = float(slope(x, y))
    low = high = np.nan
    slopes = np.zeros(0)
    weights = None
    if len(np.unique(windows)) >= min_windows:
        weights = window_weights(every_window, n_boot, np.random.default_rng([seed, 12697]), 1)
    if weights is not None:
        w = weights[0]  # (B, W) counts over every_window
        unit = np.searchsorted(every_window, windows)  # (rows,) kept rows' window index
        boot = np.stack([_weighted_medians(log_values[i], w[:, unit[i]]) for i in members], axis=1)  # (B, bins)
        slopes = np.asarray(slope(x, boot), dtype=np.float64)  # (B,)
        low, high = np.percentile(slopes[np.isfinite(slopes)], [2.5, 97.5])
    return GammaFit(gamma, float(low), float(high), bins, x, np.exp(y), counts, slopes)


def law_shares(labels: np.ndarray, windows: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0,
               min_windows: int = MIN_WINDOWS) -> dict[str, tuple[float, float, float]]:
    """Per law: the share of defined rows with that label, and a window-bootstrap 95% interval."""
    labels, windows = np.asarray(labels), np.asarray(windows)
    defined = labels != "undefined"
    labels, windows = labels[defined], windows[defined]
    out = {}
    if len(labels) == 0:
        return {law: (np.nan, np.nan, np.nan) for law in LAWS}
    weights = window_weights(windows, n_boot, np.random.default_rng([seed, 4]), min_windows)
    for law in LAWS:
        hit = (labels == law).astype(np.float64)
        share = float(hit.mean())
        low = high = np.nan
        if weights is not None:
            w, unit = weights
            per_window_hits = np.bincount(unit, weights=hit, minlength=w.shape[1])  # (W,)
            per_window_rows = np.bincount(unit, minlength=w.shape[1]).astype(np.float64)  # (W,)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (w @ per_window_hits) / (w @ per_window_rows)  # (B,)
            low, high = np.percentile(boot[np.isfinite(boot)], [2.5, 97.5])
        out[law] = (share, float(low), float(high))
    return out
