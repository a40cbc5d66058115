"""The PDF (``make pdf PROFILE=ci``) is set like the HTML: its outline, and no box overfull by more than 10 pt.

``-m pdf`` tests read ``build/pdf/ci/_build/latex/``; CI runs them after ``make pdf`` with
CRITSCALE_REQUIRE_PDF=1.  The other tests here check the parsers and the marks on made-up input.
Old behaviour they catch: 259 overfull boxes (102 over 10 pt) in the PDF, and an outline where
"Gaps, ..." was Chapter 3 and the parts were missing.
"""

import json
import os
from pathlib import Path

import pytest

from critscale.bookbuild import latexlog, latexstructure

ROOT = Path(__file__).resolve().parents[1]
LATEX = ROOT / "build" / "pdf" / "ci" / "_build" / "latex"
TOLERANCE_PT = 10.0


def _read(name: str) -> str:
    path = LATEX / name
    if not path.exists():
        if os.environ.get("CRITSCALE_REQUIRE_PDF"):
            pytest.fail(f"{path.relative_to(ROOT)} missing")
        pytest.skip(f"no {path.relative_to(ROOT)}: run `make pdf PROFILE=ci`")
    return path.read_text(encoding="latin-1")


@pytest.mark.pdf
def test_no_box_of_the_pdf_is_overfull_by_more_than_10_pt():
    boxes = [(pt, line) for pt, line in latexlog.overfull_boxes(_read("book.log")) if pt > TOLERANCE_PT]
    assert not boxes, f"{len(boxes)} boxes overfull by more than {TOLERANCE_PT:g} pt, e.g.:\n" + "\n".join(
        line for _, line in sorted(boxes, reverse=True)[:10])


def _parts_and_chapters(entries):
    return [e for e in entries if e[0] in ("part", "chapter")]


@pytest.mark.pdf
def test_pdf_outline_has_the_parts_and_chapter_numbers_of_the_html_toc():
    found = _parts_and_chapters(latexlog.outline(_read("book.out")))
    # the PDF adds its index of results after the bibliography; the HTML has it as a page of its own
    while found and found[-1][2].startswith("Index"):
        found.pop()
    assert found == latexstructure.expected_outline(ROOT)


def test_outline_reader_decodes_hyperref_bookmarks():
    out = ("\\BOOKMARK [-1][-]{part.1}{\\376\\377\\000I\\000\\040\\000F\\000o\\000u}{}% 1\n"
           "\\BOOKMARK [0][-]{section*.3}{\\376\\377\\000W\\000h\\000y}{part.1}% 2\n"
           "\\BOOKMARK [0][-]{chapter.1}{\\376\\377\\000G\\000a\\000p\\000s\\000,\\000\\040\\040\\023}{part.1}% 3\n"
           "\\BOOKMARK [1][-]{section*.4}{Plain}{chapter.1}% 4\n")
    assert latexlog.outline(out) == [("part", None, "Fou"), ("chapter", None, "Why"),
                                     ("chapter", 1, "Gaps, \u2013"), ("section", None, "Plain")]


def test_overfull_reader_takes_hboxes_and_vboxes():
    log = ("Overfull \\hbox (12.5pt too wide) in paragraph at lines 3--4\n"
           "Underfull \\hbox (badness 10000) in paragraph\n"
           "Overfull \\vbox (114.8pt too high) has occurred while \\output is active []\n")
    assert [pt for pt, _ in latexlog.overfull_boxes(log)] == [12.5, 114.8]


def test_expected_outline_numbers_chapters_by_their_notebooks():
    outline = latexstructure.expected_outline(ROOT)
    parts = [title for kind, _, title in outline if kind == "part"]
    assert parts == ["Foundations", "Scaling laws", "Computation", "Reference"]
    numbers = [n for kind, n, _ in outline if kind == "chapter" and n is not None]
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md") if not p.stem.startswith("99_"))
    assert numbers == list(range(1, len(chapters) + 1)) and len(chapters) >= 14  # one number per chapter notebook
    assert ("chapter", 1, "Gaps, the gap-counting function and the accumulation scale") in outline
    assert ("chapter", None, "Bibliography") == outline[-1]


def test_marks_go_before_each_title_and_its_label(tmp_path):
    import nbformat

    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "  - caption: Foundations\n    chapters:\n      - file: reconstruction\n      - file: generated/01_a\n"
        "  - caption: Reference\n    chapters:\n      - file: generated/99_r\n")
    (tmp_path / "intro.md").write_text("# Book\n\n## Introduction\n\ntext\n")
    (tmp_path / "reconstruction.md").write_text("(ch-rec)=\n# What we know\n\nbody\n")
    (tmp_path / "generated").mkdir()
    for name, title in (("01_a", "(ch-a)=\n# Gaps"), ("99_r", "# Reproducibility")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(title + "\n\ntext")])
        nbformat.write(nb, tmp_path / "generated" / f"{name}.ipynb")
    latexstructure.mark(tmp_path)
    assert (tmp_path / "intro.md").read_text().startswith(
        "# Book\n\n```{raw} latex\n\\critscaleunnumbered\n```\n\n## Introduction")
    assert (tmp_path / "reconstruction.md").read_text().startswith(
        "```{raw} latex\n\\part{Foundations}\n\\critscaleunnumbered\n```\n\n(ch-rec)=\n# What we know")
    first = nbformat.read(tmp_path / "generated" / "01_a.ipynb", as_version=4).cells[0].source
    assert first.startswith("```{raw} latex\n\\setcounter{chapter}{0}\n```\n\n(ch-a)=\n# Gaps")
    last = nbformat.read(tmp_path / "generated" / "99_r.ipynb", as_version=4).cells[0].source
    assert last.startswith("```{raw} latex\n\\part{Reference}\n\\critscaleunnumbered\n```")

