"""The phone layout of a figure: its panels stacked in one column, its text at its own size.

A figure of the book is laid out for the text column (``plotting.HTML_FIGURE_WIDTH_IN``); shown on a
phone it would shrink, and its 9 pt text with it, to about 5 pt.  ``one_column(fig)`` lays the same
figure out ``NARROW_FIGURE_WIDTH_IN`` wide for as long as the ``with`` block lasts, and puts it back as
it was afterwards:

- the panels are grouped into the columns of the wide layout (axes whose boxes overlap horizontally,
  a colour bar beside a panel with its panel) and the columns are put one below the other, left to
  right, each panel (with its twins and insets) below the one above it in its column;
- every column is left-aligned on its axes (not on its labels), so that the stacked panels line up,
  and its axes (not its text) narrowed or widened to fill the width;
- a y axis shared with another column gets back the tick labels and label that the wide layout left
  to the leftmost panel;
- a panel's legend set beside the panel (outside its axes, left or right), or wider than the panel will
  be, is set again below it, and a title or x-axis label wider than the phone's panel is wrapped between words;
- the figure's own legends are set again with as many columns as fit, and its own texts (a title,
  ``plotting.stamp``'s line) are wrapped to the width, above or below the panels as in the wide layout.

``ValueError`` names what does not fit: a block whose labels alone are wider than the width, or a figure
text that sits among the panels.
"""

from __future__ import annotations

import textwrap
from contextlib import contextmanager
from dataclasses import dataclass, field

NARROW_FIGURE_WIDTH_IN = 3.5  # 336 CSS px: a figure's box at a 390 px window (343 px, less the page's padding and scroll bar)
GAP_IN = 0.15  # between stacked blocks and around the figure's own texts and legends
_MIN_SQUEEZE = 0.25  # a block narrowed to less than this share of its axes' width is an error
_TRIES = 4


@dataclass
class _Saved:
    """What ``one_column`` changes, to put it back."""

    size: tuple
    engine: object
    positions: dict = field(default_factory=dict)  # axes -> (original, active)
    legends: list = field(default_factory=list)
    texts: dict = field(default_factory=dict)  # text -> (position, string, va)
    ticks: list = field(default_factory=list)  # (axes, labelleft, labelright, ylabel) changed
    axes_legends: list = field(default_factory=list)  # (axes, its legend) replaced
    titles: list = field(default_factory=list)  # (axes title, its text) wrapped


def _save(fig) -> _Saved:
    saved = _Saved(size=tuple(fig.get_size_inches()), engine=fig.get_layout_engine(), legends=list(fig.legends))
    for ax in fig.axes:
        saved.positions[ax] = (ax.get_position(original=True).frozen(), ax.get_position().frozen())
    for text in fig.texts:
        saved.texts[text] = (text.get_position(), text.get_text(), text.get_va())
    return saved


def _reset_texts(fig, saved: _Saved) -> None:
    """The figure's own legends and texts as they were."""
    fig.legends[:] = saved.legends
    for text, (position, string, va) in saved.texts.items():
        text.set_position(position)
        text.set_text(string)
        text.set_va(va)


def _restore(fig, saved: _Saved) -> None:
    for ax, legend in saved.axes_legends:
        ax.legend_ = legend
    for title, text in saved.titles:
        title.set_text(text)
    for ax, labelleft, labelright, ylabel in saved.ticks:
        ax.yaxis.set_tick_params(which="both", labelleft=labelleft, labelright=labelright)
        ax.set_ylabel(ylabel)
    _reset_texts(fig, saved)
    fig.set_size_inches(*saved.size)
    for ax, (original, active) in saved.positions.items():
        ax.set_position(original, which="original")
        ax.set_position(active, which="active")
    fig.set_layout_engine(saved.engine)
    fig.stale = True


@contextmanager
def one_column(fig, width_in: float = NARROW_FIGURE_WIDTH_IN):
    """Lay ``fig`` out in one column ``width_in`` wide inside the block, as it was after it (module docstring)."""
    fig.draw_without_rendering()  # a layout engine places the axes at draw time
    saved = _save(fig)
    try:
        _lay_out(fig, saved, width_in)
        yield fig
    finally:
        _restore(fig, saved)


# ---------------------------------------------------------------- the layout
def _renderer(fig):
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def _inches(bbox, fig):
    """A display-space box in inches (x0, y0, x1, y1)."""
    return tuple(v / fig.dpi for v in (bbox.x0, bbox.y0, bbox.x1, bbox.y1))


def _boxes(saved):
    """Each axes' active box in inches in the wide layout."""
    w, h = saved.size
    return {ax: (a.x0 * w, a.y0 * h, a.x1 * w, a.y1 * h) for ax, (_, a) in saved.positions.items()}


def _columns(boxes) -> list[list]:
    """The axes grouped into the wide layout's columns, left to right."""
    axes = list(boxes)
    parent = {ax: ax for ax in axes}

    def root(ax):
        while parent[ax] is not ax:
            ax = parent[ax]
        return ax

    for i, a in enumerate(axes):
        for b in axes[i + 1:]:
            (a0, _, a1, _), (b0, _, b1, _) = boxes[a], boxes[b]
            overlap = min(a1, b1) - max(a0, b0)
            if overlap > 0.5 * min(a1 - a0, b1 - b0):
                parent[root(b)] = root(a)
    groups: dict = {}
    for ax in axes:
        groups.setdefault(root(ax), []).append(ax)
    columns = sorted(groups.values(), key=lambda g: min(boxes[ax][0] for ax in g))
    # a column of colour bars only (a vertical bar beside its panel) belongs to the column on its left
    merged: list[list] = []
    for column in columns:
        if merged and all(hasattr(ax, "_colorbar") for ax in column):
            merged[-1].extend(column)
        else:
            merged.append(column)
    return merged


def _rows(column, boxes) -> list[list]:
    """A column's axes grouped into rows (axes whose boxes overlap vertically: twins, insets), top to bottom."""
    rows: list[list] = []
    for ax in sorted(column, key=lambda a: -boxes[a][3]):
        _, y0, _, y1 = boxes[ax]
        for row in rows:
            r0, r1 = min(boxes[a][1] for a in row), max(boxes[a][3] for a in row)
            if min(y1, r1) - max(y0, r0) > 0.5 * min(y1 - y0, r1 - r0):
                row.append(ax)
                break
        else:
            rows.append([ax])
    return rows


def _share_y_labels(fig, columns, saved) -> None:
    """Give a panel whose y axis is shared with another column the tick labels and label of that column's."""
    column_of = {ax: i for i, column in enumerate(columns) for ax in column}
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        params = ax.yaxis.get_tick_params()
        left, right = params.get("labelleft", True), params.get("labelright", False)
        if left or right:
            continue
        for sibling in ax.get_shared_y_axes().get_siblings(ax):
            if sibling is ax or column_of.get(sibling) == column_of.get(ax):
                continue
            sib = sibling.yaxis.get_tick_params()
            if sib.get("labelleft", True) or sib.get("labelright", False):
                saved.ticks.append((ax, left, right, ax.get_ylabel()))
                ax.yaxis.set_tick_params(which="both", labelleft=sib.get("labelleft", True),
                                         labelright=sib.get("labelright", False))
                if not ax.get_ylabel() and sibling.get_ylabel():
                    ax.set_ylabel(sibling.get_ylabel(), fontsize=sibling.yaxis.label.get_fontsize())
                break


def _tight(fig, renderer, column):
    """The column's tight box in inches: its visible axes with their labels, titles and legends."""
    boxes = [_inches(ax.get_tightbbox(renderer), fig) for ax in column if ax.get_visible()]
    boxes = [b for b in boxes if b[2] > b[0]]
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _place(fig, ax, box, size):
    """Put ``ax``'s box (inches, x0 y0 x1 y1) at ``box`` in a figure of ``size`` inches."""
    from matplotlib.transforms import Bbox

    w, h = size
    position = Bbox.from_extents(box[0] / w, box[1] / h, box[2] / w, box[3] / h)
    ax.set_position(position, which="both")


def _overhangs(fig, saved, columns, renderer) -> tuple[float, list[float]]:
    """How far labels reach beyond the axes, in inches: left of the columns (the most), right of each column.

    The legends set below their panels are left out: they start at the figure's left edge and are as wide
    as the phone's column at most."""
    moved = [ax.get_legend() for ax, _ in saved.axes_legends]
    for legend in moved:
        legend.set_visible(False)
    w = fig.get_size_inches()[0]
    lefts, rights = [], []
    for column in columns:
        x0 = min(ax.get_position().x0 for ax in column) * w
        x1 = max(ax.get_position().x1 for ax in column) * w
        t = _tight(fig, renderer, column) or (x0, 0, x1, 0)
        lefts.append(max(0.0, x0 - t[0]))
        rights.append(max(0.0, t[2] - x1))
    for legend in moved:
        legend.set_visible(True)
    return max(lefts), rights


def _narrow(columns, boxes, width_in, left, rights):
    """Fit each column's axes to the width and left-align them on their axes; returns the new boxes (inches)."""
    new = {}
    for column, right in zip(columns, rights):
        x0 = min(boxes[ax][0] for ax in column)
        x1 = max(boxes[ax][2] for ax in column)
        factor = (width_in - left - right) / (x1 - x0)  # narrower or wider: every column as wide as the phone's
        if factor < _MIN_SQUEEZE:
            raise ValueError(f"a column of the figure has labels {left + right:.2f} in wide: its panels do not "
                             f"fit {width_in:.2f} in")
        for ax in column:
            b = boxes[ax]
            new[ax] = (left + (b[0] - x0) * factor, b[1], left + (b[2] - x0) * factor, b[3])
    return new


def _titles(ax) -> list:
    """The titles of ``ax``: its text children that are not its ``texts`` (annotations)."""
    from matplotlib.text import Text

    return [c for c in ax.get_children()
            if isinstance(c, Text) and c not in ax.texts and c.get_visible() and c.get_text().strip()]


def _wrap_titles(fig, saved, width_in, renderer) -> None:
    """Wrap every axes title and x-axis label wider than ``width_in`` (the axes of the phone layout) between words."""
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        label = [ax.xaxis.label] if ax.xaxis.label.get_visible() and ax.xaxis.label.get_text().strip() else []
        for title in _titles(ax) + label:
            box = _inches(title.get_window_extent(renderer), fig)
            if box[2] - box[0] > width_in:
                saved.titles.append((title, title.get_text()))
                _wrap(title, width_in, renderer, fig)


def _wrap(text, width_in, renderer, fig) -> None:
    """Wrap a figure text to ``width_in`` (a stamp by its parts, other text between words)."""
    from . import plotting

    if plotting.rewrap_stamp(text, width_in):
        return
    box = _inches(text.get_window_extent(renderer), fig)
    if box[2] - box[0] <= width_in:
        return
    words = text.get_text().split()
    for per_line in range(max(len(text.get_text()), 10), 5, -2):
        text.set_text("\n".join(textwrap.wrap(" ".join(words), per_line)))
        box = _inches(text.get_window_extent(renderer), fig)
        if box[2] - box[0] <= width_in:
            return
    raise ValueError(f"the figure text {text.get_text()[:40]!r} does not fit {width_in:.2f} in")


def _set_again(owner, legend, width_in, renderer, fig, **placement):
    """``legend`` set again on ``owner`` (the figure or an axes) with as many columns as fit ``width_in``."""
    labels = [t.get_text() for t in legend.texts]
    title = legend.get_title()
    style = dict(fontsize=legend.texts[0].get_fontsize() if legend.texts else None,
                 title=title.get_text() or None, title_fontsize=title.get_fontsize(), frameon=legend.get_frame_on())
    ncol = max(1, len(labels))
    while True:
        new = owner.legend(list(legend.legend_handles), labels, ncol=ncol, **placement, **style)
        box = _inches(new.get_window_extent(renderer), fig)
        if box[2] - box[0] <= width_in:
            return new
        if ncol == 1:  # one column and still too wide: its labels wrapped between words
            widths = [_inches(t.get_window_extent(renderer), fig) for t in new.texts]
            room = width_in - (box[2] - box[0] - max(b[2] - b[0] for b in widths))
            for text in new.texts:
                _wrap(text, room, renderer, fig)
            return new
        if owner is fig:
            fig.legends.remove(new)
        ncol -= 1


def _legend_again(fig, legend, width_in, renderer):
    """The figure legend set again with as many columns as fit ``width_in``."""
    fig.legends.remove(legend)
    return _set_again(fig, legend, width_in, renderer, fig, loc="upper center")


def _legends_below(fig, saved, width_in, renderer) -> None:
    """A panel's legend beside it (outside its axes, left or right), or too wide for its axes in the phone's
    column, set again below its x axis, from the figure's left edge (``width_in``: the phone's content width)."""
    from matplotlib.transforms import blended_transform_factory

    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible() or not ax.get_visible():
            continue
        box, axes_box = _inches(legend.get_window_extent(renderer), fig), _inches(ax.bbox, fig)
        legend.set_visible(False)
        tight = _inches(ax.get_tightbbox(renderer), fig)
        legend.set_visible(True)
        beside = not axes_box[0] + 0.01 < (box[0] + box[2]) / 2 < axes_box[2] - 0.01
        # the axes' width in the phone's column, less its labels either side
        phone_axes = width_in - max(0.0, axes_box[0] - tight[0]) - max(0.0, tight[2] - axes_box[2])
        if not beside and box[2] - box[0] <= phone_axes:
            continue  # over or under the axes, and narrow enough: it moves with them
        anchor = (tight[1] - GAP_IN / 2 - axes_box[1]) / (axes_box[3] - axes_box[1])
        saved.axes_legends.append((ax, legend))
        _set_again(ax, legend, width_in, renderer, fig, loc="upper left", bbox_to_anchor=(0.0, anchor),
                   bbox_transform=blended_transform_factory(fig.transFigure, ax.transAxes), borderaxespad=0.0)


def _lay_out(fig, saved, width_in) -> None:
    renderer = _renderer(fig)
    fig.set_layout_engine("none")
    boxes = _boxes(saved)
    columns = _columns(boxes)
    _share_y_labels(fig, columns, saved)
    renderer = _renderer(fig)
    import matplotlib as mpl

    # the content's width: a figure saved with ``bbox_inches="tight"`` gets a pad on either side
    target = width_in - 2 * float(mpl.rcParams["savefig.pad_inches"])
    _legends_below(fig, saved, target, renderer)
    renderer = _renderer(fig)
    left, rights = _overhangs(fig, saved, columns, renderer)
    _wrap_titles(fig, saved, target - left - max(rights), renderer)
    renderer = _renderer(fig)
    left, rights = _overhangs(fig, saved, columns, renderer)  # measured once, in the wide layout
    for _ in range(_TRIES):
        narrowed = _narrow(columns, boxes, target, left, rights)
        _stack(fig, saved, columns, narrowed, target, renderer)
        from .plotting import saved_width_in

        excess = saved_width_in(fig) - width_in
        if excess <= 0:
            return
        target -= excess + 0.02
        renderer = _renderer(fig)
    raise ValueError(f"the figure is still wider than {width_in:.2f} in in one column")


def _stack(fig, saved, columns, narrowed, width_in, renderer) -> None:
    """Stack the columns top to bottom with the figure's own texts and legends above and below them."""
    _reset_texts(fig, saved)  # as in the wide layout: an earlier try may have moved them
    h_old = saved.size[1]
    # the narrowed widths at the old heights, to measure each column's tight box as it will be drawn
    size = (width_in, h_old)
    fig.set_size_inches(*size)
    for ax, box in narrowed.items():
        _place(fig, ax, box, size)
    renderer = _renderer(fig)
    axes_top = max(saved.positions[ax][1].y1 for ax in narrowed) * h_old
    axes_bottom = min(saved.positions[ax][1].y0 for ax in narrowed) * h_old
    above, below = [], []
    for text in fig.texts:
        if not text.get_visible() or not text.get_text().strip():
            continue
        if text.get_transform() not in (fig.transFigure, fig.transSubfigure):
            raise ValueError(f"the figure text {text.get_text()[:40]!r} is not placed in figure coordinates")
        y = saved.texts[text][0][1] * h_old
        if y >= axes_top:
            above.append(text)
        elif y <= axes_bottom:
            below.append(text)
        else:
            raise ValueError(f"the figure text {text.get_text()[:40]!r} sits among the panels: it has no place in one column")
    legends_above, legends_below = [], []
    for legend in list(fig.legends):
        if legend not in saved.legends:
            continue
        box = _inches(legend.get_window_extent(renderer), fig)
        centre = (box[1] + box[3]) / 2 * (h_old / fig.get_size_inches()[1])
        (legends_above if centre >= (axes_top + axes_bottom) / 2 else legends_below).append(legend)
    for text in above + below:
        _wrap(text, width_in, renderer, fig)
    legends_above = [_legend_again(fig, legend, width_in, renderer) for legend in legends_above]
    legends_below = [_legend_again(fig, legend, width_in, renderer) for legend in legends_below]
    renderer = _renderer(fig)

    def height(artist):
        box = _inches(artist.get_window_extent(renderer), fig)
        return box[3] - box[1]

    blocks = []
    for column in columns:
        for row in _rows(column, narrowed):
            t = _tight(fig, renderer, row)
            if t is not None:  # a row of hidden axes (a colour bar's room kept in the wide layout) takes none
                blocks.append((row, t[1], t[3]))
    pieces = ([("artist", a, height(a)) for a in above + legends_above]
              + [("column", b, b[2] - b[1]) for b in blocks]
              + [("artist", a, height(a)) for a in legends_below + below])
    total = sum(h for _, _, h in pieces) + GAP_IN * (len(pieces) + 1)
    size = (width_in, total)
    fig.set_size_inches(*size)
    top = total - GAP_IN
    for kind, piece, h in pieces:
        if kind == "column":
            column, y0, _ = piece
            shift = (top - h) - y0
            for ax in column:
                b = narrowed[ax]
                _place(fig, ax, (b[0], b[1] + shift, b[2], b[3] + shift), size)
        elif hasattr(piece, "set_bbox_to_anchor"):  # a legend: its top at ``top``, centred
            piece.set_bbox_to_anchor((0.5, top / total), transform=fig.transFigure)
        else:  # a text: its top at ``top``, where it was across the figure
            x = saved.texts[piece][0][0]
            piece.set_position((x, top / total))
            piece.set_va("top")
        top -= h + GAP_IN
    fig.stale = True
