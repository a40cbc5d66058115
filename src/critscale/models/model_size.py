"""Bounds on a model before it is built: its sizes from the configuration, against what this machine can hold.

A configuration of a few hundred bytes can declare a model of terabytes (``vocab_size`` 2e9) or of a
million layers (which takes hours to build).  :func:`check_config_sizes` reads the sizes first: each
must be a positive integer and consistent (a width that the heads divide), the layers at most
:data:`MAX_LAYERS`, and the parameters' bytes at most the memory the model will be loaded into
(:func:`memory_limit`).  Each refusal is one line naming the file, the field and its value.
"""

from __future__ import annotations

import os

from .errors import InvalidCheckpointError

MAX_LAYERS = 4096  # the deepest published transformers have about 100 to 200 layers
GIB = 2 ** 30


def physical_memory() -> int:
    """This machine's physical memory in bytes."""
    try:
        import psutil
    except ImportError:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(psutil.virtual_memory().total)


def memory_limit(device_map=None, offload_folder=None) -> tuple[int, str]:
    """Bytes a model can occupy, and what they are: the memory, plus the GPUs' and the offload disk's under a device map."""
    limit, what = physical_memory(), "memory"
    if device_map is None:
        return limit, what
    import torch

    if torch.cuda.is_available():
        limit += sum(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))
        what = "memory and GPU memory"
    if offload_folder is not None:
        import shutil

        folder = os.path.abspath(offload_folder)
        while not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        limit += shutil.disk_usage(folder).free
        what += " and free disk of the offload folder"
    return limit, what


def bytes_per_parameter(config) -> int:
    """The bytes of one parameter in the dtype the configuration declares (float32 when it declares none)."""
    import torch

    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    return dtype.itemsize if isinstance(dtype, torch.dtype) else 4


def readable_size(nbytes: int) -> str:
    """``nbytes`` in GiB, MiB or bytes, whichever reads best."""
    if nbytes >= GIB:
        return f"{nbytes / GIB:,.1f} GiB"
    return f"{nbytes / 2 ** 20:.1f} MiB" if nbytes >= 2 ** 20 else f"{nbytes:,} bytes"


def check_fits(nbytes: int, what: str, where: str, limit: tuple[int, str] | None = None) -> None:
    """Refuse ``nbytes`` (made by ``what``) when they exceed ``limit`` (default: this machine's memory)."""
    size, kind = limit or memory_limit()
    if nbytes > size:
        raise InvalidCheckpointError(f"{where}: {what}: about {readable_size(nbytes)}, more than this machine's "
                                     f"{readable_size(size)} of {kind}")


def check_config_sizes(arch, config, where: str, limit: tuple[int, str] | None = None) -> None:
    """Refuse a configuration whose sizes are not positive integers, are inconsistent, or do not fit (see above)."""
    for name in arch.size_fields + arch.optional_size_fields:
        value = getattr(config, name, None)
        if value is None and name in arch.optional_size_fields:
            continue
        if type(value) is not int or value <= 0:
            raise InvalidCheckpointError(f"{where}: {name} {value!r} is not a positive integer")
    problem = arch.size_problem(config)
    if problem:
        raise InvalidCheckpointError(f"{where}: {problem}")
    layers = arch.shape(config).n_layers
    if layers > MAX_LAYERS:
        raise InvalidCheckpointError(f"{where}: {arch.size_fields[0]} {layers} is more layers than the loader "
                                     f"builds (at most {MAX_LAYERS})")
    terms = arch.parameter_terms(config)
    per_parameter = bytes_per_parameter(config)
    total = sum(n for _, n in terms) * per_parameter
    fields, largest = max(terms, key=lambda term: term[1])
    check_fits(total, f"{fields} make {largest:,} parameters (the model {total // per_parameter:,} at "
                      f"{per_parameter} bytes each)", where, limit)
