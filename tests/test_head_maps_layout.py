"""Chapter 13's layer x head maps: the four panels have one height, so that their layers line up.

The "law" panel had no colour bar and was taller than its neighbours (figure 30 of the HTML).
"""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from critscale.diagnostic import figures  # noqa: E402


class _Diag:
    def __init__(self, layers=3, heads=4):
        rng = np.random.default_rng(0)
        grid = [(lay, hd) for lay in range(layers) for hd in range(heads)]
        self.heads = pd.DataFrame({
            "layer": [g[0] for g in grid], "head": [g[1] for g in grid],
            "gamma": rng.normal(0.5, 0.1, len(grid)),
            "law": rng.choice(["linear", "step", "power"], len(grid)),
            "c_half": rng.uniform(0.5, 2.0, len(grid)),
            "sink_fraction": rng.uniform(0, 1, len(grid))})


def test_the_four_head_maps_have_one_height_and_top():
    import matplotlib.pyplot as plt

    fig = figures.head_maps(_Diag())
    maps = [ax for ax in fig.axes if ax.images][:4]
    assert len(maps) == 4
    boxes = [ax.get_position() for ax in maps]
    assert max(b.height for b in boxes) == pytest.approx(min(b.height for b in boxes), abs=1e-3)
    assert max(b.y1 for b in boxes) == pytest.approx(min(b.y1 for b in boxes), abs=1e-3)
    plt.close(fig)
