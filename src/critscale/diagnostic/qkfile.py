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
Every value must be finite; ``T`` must be at least :data:`.design.MIN_LENGTH`.
A file holds one forward per window, so it is read with the prefix design (:mod:`.design`).
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


def load_qk_file(path) -> QKArrays:
    """Read and validate an ``.npz`` file of the format above (:class:`QKFileError` on any problem)."""
    p = Path(path)
    if str(path) == "":
        raise QKFileError("--qk is empty: give an .npz file")
    if not p.exists():
        raise QKFileError(f"q/k file {p} does not exist")
    if not p.is_file():
        raise QKFileError(f"q/k file {p} is {'a directory' if p.is_dir() else 'not a regular file'}, not an .npz file")
    try:
        archive = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise QKFileError(f"q/k file {p} is not a readable .npz archive ({err.__class__.__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else 'no detail'})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise QKFileError(f"q/k file {p} is a single .npy array, not an .npz archive with arrays q and k")
    with archive:
        names = set(archive.files)
        missing = [a for a in ("q", "k") if a not in names]
        if missing:
            raise QKFileError(f"q/k file {p} has no array {' or '.join(missing)} "
                              f"(arrays present: {', '.join(sorted(names)) or 'none'})")
        unknown = sorted(names - set(ARRAYS))
        if unknown:
            raise QKFileError(f"q/k file {p} has unknown arrays {', '.join(unknown)}; "
                              f"the format knows only {', '.join(ARRAYS)}")
        try:
            values = {a: archive[a] for a in names}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            raise QKFileError(f"q/k file {p}: an array cannot be read ({err.__class__.__name__}: {err})") from None
    return validate_qk(values["q"], values["k"], values.get("scale"), values.get("causal", True), where=f"q/k file {p}")
