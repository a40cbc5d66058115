"""Pieces of the diagnostic that have closed forms, and the remaining documented errors."""

import numpy as np
import pandas as pd
import pytest

from critscale.gpt2 import classify
from critscale.gpt2.diagnose import (MIN_TOKENS, TextError, resolve_backend, rule_drifts, tokenize_text,
                                     windows_of)
from critscale.models.load import ByteTokenizer
from critscale.gpt2.train import TrainConfig, train_or_load


def _bins(kappa16):
    n = np.array([24.0, 48.0, 96.0, 192.0, 384.0])
    return pd.DataFrame({"n_centre": n, "log_log_n": np.log(np.log(n)), "kappa16_median": kappa16(n)})


def test_rule_drift_is_zero_for_the_matching_rule():
    """kappa_16 = 3 log n: SSMax (s log n) and the entropy-invariant rule keep c flat (drift 0);
    no rescaling drifts by -1, sqrt(2 log n) by -1/2, (log n)^2 by +1, all exactly in log log n."""
    drifts = rule_drifts(_bins(lambda n: 3.0 * np.log(n)), context=1024)
    assert drifts["ssmax"] == pytest.approx(0.0, abs=1e-12)
    assert drifts["entropy_invariant"] == pytest.approx(0.0, abs=1e-12)
    assert drifts["none"] == pytest.approx(-1.0, abs=1e-12)
    assert drifts["yarn"] == pytest.approx(-1.0, abs=1e-12)  # 1 inside the training context
    assert drifts["sqrt_2_log_n"] == pytest.approx(-0.5, abs=1e-12)
    assert drifts["log_n_squared"] == pytest.approx(1.0, abs=1e-12)


def test_rule_drift_for_a_flat_scale():
    drifts = rule_drifts(_bins(lambda n: np.full_like(n, 2.0)), context=1024)
    assert drifts["none"] == pytest.approx(0.0, abs=1e-12)
    assert min(drifts, key=lambda k: abs(drifts[k])) in ("none", "yarn")


def test_windows():
    ids = np.arange(1000)
    wins = windows_of(ids, 256, 8)
    assert [len(w) for w in wins] == [256, 256, 256]
    np.testing.assert_array_equal(wins[1], np.arange(256, 512))
    assert [len(w) for w in windows_of(ids, 256, 2)] == [256, 256]
    assert [len(w) for w in windows_of(ids[:200], 256, 8)] == [200]  # one shorter window


def test_text_errors():
    tok = ByteTokenizer()
    with pytest.raises(TextError, match="empty"):
        tokenize_text(tok, "")
    with pytest.raises(TextError, match="too short"):
        tokenize_text(tok, "x" * (MIN_TOKENS - 1))
    assert len(tokenize_text(tok, "x" * MIN_TOKENS)) == MIN_TOKENS


def test_backend_errors():
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend("fast")
    assert resolve_backend("reference") == "reference"
    import torch

    if not torch.cuda.is_available():
        assert resolve_backend("auto") == "reference"
        with pytest.raises(ValueError, match="needs CUDA"):
            resolve_backend("kernel")


def test_classifier_and_training_errors(tmp_path):
    with pytest.raises(ValueError, match="at least 4 gaps"):
        classify.classify_profiles(np.zeros((2, 3)))
    from critscale.gpt2.corpus import build_corpus

    with pytest.raises(ValueError, match="only step-bounded"):
        train_or_load(TrainConfig(steps=None, minutes=1.0), build_corpus("topics"), cache_root=tmp_path)
    with pytest.raises(ValueError, match="corpus too short"):
        from critscale.gpt2.train import train_model

        train_model(TrainConfig(n_positions=100_000, n_layer=1, n_head=1, n_embd=8, steps=1),
                    build_corpus("topics"), progress=False)
