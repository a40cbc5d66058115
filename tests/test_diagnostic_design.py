"""The design: context lengths, which rows are read, and the windows of q and k each source gives."""

import numpy as np
import pytest
import torch

from critscale.diagnostic.design import DesignError, length_grid, make_design
from critscale.diagnostic.pipeline import resolve_length, token_windows
from critscale.diagnostic.windows import ArraySource, ModelSource


def test_length_grid():
    assert length_grid(1024) == (32, 45, 64, 91, 128, 181, 256, 362, 512, 724, 1024)
    assert length_grid(128) == (32, 45, 64, 91, 128)
    assert length_grid(200) == (32, 45, 64, 91, 128, 181, 200)  # the window length is always the last level


def test_design_rows_and_errors():
    design = make_design("suffix", 128, queries=4)
    np.testing.assert_array_equal(design.row_lengths(64), [61, 62, 63, 64])
    np.testing.assert_array_equal(make_design("prefix", 128, causal=False).row_lengths(64), [64] * 4)
    assert "suffix design" in design.describe()
    with pytest.raises(DesignError, match="too short"):
        make_design("suffix", 127)
    for bad in (0, 17, True):
        with pytest.raises(DesignError, match="queries per level"):
            make_design("suffix", 128, queries=bad)
    with pytest.raises(DesignError, match="unknown design"):
        make_design("middle", 128)


def test_token_windows_and_lengths():
    ids = np.arange(1000)
    wins = token_windows(ids, 256, 8)
    assert wins.shape == (3, 256) and np.array_equal(wins[1], np.arange(256, 512))
    assert token_windows(ids, 256, 2).shape == (2, 256)
    with pytest.raises(DesignError, match="too short: 200 tokens"):
        token_windows(ids[:200], 256, 8)
    with pytest.raises(DesignError, match=">= 1"):
        token_windows(ids, 256, 0)
    assert resolve_length(2048, None) == 1024 and resolve_length(128, None) == 128
    with pytest.raises(DesignError, match="exceeds the model's context"):
        resolve_length(128, 256)


def test_array_source_prefix_and_suffix_slices():
    """Prefix: queries n-m..n-1 and keys 0..n-1 of the window; suffix: the window's last m queries
    (the same tokens at every level) and its last n keys.  Rejects a suffix design that moves its
    query tokens with n (which would confound length with position again)."""
    q = torch.arange(2 * 128 * 1, dtype=torch.float64).reshape(1, 1, 2, 128, 1)
    k = -q
    for kind in ("prefix", "suffix"):
        for block in ArraySource(q, k, 1.0).blocks(make_design(kind, 128, queries=4)):
            n = block.n
            positions = block.q[0, 0, :, :, 0] - 128 * torch.arange(2)[:, None]  # (B, m) token positions
            keys = -block.k[0, 0, :, :, 0] - 128 * torch.arange(2)[:, None]  # (B, n)
            if kind == "prefix":
                assert positions[0].tolist() == list(range(n - 4, n)) and keys[0].tolist() == list(range(n))
            else:
                assert positions[0].tolist() == [124, 125, 126, 127]
                assert keys[0].tolist() == list(range(128 - n, 128))


def test_model_source_runs_the_model_on_the_last_n_tokens(tmp_path):
    """Suffix design on a model: level n is a fresh forward of the window's last n tokens (its own
    positions 0..n-1), not a slice of the full window's forward.  Prefix design: one forward, sliced."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from critscale.models import load_model
    from critscale.models.capture import capture_qk

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=16, n_positions=128, vocab_size=256,
                        bos_token_id=None, eos_token_id=None)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    ids = np.random.default_rng(0).integers(0, 256, size=(1, 128))
    forwards = []
    source = ModelSource(loaded, ids, on_forward=lambda: forwards.append(1))
    design = make_design("suffix", 128, queries=4)
    for block in source.blocks(design):
        expected = capture_qk(loaded.model, ids[0, 128 - block.n:])
        torch.testing.assert_close(block.q[:, :, 0], expected.q[:, :, block.n - 4:])
        torch.testing.assert_close(block.k[:, :, 0], expected.k)
    assert len(forwards) == len(design.levels)
    full = capture_qk(loaded.model, ids[0])
    for block in ModelSource(loaded, ids).blocks(make_design("prefix", 128, queries=4)):
        torch.testing.assert_close(block.k[:, :, 0], full.k[:, :, :block.n])
