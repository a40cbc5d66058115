"""Shape an executed notebook for readers: one parameter box, code folded.

papermill leaves two parameter cells on the page: the notebook's defaults and its own
``injected-parameters`` copy.  ``merge_parameters`` rewrites the ``parameters`` cell to
the values this build used (the defaults' comments kept), removes papermill's copy and
collapses the cell under a "parameters of this build" toggle; the cell keeps its
``parameters`` tag, so the downloaded notebook can be rerun with papermill.
``fold_code`` collapses every code cell that shows its code, except cells tagged
``show-input`` and notebooks whose metadata says ``critscale: {fold_code: false}``
(the kernels chapter, where the code is the point).
"""

from __future__ import annotations

import ast
from typing import Any

SHOWN_TAGS = {"show-input"}
HIDDEN_TAGS = {"remove-input", "remove-cell", "hide-input", "hide-cell", "remove_cell"}
PARAMETERS_PROMPT = {"code_prompt_show": "Parameters of this build",
                     "code_prompt_hide": "Hide the parameters"}
CODE_PROMPT = {"code_prompt_show": "Show code", "code_prompt_hide": "Hide code"}


def _tags(cell) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _literal(value: Any) -> str:
    from papermill.translators import PythonTranslator

    return PythonTranslator.translate(value)


def rewrite_assignments(source: str, values: dict[str, Any]) -> str:
    """``source`` with the right-hand side of each top-level ``name = ...`` in ``values`` replaced.

    Comments after a replaced assignment are kept; a multi-line value becomes one line.
    """
    lines = [line.encode() for line in source.split("\n")]  # ast offsets count UTF-8 bytes
    edits = []
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in values):
            edits.append(node)
    for node in reversed(edits):  # bottom-up, so earlier line numbers stay valid
        first, last = node.value.lineno - 1, node.value.end_lineno - 1
        head = lines[first][:node.value.col_offset]
        tail = lines[last][node.value.end_col_offset:]
        lines[first:last + 1] = [head + _literal(values[node.targets[0].id]).encode() + tail]
    return "\n".join(line.decode() for line in lines)


def merge_parameters(nb, params_file: str) -> None:
    """One parameter cell with this build's values, collapsed; papermill's copy removed."""
    injected = nb.metadata.get("papermill", {}).get("parameters", {})
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in _tags(c)]
    if len(cells) != 1:
        raise ValueError(f"{len(cells)} cells tagged 'parameters' (exactly one is needed)")
    cell = cells[0]
    cell.source = (f"# The parameters of this build ({params_file}); rerun with other values:\n"
                   f"# papermill -p NAME VALUE, see the reproducibility page.\n"
                   + rewrite_assignments(cell.source, injected))
    tags = _tags(cell)
    if "hide-input" not in tags:
        tags.append("hide-input")
    cell.metadata["mystnb"] = {**cell.metadata.get("mystnb", {}), **PARAMETERS_PROMPT}
    nb.cells = [c for c in nb.cells if "injected-parameters" not in _tags(c)]


def fold_code(nb) -> int:
    """Collapse every shown code cell (see the module docstring); the number folded."""
    if nb.metadata.get("critscale", {}).get("fold_code", True) is False:
        return 0
    folded = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        tags = set(_tags(cell))
        if tags & (SHOWN_TAGS | HIDDEN_TAGS) or "parameters" in tags:
            continue
        _tags(cell).append("hide-input")
        cell.metadata["mystnb"] = {**CODE_PROMPT, **cell.metadata.get("mystnb", {})}
        folded += 1
    return folded
