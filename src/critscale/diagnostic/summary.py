"""Stage 4: one head's summary from its rows, and the audit of every head beside its nulls.

:func:`summarise_unit` reads a head (or a null head) the same way:

* **operating point** at the model's own temperature, first, because it does not depend on how kappa
  is defined: medians over the rows of the longest level (n = T) of p_max, the entropy and
  beta_1/2 (in units of the model's beta), then kappa, kappa_16 and the three operating points
  c_half = 1/beta_1/2, c = 1/kappa, c16 = 1/kappa_16 side by side.  Each is labelled ``subcritical``
  (c <= 1/4), ``crossover`` (1/4 < c < 4: not a phase, the finite-n window around the transition)
  or ``supercritical`` (c >= 4).
* **law** of log N(t) (median profile) and the **law shares** of its rows, with window-bootstrap
  intervals (:mod:`.laws`);
* **sink**: the first key of the forward is the row maximum in at least half of the rows (a
  degenerate row, whose logits are all equal, has no maximum and counts as no sink row);
* **degenerate**: at least :data:`DEGENERATE_THRESHOLD` of the head's rows are degenerate (every
  logit equal: all-zero or constant q or k).  Such a head has no law, sink, kappa, gamma or rule to
  read: those columns are ``undefined``/NaN/false, and the head is named in the summary's warning;
* **gamma**: slopes of kappa_16 (the primary ``gamma``, rows with n >= 64), of kappa (``gamma_kappa``)
  and of beta_1/2 (``gamma_half``) on log log n, with window-bootstrap intervals.

:func:`audit` then puts each head beside the nulls (:mod:`.nulls`) and decides (:mod:`.inference`): its rule,
and whether its law shares and gamma stand beyond the Gaussian null.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import inference, laws
from .nulls import NULLS
from .rows import BETA_GRID, MODEL_BETA

KAPPA16_MIN_N = laws.min_length(16)
LAW_MIN_N = laws.min_length(laws.SHAPE_K)
CROSSOVER = (0.25, 4.0)
REFERENCE_NULL = "gauss_qk"  # the head without structure, whose shares stand beside every head's
BEYOND_Z = inference.flag_threshold(inference.NULL_REPLICATES)  # |t| that flags one comparison at the default
DEGENERATE_THRESHOLD = 0.5  # a head is degenerate when at least this share of its rows has all logits equal
UNDEFINED_WHEN_DEGENERATE = ("kappa", "kappa16", "c", "c16", "profile_r2", "gamma", "gamma_low", "gamma_high",
                             "gamma_kappa", "gamma_kappa_low", "gamma_kappa_high", "gamma_half", "gamma_half_low",
                             "gamma_half_high")


def regime(c: float) -> str:
    """``subcritical`` (c <= 1/4), ``crossover`` (1/4 < c < 4) or ``supercritical`` (c >= 4); ``undefined`` if NaN."""
    if not np.isfinite(c):
        return "undefined"
    if c <= CROSSOVER[0]:
        return "subcritical"
    return "crossover" if c < CROSSOVER[1] else "supercritical"


def _median(x: np.ndarray) -> float:
    """Median over the defined values (NaN marks an undefined one; inf, a tied maximum's kappa, counts)."""
    x = x[~np.isnan(x)]
    return float(np.median(x)) if len(x) else float("nan")


def row_laws(data: dict) -> np.ndarray:
    """Law label of every row (``"undefined"`` for rows shorter than 4 K or with a tied maximum)."""
    labels = laws.classify_profiles(laws.profile_of_gaps(data["top_gaps"]))[0]
    labels[data["n"] < LAW_MIN_N] = "undefined"
    return labels


def summarise_unit(unit: str, layer: int, head: int, data: dict, *, seed: int = 0,
                   min_windows: int = laws.MIN_WINDOWS) -> tuple[dict, list, list, list, np.ndarray]:
    """One unit's summary record, its per-level records, its curves, its median profile records, and the
    window-bootstrap replicates ``(B,)`` of its ``gamma`` (:attr:`.laws.GammaFit.boot`; NaN for a degenerate head)."""
    n, level, windows = data["n"], data["level"], data["window"]
    p_max, entropy = data["max_weight"][:, MODEL_BETA], data["entropy"][:, MODEL_BETA]
    kappa16 = np.where(n >= KAPPA16_MIN_N, data["kappa16"], np.nan)
    fits = {name: laws.fit_gamma(level, n, values, windows, min_n=min_n, seed=seed + i, min_windows=min_windows)
            for i, (name, values, min_n) in enumerate((("gamma", data["kappa16"], KAPPA16_MIN_N),
                                                       ("gamma_kappa", data["kappa"], 0),
                                                       ("gamma_half", data["beta_half"], 0)))}
    longest = level == level.max()
    point = {"p_max": _median(p_max[longest]), "entropy": _median(entropy[longest]),
             "beta_half": _median(data["beta_half"][longest]), "kappa": _median(data["kappa"][longest]),
             "kappa16": _median(kappa16[longest])}
    c_half, c, c16 = 1 / point["beta_half"], 1 / point["kappa"], 1 / point["kappa16"]
    labels = row_laws(data)
    long_rows = n >= LAW_MIN_N
    profile = laws.head_profile(laws.profile_of_gaps(data["top_gaps"][long_rows]))
    shares = laws.law_shares(labels, windows, seed=seed + 7, min_windows=min_windows)
    degenerate_rows = np.asarray(data["degenerate"], dtype=bool)
    first_max = np.asarray(data["argmax_first"], dtype=bool) & ~degenerate_rows  # a tie of all keys is no sink
    sink_fraction = float(np.mean(first_max))
    record = {
        "unit": unit, "layer": layer, "head": head, "rows": int(len(n)), "windows": int(len(np.unique(windows))),
        "n_max": int(level.max()), **point, "c_half": c_half, "c": c, "c16": c16,
        "regime": regime(c_half), "regime_kappa": regime(c), "regime_kappa16": regime(c16),
        "law": laws.law_of_profile(profile), "profile_r2": float(profile[1]),
        **{f"rows_{law}{suffix}": v for law, (s, lo, hi) in shares.items()
           for suffix, v in (("", s), ("_low", lo), ("_high", hi))},
        "sink": sink_fraction >= laws.SINK_THRESHOLD, "sink_fraction": sink_fraction,
        "first_weight": float(np.mean(data["first_weight"])),
        **{f"{name}{suffix}": v for name, fit in fits.items()
           for suffix, v in (("", fit.gamma), ("_low", fit.low), ("_high", fit.high))},
        "spread": _median(data["spread"]),
        "degenerate": False, "degenerate_fraction": float(np.mean(degenerate_rows)),
    }
    gamma_boot = fits["gamma"].boot
    if record["degenerate_fraction"] >= DEGENERATE_THRESHOLD:
        _mark_degenerate(record)
        gamma_boot = np.full_like(gamma_boot, np.nan)
    record["domain"] = laws.LAW_DOMAIN.get(record["law"], "undefined")
    bins, curves = [], []
    for lv in np.unique(level):
        sel = level == lv
        rec = {"unit": unit, "layer": layer, "head": head, "level": int(lv), "n_centre": float(np.median(n[sel])),
               "log_log_n": float(np.median(np.log(np.log(n[sel])))), "rows": int(sel.sum()),
               "p_max": _median(p_max[sel]), "entropy": _median(entropy[sel]),
               "beta_half": _median(data["beta_half"][sel]), "kappa": _median(data["kappa"][sel]),
               "kappa16": _median(kappa16[sel]), "first_weight": float(np.mean(data["first_weight"][sel])),
               "sink_fraction": float(np.mean(first_max[sel]))}
        rec.update(c_half=1 / rec["beta_half"], c=1 / rec["kappa"], c16=1 / rec["kappa16"])
        bins.append(rec)
        h = np.median(data["entropy"][sel], axis=0)  # (betas,)
        p = np.median(data["max_weight"][sel], axis=0)  # (betas,)
        curves += [{"unit": unit, "layer": layer, "head": head, "level": int(lv), "beta": float(beta),
                    "entropy": float(hv), "p_max": float(pv), "log_n": float(np.log(rec["n_centre"]))}
                   for beta, hv, pv in zip(BETA_GRID, h, p)]
    profiles = [{"unit": unit, "layer": layer, "head": head, "k": k + 1, "r": float(r)} for k, r in enumerate(profile)]
    return record, bins, curves, profiles, gamma_boot


def subset_records(data: dict, windows: int, subsets: int, rng: np.random.Generator) -> pd.DataFrame:
    """The tested statistics (:data:`.inference.TESTED`) and p_max of ``subsets`` random sets of ``windows`` windows.

    ``data`` are the rows of a pool of null windows; each set is drawn without replacement and read by the
    same estimators as :func:`summarise_unit` (law shares of the defined rows, gamma of kappa_16 on
    n >= :data:`KAPPA16_MIN_N`, median p_max of the longest level).
    """
    labels = row_laws(data)
    ids, inverse = np.unique(data["window"], return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    rows_of = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)  # rows of each pooled window
    p_max = data["max_weight"][:, MODEL_BETA]
    longest = data["level"] == data["level"].max()
    records = []
    for _ in range(int(subsets)):
        sel = np.concatenate([rows_of[i] for i in rng.choice(len(ids), size=int(windows), replace=False)])
        defined = sel[labels[sel] != "undefined"]
        record = {f"rows_{law}": float(np.mean(labels[defined] == law)) if len(defined) else np.nan for law in laws.LAWS}
        record["gamma"] = laws.fit_gamma(data["level"][sel], data["n"][sel], data["kappa16"][sel], data["window"][sel],
                                         min_n=KAPPA16_MIN_N, min_windows=np.iinfo(np.int64).max).gamma
        record["p_max"] = _median(p_max[sel[longest[sel]]])
        records.append(record)
    return pd.DataFrame(records).assign(windows=int(windows))


def _mark_degenerate(record: dict) -> None:
    """A degenerate head's record: flagged, no law, sink, kappa, gamma or law shares (NaN, ``undefined``)."""
    record["degenerate"] = True
    record["sink"] = False
    record["law"] = "undefined"
    for name in UNDEFINED_WHEN_DEGENERATE:
        record[name] = np.nan
    for name in [k for k in record if k.startswith("rows_")]:
        record[name] = np.nan
    record["regime_kappa"] = record["regime_kappa16"] = "undefined"


def audit(heads: pd.DataFrame, nulls: pd.DataFrame, replicates: pd.DataFrame | None = None, *,
          intervals: bool = True, replicate_count: int = inference.NULL_REPLICATES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Add the rule decision and the null comparisons to ``heads`` and ``nulls`` (returns new frames).

    Each head is put beside the nulls (:mod:`.nulls`) and decides (:mod:`.inference`):
    the drift of each rule is the head's gamma minus the gamma of the null of the head's law whose exact
    scale is that rule (:data:`.nulls.RULE_NULLS`); ``rules_consistent`` lists the rules whose null the
    head's gamma cannot be told from, ``best_rule`` is the one such rule (``undecided`` when there are
    none or several, ``undefined`` for a law without rule nulls, such as ``power``) and ``nearest_rule``
    the rule of smallest |drift|.  The Gaussian q/k null's law shares and gamma stand beside the head's
    (``null_rows_*``, ``null_gamma*``); each head's law shares and gamma are tested against independent
    Gaussian null replicates read over the head's own design and windows: ``beyond_null`` names those
    that differ (``+`` above, ``-`` below), ``null_p`` is the head's Bonferroni-adjusted p-value and
    ``gamma_z`` the t of its gamma.  A head without structure is flagged with probability at most 5%
    (measured in tests/test_diagnostic_calibration.py).

    ``replicates`` are the statistics of subsets of the pooled windows of ``replicate_count`` Gaussian null
    replicates (:mod:`.inference`); without them (or without ``intervals``) no head is tested against
    the null (``beyond_null`` empty).
    """
    by_name = nulls.set_index("unit") if len(nulls) else pd.DataFrame(columns=["gamma", "gamma_low", "gamma_high"])
    null_gamma = by_name["gamma"]
    reference = by_name.loc[REFERENCE_NULL] if REFERENCE_NULL in by_name.index else None
    distribution = (inference.null_distribution(replicates, replicate_count)
                    if replicates is not None and len(replicates) > 1 else None)

    def one(row, exclude=None) -> dict:
        out = inference.rule_decision(row, by_name)
        others = {k: v for k, v in null_gamma.items() if k != exclude and np.isfinite(v)}
        out["nearest_null"] = (min(others, key=lambda k: abs(others[k] - row["gamma"]))
                               if others and np.isfinite(row["gamma"]) else "undefined")
        if reference is not None:
            for law in laws.LAWS:
                out[f"null_rows_{law}"] = reference[f"rows_{law}"]
            for suffix in ("", "_low", "_high"):
                out[f"null_gamma{suffix}"] = reference[f"gamma{suffix}"]
        if distribution is not None:
            test = inference.null_test(row, distribution, intervals=intervals)
            out["gamma_z"] = test.pop("gamma_t")
            out.update(test)
        else:
            out.update(gamma_z=np.nan, null_p=np.nan, beyond_null="")
        return out

    heads = heads.join(pd.DataFrame([one(r) for _, r in heads.iterrows()], index=heads.index))
    nulls = nulls.join(pd.DataFrame([one(r, exclude=r["unit"]) for _, r in nulls.iterrows()], index=nulls.index))
    nulls.insert(1, "description", [NULLS[u].description for u in nulls["unit"]])
    nulls.insert(2, "known_law", [NULLS[u].law for u in nulls["unit"]])
    return heads, nulls
