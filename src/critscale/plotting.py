"""One look for every figure of the book: a seaborn theme and one colour per family.

``setup()`` is called once per notebook; ``FAMILY_COLORS`` maps a family name of
``critscale.families`` to its colour in every chapter; ``stamp`` writes the run's
facts (n, rows, seeds, profile) into the figure itself, so a figure copied out of the
book still says how it was made.
"""

from __future__ import annotations

import matplotlib as mpl
import seaborn as sns

_PALETTE = sns.color_palette("tab20", 20)

# One colour per family, fixed across chapters (domains share hue families:
# Gumbel = blues/greens/oranges, Weibull = purples/browns, step = reds, Fréchet = greys).
FAMILY_COLORS = {
    "gauss": _PALETTE[0],
    "ptail1": _PALETTE[1],
    "ptail3": _PALETTE[2],
    "logexp": _PALETTE[4],
    "edge": _PALETTE[3],
    "unif": _PALETTE[8],
    "sphere3": _PALETTE[9],
    "sphere5": _PALETTE[10],
    "sphere9": _PALETTE[11],
    "planted": _PALETTE[6],
    "simplex": _PALETTE[7],
    "planted_shrink": _PALETTE[12],
    "pareto1": _PALETTE[14],
    "pareto2": _PALETTE[15],
}

LIMIT_COLOR = "black"  # theoretical limit curves


def setup() -> None:
    """The book's theme: white grid, readable fonts, figures sized for a page column."""
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    mpl.rcParams.update({
        "figure.figsize": (7.0, 3.6),
        "figure.dpi": 110,
        "axes.titlesize": "medium",
        "legend.fontsize": "small",
        "legend.frameon": False,
    })


def color(family: str):
    """The family's colour (``KeyError`` names unknown families)."""
    try:
        return FAMILY_COLORS[family]
    except KeyError:
        raise KeyError(f"no colour for family {family!r}; known: {sorted(FAMILY_COLORS)}") from None


def stamp(fig, *, profile: str, seeds=None, n=None, rows=None, extra: str | None = None) -> None:
    """Write the run's facts in small type under the axes of ``fig``."""
    parts = [f"profile {profile}"]
    if n is not None:
        parts.append(f"n = {n}")
    if rows is not None:
        parts.append(f"rows = {rows}")
    if seeds is not None:
        parts.append(f"seeds {seeds}")
    if extra:
        parts.append(extra)
    fig.text(0.99, 0.005, " · ".join(parts), ha="right", va="bottom", fontsize=7, color="0.35")
