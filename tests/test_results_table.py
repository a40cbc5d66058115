"""The results table of the package docstring (critscale.__doc__) names labels, functions and tests that exist.

The table maps each labelled result of chapters 01-11 to its chapter, its function and its test.  This test
fails when a result is added to a chapter without a row, when a label, function or test is renamed, or when a
row names the wrong chapter.
"""

import re
from pathlib import Path

import critscale

ROOT = Path(__file__).resolve().parents[1]


def table_rows():
    """(label, chapter, functions, tests) per result, continuation lines merged."""
    lines = critscale.__doc__.splitlines()
    borders = [i for i, line in enumerate(lines) if line.startswith("====")]
    assert len(borders) == 3, "the docstring must hold one simple table (three border lines)"
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", lines[borders[0]])]
    rows = []
    for line in lines[borders[1] + 1:borders[2]]:
        cells = [line[start:(spans[k + 1][0] if k + 1 < len(spans) else None)].strip()
                 for k, (start, _) in enumerate(spans)]
        if cells[0]:
            rows.append([cells[0], cells[1], [], []])
        else:
            assert rows, "a continuation line cannot come first"
        rows[-1][2] += [f.strip() for f in cells[2].split(",") if f.strip()]
        rows[-1][3] += [t.strip() for t in cells[3].split(",") if t.strip()]
    return rows


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
