"""Load a GPT-2-family causal language model and its tokenizer, offline-safe.

A model is named by a hub name (``"gpt2"``, ``"distilgpt2"``) or a local directory
written by ``save_pretrained``.  When no name is given, ``$CRITSCALE_GPT2`` is used.
``HF_HUB_OFFLINE=1`` is honoured: a hub name that is not in the local cache then fails
at once (instead of retrying the network for 20-40 s) with a :class:`ModelNotFoundError`
that says how to provide the weights.

"GPT-2-like" means what the q/k capture of :mod:`critscale.models.capture` needs:
``config.model_type == "gpt2"`` and blocks ``model.transformer.h[i].attn.c_attn``
whose output is the fused ``[q | k | v]`` projection.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "CRITSCALE_GPT2"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json",
                "pytorch_model.bin", "pytorch_model.bin.index.json")

HOW_TO_PROVIDE = (
    "Provide GPT-2 weights in one of these ways: (1) on a machine with internet, run "
    "`huggingface-cli download gpt2` (or `GPT2LMHeadModel.from_pretrained('gpt2')`) so the hub cache "
    "holds them, then copy ~/.cache/huggingface here; (2) pass a directory written by "
    "`model.save_pretrained(DIR)` (config.json + model.safetensors), e.g. `--model DIR` or "
    f"`{ENV_VAR}=DIR`; (3) train the book's own model with `critscale.gpt2.train`."
)


class ModelNotFoundError(ValueError):
    """The model's weights (or its config, or its tokenizer) are not available here."""


class NotGPT2LikeError(ValueError):
    """The model exists but is not a GPT-2-family causal LM with a fused q/k/v projection."""


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

    model: object  # transformers.GPT2LMHeadModel, in eval mode
    tokenizer: object  # ByteTokenizer or a transformers tokenizer
    checkpoint: str  # hub name or resolved directory
    kind: str  # "hub" or "directory"

    @property
    def config(self):
        return self.model.config

    # Architecture-neutral shape of the model: what the diagnostic reads (never config.n_* directly).
    @property
    def n_layers(self) -> int:
        return int(self.config.n_layer)

    @property
    def n_heads(self) -> int:
        """Query heads per layer (the diagnostic's heads)."""
        return int(self.config.n_head)

    @property
    def head_dim(self) -> int:
        return int(self.config.n_embd // self.config.n_head)

    @property
    def context(self) -> int:
        """The longest sequence the model accepts (its trained context)."""
        return int(self.config.n_positions)

    def describe(self) -> str:
        c = self.config
        n_params = sum(p.numel() for p in self.model.parameters())
        return (f"{_display_path(self.checkpoint)} ({self.kind}; {c.n_layer} layers x {c.n_head} heads, "
                f"width {c.n_embd}, context {c.n_positions}, vocabulary {c.vocab_size}, "
                f"{n_params:,} parameters, "
                f"tokenizer {getattr(self.tokenizer, 'name', None) or getattr(self.tokenizer, 'name_or_path', '?')})")


def _display_path(checkpoint: str) -> str:
    """A checkpoint directory inside the working directory is shown relative to it (no machine paths on pages)."""
    try:
        return str(Path(checkpoint).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return checkpoint


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
    """Whether the hub cache already holds ``name``'s config and weights (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        return False
    return any(isinstance(try_to_load_from_cache(name, f), str) for f in WEIGHT_FILES)


def _check_gpt2_config(config, source: str) -> None:
    model_type = getattr(config, "model_type", None)
    if model_type != "gpt2":
        raise NotGPT2LikeError(
            f"{source} is a {model_type!r} model, not GPT-2-like: the diagnostic needs model_type 'gpt2' "
            "(GPT-2, DistilGPT-2 and models saved from transformers.GPT2LMHeadModel)")
    if getattr(config, "add_cross_attention", False):
        raise NotGPT2LikeError(f"{source} has cross-attention; only causal self-attention is supported")


def _check_gpt2_structure(model, source: str) -> None:
    try:
        blocks = model.transformer.h
        projections = [block.attn.c_attn for block in blocks]
    except AttributeError as err:
        raise NotGPT2LikeError(
            f"{source} has no transformer.h[i].attn.c_attn (the fused GPT-2 q/k/v projection)") from err
    width = model.config.n_embd
    for i, proj in enumerate(projections):
        out_features = getattr(proj, "nf", None) or getattr(proj, "out_features", None)
        if out_features != 3 * width:
            raise NotGPT2LikeError(f"{source}: layer {i}'s c_attn has {out_features} outputs, expected 3 x {width}")


def _directory_checks(path: Path) -> None:
    if not path.is_dir():
        raise ModelNotFoundError(f"model directory {path} does not exist. " + HOW_TO_PROVIDE)
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"{path} has no config.json, so it is not a saved transformers model. "
                                 + HOW_TO_PROVIDE)


def _directory_weights_check(path: Path) -> None:
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise ModelNotFoundError(f"{path} has a config.json but no weights ({' / '.join(WEIGHT_FILES[::2])}). "
                                 + HOW_TO_PROVIDE)


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


def load_model(name_or_dir: str | os.PathLike | None = None, *, device: str = "cpu",
               attn_implementation: str = "sdpa") -> LoadedModel:
    """Load a GPT-2-family model for the diagnostic (theory.md §6 P-13).

    ``attn_implementation="sdpa"`` (default) never materialises the n x n attention
    matrix; the diagnostic reads q and k from hooks instead.  Use ``"eager"`` to compare
    with the model's own attention probabilities (``output_attentions=True``).
    Raises :class:`ModelNotFoundError` or :class:`NotGPT2LikeError` (both ``ValueError``).
    """
    from transformers import AutoConfig, GPT2LMHeadModel

    quiet_transformers()
    source = resolve_source(name_or_dir)
    expanded = Path(os.path.expanduser(source))
    is_dir = expanded.exists() or _looks_like_path(source)
    local_only = True if is_dir else offline()
    if is_dir:
        _directory_checks(expanded)
        source = str(expanded.resolve())
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as err:
        where = "in the local hub cache (HF_HUB_OFFLINE is set)" if local_only else "on the hub or in its cache"
        raise ModelNotFoundError(f"model {source!r} not found {where}. " + HOW_TO_PROVIDE) from err
    _check_gpt2_config(config, source)
    if is_dir:
        _directory_weights_check(expanded)
    try:
        model = GPT2LMHeadModel.from_pretrained(source, local_files_only=local_only,
                                                attn_implementation=attn_implementation)
    except OSError as err:
        raise ModelNotFoundError(f"weights of {source!r} could not be loaded ({err.__class__.__name__}). "
                                 + HOW_TO_PROVIDE) from err
    _check_gpt2_structure(model, source)
    model.to(device).eval()
    tokenizer = load_tokenizer(source, config, local_only=local_only)
    return LoadedModel(model, tokenizer, source, "directory" if is_dir else "hub")
