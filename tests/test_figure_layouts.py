"""The book's {glue:figure} places a figure's wide and phone layouts in HTML, the wide one alone in LaTeX
(critscale.bookbuild.figurelayouts); before it, the HTML had the wide image alone, shown at 4-5 pt on a phone."""

import base64
import re
import subprocess
import sys

import pytest

from critscale.page.pagedata import GLUE_PREFIX, NARROW_METADATA

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")).decode()
WIDE_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="494pt" height="200pt"><rect width="9" height="9"/></svg>'
NARROW_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="250pt" height="400pt"><circle r="9"/></svg>'


def _notebook(path, narrow=True):
    import nbformat

    nb = nbformat.v4.new_notebook()
    data = {GLUE_PREFIX + "image/svg+xml": WIDE_SVG, GLUE_PREFIX + "image/png": PNG, GLUE_PREFIX + "text/plain": "fig"}
    metadata = {"scrapbook": {"name": "two_fig", "mime_prefix": GLUE_PREFIX}}
    if narrow:
        metadata[NARROW_METADATA] = {"image/svg+xml": NARROW_SVG}
    nb.cells = [nbformat.v4.new_markdown_cell("# Page"),
                nbformat.v4.new_code_cell("record_figure()", outputs=[
                    nbformat.v4.new_output("display_data", data=data, metadata=metadata)]),
                nbformat.v4.new_markdown_cell("```{glue:figure} two_fig\n:name: fig-two\n\nTwo panels.\n```")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _build(tmp_path, builder, narrow=True):
    """Build in a child process: myst-nb registers its parser in Sphinx's defaults for the whole process, and a later
    in-process build without it (tests/test_proof_index.py) then stops on "Source parser for myst-nb not registered"."""
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "conf.py").write_text("extensions = ['myst_nb', 'critscale.bookbuild.figurelayouts']\nproject = 't'\n"
                                 "nb_execution_mode = 'off'\nsuppress_warnings = ['mystnb.unknown_mime_type']\n")
    (src / "index.md").write_text("# Book\n\n```{toctree}\npage\nown\n```\n")
    _notebook(src / "page.ipynb", narrow)
    # a page's own figure (the landing page's headline): its phone layout is the file beside it
    (src / "img").mkdir(exist_ok=True)
    (src / "img" / "f.svg").write_text(WIDE_SVG)
    (src / "img" / "f.png").write_bytes(base64.b64decode(PNG))
    if narrow:
        (src / "img" / "f-narrow.svg").write_text(NARROW_SVG)
    (src / "own.md").write_text("# Own\n\n```{figure} img/f.*\n:name: fig-own\n\nThe headline.\n```\n")
    out = tmp_path / builder
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", builder, str(src), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.slow
def test_html_has_both_layouts_and_latex_the_wide_one(tmp_path):
    html = (_build(tmp_path, "html") / "page.html").read_text()
    figure = re.search(r'<figure class="([^"]*)"[^>]*>(.*?)</figure>', html, re.S)
    assert figure and "critscale-two-layouts" in figure.group(1).split()
    images = re.findall(r'<img[^>]*>', figure.group(2))
    assert len(images) == 2, images
    wide, narrow = images
    assert 'class="critscale-wide"' in wide and wide.count(".svg") >= 1
    assert 'class="critscale-narrow"' in narrow and ".svg" in narrow
    assert figure.group(2).index("critscale-narrow") < figure.group(2).index("<figcaption")
    own = (tmp_path / "html" / "own.html").read_text()
    figure = re.search(r'<figure class="([^"]*)"[^>]*>(.*?)</figure>', own, re.S)
    assert "critscale-two-layouts" in figure.group(1).split()
    wide, narrow = re.findall(r'<img[^>]*>', figure.group(2))
    assert 'class="critscale-wide"' in wide and "f.svg" in wide
    assert 'class="critscale-narrow"' in narrow and "f-narrow.svg" in narrow
    tex = next((_build(tmp_path, "latex")).glob("*.tex")).read_text()
    assert len(re.findall(r"\\sphinxincludegraphics", tex)) == 2
    assert "critscale" not in tex and "narrow" not in tex


@pytest.mark.slow
def test_a_figure_glued_without_a_phone_layout_keeps_its_one_image(tmp_path):
    html = (_build(tmp_path, "html", narrow=False) / "page.html").read_text()
    figure = re.search(r'<figure class="([^"]*)"[^>]*>(.*?)</figure>', html, re.S)
    assert "critscale-two-layouts" not in figure.group(1) and len(re.findall(r"<img", figure.group(2))) == 1
    own = (tmp_path / "html" / "own.html").read_text()
    assert "critscale-two-layouts" not in own and own.count("<img") == 1
