"""Names of recorded values that carry a number, so the chapters' keys stay consistent.

A recorded key such as ``coll_mean_gauss_c0p5`` must be a plain identifier for the book's glue and
the tests; :func:`key_c` turns a value of :math:`c = \\beta/\\bar\\kappa_n` into its tag.
"""

from __future__ import annotations

from typing import Any

from .._validate import as_number

__all__ = ["key_c"]


def key_c(c: Any) -> str:
    """Tag of a value of ``c`` in recorded keys: ``"c"`` and ``f"{c:g}"`` with the point written ``p``.

    ``key_c(0.5) == "c0p5"``, ``key_c(2.0) == "c2"``, ``key_c(1.25) == "c1p25"`` (chapters 06, 07
    and 08).  ``c`` must be a finite number >= 0.

    Test: ``tests/test_keys.py::test_key_c`` (the keys the chapters record, and distinct tags for the
    chapters' grids of c; ``str(c)`` instead of ``:g`` would give ``c2p0`` and break the tests that
    read ``c2``).
    """
    value = as_number(c, "c", minimum=0)
    return f"c{value:g}".replace(".", "p")
