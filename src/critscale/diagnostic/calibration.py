"""The diagnostic's decisions measured on heads whose answer is known: false flags and the rule's accuracy.

* :func:`gaussian_heads` reads ``heads`` i.i.d. Gaussian heads (built like the ``gauss_qk`` null, logit
  scale ``1/sqrt(d)``) through :func:`.pipeline.diagnose_source` against their own null, and
  :func:`flag_rate` counts those flagged ``beyond_null``: a calibrated test flags about
  :data:`.inference.FLAG_LEVEL` of them, within the exact binomial interval of the count.
* :func:`rule_null_heads` reads heads of each rule's null family (:data:`RULE_FAMILIES`) beside the rule
  nulls read on the pipeline's reference windows, and :func:`rule_accuracy` gives per family the heads
  whose rule is decided, those decided right, and the undecided share.
* :func:`seed_agreement` sets a model's diagnosis beside the same heads read against nulls of another seed
  (:func:`.pipeline.with_null_seed`, which does not read the model again): the share of heads with the same
  ``beyond_null`` decision and the same rule, with its exact binomial interval.  :func:`heads_record` and
  :func:`from_heads_record` keep what that needs of a model's diagnosis (its heads' summaries and its null
  plan) as JSON, so a test can redraw a real model's nulls without the model.

tests/test_diagnostic_calibration.py runs them at the full size (:data:`TEST_GAUSSIAN_HEADS` Gaussian heads
per design and number of windows, :data:`TEST_RULE_HEADS` heads per rule family); chapter 13 runs them at the
size its time allows and states it.
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
TEST_GAUSSIAN_HEADS = 200  # Gaussian heads per design and number of windows in tests/test_diagnostic_calibration.py
TEST_RULE_HEADS = 30  # heads per rule family in that test
SEED_AGREEMENT = 0.95  # two null seeds must give the same decisions on at least this share of a model's heads
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
        return ("The rule's accuracy is not measured in this build (the library's full-size calibration check "
                f"measures it on {TEST_RULE_HEADS} heads per family).")
    decided, right = int(accuracy["decided"].sum()), int(accuracy["right"].sum())
    share = f"{right / decided:.0%}" if decided else "none decided"
    return (f"{per_family} heads of each family whose exact scale is one of the rules (the full-size check reads "
            f"{TEST_RULE_HEADS}), read on "
            f"the default windows beside the rule nulls: {decided} of {int(accuracy['heads'].sum())} are decided, "
            f"{right} of them right ({share}), and on average {float(accuracy['undecided'].mean()):.0%} of a "
            "family's heads are undecided.")


def seed_agreement(first: pipeline.Diagnosis, second: pipeline.Diagnosis, confidence: float = 0.95) -> dict:
    """How many of the same heads get the same decisions from two diagnoses (two null seeds).

    A head agrees when it is flagged ``beyond_null`` in both or in neither, and its ``best_rule`` is the same in
    both.  Returns the heads, those with the same flag (``same_flag``), the same rule (``same_rule``) and both
    (``same``), the share agreeing and its exact (Clopper-Pearson) interval, the heads flagged and the heads
    whose rule is decided in either, the two seeds, and ``tested``: whether a head could be flagged or decided
    at all (without intervals, fewer than :data:`.laws.MIN_WINDOWS` windows, every decision is "no" whatever the
    seed, and the agreement measures nothing).
    """
    a = first.heads.set_index("unit")
    b = second.heads.set_index("unit")
    if set(a.index) != set(b.index):
        raise ValueError("the two diagnoses read different heads: the agreement of their decisions is undefined")
    b = b.loc[a.index]
    flag_a, flag_b = a["beyond_null"].fillna("") != "", b["beyond_null"].fillna("") != ""
    same_flag = flag_a == flag_b
    same_rule = a["best_rule"] == b["best_rule"]
    same = int((same_flag & same_rule).sum())
    total = len(a)
    low, high = clopper_pearson(same, total, confidence)
    decided = ~a["best_rule"].isin([inference.UNDECIDED, "undefined"]) | \
        ~b["best_rule"].isin([inference.UNDECIDED, "undefined"])
    return {"heads": total, "same_flag": int(same_flag.sum()), "same_rule": int(same_rule.sum()), "same": same,
            "share": same / total if total else math.nan, "low": low, "high": high, "confidence": confidence,
            "flagged": int((flag_a | flag_b).sum()), "decided": int(decided.sum()),
            "seeds": [int(first.meta["seed"]), int(second.meta["seed"])],
            "tested": bool(first.meta.get("intervals", True)) and bool(second.meta.get("intervals", True))}


def null_seed_agreement(diag: pipeline.Diagnosis, seed: int, confidence: float = 0.95) -> dict:
    """:func:`seed_agreement` of ``diag`` and its heads read against the nulls of ``seed`` (the model is not read
    again, :func:`.pipeline.with_null_seed`), with the seconds the second null stage took.

    A diagnosis without intervals (too few windows) flags and decides no head whatever the seed: nothing is
    redrawn, and the result says it measured nothing (``tested`` false, NaN share)."""
    if not diag.meta.get("intervals", True):
        heads = len(diag.heads)
        return {"heads": heads, "same_flag": heads, "same_rule": heads, "same": heads, "share": math.nan,
                "low": math.nan, "high": math.nan, "confidence": confidence, "flagged": 0, "decided": 0,
                "seeds": [int(diag.meta["seed"]), int(seed)], "tested": False, "null_seconds": 0.0}
    other = pipeline.with_null_seed(diag, seed)
    return {**seed_agreement(diag, other, confidence), "null_seconds": other.meta["null_seconds"]}


def agreement_sentence(model: str, agreement: dict) -> str:
    """One model's agreement under two null seeds (:func:`seed_agreement`) as a sentence, or why it measures nothing."""
    seeds = " and ".join(str(s) for s in agreement["seeds"])
    if not agreement["tested"]:
        return (f"{model}: not measured in this build (too few windows for intervals, so no head can be flagged or "
                "given a rule, whatever the seed).")
    share = f"{agreement['share']:.1%} [{agreement['low']:.1%}, {agreement['high']:.1%}]"
    aim = f"the {SEED_AGREEMENT:.0%} the diagnostic aims at"
    verdict = (f"below {aim}" if agreement["share"] < SEED_AGREEMENT else
               f"at least {aim}, though its interval reaches below it" if agreement["low"] < SEED_AGREEMENT else
               f"at least {aim}, with its whole interval")
    return (f"{model}: null seeds {seeds} give the same decisions on {agreement['same']} of {agreement['heads']} heads "
            f"({share}, exact {agreement['confidence']:.0%} interval; {verdict}): the same flag beyond the null on {agreement['same_flag']} "
            f"({agreement['flagged']} flagged under at least one seed), the same rule on {agreement['same_rule']} "
            f"({agreement['decided']} decided for a rule under at least one).")


AUDIT_FIELDS = ("unit", "layer", "head", "law", "degenerate", "gamma", "gamma_low", "gamma_high", *inference.TESTED)
"""The fields of a head's summary that its audit beside the nulls reads (:func:`.summary.audit`)."""


def heads_record(diag: pipeline.Diagnosis, **provenance) -> dict:
    """What :func:`.pipeline.with_null_seed` needs of ``diag`` as JSON-ready data: the heads' summaries (the fields
    of :data:`AUDIT_FIELDS`), the null plan and ``provenance`` (what was read, by which commit)."""
    if diag.plan is None or diag.head_records is None:
        raise ValueError("the diagnosis keeps no null plan: it was not computed by diagnose_source")
    plan = diag.plan
    fields = [{k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in AUDIT_FIELDS} for r in diag.head_records]
    return {"format": "critscale-heads/1", "provenance": provenance,
            "design": {"kind": plan.design.kind, "window_length": plan.design.window_length,
                       "queries": plan.design.queries, "causal": plan.design.causal},
            "plan": {k: getattr(plan, k) for k in ("head_dim", "windows", "spread", "spread_from", "null_windows",
                                                   "rule_windows", "null_replicates", "backend")}
            | {"nulls": list(plan.nulls)},
            "seed": int(diag.meta["seed"]), "heads": fields}


def from_heads_record(record: dict, *, backend: str | None = None) -> pipeline.Diagnosis:
    """A diagnosis that holds only what :func:`heads_record` kept: its nulls must be drawn (``with_null_seed``).

    ``backend`` replaces the recorded one (the row statistics of the nulls: ``reference`` on any machine)."""
    if not isinstance(record, dict) or record.get("format") != "critscale-heads/1":
        raise ValueError("not a heads record (no \"format\": \"critscale-heads/1\")")
    d = record["design"]
    design = make_design(d["kind"], d["window_length"], queries=d["queries"], causal=d["causal"])
    p = dict(record["plan"])
    plan = pipeline.NullPlan(design, int(p["head_dim"]), int(p["windows"]), float(p["spread"]), p["spread_from"],
                             tuple(p["nulls"]), int(p["null_windows"]), int(p["rule_windows"]),
                             int(p["null_replicates"]), backend or p["backend"], False)
    heads = [dict(h) for h in record["heads"]]
    frame = pd.DataFrame(heads)
    empty = pd.DataFrame()
    meta = {"seed": int(record["seed"]), "intervals": plan.intervals, "window_length": design.window_length}
    return pipeline.Diagnosis(frame, empty, empty, empty, empty, meta=meta, head_records=heads, plan=plan)
