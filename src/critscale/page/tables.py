"""Publication tables: a DataFrame as the book prints it, in HTML and in the PDF.

``table_bundle(df)`` is the display data that ``cs.record(key, df)`` glues for a table:

- ``text/markdown``: a MyST table that jupyter-book turns into a real table in both the
  HTML (MathJax typesets the math) and the LaTeX/PDF output;
- ``text/plain``: the same cells as aligned text, for consoles.

Cells and headers follow one convention: ``\\(...\\)`` marks math (written as ``$...$``
in the markdown), numbers show ``digits`` significant digits with no exponent notation
(tiny and huge values as ``a \\times 10^{k}``), the row index is never shown.
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any

import numpy as np

MATH = re.compile(r"\\\((.+?)\\\)")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|$#])")
_MATH_OR_CODE = re.compile(r"\\\((.+?)\\\)|(`[^`]+`)")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def format_number(value: Any, digits: int = 4, plain: bool = False) -> str:
    """A number as a table shows it: ``digits`` significant digits, never ``e+00`` notation.

    Integers print in full; floats between ``1e-3`` and ``10**digits`` print in fixed
    notation (``4.958``, ``0.01234``, ``1235``), others as ``\\(1.23 \\times 10^{-5}\\)``,
    or with ``plain`` (text outputs, no math) as ``1.23×10⁻⁵``.
    """
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        if plain:
            return "∞" if value > 0 else "-∞"
        return r"\(\infty\)" if value > 0 else r"\(-\infty\)"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 10**digits:
        exponent = math.floor(math.log10(magnitude))
        decimals = max(digits - 1 - exponent, 0)
        text = f"{value:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    if plain:
        return f"{mantissa}×10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    return rf"\({mantissa} \times 10^{{{int(exponent)}}}\)"


def interval(value: float, low: float, high: float, digits: int = 2) -> str:
    """A value with its interval, set compactly: ``0.520 ± 0.060``, or ``0.520^{+0.061}_{-0.058}`` (math)
    when the two sides differ at ``digits`` significant digits.

    The half-widths keep ``digits`` significant digits and the value is rounded to the same decimal
    place, as a journal prints an estimate with its error.  An empty or undefined interval leaves
    the value alone (``format_number``).
    """
    value, low, high = float(value), float(low), float(high)
    above, below = high - value, value - low
    if not all(map(math.isfinite, (value, above, below))) or min(above, below) < 0 or max(above, below) == 0:
        return format_number(value)
    smallest = min(x for x in (above, below) if x > 0)
    decimals = min(max(digits - 1 - math.floor(math.log10(smallest)), 0), 8)
    centre, up, down = (f"{x:.{decimals}f}" for x in (value, above, below))
    if up == down:
        return f"{centre} ± {up}"
    return rf"\({centre}^{{+{up}}}_{{-{down}}}\)"


def format_cell(value: Any, digits: int = 4, plain: bool = False) -> str:
    """A cell's text: numbers through ``format_number``, everything else as ``str``."""
    if isinstance(value, (Real, np.number, np.bool_)) and not isinstance(value, str):
        return format_number(value, digits, plain)
    if value is None:
        return "n/a"
    return str(value)


def inline_math(text: str) -> str:
    """The words of a table cell for a sentence of prose: each ``\\(..\\)`` becomes ``$..$``, nothing is escaped."""
    return MATH.sub(lambda m: f"${m.group(1)}$", text)


def _markdown_text(text: str) -> str:
    """Markdown for one cell: ``\\(..\\)`` becomes ``$..$``, a code span ```x_1``` stays code (only a ``|`` in it
    escaped, for the table), everything else escaped."""
    parts, last = [], 0
    for match in _MATH_OR_CODE.finditer(text):
        parts.append(_MARKDOWN_SPECIAL.sub(r"\\\1", text[last:match.start()]))
        parts.append(f"${match.group(1)}$" if match.group(1) is not None else match.group(2).replace("|", r"\|"))
        last = match.end()
    parts.append(_MARKDOWN_SPECIAL.sub(r"\\\1", text[last:]))
    return "".join(parts).replace("\n", " ")


def _plain_text(text: str) -> str:
    return MATH.sub(lambda m: m.group(1), text)


def _is_numeric(column) -> bool:
    return column.dtype.kind in "iufb"


def to_markdown(df, digits: int = 4) -> str:
    """The table as MyST markdown (numeric columns right-aligned, no index); a table without rows is one line
    saying so (a header without a body breaks Sphinx's LaTeX writer, and shows nothing in the HTML)."""
    header = [_markdown_text(str(c)) for c in df.columns]
    if len(df) == 0:
        return "*No rows in this build* (columns: " + ", ".join(header) + ").\n"
    align = ["---:" if _is_numeric(df[c]) else ":---" for c in df.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_markdown_text(format_cell(v, digits)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_plain(df, digits: int = 4) -> str:
    """The table as aligned text (math delimiters dropped), for consoles."""
    cells = [[_plain_text(str(c)) for c in df.columns]]
    cells += [[_plain_text(format_cell(v, digits, plain=True)) for v in row] for row in df.itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)


def table_bundle(df, digits: int = 4) -> dict[str, str]:
    """Display data of a publication table (see the module docstring)."""
    return {"text/markdown": to_markdown(df, digits), "text/plain": to_plain(df, digits)}


def blank_missing(df):
    """``df`` with its missing cells as empty strings (a table shows nothing there), whatever the column's dtype."""
    return df.astype(object).where(df.notna(), "")
