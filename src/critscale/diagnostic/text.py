"""Stage 1 for a model: the tokens of a text file, streamed, never more than the diagnostic reads.

:func:`read_tokens` decodes the file incrementally and tokenizes a growing prefix until it holds the
tokens asked for, so memory is bounded by the tokens analysed (windows x window length), whatever
the size of the file.  Decoding is strict by default: the first invalid byte of the part read is
an error naming its byte offset, unless the caller chooses another ``encoding`` or ``errors``
handler (those of :func:`codecs.decode`).  A NUL byte means the file is not text and is always an
error.  Only the part of the file that was read is decoded, checked and hashed.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BLOCK_BYTES = 1 << 16
TOKENIZE_MARGIN = 64  # tokens read beyond the count asked for: a cut word is re-tokenized at the cut


class TextError(ValueError):
    """The text input is unusable (missing, not a regular file, not decodable, too short)."""


def check_text_path(path) -> Path:
    """``path`` as a :class:`~pathlib.Path` when it is a readable regular file, else :class:`TextError`."""
    if path is None or str(path) == "":
        raise TextError("--text is empty: give a text file")
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise TextError(f"text file {p} does not exist") from None
    except OSError as err:
        raise TextError(f"text file {p} cannot be read: {err.strerror}") from None
    if stat.S_ISDIR(mode):
        raise TextError(f"text file {p} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = "a character device" if stat.S_ISCHR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise TextError(f"text file {p} is {kind}, not a regular file")
    if not os.access(p, os.R_OK):
        raise TextError(f"text file {p} is not readable")
    return p


def check_codec(encoding: str, errors: str) -> None:
    """:class:`TextError` unless ``encoding`` and ``errors`` name a text codec and an error handler."""
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        raise TextError(f"unknown text encoding {encoding!r}") from None
    if not getattr(info, "_is_text_encoding", True):
        raise TextError(f"{encoding!r} is not a text encoding")
    try:
        codecs.lookup_error(errors)
    except LookupError:
        raise TextError(f"unknown decoding error handler {errors!r} (use strict, replace or ignore)") from None


@dataclass
class TextRead:
    """Tokens read from a file and what was read to get them."""

    tokens: np.ndarray  # (count,) int64 token ids, fewer when the file ends first
    bytes_read: int
    sha256: str  # of the bytes read
    exhausted: bool  # the whole file was read


def read_tokens(path, tokenizer, count: int, *, encoding: str = "utf-8", errors: str = "strict") -> TextRead:
    """The first ``count`` tokens of the text file ``path`` (``tokenizer.encode`` on a prefix).

    Reads blocks of :data:`BLOCK_BYTES`; the prefix is re-tokenized only when its length doubles,
    so the work is linear in the text read.  Raises :class:`TextError` for an invalid byte (with its
    offset), a NUL byte, or an empty text.
    """
    path = check_text_path(path)
    check_codec(encoding, errors)
    if count < 1:
        raise TextError(f"token count must be >= 1, got {count}")
    decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
    digest = hashlib.sha256()
    parts: list[str] = []
    chars = offset = 0
    target = count + TOKENIZE_MARGIN  # characters: at least one per token
    tokens = np.zeros(0, dtype=np.int64)
    exhausted = False
    with open(path, "rb") as handle:
        while True:
            block = handle.read(BLOCK_BYTES)
            exhausted = not block
            digest.update(block)
            text = _decode(decoder, block, exhausted, offset, path, encoding)
            _check_no_nul(text, block, offset, path)
            offset += len(block)
            parts.append(text)
            chars += len(text)
            if chars >= target or exhausted:
                joined = "".join(parts)
                parts = [joined]
                tokens = np.asarray(tokenizer.encode(joined), dtype=np.int64)
                if len(tokens) >= count + TOKENIZE_MARGIN or exhausted:
                    break
                target = 2 * chars
    if not any(p.strip() for p in parts):
        raise TextError(f"text file {path} is empty" if offset == 0 else
                        f"text file {path} holds only white space in the {offset} bytes read")
    return TextRead(tokens[:count], offset, digest.hexdigest(), exhausted)


def _decode(decoder, block: bytes, final: bool, offset: int, path: Path, encoding: str) -> str:
    pending = len(decoder.getstate()[0])  # bytes of an incomplete character kept from the last block
    try:
        return decoder.decode(block, final=final)
    except UnicodeDecodeError as err:  # err.object is the pending bytes followed by this block
        start = offset - pending + err.start
        bad = err.object[err.start:err.start + 1].hex()
        raise TextError(f"text file {path} is not valid {encoding}: byte 0x{bad} at offset {start} "
                        f"({err.reason}); choose the file's encoding with --encoding, or --errors replace "
                        "to substitute U+FFFD for invalid bytes") from None


def _check_no_nul(text: str, block: bytes, offset: int, path: Path) -> None:
    position = text.find("\0")
    if position >= 0:
        at = block.find(b"\0")
        where = f"at byte offset {offset + at}" if at >= 0 else "in the text"
        raise TextError(f"text file {path} contains a NUL byte {where}: it is binary, not text")
