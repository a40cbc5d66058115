"""Figures of the GPT-2 diagnostic (theory.md §6 P-13), one function per figure.

Every function takes a :class:`.diagnose.Diagnosis` and returns a matplotlib figure; ``save_all``
writes them as PNG files.  Colours: one per law (linear = Gumbel blue, power = Weibull purple,
step = planted red), matching the domain colours of :mod:`critscale.plotting`.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np

LAW_COLORS = {"linear": "#1f77b4", "power": "#9467bd", "step": "#d62728", "undefined": "#7f7f7f"}


def _law_handles(patches: bool = False) -> list:
    """Legend entries for the three laws of log N(t), as colour patches or as lines."""
    if patches:
        return [matplotlib.patches.Patch(color=LAW_COLORS[k], label=k) for k in ("linear", "step", "power")]
    return [matplotlib.lines.Line2D([], [], color=LAW_COLORS[k], label=k) for k in ("linear", "step", "power")]


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _head_label(layer, head):
    return f"L{layer}H{head}"


def kappa_vs_n(diag, stat: str = "kappa16"):
    """Median kappa_16 (or kappa) against n per head, one panel per law, log-log(n) axes."""
    plt = _plt()
    laws = ["linear", "step", "power"]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), sharey=True)
    column = "kappa_median" if stat == "kappa" else f"{stat}_median"
    heads = diag.heads.set_index(["layer", "head"])
    for ax, law in zip(axes, laws):
        count = 0
        for (layer, head), group in diag.bins.groupby(["layer", "head"]):
            if heads.loc[(layer, head), "law"] != law:
                continue
            ax.plot(np.exp(group["log_log_n"]), group[column], "-o", ms=2.5, lw=1, alpha=0.7,
                    color=LAW_COLORS[law])
            count += 1
        x = np.exp(diag.bins["log_log_n"].to_numpy())
        if len(x):
            x0 = np.array([x.min(), x.max()])
            y0 = np.nanmedian(diag.bins[column])
            for gamma, style in ((0.5, ":"), (1.0, "--"), (2.0, "-.")):
                ax.plot(x0, y0 * (x0 / x0[0]) ** gamma, style, color="k", lw=0.8, label=f"(log n)^{gamma:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_title(f"{law} heads ({count})")
        ax.set_xlabel("log n")
    axes[0].set_ylabel(f"median {'κ' if stat == 'kappa' else 'κ₁₆'}")
    axes[0].legend(loc="upper left", fontsize="x-small")
    fig.tight_layout()
    return fig


def head_maps(diag):
    """Layer x head maps: gamma_16, law, operating point c, sink fraction."""
    plt = _plt()
    h = diag.heads
    L, H = int(h["layer"].max()) + 1, int(h["head"].max()) + 1

    def grid(column):
        g = np.full((L, H), np.nan)
        for r in h.itertuples():
            g[r.layer, r.head] = getattr(r, column)
        return g

    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
    law_code = {"linear": 0, "step": 1, "power": 2, "undefined": 3}
    laws = np.full((L, H), np.nan)
    for r in h.itertuples():
        laws[r.layer, r.head] = law_code[r.law]
    panels = [("gamma16", "γ (κ₁₆ ∝ (log n)^γ)", "viridis", None),
              ("law", "law of log N(t)", matplotlib.colors.ListedColormap(
                  [LAW_COLORS[k] for k in ("linear", "step", "power", "undefined")]), (-0.5, 3.5)),
              ("c_median", "log₁₀ c = log₁₀(1/κ)", "coolwarm", None),
              ("sink_fraction", "sink fraction (argmax at 0)", "magma", (0, 1))]
    for ax, (column, title, cmap, lim) in zip(axes, panels):
        data = laws if column == "law" else grid(column)
        if column == "c_median":
            data = np.log10(data)
            bound = np.nanmax(np.abs(data)) if np.isfinite(data).any() else 1
            lim = (-bound, bound)
        im = ax.imshow(data, cmap=cmap, aspect="auto", vmin=lim[0] if lim else None, vmax=lim[1] if lim else None)
        ax.set_title(title, fontsize="small")
        ax.set_xticks(range(0, H, max(1, H // 6)))
        ax.set_yticks(range(0, L, max(1, L // 6)))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.grid(False)
        if column != "law":
            fig.colorbar(im, ax=ax, fraction=0.046)
    handles = _law_handles(patches=True)
    axes[1].legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize="x-small")
    fig.tight_layout()
    return fig


def profiles(diag):
    """Median scale-free profile log N against r = Delta/Delta_(K) per head (linear x) and log r (log x)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    laws = diag.heads.set_index(["layer", "head"])["law"]
    for (layer, head), group in diag.profiles.groupby(["layer", "head"]):
        law = laws.loc[(layer, head)]
        r = group["r"].to_numpy()[1:]
        y = np.log(group["k"].to_numpy()[1:])
        for ax in axes:
            ax.plot(r, y, "-", lw=1, alpha=0.6, color=LAW_COLORS[law])
    axes[0].set_xlabel("t / Δ₍K₎")
    axes[1].set_xlabel("t / Δ₍K₎ (log)")
    axes[1].set_xscale("log")
    for ax in axes:
        ax.set_ylabel("log N(t)")
    handles = _law_handles()
    axes[0].legend(handles=handles, fontsize="x-small")
    axes[0].set_title("linear in t: Gumbel-like; jump: step", fontsize="small")
    axes[1].set_title("linear in log t: Weibull (power)", fontsize="small")
    fig.tight_layout()
    return fig


def entropy_curves(diag):
    """Median entropy against beta (model's beta = 1) in the longest-row bin, one line per head."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    curves = diag.curves
    top = curves["log2_n_bin"].max()
    laws = diag.heads.set_index(["layer", "head"])["law"]
    for (layer, head), group in curves[curves["log2_n_bin"] == top].groupby(["layer", "head"]):
        ax.plot(group["beta"], group["entropy_median"], "-", lw=1, alpha=0.7, color=LAW_COLORS[laws.loc[(layer, head)]])
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.axhline(curves.loc[curves["log2_n_bin"] == top, "log_n_centre"].median(), color="0.5", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("β (the model's own β = 1)")
    ax.set_ylabel("median entropy H (nats)")
    ax.set_title(f"rows with log₂ n in [{top}, {top + 1})", fontsize="small")
    handles = _law_handles()
    ax.legend(handles=handles, fontsize="x-small")
    fig.tight_layout()
    return fig


def operating_points(diag):
    """Median c = 1/kappa against n per head (left) and heads per best rule (right)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    laws = diag.heads.set_index(["layer", "head"])["law"]
    for (layer, head), group in diag.bins.groupby(["layer", "head"]):
        axes[0].plot(group["n_centre"], group["c_median"], "-o", ms=2.5, lw=1, alpha=0.7,
                     color=LAW_COLORS[laws.loc[(layer, head)]])
    axes[0].axhline(1.0, color="k", lw=0.8, ls="--")
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("n")
    axes[0].set_ylabel("median c = 1/κ")
    axes[0].set_title("operating point at the model's temperature", fontsize="small")
    counts = diag.heads["best_rule"].value_counts()
    axes[1].barh(counts.index.astype(str), counts.to_numpy(), color="0.4")
    axes[1].set_xlabel("heads")
    axes[1].set_title("rule keeping c flat over n", fontsize="small")
    fig.tight_layout()
    return fig


FIGURES = {"kappa_vs_n": kappa_vs_n, "head_maps": head_maps, "profiles": profiles,
           "entropy_curves": entropy_curves, "operating_points": operating_points}


def save_all(diag, out_dir) -> list[Path]:
    """Write every figure of :data:`FIGURES` as ``<name>.png`` into ``out_dir`` (in the book's theme)."""
    from critscale import plotting

    plt = _plt()
    plotting.setup()
    written = []
    for name, make in FIGURES.items():
        fig = make(diag)
        path = Path(out_dir) / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
