"""Caches live in the user's cache directory (or $CRITSCALE_CACHE), and GGUF needs its extra, said in one line."""

import sys
from pathlib import Path

import pytest

from critscale.cache import cache_root, models_cache
from critscale.cli import main

from test_models_gguf_header import _tiny_gguf


def test_cache_root_follows_the_environment(tmp_path, monkeypatch):
    """$CRITSCALE_CACHE first (a relative one made absolute), then an absolute $XDG_CACHE_HOME, then ~/.cache."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for name in ("CRITSCALE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "critscale"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # the XDG rule: relative paths are ignored
    assert cache_root() == tmp_path / "home" / ".cache" / "critscale"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "critscale"
    monkeypatch.setenv("CRITSCALE_CACHE", "mine")
    assert cache_root() == tmp_path / "mine" and models_cache() == tmp_path / "mine" / "models"
    monkeypatch.setenv("CRITSCALE_CACHE", "")
    assert cache_root() == tmp_path / "xdg" / "critscale"


@pytest.mark.parametrize("package", ["gguf", "accelerate"])
def test_a_gguf_file_without_the_gguf_extra_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch, package):
    """Before anything is read or cached; the old code imported gguf deep in the header reader (a traceback)."""
    path = _tiny_gguf(tmp_path / "tiny.gguf")
    text = tmp_path / "text.txt"
    text.write_text("some text to read " * 40)
    monkeypatch.setenv("CRITSCALE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, package, None)  # `import gguf` fails and find_spec finds nothing
    status = main(["diagnose", "--model", str(path), "--text", str(text), "--out", str(tmp_path / "out"),
                   "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert f"GGUF file tiny.gguf needs {package}" in err[0] and "pip install 'critscale[gguf]'" in err[0]
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
