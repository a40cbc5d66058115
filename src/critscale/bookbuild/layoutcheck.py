"""What a reader cannot read on a rendered page: the problems in a ``browser.Measurement``.

- ``overflowing_tables``: a table wider than its container (``scrollWidth`` against the
  container's ``clientWidth``), or a header broken inside a word;
- ``overflowing_math``: a display equation wider than its box, whether the box scrolls or not;
- ``clipped_math``: a display equation wider than its box that no scrolling box holds
  (part of it cannot be seen at all);
- ``small_figure_text``: a figure whose smallest text is shown below ``plotting.MIN_TEXT_PT``, or
  a figure none of whose images (wide or phone layout) is shown.

The size of a figure's text as shown.  A figure saved by ``pagedata.record_figure`` is ``W``
points wide (the SVG's ``width``, or the PNG's pixel width over its dpi times 72) and states
the size ``s`` of its smallest text in points in its description.  A browser shows the image
``w`` CSS pixels wide, and a CSS pixel is 0.75 pt, so the text appears ``s * 0.75 * w / W``
points high.  An image without that description cannot be held to the rule and is reported.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..page.plotting import MIN_TEXT_PT, parse_text_size_description
from .browser import Measurement

PT_PER_CSS_PX = 0.75


def overflowing_tables(m: Measurement) -> list[str]:
    """Tables wider than their container, and headers broken inside a word."""
    problems = []
    for t in m.tables:
        room = min(t["box"], t["column"])
        if t["width"] > room + 1:
            problems.append(f"table {t['width']} px wide in a {room} px column: {t['label']}")
        for header in t["broken_headers"]:
            problems.append(f"header {header!r} broken inside a word: {t['label']}")
    return problems


def overflowing_math(m: Measurement) -> list[str]:
    """Display equations wider than their box (scrolling or not)."""
    return [f"equation {e['width']} px wide in a {e['box']} px box: {e['label']}"
            for e in m.math if e["width"] > e["box"] + 1]


def clipped_math(m: Measurement) -> list[str]:
    """Display equations part of which a reader cannot see: wider than their box, or past the
    window's edge, with no scrolling box around them."""
    problems = []
    for e in m.math:
        if e["scrolls"]:
            continue
        if e["width"] > e["box"] + 1:
            problems.append(f"equation {e['width']} px wide in a {e['box']} px box that does not scroll: {e['label']}")
        elif e["right_edge"] > m.viewport + 1:
            problems.append(f"equation cut at the window's edge ({e['right_edge']:.0f} px > {m.viewport} px): {e['label']}")
    return problems


def figure_size_pt(path: Path) -> tuple[float, float | None]:
    """``(width in points, smallest text in points)`` of a saved figure (module docstring).

    ``ValueError`` names the file when it does not state its smallest text size.
    """
    if path.suffix == ".svg":
        head = path.read_text(encoding="utf-8", errors="replace")[:20000]
        width = re.search(r'<svg\b[^>]*\bwidth="([0-9.]+)pt"', head)
        text = re.search(r"<dc:description>(.*?)</dc:description>", head, re.S)
        if not width:
            raise ValueError(f"{path.name}: no width in points on its <svg> element")
        width_pt = float(width.group(1))
        description = text.group(1) if text else ""
    elif path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            dpi = image.info.get("dpi", (72.0, 72.0))[0]
            width_pt = image.size[0] / dpi * 72.0
            description = image.info.get("Description", "")
    else:
        raise ValueError(f"{path.name}: neither an SVG nor a PNG figure")
    try:
        return width_pt, parse_text_size_description(description)
    except ValueError:
        raise ValueError(f"{path.name}: states no smallest text size (not saved by pagedata.record_figure)") from None


def shown_text_pt(path: Path, shown_css_px: float) -> float | None:
    """The smallest text of the figure in ``path`` as shown ``shown_css_px`` CSS pixels wide (None: no text)."""
    width_pt, size = figure_size_pt(path)
    return None if size is None else size * PT_PER_CSS_PX * shown_css_px / width_pt


def small_figure_text(m: Measurement, minimum: float = MIN_TEXT_PT) -> list[str]:
    """Figures of the page whose smallest text is shown below ``minimum`` points, whose size is unknown, or
    that show no image at all (an image hidden by the page, width 0, is not shown and not held to the rule)."""
    problems = [f"figure shows none of its images: {label}" for label in m.hidden_figures]
    for figure in m.figures:
        src = figure["src"] or ""
        if urlparse(src).scheme in ("http", "https", "data") or figure["width"] <= 0:
            continue
        path = (m.page.parent / unquote(src.split("#")[0].split("?")[0])).resolve()
        try:
            shown = shown_text_pt(path, figure["width"])
        except (OSError, ValueError) as err:
            problems.append(f"figure {src}: {err}")
            continue
        if shown is not None and shown < minimum - 0.05:
            problems.append(f"figure {path.name} shown {figure['width']:.0f} px wide: its smallest text is "
                            f"{shown:.1f} pt (< {minimum:g} pt)")
    return problems
