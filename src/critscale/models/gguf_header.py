"""The header of a GGUF file, read with a length check before every field and a bound on every count.

A GGUF file (version 2 or 3, little-endian) is: the magic ``GGUF``, the version (uint32), the tensor
count and the metadata count (uint64 each), the metadata (key, value type, value), the tensor infos
(name, dimensions, type, offset), padding to the alignment, then the tensor data.
:func:`read_header` reads all of it but the data and checks that each declared length fits in the
file, each count in the bytes left, each type is known, and each tensor's data lies inside the file.
A truncated or absurd file is an :class:`InvalidCheckpointError` naming the file and the problem, before
``gguf`` or ``transformers`` (whose readers raise ``struct.error`` or allocate what a count declares) see it.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidCheckpointError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 4  # arrays of arrays are allowed by the format; deeper nesting is refused
DEFAULT_ALIGNMENT = 32

# GGUF value type -> struct format of a scalar (8: string, 9: array, handled apart)
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
MIN_VALUE_BYTES = {**{t: struct.calcsize("<" + f) for t, f in SCALARS.items()}, STRING: 8, ARRAY: 12}
MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, smallest value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dimension, type, offset


@dataclass(frozen=True)
class Array:
    """A metadata array: its element type and length (the elements are checked, not kept)."""

    type: int
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: the innermost dimension first
    type: int  # ggml type (gguf.GGMLQuantizationType)
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict = field(repr=False)  # key -> int, float, bool, str or Array
    tensors: tuple[TensorInfo, ...] = field(repr=False)
    data_offset: int = 0
    alignment: int = DEFAULT_ALIGNMENT


class _Cursor:
    """Reads little-endian fields from a buffer, refusing to read past its end."""

    def __init__(self, buffer, path: Path):
        self.buffer, self.path, self.pos, self.size = buffer, path, 0, len(buffer)

    def fail(self, problem: str):
        raise InvalidCheckpointError(f"GGUF file {self.path} is invalid: {problem}")

    def left(self) -> int:
        return self.size - self.pos

    def unpack(self, fmt: str, what: str):
        n = struct.calcsize("<" + fmt)
        if n > self.left():
            self.fail(f"truncated at byte {self.pos} of {self.size}, in {what}")
        value = struct.unpack_from("<" + fmt, self.buffer, self.pos)[0]
        self.pos += n
        return value

    def count(self, what: str, min_bytes: int, where: str) -> int:
        """A uint64 count of items of at least ``min_bytes`` each, which must fit in the bytes left."""
        n = self.unpack("Q", where)
        if n * min_bytes > self.left():
            self.fail(f"{where} declares {n:,} {what}, more than the {self.left():,} bytes left can hold")
        return n

    def string(self, where: str) -> str:
        n = self.count("bytes", 1, f"the length of {where}")
        raw = bytes(self.buffer[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            self.fail(f"{where} is not UTF-8 (byte {err.start})")

    def value(self, kind: int, where: str, depth: int = 0):
        if kind in SCALARS:
            return self.unpack(SCALARS[kind], where)
        if kind == STRING:
            return self.string(where)
        if kind != ARRAY:
            self.fail(f"{where} has value type {kind}, which GGUF does not define (0 to 12)")
        if depth >= MAX_ARRAY_DEPTH:
            self.fail(f"{where} nests arrays more than {MAX_ARRAY_DEPTH} deep")
        element = self.unpack("I", f"the element type of {where}")
        if element not in MIN_VALUE_BYTES:
            self.fail(f"{where} is an array of value type {element}, which GGUF does not define (0 to 12)")
        length = self.count("elements", MIN_VALUE_BYTES[element], f"the array {where}")
        if element in SCALARS:  # fixed size: skip the elements at once
            self.pos += length * MIN_VALUE_BYTES[element]
        else:
            for i in range(length):
                self.value(element, f"element {i} of {where}", depth + 1)
        return Array(element, length)


def _metadata(cursor: _Cursor, count: int) -> dict:
    metadata: dict = {}
    for i in range(count):
        key = cursor.string(f"the key of metadata entry {i}")
        if key in metadata:
            cursor.fail(f"metadata key {key!r} appears twice")
        metadata[key] = cursor.value(cursor.unpack("I", f"the value type of {key!r}"), f"metadata {key!r}")
    return metadata


def _alignment(cursor: _Cursor, metadata: dict) -> int:
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        cursor.fail(f"general.alignment {alignment!r} is not a positive power of two")
    return alignment


def _tensor_info(cursor: _Cursor, i: int) -> tuple[str, tuple[int, ...], int, int, int]:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    name = cursor.string(f"the name of tensor {i}")
    n_dims = cursor.unpack("I", f"the dimension count of tensor {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        cursor.fail(f"tensor {name!r} declares {n_dims} dimensions (GGUF allows 1 to {MAX_DIMS})")
    shape = tuple(cursor.unpack("Q", f"the dimensions of tensor {name!r}") for _ in range(n_dims))
    kind = cursor.unpack("I", f"the type of tensor {name!r}")
    offset = cursor.unpack("Q", f"the offset of tensor {name!r}")
    try:
        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        cursor.fail(f"tensor {name!r} has type {kind}, which ggml does not define")
    n = 1
    for d in shape:
        n *= d
    if n == 0 or shape[0] % block:
        cursor.fail(f"tensor {name!r} has shape {list(shape)}, not a whole number of "
                    f"{GGMLQuantizationType(kind).name} blocks of {block}")
    return name, shape, kind, offset, n // block * block_bytes


def read_header(path: str | Path) -> Header:
    """The checked header of GGUF file ``path`` (see the module docstring); one line naming the file if not valid."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise InvalidCheckpointError(f"GGUF file {path} cannot be read: {err.strerror or err}") from err
    with handle:
        size = handle.seek(0, 2)
        if size == 0:
            raise InvalidCheckpointError(f"GGUF file {path} is empty")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            return _parse(_Cursor(memoryview(buffer), path))


def _parse(cursor: _Cursor) -> Header:
    try:
        head = bytes(cursor.buffer[:4])
        if head != MAGIC:
            raise InvalidCheckpointError(f"{cursor.path} is not a GGUF file: it starts with {head!r}, not {MAGIC!r}")
        cursor.pos = 4
        version = cursor.unpack("I", "the version")
        if version not in VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            kind = "a big-endian file, which is not supported" if swapped in VERSIONS else "not supported"
            cursor.fail(f"GGUF version {version} is {kind} (versions {VERSIONS[0]} and {VERSIONS[1]} are)")
        n_tensors = cursor.unpack("Q", "the tensor count")
        n_kv = cursor.count("metadata entries", MIN_KV_BYTES, "the header")
        if n_tensors * MIN_TENSOR_INFO_BYTES > cursor.left():
            cursor.fail(f"the header declares {n_tensors:,} tensors, more than the {cursor.left():,} bytes left "
                        "can hold")
        metadata = _metadata(cursor, n_kv)
        alignment = _alignment(cursor, metadata)
        infos = [_tensor_info(cursor, i) for i in range(n_tensors)]
        data_offset = -(-cursor.pos // alignment) * alignment
        return Header(version, metadata, _tensors(cursor, infos, data_offset, alignment), data_offset, alignment)
    finally:
        cursor.buffer.release()


def _tensors(cursor: _Cursor, infos: list, data_offset: int, alignment: int) -> tuple[TensorInfo, ...]:
    names: set[str] = set()
    data_bytes = cursor.size - data_offset
    for name, _shape, _kind, offset, nbytes in infos:
        if name in names:
            cursor.fail(f"tensor {name!r} appears twice")
        names.add(name)
        if offset % alignment:
            cursor.fail(f"tensor {name!r} starts at offset {offset}, not a multiple of the alignment {alignment}")
        if offset + nbytes > data_bytes:
            cursor.fail(f"tensor {name!r} needs data up to byte {data_offset + offset + nbytes:,} and the file has "
                        f"{cursor.size:,} bytes (truncated?)")
    return tuple(TensorInfo(*info) for info in infos)
