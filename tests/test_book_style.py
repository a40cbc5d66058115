"""One furniture everywhere: exercises numbered alike, solutions after them, code after the solution.

Read from the notebook sources (no build needed).  Chapter 01, 02, 03 and 13 had an unnumbered
"Exercise" box of another colour (class ``tip``), chapters 09-11 put the exercise's code between
the exercise and its solution, and solutions said "the code is the folded cell below", which the
PDF (where folded code is left out) does not have.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
EXERCISE = re.compile(r"^(:{3,}|`{3,})\{admonition\} (Exercise\b[^\n]*)\n((?::[^\n]*\n)*)", re.M)


def _exercises(path: Path):
    text = path.read_text()
    for match in EXERCISE.finditer(text):
        yield text, match


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_is_numbered_coloured_alike_and_followed_by_its_solution(path):
    chapter = int(path.stem[:2])
    for count, (text, match) in enumerate(_exercises(path), start=1):
        fence, title, options = match.groups()
        number = f"{chapter}.{count}"
        assert re.fullmatch(rf"Exercise {re.escape(number)}: \S.*", title), f"{path.name}: exercise titled {title!r}"
        assert ":class: exercise" in options, f"{path.name}: exercise {number} is not of class exercise"
        rest = text[match.end():]
        closing = re.search(rf"^{fence}\s*$", rest, re.M)
        after = rest[closing.end():]
        solution = re.match(r"\s*(:{3,})\{dropdown\} Solution to exercise ([0-9.]+)\n", after)
        assert solution, f"{path.name}: exercise {number} is not followed at once by its solution dropdown"
        assert solution.group(2) == number, f"{path.name}: exercise {number}'s solution is numbered {solution.group(2)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_text_points_at_a_folded_cell_the_pdf_does_not_have(path):
    text = path.read_text()
    for phrase in ("folded cell below", "folded cell above", "cell above, folded"):
        assert phrase not in text, f"{path.name} says {phrase!r}; the PDF leaves folded code out"


def test_chapter_12_folds_its_test_harness():
    """The numerical check's harness cells (inputs, reference, errors) are folded, the kernels shown."""
    text = (ROOT / "notebooks" / "12_kernels.md").read_text()
    section = text.split("## Numerical check", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", section, re.S)
    assert cells, "no code in chapter 12's numerical check"
    for cell in cells:
        tags = re.search(r"^:tags: \[(.*)\]", cell, re.M)
        assert tags and set(tags.group(1).replace(" ", "").split(",")) & {"hide-input", "remove-input"}, (
            "a harness cell of chapter 12 is shown unfolded: " + cell.strip().splitlines()[0][:80])


def test_exercise_pattern_finds_the_old_unnumbered_box():
    """The check above reads the old chapter-01 box as an exercise and rejects it."""
    old = ":::{admonition} Exercise\n:class: tip\n\ntext\n:::\n\n:::{dropdown} Solution\nx\n:::\n"
    (match,) = EXERCISE.finditer(old)
    assert match.group(2) == "Exercise" and ":class: tip" in match.group(3)
    assert not re.fullmatch(r"Exercise 1\.1: \S.*", match.group(2))
