"""Reading a GGUF file through transformers in seconds rather than minutes.

``transformers`` reads a GGUF file with ``gguf.GGUFReader`` (for the configuration, the weights and the
tokenizer: several times per model).  The reader takes every field of the header, down to each string of
the tokenizer's vocabulary, as a slice of a ``numpy.memmap``, and a memmap's slicing runs Python code on
every slice: Gemma 3's 262,144-token vocabulary (three arrays of 262,144 entries) takes about 45 s per
read on this project's two cores, against 4 s to dequantise all its weights with ``gguf``'s own
``dequantize``.  :class:`FastReader` is the same reader, with the same fields, parts and tensors, whose
slices are taken from a plain ``numpy.ndarray`` view of the same memory map (C-level slicing).
:func:`fast_gguf_reading` installs it as ``gguf.GGUFReader`` (where transformers looks it up at each read)
for the duration of a block, and puts the original back.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np


def _reader_class():
    import gguf

    return gguf.GGUFReader


class _Plain:
    """Mixin of :class:`FastReader`: ``_get`` slices a plain ndarray view of ``self.data``."""

    def _get(self, offset, dtype, count=1, override_order=None):
        plain = self.__dict__.get("_plain")
        if plain is None:  # self.data, the memory map, is set before the first read and never replaced
            plain = self._plain = self.data.view(np.ndarray)
        count = int(count)
        itemsize = np.dtype(dtype).itemsize
        arr = plain[offset:offset + itemsize * count].view(dtype=dtype)[:count]
        return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))


def fast_reader_class():
    """``gguf.GGUFReader`` with C-level slicing of its memory map (module docstring)."""
    base = _reader_class()
    return type("FastReader", (_Plain, base), {"__doc__": _Plain.__doc__})


@contextmanager
def fast_gguf_reading():
    """Within the block, ``gguf.GGUFReader`` is :func:`fast_reader_class`'s reader; restored afterwards."""
    import gguf

    original = gguf.GGUFReader
    gguf.GGUFReader = fast_reader_class() if not issubclass(original, _Plain) else original
    try:
        yield
    finally:
        gguf.GGUFReader = original
