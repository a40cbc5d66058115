"""Figures fit the HTML column at their own size, and say how small their text is (plotting, pagedata)."""

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from critscale.page import plotting  # noqa: E402


def _saved_width_pt(fig) -> float:
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", bbox_inches="tight")
    return float(re.search(r'width="([0-9.]+)pt"', svg.getvalue().decode()).group(1))


def test_a_figure_wider_than_the_column_is_shrunk_text_kept():
    """A 7-inch figure with a legend outside its axes was saved 507 pt wide and shown at 660 px (495 pt),
    its 9 pt text at 8.8 pt."""
    fig, ax = plt.subplots(figsize=(7.0, 3.3))
    ax.plot([1, 2], label="a family")
    ax.legend(loc="center left", bbox_to_anchor=(1, 0.5), fontsize=9)
    assert _saved_width_pt(fig) > plotting.HTML_FIGURE_WIDTH_IN * 72
    plotting.fit_to_column(fig)
    assert _saved_width_pt(fig) <= plotting.HTML_FIGURE_WIDTH_IN * 72
    assert plotting.min_text_size(fig) == pytest.approx(9.0)
    plt.close(fig)


def test_a_constrained_layout_figure_is_measured_as_drawn():
    """Before it is drawn, a constrained-layout figure's tight box is narrower than the one it is saved with."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.3), layout="constrained")
    axes[0].plot([1, 2], label="a")
    axes[1].legend(handles=axes[0].lines, loc="center left", bbox_to_anchor=(1, 0.5))
    plotting.fit_to_column(fig)
    assert _saved_width_pt(fig) <= plotting.HTML_FIGURE_WIDTH_IN * 72
    plt.close(fig)


def test_text_size_description_round_trips_and_refuses_other_text():
    assert plotting.parse_text_size_description(plotting.text_size_description(9.5)) == 9.5
    assert plotting.parse_text_size_description(plotting.text_size_description(None)) is None
    with pytest.raises(ValueError, match="not a critscale text-size description"):
        plotting.parse_text_size_description("Matplotlib figure")


def test_a_long_stamp_does_not_keep_the_figure_wider_than_the_column():
    """Chapter 12's floor figure carried a stamp wider than the figure: saved 660 pt wide, its text shown at 6.8 pt."""
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    ax.plot([1, 2])
    plotting.stamp(fig, profile="ci", rows=4096, n=2**20,
                   extra="floors: Triton 3.4.0, sm_90a; NVIDIA H200 at 1980 MHz, and a long tail of words about it")
    plotting.fit_to_column(fig)
    assert _saved_width_pt(fig) <= plotting.HTML_FIGURE_WIDTH_IN * 72
    plt.close(fig)


def test_a_stamp_with_one_long_part_is_wrapped_inside_the_column():
    """Chapter 12's benchmark stamp had one part (the commits) longer than a line: saved 660 pt wide."""
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    ax.plot([1, 2])
    plotting.stamp(fig, profile="ci", extra="NVIDIA H200; " + "; ".join(f"impl{i}: commit abcdef{i}" for i in range(12)))
    plotting.fit_to_column(fig)
    assert _saved_width_pt(fig) <= plotting.HTML_FIGURE_WIDTH_IN * 72
    plt.close(fig)


def test_text_wider_than_the_column_is_an_error_not_a_silent_overflow():
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    ax.set_title("x" * 200, fontsize=12)
    with pytest.raises(ValueError, match="its text alone is wider"):
        plotting.fit_to_column(fig)
    plt.close(fig)
