"""Numbers, tables and figures reach the book's pages only through this module.

``record(key, value)`` glues ``value`` into the executing notebook (so the page can
write ``{glue:text}`key:.3f```) and stores it in the notebook's results file
``$CRITSCALE_RESULTS_DIR/<notebook>.json``, which the tests read.  A pandas DataFrame
is glued as a publication table (``critscale.page.tables``: significant digits, math in
headers and cells, no index), in a form that both the HTML and the LaTeX builders
typeset.  ``record_figure`` glues a matplotlib figure as SVG (HTML) plus a 200-dpi PNG
(PDF) and saves both beside the results.

The build driver (``python -m critscale.bookbuild notebook``) sets ``CRITSCALE_NOTEBOOK``
(the notebook's stem) and points ``CRITSCALE_RESULTS_DIR`` at a staging folder that is
moved into ``build/results/<profile>`` only when the notebook succeeds.  Outside the
build (an interactive session, a downloaded notebook) results go to
``build/results/interactive/interactive.json`` under the working directory.
"""

from __future__ import annotations

import base64
import json
import math
import os
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np

GLUE_PREFIX = "application/papermill.record/"  # the mime prefix myst-nb's glue reads
FIGURE_DPI = 200  # print resolution of the PNG (the PDF uses it; the HTML uses the SVG)
SVG_MAX_BYTES = 1_500_000  # larger SVGs (dense scatter plots) are replaced by the PNG alone
# The glued figure's metadata key holding its phone layout (``narrowfigure``), a mime bundle of one image,
# which the book's ``critscale.bookbuild.figurelayouts`` shows on narrow screens.
NARROW_METADATA = "critscale/narrow"


def _notebook_name() -> str:
    return os.environ.get("CRITSCALE_NOTEBOOK", "interactive")


def results_dir() -> Path:
    """Folder that receives ``<notebook>.json`` and ``figures/<notebook>/``."""
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
    if _is_dataframe(value):
        return {"columns": [str(c) for c in value.columns],
                "records": plain(value.to_dict(orient="records"))}
    return value


def _is_dataframe(value: Any) -> bool:
    return hasattr(value, "to_dict") and hasattr(value, "columns")


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


def glue(key: str, obj: Any, display: bool = False, bundle: dict | None = None,
         extra_metadata: dict | None = None) -> None:
    """Store display data under ``key`` in the cell output (myst-nb's glue format).

    ``bundle`` (mime type -> data) replaces IPython's own formatting of ``obj``;
    ``extra_metadata`` is added to the output's metadata (``NARROW_METADATA``: a figure's phone layout).
    """
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    metadata: dict = {}
    if bundle is None:
        bundle, metadata = format_display_data(obj)
    prefix = "" if display else GLUE_PREFIX
    ipy_display(
        {prefix + k: v for k, v in bundle.items()},
        raw=True,
        metadata={"scrapbook": {"name": key, "mime_prefix": prefix},
                  **{prefix + k: v for k, v in metadata.items()}, **(extra_metadata or {})},
    )


def with_reader_names(frame: Any) -> Any:
    """The table as the reader sees it: registry names of families (``gauss``) as reader names (``Gaussian``,
    ``critscale.page.reader_names``) in a ``family`` column and in every column whose cells are all registry names
    (chapter 10's "closest family", chapter 11's "rows of"); other cells, and the records stored for the tests,
    unchanged."""
    from .reader_names import reader_name

    def name(cell: Any) -> Any:
        try:
            return reader_name(cell) if isinstance(cell, str) else cell
        except ValueError:  # not a registry name: already a reader's word
            return cell

    def registry(cell: Any) -> bool:
        try:
            return isinstance(cell, str) and bool(reader_name(cell))
        except ValueError:
            return False

    def all_family_names(column: Any) -> bool:
        cells = [cell for cell in column if cell is not None and cell == cell]
        return bool(cells) and all(registry(cell) for cell in cells)

    unique = frame.columns.is_unique
    columns = [c for c in frame.columns if c == "family" or (unique and all_family_names(frame[c]))]
    if not columns:
        return frame
    shown = frame.copy()
    for column in columns:
        shown[column] = [name(cell) for cell in frame[column]]
    return shown


def record(key: str, value: Any, display: bool = False, digits: int = 4, text_digits: int | None = None) -> None:
    """Glue ``value`` into the page under ``key`` and write it to the results file.

    Returns nothing, so a cell that ends with ``record(...)`` prints nothing.
    A pandas DataFrame is glued as a publication table (``critscale.page.tables.table_bundle``:
    ``digits`` significant digits, ``\\(...\\)`` typeset as math, no row index, a ``family``
    column in reader names) and stored in full as records, with the registry names.  A string is glued as text and as markdown (``{glue:md}``).
    With ``text_digits``, a number is also recorded as ``<key>_text``, written as prose writes
    numbers (``critscale.page.tables.format_number(value, text_digits, plain=True)``: ``2.9×10⁻¹²``,
    never ``2.9e-12``), for ``{glue:text}`<key>_text```.
    """
    value_plain = plain(value)
    if text_digits is not None:
        from .tables import format_number

        if not isinstance(value_plain, Real) or isinstance(value_plain, bool):
            raise ValueError(f"record {key!r}: text_digits needs a number, got {type(value_plain).__name__}")
        record(f"{key}_text", format_number(value_plain, text_digits, plain=True))
    if _is_dataframe(value):
        from .tables import table_bundle

        glue(key, value, display=display, bundle=table_bundle(with_reader_names(value), digits=digits))
    elif isinstance(value_plain, str):  # also as markdown, for {glue:md} (sentences built from the data)
        from IPython.core.formatters import format_display_data

        glue(key, value_plain, display=display,
             bundle={**format_display_data(value_plain)[0], "text/markdown": value_plain})
    else:
        glue(key, value_plain, display=display)
    _store(key, value_plain)


def record_numbers(numbers: dict[str, Any], text_digits: dict[str, int] | None = None) -> None:
    """Record the numbers a page states, given as one table of names and values: :func:`record` of each item of
    ``numbers`` in order, with ``text_digits[key]`` for the keys it names.

    A key of ``text_digits`` that ``numbers`` lacks is a ``ValueError`` raised before anything is recorded.
    """
    text_digits = dict(text_digits or {})
    unknown = sorted(set(text_digits) - set(numbers))
    if unknown:
        raise ValueError(f"record_numbers: text_digits names keys that are not among the numbers: {', '.join(unknown)}")
    for key, value in numbers.items():
        record(key, value, text_digits=text_digits.get(key))


def record_figure(key: str, fig, close: bool = True) -> None:
    """Glue a matplotlib figure (SVG and a 200-dpi PNG) and save both beside the results.

    The HTML shows the SVG (or the PNG when the SVG exceeds ``SVG_MAX_BYTES``), the PDF
    the PNG.  The smallest text of the figure at page width is stored too
    (``figure_text_pt``), so the tests can hold every figure to a readable size, and both
    files carry the smallest text size of the figure itself in their description
    (``plotting.text_size_description``), so that a check of the rendered page can tell
    how big that text is shown.
    The figure is also saved in its phone layout (``narrowfigure.one_column``: its panels in one
    column ``NARROW_FIGURE_WIDTH_IN`` wide, text at its own size) as ``<key>.narrow.svg`` (or ``.png``),
    glued in the output's metadata under ``NARROW_METADATA``, which narrow screens show instead.
    A figure that has no phone layout (``narrowfigure`` says why) is glued without one and the reason is
    stored under ``figure_layout_problems``, which the book's tests report (``tests/test_book_conventions.py``).
    """
    import io

    import matplotlib.pyplot as plt

    from .plotting import fit_to_column, min_text_size, min_text_size_at_page_width, text_size_description

    folder = results_dir() / "figures" / _notebook_name()
    folder.mkdir(parents=True, exist_ok=True)
    fit_to_column(fig)  # shown at its own size in the HTML column, text unscaled
    described = {"Description": text_size_description(min_text_size(fig))}  # read by the browser check
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=FIGURE_DPI, bbox_inches="tight", facecolor="white", metadata=described)
    (folder / f"{key}.png").write_bytes(png.getvalue())
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", bbox_inches="tight", facecolor="white", metadata={"Date": None, **described})
    bundle = {"image/png": base64.b64encode(png.getvalue()).decode("ascii"),
              "text/plain": repr(fig)}
    files = {"png": f"figures/{_notebook_name()}/{key}.png"}
    if len(svg.getvalue()) <= SVG_MAX_BYTES:
        (folder / f"{key}.svg").write_bytes(svg.getvalue())
        bundle["image/svg+xml"] = svg.getvalue().decode("utf-8")
        files["svg"] = f"figures/{_notebook_name()}/{key}.svg"
    try:
        narrow_bundle, files["narrow"] = _save_narrow(fig, folder / key)
    except ValueError as err:  # the page shows the wide layout alone; the tests name the figure and the reason
        narrow_bundle = None
        _store(key, str(err), section="figure_layout_problems")
    glue(key, fig, display=False, bundle=bundle,
         extra_metadata={NARROW_METADATA: narrow_bundle} if narrow_bundle else None)
    _store(key, files, section="figures")
    _store(key, round(min_text_size_at_page_width(fig), 2), section="figure_text_pt")
    if close:
        plt.close(fig)


def _save_narrow(fig, stem: Path) -> tuple[dict, str]:
    """Save ``fig`` in its phone layout beside the wide files: (its one-image mime bundle, its path in the results)."""
    import io

    from .narrowfigure import one_column
    from .plotting import min_text_size, text_size_description

    with one_column(fig):
        described = {"Description": text_size_description(min_text_size(fig))}
        svg = io.BytesIO()
        fig.savefig(svg, format="svg", bbox_inches="tight", facecolor="white", metadata={"Date": None, **described})
        if len(svg.getvalue()) <= SVG_MAX_BYTES:
            path, bundle = stem.with_name(f"{stem.name}.narrow.svg"), {"image/svg+xml": svg.getvalue().decode("utf-8")}
            path.write_bytes(svg.getvalue())
        else:
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=FIGURE_DPI, bbox_inches="tight", facecolor="white", metadata=described)
            path, bundle = stem.with_name(f"{stem.name}.narrow.png"), {"image/png": base64.b64encode(png.getvalue()).decode("ascii")}
            path.write_bytes(png.getvalue())
    return bundle, f"figures/{_notebook_name()}/{path.name}"


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
