"""The decisions read from a head beside its nulls: does it differ from the Gaussian null, which rule does it want.

A head is *beyond the null* when a law share or gamma differs from its sampling distribution for a head
without structure, measured on Gaussian null replicates read over the head's own design and windows
(:func:`null_test`, at most :data:`FLAG_LEVEL` false flags); its *rule* is the one rescaling rule whose null's
gamma it cannot be told from (:func:`rule_decision`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm, t as student

from .nulls import RULE_LABEL, RULE_NULLS, RULES

NULL_REPLICATES = 64  # independent Gaussian q/k heads that give each head's statistics their null distribution
SUBSETS = 400  # random sets of the input's number of windows drawn from the replicates' pooled windows
TESTED = ("rows_linear", "rows_power", "rows_step", "gamma")  # the comparisons of a head with the null
FLAG_LEVEL = 0.05  # a head without structure is flagged with at most this probability
RULE_LEVEL = 0.01  # a head of a rule's null is inconsistent with that rule with at most this probability
RULE_Z = float(norm.isf(RULE_LEVEL / 2))
UNDECIDED = "undecided"


def flag_threshold(replicates: int) -> float:
    """The |t| above which one comparison flags a head: two-sided, level FLAG_LEVEL / len(TESTED), R - 1 d.o.f."""
    return float(student.isf(FLAG_LEVEL / len(TESTED) / 2, int(replicates) - 1))


def null_distribution(subsets: pd.DataFrame, replicates: int) -> pd.DataFrame:
    """Mean and standard deviation of each statistic of :data:`TESTED` over the subsets of the pooled null
    windows, and ``count``, the number of independent replicates they come from (their degrees of freedom).

    Subsets of W of the pool's N = R W windows, drawn without replacement, overlap: their variance is
    the variance of a W-window statistic times (N - W)/(N - 1) (for a mean of windows), which is undone here.
    """
    windows = int(subsets["windows"].iloc[0])  # W, the windows of each subset
    pool = int(replicates) * windows
    correction = (pool - 1) / (pool - windows) if pool > windows else 1.0
    out = {}
    for name in TESTED:
        values = subsets[name].to_numpy(dtype=np.float64)
        values = values[np.isfinite(values)]
        out[name] = {"mean": float(values.mean()) if len(values) else np.nan,
                     "sd": float(np.sqrt(values.var(ddof=1) * correction)) if len(values) > 1 else np.nan,
                     "count": int(replicates) if len(values) > 1 else 0}
    return pd.DataFrame(out).T


def _t_statistic(x: float, mean: float, sd: float, count: int) -> float:
    """The prediction statistic of one value against ``count`` replicates (NaN when it is undefined)."""
    if not (np.isfinite(x) and np.isfinite(mean) and np.isfinite(sd)) or count < 2:
        return np.nan
    if sd == 0:  # every replicate equal: a head equal to them is no evidence, any other value is
        return 0.0 if x == mean else np.copysign(np.inf, x - mean)
    return (x - mean) / (sd * np.sqrt(1 + 1 / count))


def null_test(head: pd.Series, distribution: pd.DataFrame, *, intervals: bool) -> dict:
    """``beyond_null`` (the statistics that differ, ``+`` above, ``-`` below), ``null_p`` (the head's
    Bonferroni-adjusted p-value, the smallest over its comparisons times their number) and the t of each.

    Without intervals (fewer than :data:`.laws.MIN_WINDOWS` windows) no head is flagged and ``null_p`` is NaN.

    A head's law shares and gamma are compared with their sampling distribution for
    a head without structure, measured: :data:`NULL_REPLICATES` independent Gaussian q/k heads
    (:func:`.nulls.replicate_source`) of the input's own number of windows W, read over the input's own
    design by the same code.  Their R W windows are pooled and the statistics are read, by the same
    estimators as a head's, on :data:`SUBSETS` random sets of W of them (drawn without replacement), so
    that their spread is that of a W-window statistic, with every source of its error (few windows, rows
    of one window sharing their keys, levels of the prefix design sharing their keys), and their mean
    carries the null's own finite-W bias; pooling estimates the spread more precisely than R separate
    replicates would.  For each of the :data:`TESTED` statistics the head's value ``x`` is set against
    the subsets' mean ``m`` and standard deviation ``s`` by the prediction test

    .. math::  t = (x - m) / (s \\sqrt{1 + 1/R}),

    two-sided, against Student's t with ``R - 1`` degrees of freedom (exact for a normal statistic whose
    mean and spread come from R independent draws; the pooled spread only makes it more so).  The four
    comparisons of a head share the level :data:`FLAG_LEVEL` (Bonferroni: each is made at
    ``FLAG_LEVEL / 4``), so a head whose statistics are drawn like the null's is flagged with
    probability at most :data:`FLAG_LEVEL`.  The replicates are drawn once per diagnosis and carry the
    null's error into ``m`` and ``s`` (not one draw read once and taken as exact).
    tests/test_diagnostic_calibration.py measures the rate on i.i.d. Gaussian heads of both designs.
    """
    out, beyond, p_values = {}, [], []
    for name in TESTED:
        row = distribution.loc[name]
        value = _t_statistic(head[name], row["mean"], row["sd"], int(row["count"]))
        out[f"{name}_t"] = value
        if not intervals or np.isnan(value):
            continue
        p = float(2 * student.sf(abs(value), int(row["count"]) - 1))
        p_values.append(p)
        if p <= FLAG_LEVEL / len(TESTED):
            beyond.append(f"{name.removeprefix('rows_')}{'+' if value > 0 else '-'}")
    out["null_p"] = min(1.0, len(TESTED) * min(p_values)) if p_values else np.nan
    out["beyond_null"] = ",".join(beyond)
    return out


def _se(low: float, high: float) -> float:
    """Standard error implied by a 95% interval (its width over 3.92)."""
    return (high - low) / 3.92


def rule_decision(head: pd.Series, references: pd.DataFrame) -> dict:
    """The head's ``best_rule``, the rules it is consistent with, and the nearest rule.

    A head of a law with rule nulls (:data:`.nulls.RULE_NULLS`) is *consistent* with a
    rule when its gamma and the gamma of that rule's null differ by at most :data:`RULE_Z` standard
    errors of the difference (each standard error from the width of its 95% window-bootstrap
    interval); the head's rule is the one rule it is consistent with, ``undecided`` when its interval
    cannot tell the references apart (two or more consistent) or matches none, and ``undefined`` when
    the head has no gamma interval or its law has no rule nulls (``power``, a degenerate head).

    ``references`` are the null heads (``unit`` as index, ``gamma``, ``gamma_low``, ``gamma_high``).
    ``nearest_rule`` is the rule whose null's gamma is nearest the head's, decided or not.
    """
    table = {rule: null for rule, null in RULE_NULLS.get(head["law"], {}).items() if null in references.index}
    out = {}
    for rule in RULES:
        out[f"drift_{rule}"] = head["gamma"] - references.loc[table[rule], "gamma"] if rule in table else np.nan
    drifts = {rule: out[f"drift_{rule}"] for rule in RULES if np.isfinite(out[f"drift_{rule}"])}
    out["nearest_rule"] = RULE_LABEL[min(drifts, key=lambda r: abs(drifts[r]))] if drifts else "undefined"
    se_head = _se(head["gamma_low"], head["gamma_high"])
    consistent = []
    for rule in drifts:
        null = references.loc[table[rule]]
        se = np.hypot(se_head, _se(null["gamma_low"], null["gamma_high"]))
        if np.isfinite(se) and abs(drifts[rule]) <= RULE_Z * se:
            consistent.append(rule)
    out["rules_consistent"] = ",".join(RULE_LABEL[rule] for rule in consistent)
    if not drifts or not np.isfinite(se_head):
        out["best_rule"] = "undefined"
    else:
        out["best_rule"] = RULE_LABEL[consistent[0]] if len(consistent) == 1 else UNDECIDED
    return out


def replicate_chunks(count: int, windows: int, window_length: int, head_dim: int, elements: int) -> list[int]:
    """Replicates per chunk so that a chunk's queries (and its keys) hold at most ``elements`` numbers."""
    per = max(1, int(elements) // (int(windows) * int(window_length) * int(head_dim)))
    return [min(per, count - start) for start in range(0, int(count), per)]


def check_replicates(count) -> int:
    """``count`` checked: an integer >= 2 (a mean and a standard deviation), or 0 for no test."""
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count == 1 or count < 0:
        raise ValueError(f"null_replicates must be an integer >= 2 (0: no test against the null), got {count!r}")
    return int(count)

