"""Tags of recorded keys (critscale.page.keys)."""

import numpy as np
import pytest

from critscale.page import keys


def test_key_c():
    """The tags chapters 06-08 record (c2, c0p5, ...), chapter's inline expression for every grid value, and
    distinct tags on the grids; str(c) instead of :g would give c2p0 and miss the keys the tests read."""
    assert keys.key_c(0.5) == "c0p5" and keys.key_c(2.0) == "c2" and keys.key_c(1.25) == "c1p25"
    assert keys.key_c(np.float64(4)) == "c4" and keys.key_c(8) == "c8"
    grid = np.concatenate([np.geomspace(0.25, 8, 11), [0.75, 1.0, 1.5, 0.9, 1.1]])
    tags = [keys.key_c(c) for c in grid]
    assert tags == [f"c{c:g}".replace(".", "p") for c in grid]
    assert len(set(tags)) == len(set(np.round(grid, 12)))
    with pytest.raises(ValueError, match="c must be"):
        keys.key_c(-1.0)
    with pytest.raises(ValueError, match="c must be"):
        keys.key_c(np.nan)
