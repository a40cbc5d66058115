"""``diagnose --qk FILE.npz``: the file format, every bad file as one line and exit 2, and a good run."""

import hashlib
import io
import json
import zipfile

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


HUGE = (1000, 1000, 1000, 1000, 64)  # 233 TiB of float32


def _npy_bytes(array=None, *, shape=None, dtype="<f4", tail=b""):
    """The bytes of an .npy file: ``array`` as numpy writes it, or a header declaring ``shape`` and ``tail``."""
    buffer = io.BytesIO()
    if array is not None:
        np.lib.format.write_array(buffer, array)
    else:
        np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + tail


def _zip(tmp_path, members, name="forged.npz"):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def _forged_header(tmp_path, q, k):
    """450 bytes whose q header declares (1000, 1000, 1000, 1000, 64): 233 TiB."""
    return _zip(tmp_path, {"q.npy": _npy_bytes(shape=HUGE, tail=b"\0" * 64), "k.npy": _npy_bytes(k)})


def _bomb(tmp_path, q, k):
    """A q member that inflates to 3 MiB of zeros past the array its header declares."""
    return _zip(tmp_path, {"q.npy": _npy_bytes(q, tail=b"\0" * 3 * 2**20), "k.npy": _npy_bytes(k)})


def _huge_npy(tmp_path):
    path = tmp_path / "huge.npy"
    path.write_bytes(_npy_bytes(shape=HUGE, tail=b"\0" * 64))
    return path


BAD = {  # case: (file maker (tmp_path, q, k) -> path, message)
    "forged header": (_forged_header, "array q declares shape (1000, 1000, 1000, 1000, 64) of float32 (233 TiB) "
                      "but its member holds only 64 B"),
    "zip bomb": (_bomb, "array q declares shape (1, 2, 8, 128, 8) of float32 (64 KiB) but its member inflates to "),
    "huge npy": (lambda t, q, k: _huge_npy(t), "is a single .npy array"),
    "object": (lambda t, q, k: _zip(t, {"q.npy": _npy_bytes(shape=(2,), dtype="|O"), "k.npy": _npy_bytes(k)}),
               "array q holds Python objects"),
    "bad header": (lambda t, q, k: _zip(t, {"q.npy": b"\x93NUMPY\x01\x00\x05\x00{'a'", "k.npy": _npy_bytes(k)}),
                   "array q has no readable npy header"),
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


def test_a_file_larger_than_memory_is_refused_from_its_headers_before_any_read(tmp_path, monkeypatch):
    """Consistent headers whose arrays exceed the machine's memory: refused without reading any data."""
    from critscale.diagnostic import budget

    q, k = _arrays()
    path = tmp_path / "qk.npz"
    np.savez_compressed(path, q=np.zeros_like(q), k=np.zeros_like(k))
    monkeypatch.setattr(budget, "memory_limit", lambda: 100_000)  # bytes: less than q and k together (128 KiB)

    def no_read(*args, **kwargs):
        raise AssertionError("array data read before the sizes were checked")

    monkeypatch.setattr(np.lib.format, "read_array", no_read)
    with pytest.raises(QKFileError, match=r"arrays q \(1, 2, 8, 128, 8\) and k \(1, 2, 8, 128, 8\) need about "
                                          r"160 KiB of memory .* this machine can hold 97.7 KiB"):
        load_qk_file(path)
    monkeypatch.setattr(budget, "memory_limit", lambda: 50_000)
    with pytest.raises(QKFileError, match="array q declares shape .* 64 KiB; this machine can hold 48.8 KiB"):
        load_qk_file(path)


def test_an_all_zero_file_reports_degenerate_heads(tmp_path, capsys):
    """All-zero q and k: the run completes, heads.csv flags both heads degenerate (no sink, no kappa), and the
    printed summary carries one warning line (the old run reported sink=True, kappa=inf without one)."""
    q = np.zeros(SHAPE, dtype=np.float32)
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, q=q, k=q)
    status, printed = _run(path, tmp_path / "out", capsys)
    assert status == 0, printed.err
    heads = pd.read_csv(tmp_path / "out" / "heads.csv")
    assert heads["degenerate"].all() and not heads["sink"].any() and heads["kappa"].isna().all()
    assert (heads["law"] == "undefined").all()
    assert [line for line in printed.out.splitlines() if line.startswith("warning:")][0].startswith(
        "warning: 2 of 2 heads are degenerate")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["degenerate_heads"] == ["L0H0", "L0H1"] and summary["degenerate_head_count"] == 2


@pytest.mark.parametrize("extra,message", [
    (("--null-windows", "1000000000"), "null_windows 1000000000 (--null-windows) for 2 null(s) needs about "),
    (("--nulls", "gauss_qk,ptail2,gauss_qk"), "null gauss_qk is given more than once"),
])
def test_null_options_the_machine_cannot_run_exit_2_with_one_line(tmp_path, capsys, extra, message):
    """Refused from the sizes, before any computation: one line, exit 2, no run directory left."""
    q, k = _arrays()
    path = tmp_path / "qk.npz"
    np.savez(path, q=q, k=k)
    status = main(["diagnose", "--qk", str(path), "--out", str(tmp_path / "out"), "--nulls", FEW_NULLS,
                   "--no-figures", *extra])
    printed = capsys.readouterr()
    lines = printed.err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and message in lines[0], printed.err
    assert not (tmp_path / "out").exists()
