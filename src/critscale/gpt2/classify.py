"""Read a head's law from its rows: the shape of log N(t), the exponent gamma, the sinks.

Three documented rules (theory.md §6 P-13; the names of the domains are those of §4.1):

**Shape of log N(t).**  For a row, take its ``K = SHAPE_K`` smallest gaps
:math:`0 = \\Delta_{(1)} \\le \\dots \\le \\Delta_{(K)}`, where :math:`N(\\Delta_{(k)}) = k`, and the
scale-free profile :math:`r_k = \\Delta_{(k)}/\\Delta_{(K)}`.  A head's profile is the median of
:math:`r_k` over its rows with ``n >= 2K`` (one row's profile is noisy; the median is not).
Then, with :math:`y_k = \\log k` for ``k = 2..K``:

* **step** (planted / sink) when :math:`r_2 \\ge 1/2`: N stays at 1 over at least half of the
  range that takes it to K, then jumps (one token planted above the rest, Theorem 8);
* else **linear** (Gumbel-like) when the least-squares line :math:`y = a + b\\,r` leaves a smaller
  residual than :math:`y = a + \\alpha\\log r`, i.e. :math:`\\log N(t)` is closer to linear in t
  (exponential accumulation :math:`N(t) \\approx e^{\\kappa t}`, Theorem 6);
* else **power** (Weibull): :math:`\\log N(t)` is linear in :math:`\\log t`,
  :math:`N(t) \\approx (t/\\tau)^{\\alpha}` (Theorem 7).

Both fits have two parameters and the same response, so their residual sums compare directly.
Checked on i.i.d. rows (tests/test_gpt2_classify.py): Gaussian and exponential rows read linear,
uniform rows power, planted rows step.  Weibull rows with large alpha (sphere in d >= 9,
alpha >= 4) are close to Gumbel at K = 32 and may read linear; that is the limit alpha -> inf.

**Exponent gamma** of :math:`\\kappa \\propto (\\log n)^{\\gamma}`: rows are binned by
:math:`\\lfloor\\log_2 n\\rfloor`; the log of each bin's median kappa is regressed on the bin's
median :math:`\\log\\log n` (medians, since kappa has a Cauchy-like right tail, theory.md §7.3).
The 95% interval is a percentile bootstrap that resamples the rows' sequences (windows) when
there are at least 8, else the rows.  theory.md §5.1 warns that log log n corrections are large at
practical n, so gamma is also compared with the *finite-n* slopes of the exact scales
:math:`\\bar\\kappa_n` of reference families over the same bins (gauss: leading order 1/2,
logexp: 1, ptail1: 0, edge: 2), not only with their leading-order exponents.

**Sinks.**  A row's *sink* is position 0 (the first token of the sequence).  A head is a
**sink head** when position 0 is the row maximum in at least half of its rows with
``n >= n_min``; the mean softmax weight of position 0 at the model's temperature is reported
alongside.  A step-shaped row whose maximum is position 0 is a *planted sink row*.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPE_K = 32
STEP_THRESHOLD = 0.5
SINK_THRESHOLD = 0.5
LAWS = ("linear", "power", "step")
LAW_DOMAIN = {"linear": "gumbel", "power": "weibull", "step": "step"}
REFERENCE_FAMILIES = {"ptail1": 0.0, "gauss": 0.5, "logexp": 1.0, "edge": 2.0}


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
    """Label each ``(rows, K)`` profile ``linear``/``power``/``step`` by the rule above.

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


@dataclass
class GammaFit:
    """kappa ∝ (log n)^gamma over log2-n bins, with a bootstrap interval."""

    gamma: float
    low: float
    high: float
    bins: np.ndarray  # (bins,) floor(log2 n)
    log_log_n: np.ndarray  # (bins,) median log log n per bin
    median_kappa: np.ndarray  # (bins,)
    rows_per_bin: np.ndarray  # (bins,)

    def as_dict(self, prefix: str = "gamma") -> dict:
        return {prefix: self.gamma, f"{prefix}_low": self.low, f"{prefix}_high": self.high}


def _binned_medians(n: np.ndarray, kappa: np.ndarray, bins: np.ndarray):
    keys = np.floor(np.log2(n)).astype(int)
    x = np.array([np.median(np.log(np.log(n[keys == b]))) for b in bins])
    y = np.array([np.median(kappa[keys == b]) for b in bins])
    return x, y


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def _bootstrap_slopes(keys, log_kappa, groups, bins, x, n_boot, rng, by_group) -> np.ndarray:
    """Bootstrap slopes of the binned log median kappa on the fixed bin abscissae ``x``.

    Resampling is expressed as weights: multinomial counts over windows (``by_group``) or Poisson(1)
    weights over rows (the Poisson bootstrap).  Each bin's median is then a weighted median of its
    sorted values, computed for all replicates at once.  The abscissae stay fixed: n is the design
    of the experiment, and resampled windows carry the same lengths.
    """
    if by_group:
        _, unit = np.unique(groups, return_inverse=True)
        units = unit.max() + 1
        weights = rng.multinomial(units, np.full(units, 1.0 / units), size=n_boot).astype(np.float64)  # (B, W)
    else:
        weights = rng.poisson(1.0, size=(n_boot, len(log_kappa))).astype(np.float64)  # (B, rows)
    medians = np.empty((n_boot, len(bins)))  # (B, bins)
    for j, b in enumerate(bins):
        members = np.flatnonzero(keys == b)
        order = members[np.argsort(log_kappa[members], kind="stable")]  # (m,)
        w = weights[:, unit[order]] if by_group else weights[:, order]  # (B, m)
        cumulative = np.cumsum(w, axis=1)  # (B, m)
        total = cumulative[:, -1]  # (B,)
        position = np.argmax(cumulative >= total[:, None] / 2, axis=1)  # (B,)
        medians[:, j] = np.where(total > 0, log_kappa[order][position], np.nan)
    xc = x - x.mean()
    slopes = (xc * (medians - medians.mean(axis=1, keepdims=True))).sum(axis=1) / (xc * xc).sum()  # (B,)
    return slopes[np.isfinite(slopes)]


def fit_gamma(n, kappa, groups=None, *, n_boot: int = 400, seed: int = 0, min_rows: int = 16) -> GammaFit:
    """Fit gamma in ``kappa ∝ (log n)^gamma`` (rule in the module docstring).

    ``n``, ``kappa``: per-row lengths and scales; ``groups``: the window of each row (bootstrap
    unit when there are >= 8 windows).  Rows with non-finite or non-positive kappa are dropped
    (a tied maximum has kappa = inf; the median is robust to the few there are).
    Bins with fewer than ``min_rows`` rows are left out (e.g. the bin holding only n = context, one
    row per window).  Needs at least 3 bins with ``min_rows`` rows each, else ``ValueError``.
    """
    n = np.asarray(n, dtype=np.float64)
    kappa = np.asarray(kappa, dtype=np.float64)
    if n.shape != kappa.shape:
        raise ValueError(f"n and kappa shapes differ: {n.shape} vs {kappa.shape}")
    groups = np.zeros(len(n), dtype=int) if groups is None else np.asarray(groups)
    keep = np.isfinite(kappa) & (kappa > 0) & (n >= 3)
    n, kappa, groups = n[keep], kappa[keep], groups[keep]
    keys = np.floor(np.log2(n)).astype(int) if len(n) else np.array([], dtype=int)
    bins, counts = np.unique(keys, return_counts=True)
    bins, counts = bins[counts >= min_rows], counts[counts >= min_rows]
    if len(bins) < 3:
        raise ValueError(f"gamma needs rows in at least 3 log2(n) bins with >= {min_rows} rows each; "
                         f"got bins {bins.tolist()} (use a longer text or a larger --max-len)")
    x, y = _binned_medians(n, kappa, bins)
    gamma = _slope(x, np.log(y))
    rng = np.random.default_rng([seed, 12697])
    by_group = len(np.unique(groups)) >= 8
    boot = _bootstrap_slopes(keys, np.log(kappa), groups, bins, x, n_boot, rng, by_group)
    low, high = (np.percentile(boot, [2.5, 97.5]) if len(boot) >= 20 else (np.nan, np.nan))
    return GammaFit(gamma, float(low), float(high), bins, x, y, counts)


def reference_slopes(lengths) -> dict[str, float]:
    """Finite-n slopes of log kappa_bar_n on log log n at the given row lengths (theory.md §5.1 caveat).

    ``lengths``: one representative n per bin (the diagnostic uses exp(exp(median log log n))).
    Uses the exact scales of :mod:`critscale.families`.
    """
    from critscale import families

    lengths = np.asarray(lengths, dtype=np.float64)
    x = np.log(np.log(lengths))
    return {name: _slope(x, np.log(np.asarray(families.get(name).kappa_bar(lengths), dtype=np.float64)))
            for name in REFERENCE_FAMILIES}


def nearest_reference(gamma: float, slopes: dict[str, float]) -> str:
    """The reference family whose finite-n slope is closest to ``gamma``."""
    return min(slopes, key=lambda name: abs(slopes[name] - gamma))
