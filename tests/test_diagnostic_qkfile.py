"""``diagnose --qk FILE.npz``: the file format, every bad file as one line and exit 2, and a good run."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from critscale.cli import main
from critscale.diagnostic import diagnose_qk
from critscale.diagnostic.qkfile import QKFileError, load_qk_file, validate_qk

SHAPE = (1, 2, 8, 128, 8)  # layers, heads, windows, T, d_head
FEW_NULLS = "gauss_qk,ptail2"


def _arrays(seed=0, shape=SHAPE, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


def _run(path, out, capsys, *extra):
    status = main(["diagnose", "--qk", str(path), "--out", str(out), "--nulls", FEW_NULLS, "--null-windows", "8",
                   "--no-figures", *extra])
    return status, capsys.readouterr()


def test_qk_file_end_to_end(tmp_path, capsys):
    q, k = _arrays()
    path = tmp_path / "qk.npz"
    np.savez(path, q=q, k=k.astype(np.float16), scale=np.float64(0.3), causal=np.bool_(True))
    status, printed = _run(path, tmp_path / "out", capsys)
    assert status == 0, printed.err
    heads = pd.read_csv(tmp_path / "out" / "heads.csv")
    for column in ("layer", "head", "law", "sink", "best_rule", "gamma", "gamma_low", "gamma_high", "p_max",
                   "entropy", "beta_half", "kappa", "kappa16", "c_half", "c", "c16", "regime", "rows_step",
                   "null_rows_step"):
        assert column in heads.columns, column
    assert len(heads) == 2 and set(heads["law"]) <= {"linear", "power", "step", "undefined"}
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["inputs"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "prefix design" in printed.out and "scale 0.3" in printed.out


def _save(tmp_path, **arrays):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


def _nan(q):
    q = q.copy()
    q[0, 1, 2, 3, 4] = np.nan
    return q


def _inf(k):
    k = k.copy()
    k[0, 0, 0, 0, 0] = np.inf
    return k


def _text(tmp_path):
    path = tmp_path / "text.npz"
    path.write_text("not an archive")
    return path


def _npy(tmp_path, q):
    path = tmp_path / "single.npy"
    np.save(path, q)
    return path


BAD = {  # case: (file maker (tmp_path, q, k) -> path, message)
    "missing k": (lambda t, q, k: _save(t, q=q), "has no array k (arrays present: q)"),
    "shapes": (lambda t, q, k: _save(t, q=q, k=k[..., :64, :]), "q has shape (1, 2, 8, 128, 8) but k has"),
    "nan": (lambda t, q, k: _save(t, q=_nan(q), k=k),
            "q has 1 non-finite values (NaN or inf), the first at index (0, 1, 2, 3, 4)"),
    "inf": (lambda t, q, k: _save(t, q=q, k=_inf(k)), "k has 1 non-finite values"),
    "short": (lambda t, q, k: _save(t, q=q[..., :100, :], k=k[..., :100, :]), "T = 100 tokens are too short"),
    "int": (lambda t, q, k: _save(t, q=q.astype(np.int64), k=k), "q has dtype int64"),
    "complex": (lambda t, q, k: _save(t, q=q.astype(np.complex64), k=k), "q has dtype complex64"),
    "4-d": (lambda t, q, k: _save(t, q=q[0], k=k[0]), "q has shape (2, 8, 128, 8); it must be (layers"),
    "unknown": (lambda t, q, k: _save(t, q=q, k=k, scales=np.float64(1.0)), "unknown arrays scales"),
    "scale": (lambda t, q, k: _save(t, q=q, k=k, scale=np.float64(-1.0)), "scale must be finite and > 0"),
    "scale shape": (lambda t, q, k: _save(t, q=q, k=k, scale=np.ones(2)), "scale must be one real number"),
    "causal": (lambda t, q, k: _save(t, q=q, k=k, causal=np.int64(1)), "causal must be one boolean"),
    "not npz": (lambda t, q, k: _text(t), "is not a readable .npz archive"),
    "npy": (lambda t, q, k: _npy(t, q), "is a single .npy array"),
    "directory": (lambda t, q, k: t, "is a directory, not an .npz file"),
    "missing": (lambda t, q, k: t / "none.npz", "does not exist"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_exit_2_with_one_line(tmp_path, capsys, case):
    """Each bad file: exit 2, one line naming the array and the problem, before any computation."""
    make, message = BAD[case]
    path = make(tmp_path, *_arrays())
    status, printed = _run(path, tmp_path / "out", capsys)
    assert status == 2
    lines = printed.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], printed.err
    with pytest.raises(QKFileError, match="q/k file"):
        load_qk_file(path)


def test_validate_qk_defaults_and_non_causal_rows():
    """Default scale 1/sqrt(d_head) and causal; a non-causal file's query sees all n keys of the level."""
    q, k = _arrays()
    arrays = validate_qk(q, k)
    assert arrays.scale == pytest.approx(1 / np.sqrt(8)) and arrays.causal
    diag = diagnose_qk(q, k, causal=False, nulls=("gauss_qk",), null_windows=8, keep_rows=True)
    rows = diag.rows[diag.rows["layer"] >= 0]
    assert (rows["n"] == rows["level"]).all()
    assert diag.meta["causal"] is False and (diag.nulls["rows"] > 0).all()
