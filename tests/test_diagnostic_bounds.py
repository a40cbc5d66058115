"""Sizes and options of the diagnostic are checked before anything is read or allocated, in one line each."""

from types import SimpleNamespace

import numpy as np
import pytest

from critscale.diagnostic import budget, diagnose_model, diagnose_qk, pipeline

SHAPE = (1, 2, 8, 128, 8)  # layers, heads, windows, T, d_head


@pytest.fixture
def qk():
    rng = np.random.default_rng(5)
    return rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)


@pytest.fixture
def nothing_read(monkeypatch):
    """Fail the test if the diagnostic starts reading heads (the refusal must come first)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the heads were read before the options were checked")

    monkeypatch.setattr(pipeline, "_read_source", refuse)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_null_windows_that_are_not_a_positive_integer_are_refused(qk, nothing_read, bad):
    """0 was taken as 'the default' (0 is falsy); negatives, floats and booleans are refused too."""
    with pytest.raises(ValueError, match=r"null_windows \(--null-windows\) must be an integer >= 1"):
        diagnose_qk(*qk, nulls=("gauss_qk",), null_windows=bad)


def test_null_windows_none_is_the_default(qk):
    assert pipeline.resolve_null_windows(None, 8) == max(pipeline.NULL_WINDOW_FACTOR * 8, pipeline.MIN_NULL_WINDOWS)
    assert pipeline.resolve_null_windows(np.int64(3), 8) == 3


def test_a_null_given_twice_is_refused_before_any_computation(qk, nothing_read):
    with pytest.raises(ValueError, match=r"^null gauss_qk is given more than once; name each null once$"):
        diagnose_qk(*qk, nulls=("gauss_qk", "ptail2", "gauss_qk"), null_windows=8)


def test_a_billion_null_windows_is_refused_from_the_sizes(qk, nothing_read):
    """1e9 null windows ask for terabytes: a ValueError naming the option and the bytes, no allocation."""
    with pytest.raises(ValueError, match=r"null_windows 1000000000 \(--null-windows\) for 10 null\(s\) needs about "
                                         r"[0-9.]+ TiB of memory beside .* this machine can hold"):
        diagnose_qk(*qk, null_windows=1_000_000_000)


def test_the_heads_are_checked_against_the_memory_first(qk, nothing_read, monkeypatch):
    monkeypatch.setattr(budget, "memory_limit", lambda: 2**20)
    with pytest.raises(ValueError, match=r"reading 1 layers x 2 heads x 8 windows \(the q/k input's shape\) needs "
                                         r"about .* MiB of memory; this machine can hold 1 MiB"):
        diagnose_qk(*qk, nulls=("gauss_qk",), null_windows=8)


def test_a_model_source_names_max_windows(nothing_read, monkeypatch):
    """The model path is checked before its windows are read; the message names --max-windows.

    Only the 16-token probe that tells causal rows from bidirectional ones runs first (it is stubbed here:
    the fake model has no weights).
    """
    import critscale.models.capture as capture

    monkeypatch.setattr(budget, "memory_limit", lambda: 2**20)
    monkeypatch.setattr(capture, "rows_are_causal", lambda model, tokens: True)
    from transformers import AutoConfig

    config = AutoConfig.for_model("llama", max_position_embeddings=128, num_hidden_layers=30, num_attention_heads=9,
                                  num_key_value_heads=3, hidden_size=576)
    loaded = SimpleNamespace(context=128, n_layers=30, n_heads=9, head_dim=64, checkpoint="fake", config=config,
                             describe=lambda: "fake model", model=None, tokenizer=None)
    with pytest.raises(ValueError, match=r"30 layers x 9 heads x 40 windows \(max_windows 40 \(--max-windows\)\)"):
        diagnose_model(loaded, np.arange(128 * 40) % 50, max_windows=40, nulls=("gauss_qk",), null_windows=8)


def test_estimates_grow_with_every_size():
    """The estimate is monotone in windows, layers, heads and null windows (a size is never ignored)."""
    design = pipeline.make_design("prefix", 256, queries=4)
    base = budget.heads_bytes(2, 3, 10, 16, design, keep_rows=False, block_elements=pipeline.BLOCK_ELEMENTS)
    for args in ((4, 3, 10, 16), (2, 6, 10, 16), (2, 3, 20, 16)):
        assert budget.heads_bytes(*args, design, keep_rows=False, block_elements=pipeline.BLOCK_ELEMENTS) > base
    assert budget.heads_bytes(2, 3, 10, 16, design, keep_rows=True, block_elements=pipeline.BLOCK_ELEMENTS) > base
    small = budget.nulls_bytes(["qk", "rows"], 10, 16, design, keep_rows=False, block_elements=2**24, workers=2)
    assert budget.nulls_bytes(["qk", "rows"], 20, 16, design, keep_rows=False, block_elements=2**24, workers=2) > small
    assert budget.capture_bytes(2, 3, 512, 16) == 2 * budget.capture_bytes(2, 3, 256, 16) > 0
    assert budget.human(8 * 10**12) == "7.28 TiB" and budget.human(512) == "512 B"


@pytest.mark.parametrize("bad", [1, -2, 2.5, True, "64"])
def test_null_replicates_that_give_no_standard_deviation_are_refused(qk, nothing_read, bad):
    """One replicate has no standard deviation to test against; negatives, floats, booleans, strings are refused
    too, before anything is read."""
    with pytest.raises(ValueError, match=r"null_replicates must be an integer >= 2 \(0: no test against the null\)"):
        diagnose_qk(*qk, nulls=("gauss_qk",), null_replicates=bad)


def test_no_replicates_means_no_head_is_tested(qk):
    """null_replicates=0 reads no replicate and flags no head (the test needs them); the default reads 64, whose
    pooled windows give the null distribution on 400 subsets of the input's 8 windows."""
    diag = diagnose_qk(*qk, nulls=("gauss_qk",), null_windows=8, null_replicates=0)
    assert diag.replicates is None and diag.meta["null_replicates"] == 0
    assert (diag.heads["beyond_null"] == "").all() and diag.heads["null_p"].isna().all()
    diag = diagnose_qk(*qk, nulls=("gauss_qk",), null_windows=8)
    assert diag.meta["null_replicates"] == 64 and len(diag.replicates) == diag.meta["null_subsets"] == 400
    assert (diag.replicates["windows"] == 8).all()
    assert diag.heads["null_p"].notna().all()
