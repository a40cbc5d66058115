"""The names a reader sees for the score families, and the one table that maps them to code names.

The library names a family by its registry name (``"gauss"``, ``"ptail3"``, ``"planted_shrink"``,
``"sphere5"``; :func:`critscale.families.get`).  The book's prose, figure legends and table row labels
use the reader name instead: ``reader_name("ptail3")`` is ``"exp(−x³) tail"``, ``reader_name("sphere5")``
is ``"sphere S⁴"``.  ``mapping_table()`` is the markdown table, shown once in the book (the appendix),
that pairs each reader name with its code name and its upper tail.
Reader names contain no comma, so a generated list of them ("a, b and c") reads unambiguously.
"""

from __future__ import annotations

import re

from ..families import STANDARD

READER_NAMES: dict[str, str] = {
    "gauss": "Gaussian",
    "ptail1": "exponential",
    "ptail3": "exp(−x³) tail",
    "logexp": "double exponential",
    "edge": "endpoint singularity",
    "unif": "uniform",
    "sphere3": "sphere S²",
    "sphere5": "sphere S⁴",
    "sphere9": "sphere S⁸",
    "planted": "planted",
    "simplex": "simplex",
    "planted_shrink": "shrinking planted",
}
"""Reader name of each standard family (:data:`critscale.families.STANDARD`)."""

TAILS: dict[str, str] = {
    "gauss": r"$\varphi$, standard normal",
    "ptail1": r"$\bar F(x)=e^{-x}$",
    "ptail3": r"$\bar F(x)=e^{-x^3}$",
    "logexp": r"$\bar F(x)=e^{-e^x}$",
    "edge": r"$\bar F(-u)=e^{-1/u}$",
    "unif": r"uniform on $[0,1]$",
    "sphere3": r"$\langle q,k\rangle$, $k$ uniform on $S^2$",
    "sphere5": r"$\langle q,k\rangle$, $k$ uniform on $S^4$",
    "sphere9": r"$\langle q,k\rangle$, $k$ uniform on $S^8$",
    "planted": r"one score $g=1$ above a uniform bulk on $[-1,0]$",
    "simplex": r"one score $1$ above $n-1$ scores near $\rho=0.5$",
    "planted_shrink": r"planted with margin $1/\log n$",
}
"""The upper tail of each standard family, as the mapping table states it."""

_SUPERSCRIPT = str.maketrans("0123456789.", "⁰¹²³⁴⁵⁶⁷⁸⁹·")
_EXPONENT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_PARAMETRIC = (
    (re.compile(r"ptail(\d+(?:\.\d+)?)"), lambda v: "exp(−√x) tail" if float(v) == 0.5
     else f"exp(−x{_superscript(v)}) tail"),
    (re.compile(r"sphere(\d+)"), lambda v: f"sphere S{str(int(v) - 1).translate(_EXPONENT)}"),
    (re.compile(r"pareto(\d+(?:\.\d+)?)"), lambda v: f"Pareto, α = {float(v):g}"),
)


def _superscript(value: str) -> str:
    return f"{float(value):g}".translate(_SUPERSCRIPT)


def reader_name(name: str) -> str:
    """The reader name of a family given by its registry name (any ``ptail<p>``, ``sphere<d>``, ``pareto<α>``)."""
    if not isinstance(name, str):
        raise ValueError(f"family name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key in READER_NAMES:
        return READER_NAMES[key]
    for pattern, make in _PARAMETRIC:
        match = pattern.fullmatch(key)
        if match:
            return make(match.group(1))
    raise ValueError(f"unknown family {name!r}: no reader name (critscale.page.reader_names.READER_NAMES)")


def code_names() -> tuple[str, ...]:
    """The registry names a reader must not meet outside code: the standard ones and the extra families'."""
    return STANDARD + ("ptail0.5", "pareto1", "pareto2")


def mapping_table() -> str:
    """The markdown table of reader name, code name and upper tail of every standard family."""
    lines = ["| reader name | code name | upper tail |", "|---|---|---|"]
    lines += [f"| {READER_NAMES[name]} | `{name}` | {TAILS[name]} |" for name in STANDARD]
    return "\n".join(lines) + "\n"
