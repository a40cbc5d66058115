"""The diagnostic's decisions measured on heads whose answer is known: false flags and the rule's accuracy.

* :func:`gaussian_heads` reads ``heads`` i.i.d. Gaussian heads (built like the ``gauss_qk`` null, logit
  scale ``1/sqrt(d)``) through :func:`.pipeline.diagnose_source` against their own null, and
  :func:`flag_rate` counts those flagged ``beyond_null``: a calibrated test flags about
  :data:`.inference.FLAG_LEVEL` of them, within the exact binomial interval of the count.
* :func:`rule_null_heads` reads heads of each rule's null family (:data:`RULE_FAMILIES`) beside the rule
  nulls read on the pipeline's reference windows, and :func:`rule_accuracy` gives per family the heads
  whose rule is decided, those decided right, and the undecided share.

tests/test_diagnostic_calibration.py runs them at the full size (200 Gaussian heads per design and
number of windows, 30 heads per rule family); chapter 13 runs them at the size its time allows and
states it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from . import inference, nulls as nulls_module, pipeline, summary
from .design import make_design
from .schedule import clopper_pearson
from .windows import ArraySource

WINDOW_LENGTH, HEAD_DIM, QUERIES = 256, 64, 2  # the calibration heads' design: small, so the runs are quick
RULE_FAMILIES = {"ptail1": "none/yarn", "ptail2": "sqrt_2_log_n", "logexp": "ssmax/entropy_invariant",
                 "edge": "log_n_squared", "planted": "ssmax/entropy_invariant",
                 "planted_shrink": "log_n_squared"}


def gaussian_heads(kind: str, windows: int, heads: int, *, window_length: int = WINDOW_LENGTH,
                   head_dim: int = HEAD_DIM, queries: int = QUERIES, seed: int = 5) -> pipeline.Diagnosis:
    """``heads`` i.i.d. Gaussian heads (one layer) of ``windows`` windows over design ``kind``, diagnosed beside
    the ``gauss_qk`` null alone (the heads and their replicates are drawn from ``seed``-dependent streams)."""
    rng = np.random.default_rng([19, windows, len(kind)])
    shape = (1, heads, windows, window_length, head_dim)
    q = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    design = make_design(kind, window_length, queries=queries)
    return pipeline.diagnose_source(ArraySource(q, k, 1 / math.sqrt(head_dim)), design, describe="Gaussian heads",
                                    nulls=("gauss_qk",), seed=seed, backend="reference")


def flag_rate(diag: pipeline.Diagnosis, confidence: float = 0.99) -> dict:
    """Heads flagged ``beyond_null``: the count, the heads, the rate and its exact binomial interval."""
    flagged = int((diag.heads["beyond_null"] != "").sum())
    total = len(diag.heads)
    low, high = clopper_pearson(flagged, total, confidence)
    return {"flagged": flagged, "heads": total, "rate": flagged / total if total else math.nan,
            "low": low, "high": high, "confidence": confidence, "level": inference.FLAG_LEVEL}


def rule_null_heads(per_family: int, *, windows: int = pipeline.WINDOWS, window_length: int = WINDOW_LENGTH,
                    seed: int = 1913) -> pd.DataFrame:
    """``per_family`` heads of each family of :data:`RULE_FAMILIES` (column ``family``), audited beside the
    rule nulls read on :func:`.pipeline.resolve_rule_windows`'s windows, as every diagnosis audits its heads."""
    design = make_design("suffix", window_length, queries=4)
    rng = np.random.default_rng(seed)
    null_windows = pipeline.resolve_rule_windows(None, pipeline.resolve_null_windows(None, windows))
    records = []
    for name in RULE_FAMILIES:
        data = pipeline._concatenate(nulls_module.family_statistics(name, design, null_windows, rng))
        records.append(summary.summarise_unit(name, -1, -1, data, seed=3)[0])
    heads = []
    for name in RULE_FAMILIES:
        for i in range(per_family):
            data = pipeline._concatenate(nulls_module.family_statistics(name, design, windows, rng))
            heads.append({**summary.summarise_unit(f"{name}{i}", 0, len(heads), data, seed=i)[0], "family": name})
    audited, _ = summary.audit(pd.DataFrame(heads), pd.DataFrame(records))
    return audited


def rule_accuracy(heads: pd.DataFrame) -> pd.DataFrame:
    """Per family: heads, decided heads, decided right, their share, undecided and undefined shares, nearest wrong."""
    rows = []
    for name, rule in RULE_FAMILIES.items():
        group = heads[heads["family"] == name]
        decided = group[~group["best_rule"].isin([inference.UNDECIDED, "undefined"])]
        right = int((decided["best_rule"] == rule).sum())
        rows.append({"family": name, "rule": rule, "heads": len(group),
                     "decided": len(decided), "right": right,
                     "accuracy": right / len(decided) if len(decided) else math.nan,
                     "undecided": float((group["best_rule"] == inference.UNDECIDED).mean()),
                     "undefined": float((group["best_rule"] == "undefined").mean()),
                     "nearest_wrong": int((group["nearest_rule"] != rule).sum())})
    return pd.DataFrame(rows)


def rule_sentence(accuracy: pd.DataFrame, per_family: int) -> str:
    """What :func:`rule_accuracy`'s table says, as a sentence (or that the rule was not measured)."""
    if per_family == 0 or len(accuracy) == 0:
        return ("The rule's accuracy is not measured in this build (tests/test_diagnostic_calibration.py measures it "
                "on 30 heads per family).")
    decided, right = int(accuracy["decided"].sum()), int(accuracy["right"].sum())
    share = f"{right / decided:.0%}" if decided else "none decided"
    return (f"{per_family} heads of each family whose exact scale is one of the rules (the test reads 30), read on "
            f"the default windows beside the rule nulls: {decided} of {int(accuracy['heads'].sum())} are decided, "
            f"{right} of them right ({share}), and on average {float(accuracy['undecided'].mean()):.0%} of a "
            "family's heads are `undecided`.")
