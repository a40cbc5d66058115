"""A figure's phone layout (critscale.page.narrowfigure): panels in one column, aligned, text at its own size.

Before it, a two-panel figure set 7 in wide was the only layout: shown in a phone's 336 px column its
9 pt text appeared at 4.6 pt.
"""

import io
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from critscale.page import narrowfigure, plotting  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NARROW = narrowfigure.NARROW_FIGURE_WIDTH_IN


def _saved_width_in(fig) -> float:
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", bbox_inches="tight")
    return float(re.search(r'width="([0-9.]+)pt"', svg.getvalue().decode()).group(1)) / 72


def _boxes_in(fig, axes):
    w, h = fig.get_size_inches()
    return [(b.x0 * w, b.y0 * h, b.x1 * w, b.y1 * h) for b in (ax.get_position() for ax in axes)]


def _two_panels(sharey=False, ncols=2):
    """Chapter 02's pattern: panels side by side, a four-column figure legend below them, a stamp."""
    plotting.setup()
    fig, axes = plt.subplots(1, ncols, figsize=(7.0, 3.3), sharey=sharey)
    for ax in axes:
        for i in range(4):
            ax.plot(np.arange(10), np.arange(10) * i, label=f"family {i}")
        ax.set_xlabel("log n")
    axes[0].set_ylabel("κ")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plotting.stamp(fig, profile="ci", seeds=[12697, "f", "n"], n=1024, rows=16)
    plotting.fit_to_column(fig)
    return fig, axes


def test_two_panels_are_stacked_in_a_phone_column_with_their_text_at_its_own_size():
    fig, axes = _two_panels()
    wide = _saved_width_in(fig)
    # the old and only layout, shown in the phone's column: its text shrinks below 9 pt
    assert plotting.min_text_size(fig) * NARROW / wide < plotting.MIN_TEXT_PT - 1
    size, positions = tuple(fig.get_size_inches()), np.array([ax.get_position().bounds for ax in axes])
    legend = fig.legends[0]
    with narrowfigure.one_column(fig):
        assert _saved_width_in(fig) <= NARROW + 1e-3
        assert plotting.min_text_size(fig) >= plotting.MIN_TEXT_PT
        top, bottom = _boxes_in(fig, axes)
        assert top[0] == pytest.approx(bottom[0], abs=1e-3) and top[2] == pytest.approx(bottom[2], abs=1e-3)
        assert bottom[3] < top[1], "the right panel must sit below the left one"
        assert len(fig.legends) == 1 and fig.legends[0] is not legend
    assert tuple(fig.get_size_inches()) == size
    assert np.allclose([ax.get_position().bounds for ax in axes], positions)
    assert fig.legends == [legend]
    plt.close(fig)


def test_a_shared_y_axis_gets_its_tick_labels_and_label_in_one_column():
    """With ``sharey=True`` only the leftmost panel has y tick labels; stacked, each panel needs its own."""
    fig, axes = _two_panels(sharey=True, ncols=3)
    assert not axes[1].yaxis.get_tick_params().get("labelleft", True)
    with narrowfigure.one_column(fig):
        assert all(ax.yaxis.get_tick_params().get("labelleft", True) for ax in axes)
        assert [ax.get_ylabel() for ax in axes] == ["κ"] * 3
        assert _saved_width_in(fig) <= NARROW + 1e-3
    assert not axes[1].yaxis.get_tick_params().get("labelleft", True) and axes[1].get_ylabel() == ""
    plt.close(fig)


def test_chapter_13s_head_maps_stay_aligned_in_one_column():
    """The four layer x head maps, each with its colour bar (the law panel's hidden), stacked: one left edge,
    one height, so that the layers of the maps line up as in the wide layout."""
    from critscale.diagnostic import figures

    sys.path.insert(0, str(ROOT / "tests"))
    from test_head_maps_layout import _Diag

    fig = figures.head_maps(_Diag(12, 12))
    plotting.fit_to_column(fig)
    maps = [ax for ax in fig.axes if ax.images][:4]
    with narrowfigure.one_column(fig):
        boxes = _boxes_in(fig, maps)
        assert max(b[0] for b in boxes) - min(b[0] for b in boxes) < 1e-3
        heights = [b[3] - b[1] for b in boxes]
        assert max(heights) - min(heights) < 1e-3
        assert all(a[1] > b[3] for a, b in zip(boxes, boxes[1:])), "the maps must be stacked in their order"
        assert _saved_width_in(fig) <= NARROW + 1e-3
    plt.close(fig)


def test_a_wide_single_panel_is_narrowed_not_its_text():
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    ax.plot([1, 2, 3])
    ax.set_xlabel("inverse temperature β", fontsize=10)
    height = ax.get_position().height * fig.get_size_inches()[1]
    with narrowfigure.one_column(fig):
        assert _saved_width_in(fig) <= NARROW + 1e-3
        assert ax.xaxis.label.get_fontsize() == 10
        assert ax.get_position().height * fig.get_size_inches()[1] == pytest.approx(height)
    plt.close(fig)


def test_a_legend_beside_a_panel_goes_below_it_and_the_next_panel_below_the_legend():
    """Chapter 05's ladder: two panels one above the other, each with its legend right of it and a title as wide as
    the phone's column (wrapped there)."""
    fig, axes = plt.subplots(2, 1, figsize=(7.0, 9.6))
    fig.subplots_adjust(left=0.12, right=0.71, top=0.95, bottom=0.08, hspace=0.3)
    for ax in axes:
        for i in range(5):
            ax.plot(np.arange(10), np.arange(10) * i, marker="o", lw=0, label=f"family {i}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), title="median over rows")
        ax.set_title("(b) Weibull-class rows (uniform, sphere)", loc="left")  # wider than the phone's axes
    legends = [ax.get_legend() for ax in axes]
    with narrowfigure.one_column(fig):
        assert _saved_width_in(fig) <= NARROW + 1e-3
        renderer = fig.canvas.get_renderer()
        fig.draw_without_rendering()
        first = axes[0].get_legend().get_window_extent(renderer)
        assert first.x1 <= axes[0].bbox.x1 + 1 and first.y1 < axes[0].bbox.y0, "the legend must sit below its panel"
        assert first.y0 > axes[1].get_tightbbox(renderer).y1, "the next panel must sit below the legend"
    assert [ax.get_legend() for ax in axes] == legends
    assert axes[0].get_title(loc="left") == "(b) Weibull-class rows (uniform, sphere)"
    plt.close(fig)


def test_a_legend_wider_than_the_phones_panel_goes_below_it():
    """Chapter 06's stretched-tail figure: a legend inside the axes with a label 2.9 in long, wider than the panel
    in the phone's column; the layout shrank the panel again and again and gave up."""
    fig, ax = plt.subplots(figsize=(5.25, 4.2), layout="constrained")
    ax.plot([1, 3], [3, 1], label=r"nondecreasing-hazard families, $n=2^{16}$, and more words")
    ax.set_ylabel(r"$\mathbb{E}\sum_i p_i^2$")
    ax.legend(loc="upper left")
    with narrowfigure.one_column(fig):
        assert _saved_width_in(fig) <= NARROW + 1e-3
        fig.draw_without_rendering()
        assert ax.get_legend().get_window_extent().y1 < ax.bbox.y0
    plt.close(fig)


def test_a_figure_text_among_the_panels_is_an_error_not_a_misplaced_label():
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.0))
    fig.text(0.5, 0.5, "between the panels")
    with pytest.raises(ValueError, match="sits among the panels"):
        with narrowfigure.one_column(fig):
            pass
    plt.close(fig)


def test_record_figure_saves_and_glues_the_phone_layout(tmp_path, monkeypatch):
    from critscale.page import pagedata

    monkeypatch.setenv("CRITSCALE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("CRITSCALE_NOTEBOOK", "nb")
    glued = {}
    monkeypatch.setattr(pagedata, "glue", lambda key, obj, **kw: glued.update({key: kw}))
    fig, _ = _two_panels()
    pagedata.record_figure("two_fig", fig)
    narrow = glued["two_fig"]["extra_metadata"][pagedata.NARROW_METADATA]
    assert list(narrow) == ["image/svg+xml"]
    width_pt = float(re.search(r'<svg[^>]*\bwidth="([0-9.]+)pt"', narrow["image/svg+xml"]).group(1))
    assert width_pt <= NARROW * 72 + 0.1
    assert plotting.TEXT_SIZE_PREFIX in narrow["image/svg+xml"]
    files = pagedata.load_results("nb", tmp_path)["figures"]["two_fig"]
    assert files["narrow"] == "figures/nb/two_fig.narrow.svg" and (tmp_path / files["narrow"]).exists()


def test_the_stylesheet_switches_layouts_at_the_width_the_figures_are_set_for():
    css = (ROOT / "book" / "_static" / "critscale.css").read_text()
    found = re.search(r"@container \(max-width: ([0-9.]+)px\)", css)
    assert found, "no container query switching the figure layouts"
    assert float(found.group(1)) == pytest.approx(plotting.HTML_FIGURE_WIDTH_IN * 96, abs=0.05)
    assert NARROW * 96 <= 343, "the phone layout must fit the figure's box at a 390 px window (343 px)"
    assert re.search(r"figure\.critscale-two-layouts \{[^}]*padding-left: 0;", css), "the figure's own padding takes 16 px"


def test_a_figure_without_a_phone_layout_is_glued_wide_and_the_reason_stored(tmp_path, monkeypatch):
    from critscale.page import pagedata

    monkeypatch.setenv("CRITSCALE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("CRITSCALE_NOTEBOOK", "nb")
    glued = {}
    monkeypatch.setattr(pagedata, "glue", lambda key, obj, **kw: glued.update({key: kw}))
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.0))
    fig.text(0.5, 0.5, "between the panels")
    pagedata.record_figure("odd_fig", fig)
    assert glued["odd_fig"]["extra_metadata"] is None and "image/svg+xml" in glued["odd_fig"]["bundle"]
    results = pagedata.load_results("nb", tmp_path)
    assert "narrow" not in results["figures"]["odd_fig"]
    assert "sits among the panels" in results["figure_layout_problems"]["odd_fig"]
