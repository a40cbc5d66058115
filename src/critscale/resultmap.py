"""The map of the book's results: each result's label, the chapter that states it, the functions that
implement it and the tests that check it, read from the table in the package docstring (``critscale.__doc__``).

The docstring is the one place the map is written; ``tests/test_results_table.py`` checks it against the
chapters and the tests, and the book's reproducibility page prints it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    label: str               # the prf label in the chapter, e.g. "thm-02-sandwich"
    chapter: str             # "01" .. "11"
    functions: tuple[str, ...]  # relative to critscale, e.g. "bounds.free_energy_bounds"
    tests: tuple[str, ...]      # "file.py::test_name" in tests/


def results(doc: str | None = None) -> list[Result]:
    """The rows of the results table of ``doc`` (default ``critscale.__doc__``), continuation lines merged.

    The table is a reStructuredText simple table of four columns; a row whose first cell is empty continues
    the row above.  Raises ``ValueError`` when ``doc`` holds no such table.
    """
    if doc is None:
        import critscale

        doc = critscale.__doc__ or ""
    lines = doc.splitlines()
    borders = [i for i, line in enumerate(lines) if line.startswith("====")]
    if len(borders) != 3:
        raise ValueError(f"the results table needs three border lines, found {len(borders)}")
    starts = [i for i, ch in enumerate(lines[borders[0]]) if ch == "=" and (i == 0 or lines[borders[0]][i - 1] == " ")]
    if len(starts) != 4:
        raise ValueError(f"the results table needs four columns, found {len(starts)}")
    rows: list[list] = []
    for line in lines[borders[1] + 1:borders[2]]:
        cells = [line[start:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                 for k, start in enumerate(starts)]
        if cells[0]:
            rows.append([cells[0], cells[1], [], []])
        elif not rows:
            raise ValueError("the results table starts with a continuation line")
        rows[-1][2] += [f.strip() for f in cells[2].split(",") if f.strip()]
        rows[-1][3] += [t.strip() for t in cells[3].split(",") if t.strip()]
    return [Result(label, chapter, tuple(functions), tuple(tests)) for label, chapter, functions, tests in rows]
