"""Stage 1 for a model: the text file is streamed, checked where it is read, and refused clearly."""

import numpy as np
import pytest

from critscale.diagnostic.text import BLOCK_BYTES, TextError, check_text_path, read_tokens
from critscale.models.load import ByteTokenizer


class WordTokenizer:
    """One token per white-space separated word (a tokenizer whose tokens span many bytes)."""

    def encode(self, text):
        return [len(word) for word in text.split()]


def _write(tmp_path, data: bytes, name="t.txt"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_only_the_tokens_analysed_are_read(tmp_path):
    """A 4 MB file, 1000 tokens asked for: one block is read, not the file (the old command read and
    tokenized everything, 20 times the file's size in memory).  Bytes after that block are never
    decoded, so an invalid byte there is not an error."""
    data = (b"lorem ipsum dolor sit amet " * 160_000)[:4_000_000] + b"\xff"
    got = read_tokens(_write(tmp_path, data), ByteTokenizer(), 1000)
    assert got.bytes_read == BLOCK_BYTES and not got.exhausted
    np.testing.assert_array_equal(got.tokens, np.frombuffer(data[:1000], dtype=np.uint8))


def test_streamed_tokens_equal_those_of_the_whole_text(tmp_path):
    """With multi-byte tokens the prefix is re-tokenized as it grows; the tokens returned must be the
    first tokens of the whole text, also when a block boundary cuts a word."""
    rng = np.random.default_rng(0)
    words = ["x" * int(w) for w in rng.integers(1, 12, size=60_000)]
    text = " ".join(words)
    got = read_tokens(_write(tmp_path, text.encode()), WordTokenizer(), 20_000)
    assert got.tokens.tolist() == WordTokenizer().encode(text)[:20_000]
    short = read_tokens(_write(tmp_path, b"a bb ccc", "s.txt"), WordTokenizer(), 10)
    assert short.exhausted and short.tokens.tolist() == [1, 2, 3]


@pytest.mark.parametrize("data, offset, byte", [
    (b"a" * 100 + b"\xe9t\xe9", 100, "e9"),  # Latin-1
    (b"a" * (BLOCK_BYTES - 1) + b"\xc3A" + b"a" * 10, BLOCK_BYTES - 1, "c3"),  # a 2-byte start cut by a block end
    (bytes(range(128, 256)) * 4, 0, "80"),  # binary
])
def test_invalid_utf8_names_its_byte_offset(tmp_path, data, offset, byte):
    """Rejects the old behaviour (invalid bytes silently replaced, three byte-tokens each, exit 0)."""
    with pytest.raises(TextError, match=f"not valid utf-8: byte 0x{byte} at offset {offset} ") as err:
        read_tokens(_write(tmp_path, data), ByteTokenizer(), 100_000)
    assert "--encoding" in str(err.value) and "--errors replace" in str(err.value)


def test_nul_bytes_and_explicit_choices(tmp_path):
    with pytest.raises(TextError, match="NUL byte at byte offset 5: it is binary"):
        read_tokens(_write(tmp_path, b"hello\x00world"), ByteTokenizer(), 100)
    latin = _write(tmp_path, b"caf\xe9 au lait")
    got = read_tokens(latin, ByteTokenizer(), 100, encoding="latin-1")
    assert bytes(got.tokens.astype(np.uint8)) == "café au lait".encode("utf-8")
    got = read_tokens(latin, ByteTokenizer(), 100, errors="replace")
    assert bytes(got.tokens.astype(np.uint8)).decode() == "caf\ufffd au lait"
    with pytest.raises(TextError, match="unknown text encoding"):
        read_tokens(latin, ByteTokenizer(), 100, encoding="klingon")
    with pytest.raises(TextError, match="unknown decoding error handler"):
        read_tokens(latin, ByteTokenizer(), 100, errors="shrug")


def test_paths_that_are_not_text_files(tmp_path):
    """A directory and /dev/null say what they are (the old message said "does not exist")."""
    with pytest.raises(TextError, match="is a directory, not a file"):
        check_text_path(tmp_path)
    with pytest.raises(TextError, match="/dev/null is a character device, not a regular file"):
        check_text_path("/dev/null")
    with pytest.raises(TextError, match="does not exist"):
        check_text_path(tmp_path / "none.txt")
    with pytest.raises(TextError, match="--text is empty"):
        check_text_path("")
    with pytest.raises(TextError, match="is empty"):
        read_tokens(_write(tmp_path, b""), ByteTokenizer(), 10)
    with pytest.raises(TextError, match="only white space"):
        read_tokens(_write(tmp_path, b" \n\t "), ByteTokenizer(), 10)
