"""A parameter file must name only parameters the notebook has, with the defaults' types.

papermill injects any key it is given and only logs "Passed unknown parameter", so a
typo (``rowz: 16``) would run the notebook with its default and pass.  ``check`` refuses
such a file before anything runs, naming the file and the key.
"""

from __future__ import annotations

from numbers import Integral, Real
from pathlib import Path
from typing import Any

import yaml


class ParameterError(ValueError):
    """A parameter file that does not fit its notebook's parameters cell."""


def parameters_cell(nb) -> Any:
    """The one code cell tagged ``parameters`` (``ParameterError`` if there is not exactly one)."""
    cells = [c for c in nb.cells
             if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{len(cells)} cells tagged 'parameters' (exactly one is needed)")
    return cells[0]


def defaults(source: str) -> dict[str, Any]:
    """The parameters and their default values, as papermill sees the cell's assignments."""
    from papermill.translators import PythonTranslator

    names = [p.name for p in PythonTranslator.inspect({"source": source})]
    namespace: dict[str, Any] = {}
    exec(compile(source, "<parameters cell>", "exec"), namespace)  # the project's own assignments
    return {name: namespace[name] for name in names}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Integral):
        return "int"
    if isinstance(value, Real):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


def _fits(value: Any, default: Any) -> bool:
    """Whether ``value`` may replace ``default`` (an int may stand for a float)."""
    if default is None:
        return True
    want, have = _kind(default), _kind(value)
    if want == "float":
        return have in ("int", "float")
    if want != have:
        return False
    if want == "list" and default:
        return all(any(_fits(v, d) for d in default) for v in value)
    return True


def check(values: dict[str, Any], params: dict[str, Any], where: str) -> None:
    """Raise ``ParameterError`` for the first key of ``values`` that ``params`` lacks or mistypes."""
    if not isinstance(values, dict):
        raise ParameterError(f"{where}: not a mapping of parameter names to values")
    for key, value in values.items():
        if key not in params:
            raise ParameterError(f"{where}: unknown parameter '{key}' "
                                 f"(the notebook's parameters: {', '.join(params)})")
        if not _fits(value, params[key]):
            raise ParameterError(f"{where}: parameter '{key}' is {_kind(value)} {value!r}, "
                                 f"but the notebook's default is {_kind(params[key])} {params[key]!r}")


def load_file(path: Path, where: str | None = None) -> dict[str, Any]:
    """The parameter file's mapping (an empty file is an empty mapping); errors name it as ``where``."""
    where = where or str(path)
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParameterError(f"{where}: not valid YAML ({' '.join(str(err).split())})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ParameterError(f"{where}: cannot be read ({err.__class__.__name__}: {err})") from None
    return values
