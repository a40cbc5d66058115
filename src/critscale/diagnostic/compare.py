"""Several diagnoses side by side: one line per model, each statistic beside its own Gaussian null's.

Every model is read with its own null heads (:mod:`.nulls`: the Gaussian q/k null is scaled to that
model's logit spread and has its head dimension), so each line compares a model with the head
without structure *of the same scale*, never with another model's null.  :func:`summary_line`
collects what a reader compares across models; :func:`operating_table` and :func:`null_table` put
it in two tables (the operating point first, because it does not depend on how kappa is defined);
:func:`compare_figure` and :func:`entropy_figure` draw it.  :func:`from_record` rebuilds a
:class:`.pipeline.Diagnosis` from an entry of a recorded GPU run (``scripts/gpu_gpt2.py``), so a
recorded run goes through the same tables and figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import LAW_COLORS
from .laws import LAWS
from .pipeline import Diagnosis
from .report import REGIMES
from .summary import REFERENCE_NULL


def _reference(diag: Diagnosis) -> pd.Series:
    nulls = diag.nulls.set_index("unit")
    if REFERENCE_NULL not in nulls.index:
        raise ValueError(f"the diagnosis has no {REFERENCE_NULL} null: nothing to compare its heads with")
    return nulls.loc[REFERENCE_NULL]


def _flagged(beyond: pd.Series, kinds: tuple[str, ...]) -> int:
    """Heads whose ``beyond_null`` names one of ``kinds`` (``linear``, ``power``, ``step``, ``gamma``)."""
    return int(beyond.fillna("").map(lambda s: any(f.rstrip("+-") in kinds for f in s.split(",") if f)).sum())


def summary_line(model: str, diag: Diagnosis) -> dict:
    """Medians over a model's heads of every statistic, each beside its Gaussian null's value."""
    h, ref, meta = diag.heads, _reference(diag), diag.meta
    line = {"model": model, "heads": len(h), "windows": int(meta["windows"]), "window_length": int(meta["window_length"]),
            "intervals": bool(meta["intervals"]), "log_n": float(np.log(meta["window_length"]))}
    for name in ("p_max", "entropy", "beta_half", "kappa", "kappa16", "first_weight", "rows_step", "rows_power",
                 "rows_linear", "gamma"):
        line[name] = float(h[name].median())
        line[f"{name}_null"] = float(ref[name])
    line.update(gamma_null_low=float(ref["gamma_low"]), gamma_null_high=float(ref["gamma_high"]))
    for column, label in (("regime", "half"), ("regime_kappa", "kappa"), ("regime_kappa16", "kappa16")):
        for regime in REGIMES:
            line[f"{regime}_{label}"] = int((h[column] == regime).sum())
    line["sink_heads"] = int(h["sink"].sum())
    line["sink_null"] = bool(ref["sink"])
    for law in (*LAWS, "undefined"):
        line[f"law_{law}"] = int((h["law"] == law).sum())
    beyond = h["beyond_null"].fillna("")
    line.update(beyond=int((beyond != "").sum()), beyond_shares=_flagged(beyond, LAWS),
                beyond_gamma=_flagged(beyond, ("gamma",)))
    if "text_loss" in meta:
        line.update(nats_per_token=float(meta["text_loss"]["nats_per_token"]),
                    bits_per_byte=float(meta["text_loss"]["bits_per_byte"]))
    return line


def _pair(value: float, null: float, digits: int = 3) -> str:
    return f"{value:.{digits}g} ({null:.{digits}g})"


def _regimes(line: dict, label: str) -> str:
    return " / ".join(str(line[f"{r}_{label}"]) for r in REGIMES)


def operating_table(lines: list[dict]) -> pd.DataFrame:
    """The operating point at each model's own temperature (rows of the longest context), medians over heads.

    Each cell reads "model (its Gaussian null)"; the regime columns count heads subcritical / crossover /
    supercritical under c = 1/beta_1/2, c = 1/kappa and c = 1/kappa_16.
    """
    return pd.DataFrame([{
        "model": l["model"], "\\(n\\)": l["window_length"],
        "\\(p_{\\max}\\) (null)": _pair(l["p_max"], l["p_max_null"]),
        "\\(H\\) nats (null)": _pair(l["entropy"], l["entropy_null"]), "\\(\\log n\\)": round(l["log_n"], 2),
        "\\(\\beta_{1/2}\\) (null)": _pair(l["beta_half"], l["beta_half_null"]),
        "\\(\\kappa\\) (null)": _pair(l["kappa"], l["kappa_null"]),
        "\\(\\kappa_{16}\\) (null)": _pair(l["kappa16"], l["kappa16_null"]),
        "heads by \\(1/\\beta_{1/2}\\)": _regimes(l, "half"), "by \\(1/\\kappa\\)": _regimes(l, "kappa"),
        "by \\(1/\\kappa_{16}\\)": _regimes(l, "kappa16")} for l in lines])


def null_table(lines: list[dict]) -> pd.DataFrame:
    """What each model's heads show beyond the Gaussian null: sinks, law shares, gamma, heads flagged."""
    return pd.DataFrame([{
        "model": l["model"], "heads": l["heads"], "sink heads": l["sink_heads"],
        "weight on the first key (null)": _pair(l["first_weight"], l["first_weight_null"], 2),
        "step rows (null)": _pair(l["rows_step"], l["rows_step_null"], 2),
        "power rows (null)": _pair(l["rows_power"], l["rows_power_null"], 2),
        "\\(\\gamma\\) (null [95%])": f"{l['gamma']:.2f} ({l['gamma_null']:.2f} [{l['gamma_null_low']:.2f}, "
                                     f"{l['gamma_null_high']:.2f}])",
        "heads beyond the null: shares / \\(\\gamma\\) / any": f"{l['beyond_shares']} / {l['beyond_gamma']} / "
                                                               f"{l['beyond']}"} for l in lines])


PANELS = (("p_max", "$p_{\\max}$ at the model's $\\beta$", True),
          ("first_weight", "weight on the first key", True),
          ("rows_step", "share of step rows", False),
          ("gamma", "$\\gamma$ of $\\kappa_{16}\\propto(\\log n)^\\gamma$", False))


def compare_figure(diags: dict[str, Diagnosis], *, seed: int = 0):
    """One dot per head and model for four statistics, the model's Gaussian null as a black bar.

    For gamma the bar spans the null's 95% interval; for the others it marks the null's value.
    Dots are coloured by the head's law of log N(t); their horizontal spread is random (jitter).  A model's
    name is broken into two lines at its first space.
    """
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, axes = plt.subplots(2, 2, figsize=(7.0, 5.8))
    names = list(diags)
    for ax, (column, title, log) in zip(axes.ravel(), PANELS):
        for i, name in enumerate(names):
            h, ref = diags[name].heads, _reference(diags[name])
            x = i + rng.uniform(-0.28, 0.28, len(h))
            values = h[column].to_numpy(dtype=float)
            ax.scatter(x, values, s=7, alpha=0.6, linewidths=0, c=[LAW_COLORS[lw] for lw in h["law"]])
            if column == "gamma" and np.isfinite(ref["gamma_low"]):
                ax.plot([i, i], [ref["gamma_low"], ref["gamma_high"]], color="k", lw=2.5)
            ax.plot([i - 0.38, i + 0.38], [ref[column]] * 2, color="k", lw=1.6)
        ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) for n in names], fontsize=9.5)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_title(title, fontsize=10.5)
        if log:
            ax.set_yscale("log")
    handles = [plt.Line2D([], [], marker="o", ls="", color=LAW_COLORS[k], label=f"{k} head") for k in LAWS]
    handles.append(plt.Line2D([], [], color="k", lw=1.6, label="Gaussian null"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9.5, bbox_to_anchor=(0.5, -0.01))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def entropy_figure(diags: dict[str, Diagnosis]):
    """Median entropy of the longest rows against beta (the model's own beta = 1), one panel per model.

    One line per head, coloured by its law; dashed: the model's Gaussian null; dotted: log n.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(diags), figsize=(7.0, 3.0), sharey=True, squeeze=False)
    for ax, (name, diag) in zip(axes[0], diags.items()):
        curves = diag.curves[diag.curves["level"] == diag.curves["level"].max()]
        laws = diag.heads.set_index("unit")["law"]
        for unit, group in curves.groupby("unit"):
            if unit in laws.index:
                ax.plot(group["beta"], group["entropy"], lw=0.7, alpha=0.5, color=LAW_COLORS[laws[unit]])
        ref = curves[curves["unit"] == REFERENCE_NULL]
        ax.plot(ref["beta"], ref["entropy"], "--", color="k", lw=1.5)
        ax.axvline(1.0, color="k", lw=0.8, ls=":")
        ax.axhline(float(np.log(diag.meta["window_length"])), color="0.4", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("$\\beta$ / model's $\\beta$", fontsize=9.5)
        ax.set_title(f"{name}, n = {diag.meta['window_length']}", fontsize=9.5)
    axes[0][0].set_ylabel("median entropy $H$ (nats)")
    fig.tight_layout()
    return fig


def _restore(value):
    """JSON has no inf or NaN: the recorded files store them as the strings 'inf', '-inf', 'nan'."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def from_record(entry: dict) -> Diagnosis:
    """A :class:`.pipeline.Diagnosis` from one model's entry of ``gpt2_small_diagnostic.json``."""
    frames = {key: pd.DataFrame(_restore(entry[key])) for key in ("heads", "nulls", "bins", "entropy_curves",
                                                                   "profiles")}
    return Diagnosis(frames["heads"], frames["nulls"], frames["bins"], frames["entropy_curves"], frames["profiles"],
                     meta=_restore(dict(entry["meta"], text_loss=entry["text_loss"])))

