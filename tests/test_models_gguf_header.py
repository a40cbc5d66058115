"""GGUF headers are read with a length check before every field: a truncated or absurd file is one line naming it.

Before the header was checked, a truncated file and the absurd counts of the command-line test reached
transformers' GGUF reader and ended in a ``struct.error`` traceback of 46-49 lines; those tests fail on that
behaviour.  The other absurd headers were refused by that reader with less precise messages (or, with a valid
architecture, later by numpy); the parser's tests pin each refusal here, before any reader allocates.
"""

import struct

import numpy as np
import pytest

from critscale.cli import main
from critscale.models import InvalidCheckpointError
from critscale.models.gguf_header import read_header
from critscale.models.load import load_model


def _tiny_gguf(path):
    """A valid GGUF file: two metadata entries (one an array) and two float32 tensors."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_array("test.words", ["one", "two", "three"])
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _file(tmp_path, *, version=3, n_tensors=0, n_kv=0, body=b"", name="bad.gguf"):
    path = tmp_path / name
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + body)
    return path


def test_the_header_is_read_as_gguf_reads_it(tmp_path):
    """Fails if the parser misreads a field: the tensors, their types, sizes and the data offset are gguf's own."""
    import gguf

    path = _tiny_gguf(tmp_path / "tiny.gguf")
    header = read_header(path)
    reader = gguf.GGUFReader(path)
    assert [(t.name, t.shape, t.type, t.nbytes) for t in header.tensors] == [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.n_bytes)) for t in reader.tensors]
    assert header.data_offset == reader.data_offset and header.version == 3
    assert header.metadata["llama.block_count"] == 1 and header.metadata["test.words"].length == 3


def test_every_truncation_of_the_header_is_one_line(tmp_path):
    """Each prefix of a valid file (cut inside the counts, a key, a value, an array, a tensor info, the data)."""
    whole = _tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    for n in list(range(4, 200, 3)) + [len(whole) - 1]:
        cut.write_bytes(whole[:n])
        with pytest.raises(InvalidCheckpointError, match=r"GGUF file .*cut.gguf is invalid: (truncated at byte|"
                                                         r".* more than the .* bytes left|tensor .* needs data up to)"):
            load_model(cut, gguf_cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


ABSURD = {  # name: (the file's fields after the magic, the message's key phrase)
    "version 99": (dict(version=99), r"GGUF version 99 is not supported"),
    "big-endian": (dict(version=3 << 24), r"a big-endian file, which is not supported"),
    "2^63 tensors": (dict(n_tensors=2 ** 63), r"declares 9,223,372,036,854,775,808 tensors, more than the 0 bytes"),
    "2^64-1 metadata entries": (dict(n_kv=2 ** 64 - 1), r"declares 18,446,744,073,709,551,615 metadata entries"),
    "a key of 2^60 bytes": (dict(n_kv=1, body=struct.pack("<Q", 2 ** 60) + b"x" * 20),
                            r"the length of the key of metadata entry 0 declares 1,152,921,504,606,846,976 bytes"),
    "an unknown value type": (dict(n_kv=1, body=_string(b"k") + struct.pack("<I", 77) + b"\0" * 8),
                              r"metadata 'k' has value type 77, which GGUF does not define"),
    "an array of 2^40 uint64": (dict(n_kv=1, body=_string(b"k") + struct.pack("<IIQ", 9, 10, 2 ** 40) + b"\0" * 16),
                                r"the array metadata 'k' declares 1,099,511,627,776 elements"),
    "a key that is not UTF-8": (dict(n_kv=1, body=_string(b"\xff\xfe") + struct.pack("<IB", 0, 1)),
                                r"the key of metadata entry 0 is not UTF-8 \(byte 0\)"),
    "a repeated key": (dict(n_kv=2, body=(_string(b"k") + struct.pack("<IB", 0, 1)) * 2),
                       r"metadata key 'k' appears twice"),
    "99 dimensions": (dict(n_tensors=1, body=_string(b"t") + struct.pack("<I", 99) + b"\0" * 40),
                      r"tensor 't' declares 99 dimensions \(GGUF allows 1 to 4\)"),
    "an unknown tensor type": (dict(n_tensors=1, body=_string(b"t") + struct.pack("<IQIQ", 1, 4, 999, 0)),
                               r"tensor 't' has type 999, which ggml does not define"),
    "data past the end": (dict(n_tensors=1, body=_string(b"t") + struct.pack("<IQIQ", 1, 2 ** 40, 0, 0)),
                          r"tensor 't' needs data up to byte 4,398,046,511,168 and the file has \d+ bytes"),
    "an alignment of 3": (dict(n_kv=1, body=_string(b"general.alignment") + struct.pack("<II", 4, 3)),
                          r"general.alignment 3 is not a positive power of two"),
}


@pytest.mark.parametrize("case", list(ABSURD))
def test_absurd_header_is_one_line_naming_the_file(tmp_path, case):
    fields, message = ABSURD[case]
    path = _file(tmp_path, **fields)
    with pytest.raises(InvalidCheckpointError, match=message) as info:
        read_header(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("case", ["2^64-1 metadata entries", "a key of 2^60 bytes", "an array of 2^40 uint64"])
def test_command_line_exits_2_with_one_line_before_any_cache_is_made(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRITSCALE_CACHE", str(tmp_path / "cache"))
    path = _file(tmp_path, **ABSURD[case][0])
    text = tmp_path / "text.txt"
    text.write_text("some text to read " * 40)
    status = main(["diagnose", "--model", str(path), "--text", str(text), "--out", str(tmp_path / "out"),
                   "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1 and str(path) in err, err
    assert not (tmp_path / "build").exists() and not (tmp_path / "cache").exists()


def test_truncated_data_through_the_loader(tmp_path):
    """A valid header whose tensor data was cut off: refused by the loader before transformers reads it."""
    whole = _tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:-8])
    with pytest.raises(InvalidCheckpointError, match=r"tensor 'output_norm.weight' needs data up to byte"):
        load_model(cut, gguf_cache=tmp_path / "cache")


def test_an_unreadable_gguf_file_gives_the_real_reason(tmp_path, monkeypatch):
    """Simulated (root reads every file whatever its mode): the old loader's PermissionError was a traceback."""
    import builtins

    path = _tiny_gguf(tmp_path / "tiny.gguf")

    def denying_open(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr("critscale.models.gguf_header.open", denying_open, raising=False)
    with pytest.raises(InvalidCheckpointError, match=r"GGUF file .*tiny.gguf cannot be read: Permission denied"):
        load_model(path, gguf_cache=tmp_path / "cache")
