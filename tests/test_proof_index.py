"""The book's index of results (critscale.bookbuild.proofindex): numbers and titles, not raw labels."""

import re

import pytest

PAGE_A = """# The Gumbel window

```{prf:theorem} Gumbel class with a nondecreasing hazard
:label: thm-06-gumbel

Text.
```

```{prf:proposition} A stretched tail leaves the window
:label: prop-06-stretched

Text.
```
"""

PAGE_B = """# Definitions

```{prf:definition} Accumulation scale
:label: def-01-kappa

Text.
```
"""


def _build(tmp_path, extensions):
    from sphinx.cmd.build import build_main

    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "conf.py").write_text(f"extensions = {extensions!r}\nproject = 't'\n")
    (src / "index.md").write_text("# Book\n\n```{toctree}\na\nb\n```\n")
    (src / "a.md").write_text(PAGE_A)
    (src / "b.md").write_text(PAGE_B)
    out = tmp_path / "html"
    assert build_main(["-q", "-b", "html", str(src), str(out)]) == 0
    return (out / "prf-prf.html").read_text()


@pytest.mark.slow
def test_proof_index_lists_numbers_and_titles(tmp_path):
    """Entries read "Theorem 1" with the statement's title, grouped under the page's title in document order; no raw
    label is link text.  sphinx-proof's own index (the behaviour without the extension) shows the labels, and the
    same assertions fail on it."""
    original = _build(tmp_path / "theirs", ["myst_parser", "sphinx_proof"])
    assert "thm-06-gumbel</code>" in original and "Theorem 1</code>" not in original
    page = _build(tmp_path / "ours", ["myst_parser", "sphinx_proof", "critscale.bookbuild.proofindex"])
    links = re.findall(r'<code class="xref">([^<]*)</code>', page)
    assert links == ["Theorem 1", "Proposition 1", "Definition 1"], links
    for title in ("Gumbel class with a nondecreasing hazard", "A stretched tail leaves the window", "Accumulation scale"):
        assert title in page
    assert "thm-06-gumbel</code>" not in page
    assert 'href="a.html#thm-06-gumbel"' in page
    again = _build(tmp_path / "theirs-again", ["myst_parser", "sphinx_proof"])
    assert "thm-06-gumbel</code>" in again  # the extension changes only the application that loads it


def test_titles_lose_their_math_markup():
    """Index entries are plain text: a title's $\\kappa$ reads as the letter, not as TeX source."""
    from critscale.bookbuild.proofindex import plain_title

    assert plain_title(r"of the order of $\kappa$ (reconstructed)") == "of the order of κ (reconstructed)"
    assert plain_title(r"a finite-$n$ prediction") == "a finite-n prediction"
    assert plain_title(r"$\bar\kappa_n$ against $\sqrt{2\log n}$") == "κ_n against sqrt2log n"
    assert plain_title("no math at all") == "no math at all"


def test_the_book_loads_the_index_after_sphinx_proof():
    """Without this entry the rendered book keeps sphinx-proof's index of raw labels."""
    from pathlib import Path

    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "book" / "_config.yml").read_text())
    extensions = config["sphinx"]["config"]["extensions"]
    assert extensions.index("sphinx_proof") < extensions.index("critscale.bookbuild.proofindex")
