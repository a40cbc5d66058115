"""A model with sliding-window layers (Gemma 3) is read only where every layer's rows are full causal prefixes.

Gemma 3's sliding layers see only the last ``sliding_window`` keys: a row of a longer context is not a row such
a layer computes.  The diagnostic reads such a model on windows of at most its sliding window and refuses a longer
one in one line that names the window (before, the line named only "the model's context", the position table's
word for a limit that is the window's); chapter 13's models table says which layers slide.
"""

import numpy as np
import pytest

from critscale.diagnostic import compare, diagnose_model
from critscale.diagnostic.design import DesignError
from critscale.models.load import load_model

from test_capture_architectures import save_tiny


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    path = save_tiny(tmp_path_factory.mktemp("g") / "g", "gemma3_text", sliding_window=128,
                     max_position_embeddings=512)
    return load_model(path)


def test_a_window_longer_than_the_sliding_window_is_one_line_naming_it(gemma):
    ids = np.random.default_rng(0).integers(1, 256, 2000)
    with pytest.raises(DesignError, match=r"--max-len 160 exceeds the model's context of 128 positions \(the sliding "
                                          r"window of layers 0..0"):
        diagnose_model(gemma, ids, max_len=160, max_windows=1)


def test_rows_read_never_exceed_the_sliding_window(gemma):
    """The default length is the window; every row the diagnosis reads holds at most that many keys."""
    ids = np.random.default_rng(1).integers(1, 256, 2000)
    diag = diagnose_model(gemma, ids, max_windows=2, design="prefix", nulls=("gauss_qk",), null_replicates=0,
                          keep_rows=True)
    assert diag.meta["window_length"] == 128 and max(diag.meta["levels"]) == 128
    assert int(diag.rows["n"].max()) <= 128
    assert compare.attention_kind(gemma.config, diag.meta["causal"]) == (
        "causal; 1 of 2 layers see only the last 128 keys (sliding window), the others every key")
