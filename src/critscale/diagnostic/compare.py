"""Several diagnoses side by side: one line per model, each statistic beside its own Gaussian null's.

Every model is read with its own null heads (:mod:`.nulls`: the Gaussian q/k null is scaled to that
model's logit spread and has its head dimension), so each line compares a model with the head
without structure *of the same scale*, never with another model's null.  :func:`summary_line`
collects what a reader compares across models; :func:`operating_table` and :func:`null_table` put
it in two tables (the operating point first, because it does not depend on how kappa is defined);
:func:`compare_figure` and :func:`entropy_figure` draw it.  A recorded GPU run goes through the same
tables and figures after :mod:`.gpu_runs` has rebuilt its diagnoses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import LAW_COLORS
from .laws import LAWS
from .pipeline import Diagnosis
from .report import REGIMES
from .schedule import MULTIPLES, growth_ratio, layer_schedule
from .summary import BEYOND_Z, REFERENCE_NULL  # noqa: F401  (BEYOND_Z: the |t| of one comparison, for pages)
from .verdict import RULE_BOOK, RULE_HTML

RULE_TEXT = RULE_HTML
"""How each rule label reads in a sentence glued as text: plain unicode (constant β, √(2 log n)), no LaTeX."""


def _reference(diag: Diagnosis, required: bool = True) -> pd.Series | None:
    nulls = diag.nulls.set_index("unit") if "unit" in diag.nulls else pd.DataFrame()
    if REFERENCE_NULL not in nulls.index:
        if required:
            raise ValueError(f"the diagnosis has no {REFERENCE_NULL} null: nothing to compare its heads with")
        return None
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


def attention_kind(config, causal: bool) -> str:
    """Which keys a model's rows hold: causal or bidirectional, and its sliding-window layers, if any."""
    from critscale.models.architectures import sliding_windows

    windows = sliding_windows(config)
    sliding = [w for w in windows if w is not None]
    kind = "causal" if causal else "bidirectional"
    if not sliding:
        return f"{kind}, every layer full"
    return (f"{kind}; {len(sliding)} of {len(windows)} layers see only the last {min(sliding)} keys "
            f"(sliding window), the others every key")


def weights_kind(loaded) -> str:
    """How the weights read were stored: a GGUF quantisation dequantised to float32, or float32."""
    if getattr(loaded, "quantisation", ""):
        return f"{loaded.quantisation} GGUF, dequantised to float32"
    return "float32"


def model_facts(name: str, loaded, diag: Diagnosis, training: str) -> dict:
    """One line of the models table: what the model is (architecture, shape, size, attention, tokenizer, weights,
    training), how it was read, and its next-token loss on the windows the diagnostic read."""
    from critscale.models import ByteTokenizer

    shape = loaded.shape
    heads = f"{shape.n_layers} x {shape.n_heads}" + (f" ({shape.n_kv_heads} key/value)"
                                                     if shape.n_kv_heads != shape.n_heads else "")
    tokenizer = ("bytes (256)" if isinstance(loaded.tokenizer, ByteTokenizer) else
                 f"its own, {len(loaded.tokenizer):,} tokens")
    loss = diag.meta["text_loss"]
    return {"model": name, "architecture": type(loaded.model).__name__, "layers x heads": heads,
            "\\(d_h\\)": shape.head_dim, "width": shape.width, "context": shape.context,
            "attention": attention_kind(loaded.config, bool(diag.meta.get("causal", True))),
            "parameters": f"{sum(p.numel() for p in loaded.model.parameters()):,}", "tokenizer": tokenizer,
            "weights": weights_kind(loaded), "training": training,
            "read on": f"{diag.meta['windows']} x {diag.meta['window_length']} tokens ({diag.meta['design']} design)",
            "nats per token": round(float(loss["nats_per_token"]), 3),
            "bits per byte": round(float(loss["bits_per_byte"]), 3)}


def _pair(value: float, null: float, digits: int = 3) -> str:
    """``value (null)`` to ``digits`` significant digits, as the sentences print them (:func:`sig`)."""
    return f"{sig(value, digits)} ({sig(null, digits)})"


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


NULL_CONSTRUCTIONS = {
    "gauss_qk": r"i.i.d. Gaussian queries and keys (Gumbel class, \(\bar\kappa_n \sim \sqrt{2\log n}\))",
    "sink_qk": "Gaussian queries and keys with the first key of every forward aligned with every query "
               "(planted row, sink)",
    "ptail1": r"exponential scores, \(\bar\kappa_n = 1\)",
    "ptail2": r"scores with tail \(e^{-x^2}\), \(\bar\kappa_n = 2\sqrt{\log n}\)",
    "logexp": r"log-exponential scores, \(\bar\kappa_n = \log n\)",
    "edge": r"endpoint singularity \(e^{-1/u}\), \(\bar\kappa_n = (\log n)^2\)",
    "unif": r"scores uniform on an interval (Weibull, \(\alpha = 1\))",
    "sphere9": r"\(q\cdot k\) with keys uniform on the sphere \(S^8\) (Weibull, \(\alpha = 4\))",
    "planted": r"one score a margin 1 above a uniform bulk, \(\bar\kappa_n = \log n\)",
    "planted_shrink": r"planted with margin \(1/\log n\), \(\bar\kappa_n = (\log n)^2\)",
}
"""The construction of each null (:data:`.nulls.NULLS`), with its maths typeset for the book's table."""


QK_NULL_NAMES = {"gauss_qk": "Gaussian null", "sink_qk": "sink null"}
"""Reader names of the nulls that go through the q/k stage (the row nulls are named after their family)."""


def null_name(unit: str) -> str:
    """The reader name of a null (:data:`.nulls.NULLS`): its family's (:func:`critscale.page.reader_names.reader_name`),
    or for a q/k null :data:`QK_NULL_NAMES`'."""
    from critscale.page.reader_names import reader_name

    from .nulls import NULLS

    if unit in QK_NULL_NAMES:
        return QK_NULL_NAMES[unit]
    if unit not in NULLS or NULLS[unit].family is None:
        raise ValueError(f"unknown null {unit!r}: no reader name")
    return reader_name(NULLS[unit].family)


def nulls_table(diag: Diagnosis) -> pd.DataFrame:
    """The null heads of a diagnosis by reader name: construction, law by construction and law read, shares, gamma,
    exact slope."""
    n = diag.nulls
    return pd.DataFrame({
        "null": [null_name(u) for u in n["unit"]], "construction": [NULL_CONSTRUCTIONS[u] for u in n["unit"]], "law by construction": n["known_law"],
        "law read": n["law"], "step rows": n["rows_step"], "power rows": n["rows_power"],
        "\\(\\gamma\\) [95%]": [f"{g:.2f} [{lo:.2f}, {hi:.2f}]" for g, lo, hi in
                                zip(n["gamma"], n["gamma_low"], n["gamma_high"])],
        "exact \\(\\bar\\kappa_n\\) slope": n["gamma_exact"]})


PANELS = (("p_max", "$p_{\\max}$ at the model's $\\beta$", True),
          ("first_weight", "weight on the first key", True),
          ("rows_step", "share of step rows", False),
          ("gamma", "$\\gamma$ of $\\kappa_{16}\\propto(\\log n)^\\gamma$", False))


def compare_figure(diags: dict[str, Diagnosis], *, seed: int = 0):
    """One dot per head and model for four statistics, the model's Gaussian null as a black bar.

    For gamma the bar spans the null's 95% interval; for the others it marks the null's value (no bar
    for a diagnosis without nulls, such as a run recorded before the calibrated pipeline).
    Dots are coloured by the head's law of log N(t); their horizontal spread is random (jitter).  A model's
    name is broken into two lines at its first space.
    """
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, axes = plt.subplots(2, 2, figsize=(7.0, 5.8))
    names = list(diags)
    for ax, (column, title, log) in zip(axes.ravel(), PANELS):
        for i, name in enumerate(names):
            h, ref = diags[name].heads, _reference(diags[name], required=False)
            x = i + rng.uniform(-0.28, 0.28, len(h))
            values = h[column].to_numpy(dtype=float)
            ax.scatter(x, values, s=7, alpha=0.6, linewidths=0, c=[LAW_COLORS[lw] for lw in h["law"]])
            if ref is None:
                continue
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

    fig, axes = plt.subplots(1, len(diags), figsize=(max(7.0, 2.0 * len(diags)), 3.0), sharey=True, squeeze=False)
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


def sig(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits as prose writes it: trailing zeros kept (0.30, 1.70), fixed notation
    from 10⁻³ to 10⁴, else 2.9×10⁻¹² (:func:`critscale.page.tables.format_number`)."""
    from critscale.page.tables import format_number

    value = float(value)
    if not np.isfinite(value) or value == 0 or not 1e-3 <= abs(value) < 1e4:
        return format_number(value, digits, plain=True)
    return f"{value:.{max(digits - 1 - int(np.floor(np.log10(abs(value)))), 0)}f}"


def operating_sentence(line: dict) -> str:
    """The operating point of one model beside its Gaussian null, as a sentence of plain numbers (MyST math)."""
    return (f"{line['model']}: median $p_{{\\max}}$ {sig(line['p_max'])}, {sig(line['p_max'] / line['p_max_null'])} "
            f"times its Gaussian null's ({sig(line['p_max_null'])}); entropy {line['entropy']:.2f} nats against the "
            f"null's {line['entropy_null']:.2f} ($\\log n$ = {line['log_n']:.2f}); $p_{{\\max}}$ reaches 1/2 at "
            f"{sig(line['beta_half'])} times the model's own $\\beta$ (null: {sig(line['beta_half_null'])}); under "
            f"$c = 1/\\beta_{{1/2}}$, {line['subcritical_half']} subcritical, {line['crossover_half']} crossover and "
            f"{line['supercritical_half']} supercritical heads.")


def beyond_sentence(line: dict, min_windows: int) -> str:
    """What one model shows beyond its Gaussian null, as a sentence of plain numbers (MyST math)."""
    text = (f"{line['model']}: {line['beyond']} of {line['heads']} heads beyond the null ({line['beyond_shares']} by "
            f"their law shares, {line['beyond_gamma']} by $\\gamma$); {line['sink_heads']} sink heads; median weight "
            f"on the first key {sig(line['first_weight'], 2)} (null {sig(line['first_weight_null'], 2)}); "
            + (f"median $\\gamma$ {line['gamma']:.2f} against" if np.isfinite(line["gamma"]) else
               f"no $\\gamma$ (it needs {min_windows} windows), beside")
            + f" the null's {line['gamma_null']:.2f} [{line['gamma_null_low']:.2f}, {line['gamma_null_high']:.2f}].")
    if not line["intervals"]:
        text += (f" With {line['windows']} windows, fewer than {min_windows}, no interval is given, so no head "
                 "can be flagged.")
    return text


def _interval(value: float, low: float, high: float, digits: int = 2) -> str:
    """``value [low, high]``; the value alone without an interval; a dash without a value."""
    if not np.isfinite(value):
        return "-"
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


GROWTH_COLUMN = "\\(\\beta\\) x at {k}T [95%]"


SHARE_COLUMN = "most frequent rule: share of the decided heads [95%]"
DECIDED_COLUMN = "decided heads"


def _verdict_row(label: str, entry: dict) -> dict:
    share = entry["rule_share"]
    row = {"layer": label, "heads": entry["heads"], DECIDED_COLUMN: entry["rule_heads"],
           "rule": RULE_BOOK[entry["rule"]],
           SHARE_COLUMN: (f"{RULE_BOOK[entry['plurality']]}: "
                          + _interval(share, entry["rule_share_low"], entry["rule_share_high"]))
           if np.isfinite(share) else "-",
           "\\(\\gamma\\) [95%]": _interval(entry["gamma"], entry["gamma_low"], entry["gamma_high"])}
    for k in MULTIPLES:
        row[GROWTH_COLUMN.format(k=k)] = _interval(*entry["growth"][k], digits=3)
    return row


def null_verdict(diag: Diagnosis) -> dict:
    """The Gaussian null's verdict over the model's design: its rule, gamma and the growth factors of its gamma."""
    ref = _reference(diag)
    T = int(diag.meta["window_length"])
    gamma, low, high = (float(ref[c]) for c in ("gamma", "gamma_low", "gamma_high"))
    growth = {k: [growth_ratio(T, k) ** g if np.isfinite(g) else np.nan for g in (gamma, low, high)]
              for k in MULTIPLES}
    return {"rule": str(ref.get("best_rule", "undefined")), "gamma": gamma, "gamma_low": low, "gamma_high": high,
            "growth": growth}


def read_window(config) -> int | None:
    """The sliding window that bounds the lengths a model's rows are read at (None: every layer sees every key).

    A model with sliding-window layers is read only up to its shortest window (longer rows are windows, not the
    full rows the diagnostic reads), so no growth factor is given beyond it."""
    from critscale.models.architectures import sliding_windows

    windows = [w for w in sliding_windows(config) if w is not None]
    return int(min(windows)) if windows else None


def factor_multiples(read_length: int, window: int | None = None) -> tuple[int, ...]:
    """The multiples of the length read at which a growth factor is given: all of :data:`MULTIPLES`, or for a model
    read only up to a sliding window ``window``, those whose length lies within it."""
    return tuple(k for k in MULTIPLES if window is None or k * read_length <= window)


def verdict_table(diag: Diagnosis, window: int | None = None) -> pd.DataFrame:
    """Per layer, then over all heads, then for the Gaussian null (:func:`null_verdict`): the heads and those decided
    for a rule, the rule (reader names, :data:`.verdict.RULE_BOOK`), the most frequent rule's share of the decided
    heads with its interval, gamma and the factor by which beta must grow at 2, 4 and 8 times the length read (for a
    model read only up to a sliding window ``window``, only the multiples within it, :func:`factor_multiples`)."""
    schedule = layer_schedule(diag)
    shown = factor_multiples(schedule.read_length, window)
    rows = [_verdict_row(str(entry["layer"]), entry) for entry in schedule.layers]
    rows.append(_verdict_row("all", schedule.model))
    null = null_verdict(diag)
    decided = int(null["rule"] not in ("undecided", "undefined"))
    row = {"layer": "Gaussian null", "heads": 1, DECIDED_COLUMN: decided, "rule": RULE_BOOK[null["rule"]],
           SHARE_COLUMN: "-",
           "\\(\\gamma\\) [95%]": _interval(null["gamma"], null["gamma_low"], null["gamma_high"])}
    for k in MULTIPLES:
        row[GROWTH_COLUMN.format(k=k)] = _interval(*null["growth"][k], digits=3)
    rows.append(row)
    hidden = [GROWTH_COLUMN.format(k=k) for k in MULTIPLES if k not in shown]
    return pd.DataFrame(rows).drop(columns=hidden)


def no_factor_table(window: int) -> pd.DataFrame:
    """The growth table of a model read only up to its sliding window when no multiple lies within it: one line
    saying why there is no factor."""
    return pd.DataFrame({"growth factor of \\(\\beta\\)": [
        f"none beyond {window} tokens: the rows are read only up to the {window}-token sliding window"]})


def verdict_numbers(diag: Diagnosis, k: int = MULTIPLES[-1], window: int | None = None) -> dict:
    """The model's verdict and its Gaussian null's as plain numbers (for a page's sentences): rule, share, gamma,
    the growth factor at ``k`` times the length read with its interval, the heads decided for a rule, undecided and
    without a rule reading, and the layers decided for each rule.  Rule names are plain text (:data:`RULE_TEXT`).

    ``window`` is the sliding window a model is read up to (:func:`read_window`): beyond it no factor is given
    (NaN), and ``window`` says why."""
    schedule = layer_schedule(diag)
    model, null = schedule.model, null_verdict(diag)
    undecided = ("undecided", "undefined")
    beyond = window is not None and k * schedule.read_length > window
    growth = [np.nan] * 3 if beyond else model["growth"][k]
    null_growth = null["growth"][k]
    layers_above = sum(1 for e in schedule.layers if not beyond and np.isfinite(e["growth"][k][1])
                       and e["growth"][k][1] > null_growth[2])
    layer_rules: dict[str, int] = {}
    for e in schedule.layers:
        if e["rule"] not in undecided:
            layer_rules[RULE_TEXT[e["rule"]]] = layer_rules.get(RULE_TEXT[e["rule"]], 0) + 1
    return {"read_length": schedule.read_length, "multiple": k, "target_length": k * schedule.read_length,
            "window": window if beyond else None,
            "windows": int(diag.meta["windows"]), "min_windows": int(diag.meta["min_windows_for_intervals"]),
            "rule": RULE_TEXT[model["rule"]], "plurality": RULE_TEXT[model["plurality"]], "share": model["rule_share"],
            "heads": model["heads"], "decided": model["rule_heads"], "undecided": model["rule_undecided"],
            "rule_undefined": model["rule_undefined"],
            "share_low": model["rule_share_low"], "share_high": model["rule_share_high"],
            "gamma": model["gamma"], "gamma_low": model["gamma_low"], "gamma_high": model["gamma_high"],
            "growth": growth[0], "growth_low": growth[1], "growth_high": growth[2],
            "null_rule": RULE_TEXT[null["rule"]], "null_gamma": null["gamma"], "null_growth": null_growth[0],
            "null_growth_low": null_growth[1], "null_growth_high": null_growth[2],
            "layers": len(schedule.layers),
            "layers_decided": sum(layer_rules.values()), "layer_rules": layer_rules,
            "layers_above_null": layers_above}


def calibration_table(rates: dict) -> pd.DataFrame:
    """False flags of ``beyond_null`` on i.i.d. Gaussian heads: ``{(design, windows): flag_rate(...)}``."""
    return pd.DataFrame([{"design": kind, "windows": windows, "heads": r["heads"], "flagged": r["flagged"],
                          "rate": round(r["rate"], 3),
                          f"{r['confidence']:.0%} interval": f"[{r['low']:.3f}, {r['high']:.3f}]",
                          "stated level": r["level"]} for (kind, windows), r in rates.items()])


def rule_accuracy_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """:func:`.calibration.rule_accuracy`'s table by reader names: each rule null family and the rule it needs."""
    from critscale.page.reader_names import reader_name

    out = accuracy.copy()
    if len(out):
        out["family"] = [reader_name(f) for f in out["family"]]
        out["rule"] = [RULE_BOOK[r] for r in out["rule"]]
    return out.rename(columns={"nearest_wrong": "nearest rule wrong"})


def _growth_text(v: dict, prefix: str = "") -> str:
    return _interval(v[f"{prefix}growth"], v[f"{prefix}growth_low"], v[f"{prefix}growth_high"], 3)


def _count(n: int, one: str, many: str) -> str:
    """``"1 layer"``, ``"5 layers"``."""
    return f"{n} {one if n == 1 else many}"


def _heads_text(v: dict) -> str:
    """How the model's heads split for the rule; the counts add up to its heads."""
    parts = [f"{v['decided']} are decided for a rule", f"{v['undecided']} undecided"]
    if v.get("rule_undefined", 0):
        parts.append(f"{v['rule_undefined']} without a rule reading (a law no rule null matches, or a $\\gamma$ "
                     "without an interval)")
    return f"of its {v['heads']} heads, " + ", ".join(parts[:-1]) + " and " + parts[-1]


def _no_factor(model: str, v: dict) -> str:
    """Why a model gets no factor: read only up to its sliding window, or on too few windows for a γ."""
    if v.get("window") is None or v["windows"] < v["min_windows"]:
        return f"{model} (read on {v['windows']} windows, fewer than the {v['min_windows']} a $\\gamma$ needs)"
    return (f"{model} (read only up to its {v['window']}-token sliding window, and the diagnostic gives no "
            "factor beyond the lengths it reads)")


def verdict_sentence(model: str, v: dict) -> str:
    """One model's verdict (:func:`verdict_numbers`) beside its Gaussian null's, in three sentences of plain numbers
    (rule names in unicode, no LaTeX: the sentences are glued as text)."""
    if not np.isfinite(v["growth"]) and (v.get("window") is None or not np.isfinite(v["gamma"])):
        return (f"{model}, read at {v['read_length']} tokens on {v['windows']} windows: no $\\gamma$, rule or factor "
                f"(a $\\gamma$ needs {v['min_windows']} windows); its Gaussian null's $\\gamma$ is "
                f"{v['null_gamma']:.2f}.")
    rule = {"undecided": "is undecided for a rule", "undefined": "has no rule reading"}.get(v["rule"],
                                                                                          f"has the rule {v['rule']}")
    backing = (f", and the most frequent rule, {v['plurality']}, is read by a share "
               f"{_interval(v['share'], v['share_low'], v['share_high'])} of the decided heads" if v["decided"] else "")
    rules = ", ".join(f"{n} for {name}" for name, n in v.get("layer_rules", {}).items())
    first = f"{model}, read at {v['read_length']} tokens, {rule}: {_heads_text(v)}{backing}."
    second = (f" Its median $\\gamma$ is {_interval(v['gamma'], v['gamma_low'], v['gamma_high'])}, its Gaussian "
              f"null's {v['null_gamma']:.2f}; {v['layers_decided']} of its {v['layers']} layers are decided for a "
              f"rule{f' ({rules})' if rules else ''}.")
    if v.get("window") is not None:
        return (first + second + f" It gets no factor beyond {v['window']} tokens: its rows are read only up to its "
                f"{v['window']}-token sliding window.")
    above = _count(v["layers_above_null"], "layer needs", "layers need")
    return (first + second + f" At {v['target_length']} tokens ({v['multiple']} times) its logits would need to be "
            f"multiplied by {_growth_text(v)} to keep the operating point if the fitted power of log n goes on "
            f"holding, against {_growth_text(v, 'null_')} for the null; {above} more growth than the null (the lower "
            "end of the interval above the upper end of the null's).")


def _rules_text(verdicts: list[tuple[str, dict]]) -> str:
    """Which rules the models' layers are decided for, counted from their verdicts: constant β is named as the
    rule that does not rescale, never as a published rescaling rule singled out."""
    constant = RULE_TEXT["none/yarn"]
    counts: dict[str, int] = {}
    for _, v in verdicts:
        for rule, n in v["layer_rules"].items():
            counts[rule] = counts.get(rule, 0) + n
    decided, layers = sum(counts.values()), sum(v["layers"] for _, v in verdicts)
    rescaling = {rule: n for rule, n in counts.items() if rule != constant}
    offer = ", so what the diagnostic offers is the per-layer factors"
    if decided == 0:
        return f"none of the {layers} layers read is decided for a rule{offer}"
    if not rescaling:
        every = "it" if decided == 1 else "both" if decided == 2 else f"all {decided}"
        return (f"{decided} of the {layers} layers read are decided for a rule, {every} for {constant}, the rule that "
                f"does not rescale; no layer is decided for a rule that rescales β with the length{offer}")
    listed = ", ".join(f"{n} for {rule}" for rule, n in counts.items())
    rest = f", and the other {layers - decided} for none" if decided < layers else ""
    return f"{decided} of the {layers} layers read are decided for a rule ({listed}){rest}"


def takeaway(verdicts: list[tuple[str, dict]]) -> str:
    """The practitioner's reading of the models' verdicts (:func:`verdict_numbers`), for a summary box."""
    if not verdicts:
        return "No pretrained model was read in this build, so there is no verdict to apply."
    parts = [f"{model} by {_growth_text(v)} at {v['target_length']} tokens ({v['multiple']} times the "
             f"{v['read_length']} read; its Gaussian null asks for {v['null_growth']:.3f})"
             for model, v in verdicts if np.isfinite(v["growth"])]
    unread = [_no_factor(model, v) for model, v in verdicts if not np.isfinite(v["growth"])]
    if not parts:
        return f"No factor can be read in this build: {'; '.join(unread)}."
    test = (" These factors would hold the operating point only if the power of log n fitted on the lengths read goes "
            "on holding beyond them, which this page does not test; whether holding it keeps the loss down is what the "
            "next chapter tests, on another model.")
    missing = f" No factor for {'; '.join(unread)}." if unread else ""
    return (f"To keep the operating point beyond the length read, multiply the logits of {'; of '.join(parts)}; "
            f"{_rules_text(verdicts)}.{missing}{test}")
