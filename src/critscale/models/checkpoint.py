"""Checks of a checkpoint: its files before transformers reads them, and what transformers loaded from them.

Each check raises one line naming the file and the problem (:mod:`.errors`).  Weights are read from
safetensors only; a pickle (``pytorch_model.bin``) is refused without being opened.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import HOW_TO_PROVIDE, InvalidCheckpointError, ModelNotFoundError, one_line

SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")


def read_config(path: Path) -> dict:
    """``config.json`` of a directory as a dict with a ``model_type``, or one line saying what is wrong with it."""
    file = path / "config.json"
    if not file.is_file():
        raise ModelNotFoundError(f"{path} has no config.json, so it is not a saved transformers model. "
                                 + HOW_TO_PROVIDE)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidCheckpointError(f"{file} cannot be read: {err.strerror or one_line(err)}") from err
    except UnicodeDecodeError as err:
        raise InvalidCheckpointError(f"{file} is invalid: not UTF-8 text (byte {err.start})") from err
    except json.JSONDecodeError as err:
        raise InvalidCheckpointError(f"{file} is invalid JSON: {err.msg} at line {err.lineno}, "
                                     f"column {err.colno}") from err
    if not isinstance(data, dict):
        raise InvalidCheckpointError(f"{file} is invalid: a JSON {type(data).__name__}, not an object")
    if not isinstance(data.get("model_type"), str):
        raise InvalidCheckpointError(f"{file} is invalid: it names no model_type")
    return data


def safetensors_files(path: Path) -> list[Path]:
    """The directory's safetensors files; refuses pickles unopened."""
    single, index = (path / f for f in SAFETENSORS_FILES)
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise InvalidCheckpointError(f"{index} is invalid: {one_line(err)}") from err
        for name in names:
            _check_shard_name(index, name)
            if not (path / name).is_file():
                raise InvalidCheckpointError(f"{index} lists {name}, which is missing")
        return [path / name for name in names]
    if any((path / f).is_file() for f in PICKLE_FILES):
        raise InvalidCheckpointError(
            f"{path} holds its weights only as pytorch_model.bin, a pickle that can run code when read; it was "
            "not opened: convert it to model.safetensors on a machine you trust "
            "(from_pretrained(DIR).save_pretrained(DIR) writes safetensors)")
    raise ModelNotFoundError(f"{path} has a config.json but no weights (model.safetensors). " + HOW_TO_PROVIDE)


def _check_shard_name(index: Path, name) -> None:
    """A shard is named by its file name in the model directory: no folder, no ``..``, no absolute path.

    Anything else would read (and leave unhashed in the run record) weights from outside the directory.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise InvalidCheckpointError(f"{index} lists the shard {name!r}, which is not a file name in the model "
                                     "directory (shards outside it are refused)")


def check_readable(file: Path) -> None:
    """Refuse a file that cannot be opened for reading, with the operating system's reason."""
    try:
        with open(file, "rb") as handle:
            handle.read(1)
    except OSError as err:
        raise InvalidCheckpointError(f"{file} cannot be read: {err.strerror or one_line(err)}") from err


def check_safetensors(file: Path) -> None:
    """Read the file's header: refuses an unreadable, empty, truncated or corrupt safetensors file."""
    from safetensors import SafetensorError, safe_open

    check_readable(file)
    if file.stat().st_size == 0:
        raise InvalidCheckpointError(f"{file} is empty (0 bytes)")
    try:
        with safe_open(str(file), framework="pt") as handle:
            handle.keys()
    except SafetensorError as err:
        raise InvalidCheckpointError(f"{file} is not a valid safetensors file (truncated or corrupt): "
                                     f"{one_line(err)}") from err


def check_loading_info(info: dict, source: str, config_name: str = "config.json") -> None:
    """Refuse weights that do not match the config: missing, unexpected or differently shaped tensors."""
    prefix = f"{source}: {config_name} does not match the weights:"
    mismatched = sorted(info.get("mismatched_keys") or [], key=lambda m: m[0])
    if mismatched:
        key, in_weights, in_config = mismatched[0]
        raise InvalidCheckpointError(f"{prefix} {len(mismatched)} tensors differ in shape, e.g. {key} is "
                                     f"{list(in_weights)} in the weights and {list(in_config)} for the config")
    for what, keys in (("missing from the weights", info.get("missing_keys")),
                       ("in the weights but not in the config", info.get("unexpected_keys"))):
        if keys:
            raise InvalidCheckpointError(f"{prefix} {len(keys)} tensors {what}, e.g. {sorted(keys)[0]}")
    if info.get("error_msgs"):
        raise InvalidCheckpointError(f"{prefix} {one_line(info['error_msgs'][0])}")


def file_holding(name: str, files) -> Path | None:
    """The safetensors file (of ``files``) whose header lists tensor ``name``, else None."""
    from safetensors import safe_open

    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            if name in handle.keys():
                return Path(file)
    return None


def check_finite(model, source: str, files=()) -> None:
    """Refuse weights holding NaN or infinity (offloaded weights, on the meta device, are not read).

    A NaN or infinite entry makes a tensor's sum non-finite, so a finite sum clears the tensor
    at the cost of one reduction; a non-finite sum (possibly overflow) is confirmed entry by entry.
    The message names the file of ``files`` (the safetensors files read) that holds the weight, else ``source``.
    """
    import torch

    for name, p in model.named_parameters():
        if p.device.type == "meta" or bool(torch.isfinite(p.sum())):
            continue
        if not bool(torch.isfinite(p).all()):
            raise InvalidCheckpointError(f"{file_holding(name, files) or source}: weight {name} holds NaN or "
                                         "infinite values")
