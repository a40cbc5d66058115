"""The verdict of a diagnosis and the schedule it implies: how each layer's beta must grow beyond the length read.

**What is measured.**  A head's scale kappa_n is the median over its rows at level n of kappa_16 (:mod:`.laws`),
and over the lengths read kappa_n is proportional to (log n)^gamma, gamma the slope of its log on log log n.
Its operating point is c = beta / kappa_n.
Keeping c at its value at the longest length read, T (:attr:`Schedule.read_length`), at a length n > T needs

.. math::  \\beta(n) / \\beta(T) = \\kappa_n / \\kappa_T = (\\log n / \\log T)^{\\gamma},

the factor by which the layer's logits must be multiplied at length n (1 for n <= T).
This is our reconstruction of the rule a head needs, and beyond T it is an extrapolation: it assumes that
the power of log n fitted on the lengths read goes on holding at lengths never read.
The verdict per layer and for the model is :func:`layer_schedule`'s.

**Applying it.**  :meth:`Schedule.factor` is the factor of :func:`critscale.models.temperature.tempered`::

    from critscale.diagnostic.schedule import Schedule
    from critscale.models.temperature import tempered

    s = Schedule.from_json("run/schedule.json")
    with tempered(model, s.factor):
        model.generate(...)

``critscale diagnose`` writes ``schedule.json`` into its run directory (:meth:`Schedule.to_json`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import beta as beta_distribution

from .inference import UNDECIDED
from .nulls import RULE_LABEL, RULES

if TYPE_CHECKING:
    import torch

FORMAT = "critscale-schedule/1"
STATISTIC = "kappa16"  # the statistic whose slope on log log n is the diagnostic's gamma
MULTIPLES = (2, 4, 8)  # growth factors are reported at these multiples of the length read
CONFIDENCE = 0.95
DECIDED_RULES = tuple(RULE_LABEL[rule] for rule in RULES)  # the rules a head can be decided for
RULE_CHOICES = DECIDED_RULES + (UNDECIDED,)  # every rule label a head can read, but ``undefined``
UNDEFINED = "undefined"


class ScheduleError(ValueError):
    """A diagnosis or a file that gives no schedule, or a question the schedule cannot answer."""


def clopper_pearson(count: int, total: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided interval of a binomial share ``count / total`` (NaN when ``total`` is 0)."""
    if total <= 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low = float(beta_distribution.ppf(tail, count, total - count + 1)) if count > 0 else 0.0
    high = float(beta_distribution.ppf(1 - tail, count + 1, total - count)) if count < total else 1.0
    return low, high


def growth_ratio(read_length: int, multiple: float) -> float:
    """``log(multiple * T) / log T``: the ratio of log n at ``n = multiple * T`` to log T."""
    return math.log(multiple * read_length) / math.log(read_length)


def rule_verdict(rules) -> dict:
    """Rule shares of heads (labels of :data:`RULE_CHOICES`; ``undefined`` left out and counted) and the decision.

    A share is taken over the *decided* heads, those whose own rule is one of :data:`DECIDED_RULES`
    (``rule_heads``): an ``undecided`` head backs no rule, so it is counted (``rule_undecided``) and left out
    of every share.  Returns ``rule`` (the plurality when its interval lies above every other rule's, else
    ``undecided``; ``undefined`` when no head has a rule reading at all), ``plurality`` (``undecided`` when no
    head is decided), ``rule_share`` with its interval, ``rule_shares`` per rule ``[share, low, high]``,
    ``rule_counts`` (every label read), ``rule_heads``, ``rule_undecided`` and ``rule_undefined``.
    """
    rules = [str(r) for r in rules]
    unknown = sorted({r for r in rules if r not in RULE_CHOICES and r != UNDEFINED})
    if unknown:
        raise ScheduleError(f"unknown head rule(s) {', '.join(unknown)}; known: {', '.join(RULE_CHOICES)}, "
                            f"{UNDEFINED}")
    counts = {rule: rules.count(rule) for rule in RULE_CHOICES}
    total = sum(counts[rule] for rule in DECIDED_RULES)
    shares = {rule: [counts[rule] / total if total else math.nan, *clopper_pearson(counts[rule], total)]
              for rule in DECIDED_RULES}
    out = {"rule_heads": total, "rule_undecided": counts[UNDECIDED], "rule_undefined": rules.count(UNDEFINED),
           "rule_counts": counts, "rule_shares": shares}
    if total == 0:
        rule = UNDECIDED if counts[UNDECIDED] else UNDEFINED
        return {**out, "rule": rule, "plurality": rule, "rule_share": math.nan,
                "rule_share_low": math.nan, "rule_share_high": math.nan}
    top = max(counts[rule] for rule in DECIDED_RULES)
    leaders = [rule for rule in DECIDED_RULES if counts[rule] == top]
    plurality = leaders[0]  # a tie is never separated: the layer is undecided then
    share, low, high = shares[plurality]
    separated = len(leaders) == 1 and all(low > shares[rule][2] for rule in DECIDED_RULES if rule != plurality)
    return {**out, "rule": plurality if separated else UNDECIDED, "plurality": plurality, "rule_share": share,
            "rule_share_low": low, "rule_share_high": high}


def paired_median(gammas: np.ndarray, replicates: np.ndarray | None) -> tuple[float, float, float, int]:
    """Median of heads' ``gammas`` ``(h,)`` and its 95% interval from their paired replicates ``(h, B)``.

    Replicate b is one resample of the windows, shared by every head: the median over heads is taken per
    replicate (heads without a value in it left out), then the percentiles.  Returns
    ``(median, low, high, replicates used)``; NaN interval without replicates.
    """
    if len(gammas) == 0:
        return math.nan, math.nan, math.nan, 0
    median = float(np.median(gammas))
    if replicates is None or replicates.size == 0 or not np.isfinite(replicates).any():
        return median, math.nan, math.nan, 0
    with np.errstate(all="ignore"):
        defined = np.isfinite(replicates).any(axis=0)  # (B,)
        per_replicate = np.nanmedian(replicates[:, defined], axis=0)  # (B',)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(per_replicate, [tail, 100 - tail])
    return median, float(low), float(high), int(defined.sum())


def _growth(read_length: int, gamma: float, low: float, high: float) -> dict[int, list[float]]:
    out = {}
    for k in MULTIPLES:
        ratio = growth_ratio(read_length, k)
        out[k] = [ratio ** g if math.isfinite(g) else math.nan for g in (gamma, low, high)]
    return out


def _unit_verdict(heads, replicates, read_length: int) -> dict:
    """gamma (paired median), rule shares and growth factors of one set of heads (a layer, or the model)."""
    gamma = heads["gamma"].to_numpy(dtype=np.float64)
    usable = np.isfinite(gamma) & ~heads["degenerate"].to_numpy(dtype=bool)
    units = heads["unit"].to_numpy()[usable]
    reps = None
    if replicates is not None:
        missing = [u for u in units if u not in replicates.index]
        if missing:
            raise ScheduleError(f"the diagnosis has no gamma bootstrap replicates for head(s) {', '.join(missing[:5])}")
        reps = replicates.loc[units].to_numpy(dtype=np.float64)  # (h, B)
    g, low, high, used = paired_median(gamma[usable], reps)
    return {"heads": int(len(heads)), "heads_used": int(usable.sum()), "heads_excluded": int((~usable).sum()),
            "gamma": g, "gamma_low": low, "gamma_high": high, "replicates": used,
            **rule_verdict(heads["best_rule"]), "growth": _growth(read_length, g, low, high)}


def layer_schedule(diag) -> "Schedule":
    """The verdict per layer and for the model, and the schedule, of a :class:`.pipeline.Diagnosis`.

    **Per layer.**  The layer's gamma is the median of its heads' gammas; heads without one (degenerate, or
    too few levels) are left out and counted (``heads_excluded``).  Its 95% interval is a percentile bootstrap
    over windows, paired across heads: every head's bootstrap is drawn from one fixed stream
    (:data:`.pipeline.HEAD_SEED`) over the same windows, so replicate b resamples the same windows for every
    head (:attr:`.laws.GammaFit.boot`, kept per head in :attr:`.pipeline.Diagnosis.gamma_replicates`); the
    median over the layer's heads is taken per replicate, then its percentiles.  The growth factors at
    2T, 4T and 8T and their intervals are the factor at the gamma and at the ends of its interval (the factor
    is increasing in gamma).

    **The rule.**  Each head's rule is :func:`.inference.rule_decision`'s ``best_rule`` (constant beta, code
    label ``none/yarn``; sqrt(2 log n); s log n; (log n)^2; or undecided; heads whose rule is undefined are left
    out and counted, ``rule_undefined``).  A layer's rule shares are taken over its *decided* heads, those whose
    own rule is one of the four (``rule_heads``; undecided heads back no rule and are counted apart,
    ``rule_undecided``): the share of the decided heads with each rule, each with an exact (Clopper-Pearson)
    95% binomial interval, the decided heads taken as the draws.  The plurality rule is the layer's rule only
    when the lower end of its interval lies above the upper end of every other rule's, else the layer's rule is
    ``undecided``.  ``rule_share`` and its interval are the plurality's (named in ``plurality``), decided or not.
    The model's verdict (:attr:`Schedule.model`) is the same over all heads: its rule and share, the median
    gamma of all heads with the paired bootstrap, and the growth factors at that gamma (the median of the
    heads' growth factors, the factor being increasing in gamma).
    """
    heads = getattr(diag, "heads", None)
    meta = getattr(diag, "meta", None) or {}
    if heads is None or "window_length" not in meta:
        raise ScheduleError(f"layer_schedule needs a Diagnosis (heads and meta), got {type(diag).__name__}")
    needed = {"unit", "layer", "head", "gamma", "best_rule", "degenerate"} - set(heads.columns)
    if needed:
        raise ScheduleError(f"the diagnosis's heads lack the column(s) {', '.join(sorted(needed))}")
    if len(heads) == 0:
        raise ScheduleError("the diagnosis has no heads: there is no schedule to give")
    read_length = int(meta["window_length"])
    replicates = getattr(diag, "gamma_replicates", None)
    layers = []
    for layer in sorted(int(v) for v in heads["layer"].unique()):
        verdict = _unit_verdict(heads[heads["layer"] == layer], replicates, read_length)
        layers.append({"layer": layer, **verdict})
    source = {key: meta[key] for key in ("input", "design", "windows", "window_length", "levels", "seed")
              if key in meta}
    source["intervals"] = replicates is not None and bool(meta.get("intervals", True))  # False: no replicates kept
    return Schedule(read_length, layers, _unit_verdict(heads, replicates, read_length), source)


def _plain(value):
    """``value`` with numpy scalars as Python numbers, tuples as lists and NaN as None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(value) else float(value)
    return value


def _nan_for_none(value):
    if isinstance(value, dict):
        return {k: _nan_for_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_for_none(v) for v in value]
    return math.nan if value is None else value


def _with_int_multiples(entry: dict) -> dict:
    entry = dict(entry)
    entry["growth"] = {int(k): list(v) for k, v in entry["growth"].items()}
    return entry


@dataclass
class Schedule:
    """Per-layer factors by which beta must grow beyond the length read (module docstring)."""

    read_length: int  # T: the longest context length the diagnosis read
    layers: list[dict]  # one verdict per layer, ascending layer
    model: dict  # the verdict over all heads
    source: dict = field(default_factory=dict)  # what was read: input, design, windows, levels, seed
    run: dict | None = None  # the run manifest of the command that wrote it, when written by one

    def __post_init__(self):
        if isinstance(self.read_length, bool) or int(self.read_length) != self.read_length or self.read_length < 2:
            raise ScheduleError(f"read_length must be an integer >= 2, got {self.read_length!r}")
        self.read_length = int(self.read_length)
        self._by_layer = {int(entry["layer"]): entry for entry in self.layers}

    def layer(self, layer: int) -> dict:
        """The verdict of ``layer``; :class:`ScheduleError` when the schedule has none."""
        try:
            return self._by_layer[int(layer)]
        except (KeyError, TypeError, ValueError):
            known = sorted(self._by_layer)
            raise ScheduleError(f"layer {layer!r} is not in the schedule (layers {known[0]}..{known[-1]})") from None

    def factor(self, layer: int, lengths: torch.Tensor) -> torch.Tensor:
        """The factor of ``layer``'s logits at each context length of ``lengths`` (an integer tensor, any shape).

        ``(log n / log T)^gamma`` for n > T and exactly 1.0 for n <= T; float32 on the device of ``lengths``.
        A layer without a gamma has no factor beyond T (:class:`ScheduleError` when asked for one).
        """
        import torch

        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise ScheduleError(f"lengths must be an integer tensor, got {lengths.dtype}")
        gamma = float(self.layer(layer)["gamma"])
        one = torch.ones(lengths.shape, dtype=torch.float32, device=lengths.device)
        beyond = lengths > self.read_length
        if not math.isfinite(gamma):
            if bool(beyond.any()):
                raise ScheduleError(f"layer {layer} has no gamma (no head with one): the schedule gives no factor "
                                    f"beyond the length read, {self.read_length}")
            return one
        n = lengths.clamp(min=self.read_length).to(torch.float32)
        ratio = torch.log(n) / math.log(self.read_length)
        return torch.where(beyond, ratio ** gamma, one)

    def growth(self, layer: int, k: float) -> tuple[float, float, float]:
        """``(factor, low, high)`` of ``layer`` at ``n = k T``: ``(log kT / log T)`` to the gamma and its interval ends."""
        if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)) or not k > 0:
            raise ScheduleError(f"k must be a positive number (n = k x {self.read_length}), got {k!r}")
        entry = self.layer(layer)
        if k <= 1:
            return 1.0, 1.0, 1.0
        ratio = growth_ratio(self.read_length, float(k))
        return tuple(ratio ** float(entry[name]) if math.isfinite(entry[name]) else math.nan
                     for name in ("gamma", "gamma_low", "gamma_high"))

    def to_dict(self) -> dict:
        """The schedule as JSON-ready data (NaN as null)."""
        return _plain({"format": FORMAT, "statistic": STATISTIC, "multiples": list(MULTIPLES),
                       "confidence": CONFIDENCE, "read_length": self.read_length, "layers": self.layers,
                       "model": self.model, "source": self.source, "run": self.run})

    @classmethod
    def from_dict(cls, data: dict, what: str = "the schedule") -> "Schedule":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ScheduleError(f"{what} is not a critscale schedule (no \"format\": \"{FORMAT}\")")
        try:
            layers = [_with_int_multiples(_nan_for_none(entry)) for entry in data["layers"]]
            model = _with_int_multiples(_nan_for_none(data["model"]))
            return cls(data["read_length"], layers, model, data.get("source") or {}, data.get("run"))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ScheduleError(f"{what} is not a whole schedule ({type(err).__name__}: {err})") from None

    def to_json(self, path) -> Path:
        """Write the schedule to ``path`` (floats as JSON numbers at full precision, NaN as null)."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")
        return path

    @classmethod
    def from_json(cls, path) -> "Schedule":
        """The schedule written by :meth:`to_json`; :class:`ScheduleError` names a file that holds none."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ScheduleError(f"schedule {path}: not JSON ({err.msg} at line {err.lineno})") from None
        return cls.from_dict(data, f"schedule {path}")
