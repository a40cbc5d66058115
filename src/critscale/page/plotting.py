"""One look for every figure of the book: a theme, one colour per family, readable text.

``setup()`` is called once per notebook; ``FAMILY_COLORS`` maps a family name of
``critscale.families`` to its colour in every chapter, drawn from the colour-blind-safe
palettes of Okabe & Ito and of Paul Tol (distinct hues, no light/dark pairs);
``FAMILY_MARKERS`` gives the families of one extreme-value domain one marker, so a plot
of many families stays legible without colour.  ``stamp`` writes the run's facts
(profile, n, rows, seeds) into the figure itself, so a figure copied out of the book
still says how it was made.

Text sizes are stated at page width: a figure ``w`` inches wide is shown at most
``PAGE_WIDTH_IN`` inches wide, so its text appears scaled by ``min(1, PAGE_WIDTH_IN / w)``;
``MIN_TEXT_PT`` is the smallest size a reader must be able to read.
"""

from __future__ import annotations

import textwrap
import weakref

import matplotlib as mpl
import seaborn as sns

PAGE_WIDTH_IN = 7.0  # the text width of the HTML column and of the PDF page
MIN_TEXT_PT = 9.0
# The widest a figure is shown in the HTML at a 1280 px window (660 CSS px, 96 per inch): a saved
# figure wider than this is scaled down there, and its text with it (``fit_to_column``).
HTML_FIGURE_WIDTH_IN = 660 / 96

# Okabe & Ito (2008) and Paul Tol's "muted" scheme: both designed to stay distinct for
# the common colour-vision deficiencies.
_OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
              "purple": "#CC79A7", "sky": "#56B4E9", "yellow": "#F0E442"}
_TOL_MUTED = {"indigo": "#332288", "cyan": "#88CCEE", "teal": "#44AA99", "olive": "#999933",
              "sand": "#DDCC77", "rose": "#CC6677", "wine": "#882255", "grape": "#AA4499"}

# One colour per family (an RGB tuple), fixed across chapters; within a domain the hues differ.
_FAMILY_HEX = {
    # Gumbel domain
    "gauss": _OKABE_ITO["blue"],
    "ptail1": _OKABE_ITO["purple"],
    "ptail3": _OKABE_ITO["green"],
    "logexp": _OKABE_ITO["orange"],
    "edge": _OKABE_ITO["vermillion"],
    # Weibull domain
    "unif": _OKABE_ITO["sky"],
    "sphere3": _TOL_MUTED["wine"],
    "sphere5": _TOL_MUTED["olive"],
    "sphere9": _TOL_MUTED["teal"],
    # a step above a bulk
    "planted": _TOL_MUTED["indigo"],
    "simplex": _TOL_MUTED["sand"],
    "planted_shrink": _TOL_MUTED["rose"],
    # Fréchet domain
    "pareto1": _TOL_MUTED["grape"],
    "pareto2": "#777777",
}
FAMILY_COLORS = {name: mpl.colors.to_rgb(hex_code) for name, hex_code in _FAMILY_HEX.items()}
FAMILY_MARKERS = {"gauss": "o", "ptail1": "o", "ptail3": "o", "logexp": "o", "edge": "o",
                  "unif": "s", "sphere3": "s", "sphere5": "s", "sphere9": "s",
                  "planted": "^", "simplex": "^", "planted_shrink": "^",
                  "pareto1": "D", "pareto2": "D"}

LIMIT_COLOR = "black"  # theoretical limit curves


def setup() -> None:
    """The book's theme: white grid, text readable at page width, tables with 4 digits."""
    sns.set_theme(style="whitegrid", context="notebook")
    mpl.rcParams.update({
        "figure.figsize": (PAGE_WIDTH_IN, 3.6),
        "figure.dpi": 100,
        "font.size": 10.5,
        "axes.titlesize": 11,
        "axes.labelsize": 10.5,
        "xtick.labelsize": 9.5,
        "ytick.labelsize": 9.5,
        "legend.fontsize": 9.5,
        "legend.title_fontsize": 9.5,
        "legend.frameon": False,
        "axes.prop_cycle": mpl.cycler(color=list(_OKABE_ITO.values())),
        "svg.fonttype": "path",
    })
    _table_display()


def _table_display() -> None:
    """DataFrames printed in a cell show 4 significant digits, never ``4.957600e+00``."""
    import pandas as pd

    from .tables import format_number

    pd.set_option("display.float_format", lambda v: format_number(v, plain=True))


def color(family: str):
    """The family's colour (``KeyError`` names unknown families)."""
    try:
        return FAMILY_COLORS[family]
    except KeyError:
        raise KeyError(f"no colour for family {family!r}; known: {sorted(FAMILY_COLORS)}") from None


def marker(family: str) -> str:
    """The marker of the family's extreme-value domain (``KeyError`` names unknown families)."""
    try:
        return FAMILY_MARKERS[family]
    except KeyError:
        raise KeyError(f"no marker for family {family!r}; known: {sorted(FAMILY_MARKERS)}") from None


def page_scale(fig) -> float:
    """Factor by which the figure's text shrinks when it is shown at page width."""
    width = fig.get_size_inches()[0]
    return min(1.0, PAGE_WIDTH_IN / width)


def saved_width_in(fig) -> float:
    """The width of ``fig`` saved as SVG with ``bbox_inches="tight"``, as the HTML shows it.

    Measured on the SVG itself: Agg's tight box before drawing misses what a layout engine moves
    at draw time and differs from the SVG's text extents by up to 20 pt.
    """
    import io
    import re

    svg = io.BytesIO()
    fig.savefig(svg, format="svg", bbox_inches="tight")
    return float(re.search(rb'<svg[^>]*\bwidth="([0-9.]+)pt"', svg.getvalue()).group(1)) / 72


def fit_to_column(fig, width_in: float = HTML_FIGURE_WIDTH_IN) -> None:
    """Shrink ``fig`` (its size, not its text) until it is saved at most ``width_in`` wide, so that a
    browser shows it at its own size and its text at its own points.  ``ValueError`` when its fixed-size
    text alone (labels, a stamp) is wider than that."""
    for _ in range(6):
        saved = saved_width_in(fig)
        if saved <= width_in:
            return
        w, h = fig.get_size_inches()
        factor = max(0.5, (width_in - 0.02) / saved)
        fig.set_size_inches(w * factor, h * factor)
    if saved_width_in(fig) > width_in:
        raise ValueError(f"the figure is still {saved_width_in(fig):.2f} in wide after shrinking it to "
                         f"{fig.get_size_inches()[0]:.2f} in: its text alone is wider than the {width_in:.2f} in column")


def min_text_size(fig) -> float | None:
    """The smallest visible text of ``fig`` in points at the figure's own size (None: no text)."""
    import matplotlib.text

    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip()]
    return min(sizes) if sizes else None


def min_text_size_at_page_width(fig) -> float:
    """The smallest visible text of ``fig`` in points, as shown at page width."""
    size = min_text_size(fig)
    return (MIN_TEXT_PT if size is None else size) * page_scale(fig)


TEXT_SIZE_PREFIX = "critscale smallest text pt: "


def text_size_description(size: float | None) -> str:
    """The description a saved figure carries: its smallest text in points ("none" without text)."""
    return TEXT_SIZE_PREFIX + ("none" if size is None else f"{size:.2f}")


def parse_text_size_description(text: str) -> float | None:
    """The size ``text_size_description`` wrote; ``ValueError`` when ``text`` is not such a description."""
    if not text.startswith(TEXT_SIZE_PREFIX):
        raise ValueError(f"not a critscale text-size description: {text[:60]!r}")
    value = text[len(TEXT_SIZE_PREFIX):].strip()
    return None if value == "none" else float(value)


def _value(v) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)


SEED_SYMBOLS = {"f": "family", "n": "length"}  # a seed list's symbolic entries, in the words a reader reads


def seed_text(seeds) -> str:
    """A seed list as the stamp prints it: ``[12697, f, n]`` reads ``[12697, family, length]``."""
    text = _value(seeds)
    if not (text.startswith("[") and text.endswith("]")):
        return text
    entries = [entry.strip() for entry in text[1:-1].split(",")]
    return "[" + ", ".join(SEED_SYMBOLS.get(entry, entry) for entry in entries) + "]"


def stamp(fig, *, profile: str, seeds=None, n=None, rows=None, extra: str | None = None) -> None:
    """Write the run's facts below the axes of ``fig``, at ``MIN_TEXT_PT`` at page width.

    ``seeds`` is the seed of the run or the seed list of ``numpy.random.default_rng``;
    its symbolic entries are the row's coordinates: ``f`` the family's index in
    ``critscale.families.STANDARD``, ``n`` the row length (for example ``[12697, f, n]``), printed as the words
    ``family`` and ``length``.
    The text sits under the figure's bottom edge (saved figures are cropped to their
    content), wrapped to the figure's width (at most the HTML column's), so it never covers an
    axis label and never widens the figure.
    """
    parts = [f"profile {profile}"]
    if n is not None:
        parts.append(f"n = {_value(n)}")
    if rows is not None:
        parts.append(f"rows = {_value(rows)}")
    if seeds is not None:
        parts.append(f"seeds {seed_text(seeds)}")
    if extra:
        parts.append(extra)
    size = MIN_TEXT_PT / page_scale(fig)
    # wrapped to the narrower of the figure and the HTML column (less a margin), so that the stamp
    # never makes the saved figure wider than the column
    width_in = min(fig.get_size_inches()[0], HTML_FIGURE_WIDTH_IN - 0.3)
    text = fig.text(0.99, -0.01, _stamp_lines(parts, width_in, size), ha="right", va="top", fontsize=size,
                    color="0.3")
    _STAMPS[text] = parts


# The parts of each stamp, so that a layout of another width (``narrowfigure``) can wrap it again.
_STAMPS = weakref.WeakKeyDictionary()


def _stamp_lines(parts: list[str], width_in: float, size: float) -> str:
    """The parts joined by `` · ``, wrapped at a generous 0.6 em per character to ``width_in``."""
    per_line = max(20, int(width_in * 72 / (0.6 * size)))
    lines, line = [], ""
    for part in parts:
        candidate = f"{line} · {part}" if line else part
        if line and len(candidate) > per_line:
            lines.append(line)
            candidate = part
        line = candidate
    lines.append(line)
    lines = [piece for text in lines for piece in textwrap.wrap(text, per_line, break_on_hyphens=False)]
    return "\n".join(lines)


def rewrap_stamp(text, width_in: float) -> bool:
    """Wrap a stamp's text to ``width_in`` (less a margin); False when ``text`` is not a stamp."""
    parts = _STAMPS.get(text)
    if parts is None:
        return False
    text.set_text(_stamp_lines(parts, width_in - 0.1, text.get_fontsize()))
    return True
