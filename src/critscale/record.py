"""Numbers and figures reach the book's prose only through this module.

``record(key, value)`` glues ``value`` into the executing notebook (so the page can
write ``{glue:text}`key:.3f``) and stores it in the notebook's results file
``$CRITSCALE_RESULTS_DIR/<notebook>.json``, which the tests read.  ``record_figure``
glues a matplotlib figure as a PNG image and saves the PNG next to the results.

The Makefile sets ``CRITSCALE_NOTEBOOK`` (the notebook's stem) and
``CRITSCALE_RESULTS_DIR`` (``build/results/<profile>``) for every papermill run.
Outside the Makefile (an interactive session) results go to
``build/results/interactive/interactive.json``.
"""

from __future__ import annotations

import json
import math
import os
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np

GLUE_PREFIX = "application/papermill.record/"  # the mime prefix myst-nb's glue reads


def _notebook_name() -> str:
    return os.environ.get("CRITSCALE_NOTEBOOK", "interactive")


def results_dir() -> Path:
    """Folder that receives ``<notebook>.json`` and the figures' PNG files."""
    default = Path("build") / "results" / "interactive"
    return Path(os.environ.get("CRITSCALE_RESULTS_DIR", default))


def results_path(notebook: str | None = None) -> Path:
    return results_dir() / f"{notebook or _notebook_name()}.json"


def plain(value: Any) -> Any:
    """Convert numpy/pandas values to plain Python objects (JSON-ready, glue-friendly).

    numpy 2 scalars print as ``np.float64(…)``, which glue's number formatting cannot
    parse, so every scalar is turned into a Python ``float``/``int``/``bool`` first.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas DataFrame
        return {"columns": [str(c) for c in value.columns],
                "records": plain(value.to_dict(orient="records"))}
    return value


def _json_safe(value: Any) -> Any:
    """JSON has no inf/nan: store them as strings that ``load_results`` turns back."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'inf', '-inf', 'nan'
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _store(key: str, value: Any, section: str = "values") -> None:
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("notebook", _notebook_name())
    data.setdefault(section, {})[key] = _json_safe(value)
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def glue(key: str, obj: Any, display: bool = False) -> None:
    """Store ``obj``'s display data under ``key`` in the cell output (myst-nb's glue format)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(obj)
    prefix = "" if display else GLUE_PREFIX
    ipy_display(
        {prefix + k: v for k, v in bundle.items()},
        raw=True,
        metadata={"scrapbook": {"name": key, "mime_prefix": prefix},
                  **{prefix + k: v for k, v in metadata.items()}},
    )


def record(key: str, value: Any, display: bool = False) -> None:
    """Glue ``value`` into the page under ``key`` and write it to the results file.

    Returns nothing, so a cell that ends with ``record(...)`` prints nothing.
    A pandas DataFrame is glued as its HTML table (no row index) and stored as records.
    """
    value_plain = plain(value)
    if hasattr(value, "to_html"):  # a table: glued as HTML without the row index
        from IPython.display import HTML

        # Floats shown to 5 significant digits (the results file keeps them in full); the
        # mathjax_process wrapper lets MathJax typeset \( ... \) inside the cells.
        table_html = value.to_html(index=False, border=0, classes="dataframe",
                                   float_format=lambda v: f"{v:.5g}")
        glue(key, HTML(f'<div class="mathjax_process">{table_html}</div>'), display=display)
    else:
        glue(key, value_plain, display=display)
    _store(key, value_plain)


def record_figure(key: str, fig, close: bool = True) -> None:
    """Glue a matplotlib figure as a PNG image and save the PNG beside the results.

    The kernel must keep IPython's inline backend (never ``MPLBACKEND=Agg``):
    otherwise the figure would be glued as ``<Figure ...>`` text.
    """
    import matplotlib.pyplot as plt

    png_path = results_dir() / "figures" / _notebook_name() / f"{key}.png"
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110, bbox_inches="tight")
    glue(key, fig, display=False)
    _store(key, str(png_path), section="figures")
    if close:
        plt.close(fig)


def load_results(notebook: str, results_folder: str | os.PathLike | None = None) -> dict:
    """Read a notebook's results file back (inf/nan restored), for tests and the landing page."""
    folder = Path(results_folder) if results_folder else results_dir()
    data = json.loads((folder / f"{notebook}.json").read_text())

    def restore(v):
        if isinstance(v, str) and v in ("inf", "-inf", "nan"):
            return float(v)
        if isinstance(v, dict):
            return {k: restore(x) for k, x in v.items()}
        if isinstance(v, list):
            return [restore(x) for x in v]
        return v

    return restore(data)
