"""Stage 1 for any model: queries and keys from arrays, or from an ``.npz`` file (``--qk``).

The file format (also what :func:`validate_qk` accepts from Python):

=========  ===========================================  ===============================================
array      shape and type                               meaning
=========  ===========================================  ===============================================
``q``      ``(layers, heads, windows, T, d_head)``,      queries after every position encoding (rotary
           float16, float32 or float64                  or other), one forward of ``T`` tokens per window
``k``      the same shape and a float type              keys, already expanded to the query heads
                                                        (grouped-query attention: repeat each key head)
``scale``  optional scalar, finite and > 0              logit scale: ``s_ij = scale * q_i . k_j``;
                                                        default ``1/sqrt(d_head)``
``causal`` optional boolean scalar                      whether query ``i`` sees only keys ``j <= i``;
                                                        default true
=========  ===========================================  ===============================================

Any other array name is an error (a misspelt ``scale`` would otherwise be ignored silently).
Each array's npy header is read before its data: an array whose header declares more bytes than its
zip member holds (or fewer: a member that inflates beyond its array), or more than this machine's
memory (:mod:`.budget`), is refused before anything is allocated.
Every value must be finite; ``T`` must be at least :data:`.design.MIN_LENGTH`.
A file holds one forward per window, so it is read with the prefix design (:mod:`.design`).
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from . import budget
from .design import MIN_LENGTH

ARRAYS = ("q", "k", "scale", "causal")
FLOAT_TYPES = (np.float16, np.float32, np.float64)


class QKFileError(ValueError):
    """The q/k input is unusable; the message names the array and the problem."""


@dataclass
class QKArrays:
    """Validated queries and keys, ``(layers, heads, windows, T, d_head)`` each."""

    q: np.ndarray
    k: np.ndarray
    scale: float
    causal: bool

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return tuple(self.q.shape)


def _float_array(value, name: str, where: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.type not in FLOAT_TYPES:
        raise QKFileError(f"{where}: {name} has dtype {arr.dtype}; it must be float16, float32 or float64")
    if arr.ndim != 5:
        raise QKFileError(f"{where}: {name} has shape {arr.shape}; it must be (layers, heads, windows, T, d_head)")
    return arr


def validate_qk(q, k, scale=None, causal=True, *, where: str = "q/k arrays") -> QKArrays:
    """Check ``q``, ``k``, ``scale`` and ``causal`` as the file format above demands."""
    q = _float_array(q, "q", where)
    k = _float_array(k, "k", where)
    if q.shape != k.shape:
        raise QKFileError(f"{where}: q has shape {q.shape} but k has {k.shape}; they must be equal "
                          "(expand grouped key heads to the query heads)")
    layers, heads, windows, T, d = q.shape
    if min(layers, heads, windows, d) < 1:
        raise QKFileError(f"{where}: shape {q.shape} has an empty axis")
    if T < MIN_LENGTH:
        raise QKFileError(f"{where}: windows of T = {T} tokens are too short; the diagnostic needs T >= {MIN_LENGTH}")
    for name, arr in (("q", q), ("k", k)):
        bad = ~np.isfinite(arr)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise QKFileError(f"{where}: {name} has {int(bad.sum())} non-finite values (NaN or inf), "
                              f"the first at index {first}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    else:
        s = np.asarray(scale)
        if s.size != 1 or s.dtype.kind not in "fiu":
            raise QKFileError(f"{where}: scale must be one real number, got {s.dtype} of shape {s.shape}")
        scale = float(s.reshape(()))
        if not (math.isfinite(scale) and scale > 0):
            raise QKFileError(f"{where}: scale must be finite and > 0, got {scale}")
    c = np.asarray(causal)
    if c.size != 1 or c.dtype != np.bool_:
        raise QKFileError(f"{where}: causal must be one boolean, got {c.dtype} of shape {c.shape}")
    return QKArrays(q, k, scale, bool(c.reshape(())))


NPY_MAGIC = b"\x93NUMPY"
HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}
READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError)


@dataclass
class _Member:
    """One array of the archive as its npy header declares it, before its data is read."""

    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype
    header_bytes: int

    @property
    def data_bytes(self) -> int:
        return budget.npy_bytes(self.shape, self.dtype.itemsize)


def _detail(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else "no detail"
    return f"{err.__class__.__name__}: {text}"


def _read_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, where: str) -> _Member:
    """The npy header of member ``info`` (magic, shape, dtype), read without reading the data."""
    try:
        with archive.open(info) as stream:
            version = npy_format.read_magic(stream)
            reader = HEADER_READERS.get(version)
            if reader is None:
                raise QKFileError(f"{where}: array {name} is in npy format {version[0]}.{version[1]}, which holds "
                                  "only structured types; q/k arrays are plain float arrays (npy 1.0 or 2.0)")
            shape, _, dtype = reader(stream)
            header_bytes = stream.tell()
    except QKFileError:
        raise
    except READ_ERRORS as err:
        raise QKFileError(f"{where}: array {name} has no readable npy header ({_detail(err)})") from None
    if dtype.hasobject:
        raise QKFileError(f"{where}: array {name} holds Python objects (dtype {dtype}); they are never loaded")
    return _Member(info, tuple(int(s) for s in shape), dtype, header_bytes)


def _check_sizes(members: dict[str, _Member], where: str) -> None:
    """Each member holds exactly the bytes its header declares, and the arrays fit in this machine's memory."""
    for name, m in members.items():
        held = m.info.file_size - m.header_bytes
        if held != m.data_bytes:
            what = (f"its member holds only {budget.human(held)} (a truncated file or a forged header)"
                    if held < m.data_bytes else
                    f"its member inflates to {budget.human(m.info.file_size)} from {budget.human(m.info.compress_size)}"
                    f", {budget.human(held - m.data_bytes)} more than the array (not an array numpy wrote)")
            raise QKFileError(f"{where}: array {name} declares shape {m.shape} of {m.dtype} "
                              f"({budget.human(m.data_bytes)}) but {what}")
    limit = budget.memory_limit()
    for name, m in members.items():
        if m.data_bytes > limit:
            raise QKFileError(f"{where}: array {name} declares shape {m.shape} of {m.dtype}, "
                              f"{budget.human(m.data_bytes)}; this machine can hold {budget.human(limit)}")
    elements = max(math.prod(m.shape) for m in members.values())
    need = sum(m.data_bytes for m in members.values()) + 2 * elements  # the arrays and the finiteness masks
    if need > limit:
        shapes = " and ".join(f"{name} {members[name].shape}" for name in ("q", "k"))
        raise QKFileError(f"{where}: arrays {shapes} need about {budget.human(need)} of memory to be read and "
                          f"checked; this machine can hold {budget.human(limit)}")


def _open_archive(p: Path) -> zipfile.ZipFile:
    try:
        with open(p, "rb") as f:
            start = f.read(len(NPY_MAGIC))
    except OSError as err:
        raise QKFileError(f"q/k file {p} cannot be read ({_detail(err)})") from None
    if start == NPY_MAGIC:
        raise QKFileError(f"q/k file {p} is a single .npy array, not an .npz archive with arrays q and k")
    try:
        return zipfile.ZipFile(p)
    except READ_ERRORS as err:
        raise QKFileError(f"q/k file {p} is not a readable .npz archive ({_detail(err)})") from None


def load_qk_file(path) -> QKArrays:
    """Read and validate an ``.npz`` file of the format above (:class:`QKFileError` on any problem).

    Every member's npy header is read first: its declared size must be what the member holds
    (``ZipInfo.file_size``) and fit in this machine's memory, before any array is allocated.
    """
    p = Path(path)
    if str(path) == "":
        raise QKFileError("--qk is empty: give an .npz file")
    if not p.exists():
        raise QKFileError(f"q/k file {p} does not exist")
    if not p.is_file():
        raise QKFileError(f"q/k file {p} is {'a directory' if p.is_dir() else 'not a regular file'}, not an .npz file")
    where = f"q/k file {p}"
    with _open_archive(p) as archive:
        infos = {(i.filename[:-4] if i.filename.endswith(".npy") else i.filename): i for i in archive.infolist()}
        names = set(infos)
        missing = [a for a in ("q", "k") if a not in names]
        if missing:
            raise QKFileError(f"{where} has no array {' or '.join(missing)} "
                              f"(arrays present: {', '.join(sorted(names)) or 'none'})")
        unknown = sorted(names - set(ARRAYS))
        if unknown:
            raise QKFileError(f"{where} has unknown arrays {', '.join(unknown)}; "
                              f"the format knows only {', '.join(ARRAYS)}")
        members = {a: _read_header(archive, infos[a], a, where) for a in ARRAYS if a in names}
        _check_sizes(members, where)
        values = {}
        for name, member in members.items():
            try:
                with archive.open(member.info) as stream:
                    values[name] = npy_format.read_array(stream, allow_pickle=False)
            except READ_ERRORS as err:
                raise QKFileError(f"{where}: array {name} cannot be read ({_detail(err)})") from None
    return validate_qk(values["q"], values["k"], values.get("scale"), values.get("causal", True), where=where)
