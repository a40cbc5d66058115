"""Figures of the diagnostic, one function per figure, each head beside the null heads.

Every function takes a :class:`.pipeline.Diagnosis` and returns a matplotlib figure; :func:`save_all`
writes them as PNG files with the run manifest in their metadata.  Colours: one per law, from the
colour-blind-safe palette of :mod:`critscale.page.plotting` (linear = blue, power = green, step =
vermillion); null heads are black or grey.  Figures are at most 7 inches wide with text of at least
9 pt, so that they are readable at the book's page width.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np

from .nulls import RULE_NULLS
from .summary import CROSSOVER, REFERENCE_NULL

LAW_COLORS = {"linear": "#0072B2", "power": "#009E73", "step": "#D55E00", "undefined": "#999999"}
NULL_STYLES = (":", "--", "-.", (0, (5, 1, 1, 1)))


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _law_handles(patches: bool = False) -> list:
    """Legend entries for the three laws of log N(t), as colour patches or as lines."""
    if patches:
        return [matplotlib.patches.Patch(color=LAW_COLORS[k], label=k) for k in ("linear", "step", "power")]
    return [matplotlib.lines.Line2D([], [], color=LAW_COLORS[k], label=k) for k in ("linear", "step", "power")]


def _heads_bins(diag):
    return diag.bins[diag.bins["layer"] >= 0]


def _null_bins(diag, name):
    return diag.bins[diag.bins["unit"] == name]


def _laws(diag):
    return diag.heads.set_index("unit")["law"]


RULE_STYLES = {"none": ":", "sqrt_2_log_n": "--", "ssmax": "-.", "log_n_squared": (0, (5, 1, 1, 1, 1, 1))}
RULE_NAMES = {"none": "constant $\\beta$", "sqrt_2_log_n": "$\\sqrt{2\\log n}$",
              "ssmax": "$\\log n$ (SSMax, Su)", "log_n_squared": "$(\\log n)^2$"}
"""Legend name of each audited growth law (the rule that leaves beta unchanged is not YaRN's, which grows with n)."""
TEXT = 9.5  # points; every figure is at most 7 inches wide, so this is its size on the page


def _plain_log_ticks(ax, log_n) -> None:
    """Ticks of a log-log plot against log n at round values of log n, labelled plainly (no 4x10^0)."""
    lo, hi = float(np.min(log_n)), float(np.max(log_n))
    step = 0.5 if hi - lo < 2.5 else 1.0
    ticks = np.arange(np.ceil(lo / step) * step, hi + 1e-9, step)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def kappa_vs_n(diag):
    """Median kappa_16 against log n per head, one panel per law, beside that law's rule nulls."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(7.0, 3.4), sharey=True)
    laws = _laws(diag)
    bins = _heads_bins(diag).dropna(subset=["kappa16"])
    for ax, law in zip(axes, ("linear", "step", "power")):
        members = [u for u, lw in laws.items() if lw == law]
        for unit in members:
            group = bins[bins["unit"] == unit]
            ax.plot(np.log(group["n_centre"]), group["kappa16"], "-o", ms=2, lw=0.8, alpha=0.6, color=LAW_COLORS[law])
        anchor = bins[bins["unit"].isin(members)]
        for rule, null in RULE_NULLS[law].items():
            ref = _null_bins(diag, null).dropna(subset=["kappa16"])
            if len(ref) == 0:
                continue
            # the null's curve, moved onto the heads' median at the first level: only its slope matters
            first = anchor[anchor["level"] == ref["level"].iloc[0]]["kappa16"].median() if len(anchor) else np.nan
            shift = first / ref["kappa16"].iloc[0] if np.isfinite(first) else 1.0
            ax.plot(np.log(ref["n_centre"]), ref["kappa16"] * shift, linestyle=RULE_STYLES[rule], color="k", lw=1.1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_ticks(ax, np.log(bins["n_centre"]) if len(bins) else np.log([64.0, 1024.0]))
        ax.tick_params(labelsize=9)
        ax.set_title(f"{law} heads ({len(members)})", fontsize=TEXT)
        ax.set_xlabel("log n", fontsize=TEXT)
    axes[0].set_ylabel("median κ₁₆", fontsize=TEXT)
    handles = [matplotlib.lines.Line2D([], [], color="k", lw=1.1, linestyle=RULE_STYLES[rule],
                                       label=RULE_NAMES[rule]) for rule in RULE_STYLES]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=9, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


def head_maps(diag):
    """Layer x head maps: gamma, law, log10 c_half = log10(1/beta_1/2), sink fraction."""
    plt = _plt()
    h = diag.heads
    L, H = int(h["layer"].max()) + 1, int(h["head"].max()) + 1

    def grid(values):
        g = np.full((L, H), np.nan)
        g[h["layer"].to_numpy(), h["head"].to_numpy()] = values
        return g

    law_code = {"linear": 0, "step": 1, "power": 2, "undefined": 3}
    fig, axes = plt.subplots(1, 4, figsize=(7.0, 2.6 + 0.08 * L))
    c_log = np.log10(h["c_half"].to_numpy(dtype=float))
    bound = max(np.log10(CROSSOVER[1]), np.nanmax(np.abs(c_log)) if np.isfinite(c_log).any() else 1.0)
    panels = [(grid(h["gamma"]), "γ of κ₁₆", "viridis", None),
              (grid(h["law"].map(law_code)), "law of log N(t)", matplotlib.colors.ListedColormap(
                  [LAW_COLORS[k] for k in ("linear", "step", "power", "undefined")]), (-0.5, 3.5)),
              (grid(c_log), "log₁₀(1/β½)", "coolwarm", (-bound, bound)),
              (grid(h["sink_fraction"]), "sink fraction", "magma", (0, 1))]
    for i, (ax, (data, title, cmap, lim)) in enumerate(zip(axes, panels)):
        im = ax.imshow(data, cmap=cmap, aspect="auto", vmin=lim[0] if lim else None, vmax=lim[1] if lim else None)
        ax.set_title(title, fontsize=TEXT)
        ax.set_xticks(range(0, H, max(1, H // 4)))
        ax.set_yticks(range(0, L, max(1, L // 6)))
        ax.tick_params(labelsize=9)
        ax.set_xlabel("head", fontsize=TEXT)
        if i == 0:
            ax.set_ylabel("layer", fontsize=TEXT)
        ax.grid(False)
        # every panel takes a colour bar's room, so that the four maps have one height and their
        # layers line up; the law panel's bar is hidden (its legend says the colours)
        bar = fig.colorbar(im, ax=ax, orientation="horizontal", fraction=0.08, pad=0.22, aspect=12)
        bar.ax.tick_params(labelsize=9)
        bar.locator = matplotlib.ticker.MaxNLocator(3)
        bar.update_ticks()
        if i == 1:
            bar.ax.set_visible(False)
    axes[1].legend(handles=_law_handles(patches=True), loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                   fontsize=9)
    fig.tight_layout()
    return fig


def profiles(diag):
    """Median scale-free profile log N against t/Delta_(K) per head, beside the nulls of each law."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4))
    laws = _laws(diag)
    for unit, group in diag.profiles.groupby("unit"):
        r, y = group["r"].to_numpy()[1:], np.log(group["k"].to_numpy()[1:])
        if unit in laws.index:
            for ax in axes:
                ax.plot(r, y, "-", lw=1, alpha=0.6, color=LAW_COLORS[laws[unit]])
    for style, name in zip(NULL_STYLES, (REFERENCE_NULL, "sink_qk", "unif")):
        group = diag.profiles[diag.profiles["unit"] == name]
        if len(group):
            for ax in axes:
                ax.plot(group["r"].to_numpy()[1:], np.log(group["k"].to_numpy()[1:]), linestyle=style, color="k",
                        lw=1.1, label=f"null {name}")
    axes[0].set_xlabel("t / Δ₍K₎")
    axes[1].set_xlabel("t / Δ₍K₎ (log)")
    axes[1].set_xscale("log")
    for ax in axes:
        ax.set_ylabel("log N(t)")
    axes[0].legend(handles=_law_handles() + axes[0].get_legend_handles_labels()[0], fontsize=9)
    axes[0].set_title("linear: Gumbel-like; jump: step", fontsize=TEXT)
    axes[1].set_title("linear in log t: Weibull", fontsize=TEXT)
    fig.tight_layout()
    return fig


def entropy_curves(diag):
    """Median entropy against beta (the model's beta = 1) at the longest level, per head and Gaussian null."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    curves = diag.curves
    top = curves["level"].max()
    laws = _laws(diag)
    longest = curves[curves["level"] == top]
    for unit, group in longest.groupby("unit"):
        if unit in laws.index:
            ax.plot(group["beta"], group["entropy"], "-", lw=1, alpha=0.7, color=LAW_COLORS[laws[unit]])
    ref = longest[longest["unit"] == REFERENCE_NULL]
    if len(ref):
        ax.plot(ref["beta"], ref["entropy"], "--", color="k", lw=1.2, label="Gaussian q/k null")
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.axhline(longest["log_n"].median(), color="0.5", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("β (the model's own β = 1)")
    ax.set_ylabel("median entropy H (nats)")
    ax.set_title(f"rows with n = {top}", fontsize=TEXT)
    ax.legend(handles=_law_handles() + ax.get_legend_handles_labels()[0], fontsize=9)
    fig.tight_layout()
    return fig


def operating_points(diag):
    """c = 1/beta_1/2 against n per head beside the Gaussian null (left); heads per best rule (right)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4), gridspec_kw={"width_ratios": (3, 2)})
    laws = _laws(diag)
    bins = _heads_bins(diag)
    for unit, group in bins.groupby("unit"):
        axes[0].plot(group["n_centre"], group["c_half"], "-o", ms=2.5, lw=1, alpha=0.7, color=LAW_COLORS[laws[unit]])
    ref = _null_bins(diag, REFERENCE_NULL)
    if len(ref):
        axes[0].plot(ref["n_centre"], ref["c_half"], "--", color="k", lw=1.2, label="Gaussian q/k null")
        axes[0].legend(fontsize=9)
    axes[0].axhspan(*CROSSOVER, color="0.9", zorder=0)
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("n")
    axes[0].set_ylabel("median c = 1/β½")
    axes[0].set_title("grey: the crossover ¼ < c < 4", fontsize=TEXT)
    counts = diag.heads["best_rule"].value_counts()
    axes[1].barh(counts.index.astype(str), counts.to_numpy(), color="0.4")
    axes[1].set_xlabel("heads")
    axes[1].set_title("rule keeping c flat", fontsize=TEXT)
    fig.tight_layout()
    return fig


def law_shares(diag):
    """Each head's share of step and power rows, with the nulls' shares (black marks)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.4))
    h = diag.heads
    for law, group in h.groupby("law"):
        ax.scatter(group["rows_power"], group["rows_step"], s=16, color=LAW_COLORS.get(law, "0.5"), label=f"{law} heads")
    for _, r in diag.nulls.iterrows():
        ax.scatter([r["rows_power"]], [r["rows_step"]], marker="x", color="k", s=22)
        ax.annotate(r["unit"], (r["rows_power"], r["rows_step"]), fontsize=9, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("share of rows read power")
    ax.set_ylabel("share of rows read step")
    ax.set_title("heads (colour) and nulls (×)", fontsize=TEXT)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


FIGURES = {"kappa_vs_n": kappa_vs_n, "head_maps": head_maps, "profiles": profiles,
           "entropy_curves": entropy_curves, "operating_points": operating_points, "law_shares": law_shares}


def save_all(diag, out_dir, *, manifest: dict | None = None) -> list[Path]:
    """Write every figure of :data:`FIGURES` as ``<name>.png`` (run manifest in the PNG metadata)."""
    from critscale.page import plotting

    plt = _plt()
    plotting.setup()
    metadata = {"Software": "critscale diagnose"}
    if manifest is not None:
        metadata["Description"] = json.dumps({k: manifest[k] for k in ("command", "inputs", "commit", "date_utc")})
    written = []
    for name, make in FIGURES.items():
        fig = make(diag)
        path = Path(out_dir) / f"{name}.png"
        fig.savefig(path, dpi=110, metadata=metadata)
        plt.close(fig)
        written.append(path)
    return written
