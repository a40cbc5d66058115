"""The result map (critscale.page.resultmap.RESULTS) names labels, functions and tests that exist.

The table maps each labelled result of chapters 01-11 to its chapter, its function and its test.  This test
fails when a result is added to a chapter without a row, when a label, function or test is renamed, or when a
row names the wrong chapter.
"""

import re
from pathlib import Path

import pytest

import critscale
from critscale.page import resultmap

ROOT = Path(__file__).resolve().parents[1]


def table_rows():
    """(label, chapter, functions, tests) per result, continuation lines merged."""
    return [[r.label, r.chapter, list(r.functions), list(r.tests)] for r in resultmap.results()]


def test_the_map_is_data_not_read_from_the_package_docstring(monkeypatch):
    """resultmap used to parse the table of critscale.__doc__ by column positions (the package's only import of
    its own docstring): emptying the docstring emptied the map or raised."""
    before = resultmap.results()
    monkeypatch.setattr(critscale, "__doc__", "")
    assert resultmap.results() == before and len(before) == 24
    assert "import critscale" not in (ROOT / "src" / "critscale" / "page" / "resultmap.py").read_text()
    assert all(isinstance(r, resultmap.Result) and r.functions and r.tests for r in resultmap.RESULTS)
    assert len({r.label for r in resultmap.RESULTS}) == len(resultmap.RESULTS)


def notebook_labels():
    """label -> chapter number ("01".."11") of every prf directive in the theory chapters."""
    labels = {}
    for path in sorted((ROOT / "notebooks").glob("*.md")):
        chapter = path.name[:2]
        if not ("01" <= chapter <= "11"):
            continue
        for label in re.findall(r"^:label: (\S+)", path.read_text(), flags=re.MULTILINE):
            labels[label] = chapter
    return labels


def resolve(dotted):
    obj = critscale
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_labelled_result_has_a_row_with_existing_functions_and_tests():
    rows = table_rows()
    labels = notebook_labels()
    assert {row[0] for row in rows} == set(labels), "results table and chapter labels differ"
    for label, chapter, functions, tests in rows:
        assert labels[label] == chapter, f"{label} is stated in chapter {labels[label]}, not {chapter}"
        assert functions and tests, f"{label} needs a function and a test"
        for name in functions:
            assert callable(resolve(name)) or isinstance(resolve(name), dict), f"{label}: {name} is not callable"
        for test in tests:
            file, name = test.split("::")
            text = (ROOT / "tests" / file).read_text()
            assert re.search(rf"^def {name}\(", text, flags=re.MULTILINE), f"{label}: {test} does not exist"


def test_blank_missing_empties_missing_cells_of_float_columns_without_a_dtype_warning():
    """``fillna("")`` on a float column warns (pandas 4 will raise); the helper must not, and must keep values."""
    import warnings

    import pandas as pd

    from critscale.page.tables import blank_missing

    df = pd.DataFrame({"x": [1.5, float("nan")], "s": ["a", None]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = blank_missing(df)
    assert out["x"].tolist() == [1.5, ""] and out["s"].tolist() == ["a", ""]
