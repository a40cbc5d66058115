"""The appendix's tables fit a column: no bare web address in a table row (chapter: appendix.render).

A bare address is one unbreakable word as wide as the column: it squeezed the brief's "Finding"
column to a word per line in the HTML and ran a table off the PDF page.
"""

import re
from pathlib import Path

from critscale.bookbuild import appendix

ROOT = Path(__file__).resolve().parents[1]
BARE = re.compile(r"(?<!\]\()(?<!<)https?://")


def test_table_rows_of_the_brief_link_their_sources_by_host():
    body = appendix.render((ROOT / "docs" / "theory.md").read_text())
    rows = [line for line in body.split("\n") if line.startswith("|")]
    assert any("http" in row for row in rows), "the brief's tables cite no web source any more"
    bare = [row[:80] for row in rows if BARE.search(row)]
    assert not bare, f"{len(bare)} table rows of the appendix show a bare web address: {bare[:2]}"
    assert "[ai.panvox.news](https://ai.panvox.news/" in body


def test_a_bare_address_becomes_a_link_named_by_its_host_and_links_stay_links():
    row = "| x | see (https://www.arxiv.org/html/2505.17083v2). And [a](https://b.c/d) |"
    assert appendix._link_urls(row) == (
        "| x | see ([arxiv.org](https://www.arxiv.org/html/2505.17083v2)). And [a](https://b.c/d) |")


def test_in_print_the_prose_tables_are_long_tables_with_widths_that_fill_the_line():
    """The brief's table of prior laws ran 115 pt off the bottom of a PDF page (a tabulary cannot break)."""
    text = (ROOT / "docs" / "theory.md").read_text()
    assert "longtable" not in appendix.render(text)  # the HTML's tables are untouched
    printed = appendix.render(text, print_layout=True)
    specs = re.findall(r"```\{tabularcolumns\} (.*)\n```\n\n\{\.longtable\}\n\|", printed)
    assert len(specs) >= 2
    for spec in specs:
        widths = [float(w) for w in re.findall(r"\\Y\{([0-9.]+)\}", spec)]
        assert len(widths) >= 3 and 0.95 <= sum(widths) <= 1.0 and min(widths) >= 0.09
    assert "| Law for $\\beta_n$ |" in printed.split("{.longtable}", 2)[2][:200]
