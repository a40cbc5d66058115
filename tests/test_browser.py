"""The rendered ci book in headless Chromium: nothing wider than its column, figure text readable.

Every page of ``build/site/ci/_build/html`` (``make test`` builds it) is opened at 1280 px,
where no table and no display equation may be wider than its container and no figure's
smallest text may be shown below 9 pt, and at 390 px (a phone), where no display equation
may be clipped (tables and equations may scroll there) and no figure's smallest text may be
shown below 9 pt either (figures switch to their phone layout, ``critscale.bookbuild.figurelayouts``).  The size of figure text as shown
follows ``critscale.bookbuild.layoutcheck``: the figure's smallest text ``s`` (stated in the
saved file by ``pagedata.record_figure``) times 0.75 pt per CSS pixel times the rendered
width over the figure's width in points.

Needs Chromium (Debian: ``apt-get install chromium``); skipped with the reason when it or the
book is missing, except in CI, which sets CRITSCALE_REQUIRE_BROWSER=1 and fails instead.
"""

import os
from pathlib import Path

import pytest

from critscale.bookbuild import browser, layoutcheck

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "build" / "site" / "ci" / "_build" / "html"
NOT_PAGES = {"search.html", "genindex.html", "index.html"}  # index.html only redirects to intro.html
WIDE, PHONE = 1280, 390


def _pages() -> list[str]:
    if not HTML.is_dir():
        return []
    return sorted(str(p.relative_to(HTML)) for p in [*HTML.glob("*.html"), *HTML.glob("generated/*.html")]
                  if p.name not in NOT_PAGES and not p.name.startswith("."))


def _require(what: str):
    if os.environ.get("CRITSCALE_REQUIRE_BROWSER"):
        pytest.fail(f"{what} (CRITSCALE_REQUIRE_BROWSER is set)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def chromium():
    path = browser.chromium()
    if path is None:
        _require("no chromium on PATH: the rendered-layout checks need it (Debian: apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def measured(chromium):
    """A book page measured at both widths, in one Chromium run per page, the first time a test asks for it.

    The two checks of a page read the same run: Chromium's start is most of what measuring a page costs."""
    runs: dict[str, dict] = {}

    def get(page: str) -> dict:
        if page not in runs:
            runs[page] = browser.measure_widths(HTML / page, (WIDE, PHONE), browser=chromium)
        return runs[page]

    return get


def test_the_book_is_there_to_check():
    """Without pages the parametrised checks below would pass by having nothing to check."""
    if not _pages():
        _require(f"{HTML.relative_to(ROOT)} has no pages: run `make test` (or `make html PROFILE=ci`) first")
    assert "intro.html" in _pages() and any(p.startswith("generated/") for p in _pages())


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("page", _pages() or ["(no book built)"])
def test_page_fits_its_column_at_1280_px(page, measured):
    if page == "(no book built)":
        _require("no ci book built")
    m = measured(page)[WIDE]
    problems = layoutcheck.overflowing_tables(m) + layoutcheck.overflowing_math(m) + layoutcheck.small_figure_text(m)
    assert not problems, f"{page} at {WIDE} px:\n" + "\n".join(problems)


# Pages with a figure that has no phone layout (tests/test_book_conventions.py, PHONE_LAYOUT_KNOWN says why), as strict xfails.
PHONE_KNOWN: dict[str, str] = {}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=PHONE_KNOWN[p]))
                                  if p in PHONE_KNOWN else p for p in _pages()] or ["(no book built)"])
def test_no_display_equation_is_clipped_and_figure_text_is_readable_at_390_px(page, measured):
    """A two-panel figure set for the 660 px column was shown 327 px wide here, its text at 4.5 pt."""
    if page == "(no book built)":
        _require("no ci book built")
    m = measured(page)[PHONE]
    problems = layoutcheck.clipped_math(m) + layoutcheck.small_figure_text(m)
    assert not problems, f"{page} at {PHONE} px:\n" + "\n".join(problems)


# ---------------------------------------------------------------- the checks themselves, on a made-up page
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="504pt" height="216pt" viewBox="0 0 504 216" xmlns:dc="http://purl.org/dc/elements/1.1/">'
       '<metadata><dc:description>{}</dc:description></metadata><rect width="504" height="216"/></svg>')


def _page(tmp_path, body: str) -> Path:
    page = tmp_path / "page.html"
    page.write_text('<!DOCTYPE html><html><head><style>body{margin:0} article{width:700px;padding:0}</style></head>'
                    f'<body><article class="bd-article">{body}</article></body></html>')
    return page


@pytest.mark.browser
@pytest.mark.slow
def test_the_checks_find_a_wide_table_a_wide_equation_and_small_figure_text(tmp_path, chromium):
    (tmp_path / "small.svg").write_text(SVG.format("critscale smallest text pt: 9.00"))
    (tmp_path / "plain.svg").write_text(SVG.format("a figure from elsewhere"))
    page = _page(tmp_path, '<section id="s"><div><table><tr><th>a heading</th><td><span style="display:inline-block;width:900px">x</span></td></tr></table></div>'
                 '<div style="overflow:hidden"><mjx-container display="true" style="display:block">'
                 '<span style="display:inline-block;width:800px">wide</span></mjx-container></div>'
                 '<img src="small.svg" style="width:300px"><img src="plain.svg" style="width:600px"></section>')
    wide = browser.measure(page, WIDE, browser=chromium)
    assert len(layoutcheck.overflowing_tables(wide)) == 1
    assert len(layoutcheck.overflowing_math(wide)) == 1 and len(layoutcheck.clipped_math(wide)) == 1
    small = layoutcheck.small_figure_text(wide)
    assert len(small) == 2, small
    assert "4.0 pt" in small[0]  # 9 pt * 0.75 * 300 px / 504 pt
    assert "states no smallest text size" in small[1]


@pytest.mark.browser
@pytest.mark.slow
def test_the_checks_pass_a_page_that_fits(tmp_path, chromium):
    (tmp_path / "fig.svg").write_text(SVG.format("critscale smallest text pt: 9.00"))
    page = _page(tmp_path, '<table><tr><th>a heading</th><td>1.5</td></tr></table>'
                 '<div style="overflow-x:auto"><mjx-container display="true" style="display:block">'
                 '<span style="display:inline-block;width:800px">wide but scrolls</span></mjx-container></div>'
                 '<img src="fig.svg" style="width:672px">')
    m = browser.measure(page, WIDE, browser=chromium)
    assert layoutcheck.overflowing_tables(m) == [] and layoutcheck.small_figure_text(m) == []
    assert layoutcheck.clipped_math(m) == [] and len(layoutcheck.overflowing_math(m)) == 1


NARROW_SVG = SVG.replace('width="504pt" height="216pt" viewBox="0 0 504 216"', 'width="252pt" height="400pt" viewBox="0 0 252 400"')
TWO_LAYOUTS = ('<figure class="critscale-two-layouts align-default"><img class="critscale-wide" src="wide.svg">'
               '<img class="critscale-narrow" src="narrow.svg"><figcaption>Two panels.</figcaption></figure>')


def _book_page(tmp_path, body: str) -> Path:
    """A page with the book's stylesheet and a column as fluid as the book's."""
    (tmp_path / "critscale.css").write_text((ROOT / "book" / "_static" / "critscale.css").read_text())
    for name, svg in (("wide.svg", SVG.replace("504pt", "494pt")), ("narrow.svg", NARROW_SVG)):
        (tmp_path / name).write_text(svg.format("critscale smallest text pt: 9.00"))
    page = tmp_path / "book.html"
    page.write_text('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
                    '<link rel="stylesheet" href="critscale.css"><style>body{margin:0} img{max-width:100%}'
                    'article{max-width:740px;margin:0 auto}</style></head>'
                    f'<body><article class="bd-article">{body}</article></body></html>')
    return page


@pytest.mark.browser
@pytest.mark.slow
def test_a_figure_shows_its_phone_layout_on_a_phone_and_its_wide_one_on_a_desktop(tmp_path, chromium):
    """Measured at each width alone and at both in one run (two frames, as the book's pages are): each frame is
    its own viewport, so the phone frame shows the phone layout beside the wide one, as a run of its own does."""
    page = _book_page(tmp_path, TWO_LAYOUTS)
    wide = browser.measure(page, WIDE, browser=chromium)
    assert [(f["src"], round(f["width"])) for f in wide.figures if f["width"] > 0] == [("wide.svg", 659)]
    phone = browser.measure(page, PHONE, browser=chromium)
    assert phone.viewport <= PHONE, "the page must be measured at a phone's width, not headless Chromium's 500 px"
    assert [(f["src"], round(f["width"])) for f in phone.figures if f["width"] > 0] == [("narrow.svg", 336)]
    assert layoutcheck.small_figure_text(wide) == [] and layoutcheck.small_figure_text(phone) == []
    both = browser.measure_widths(page, (PHONE, WIDE), browser=chromium)
    assert sorted(both) == [PHONE, WIDE] and both[WIDE].width == WIDE and both[PHONE].width == PHONE
    for alone in (wide, phone):
        assert _shown(both[alone.width]) == _shown(alone), alone.width


def _shown(m) -> tuple:
    """What a measurement says a reader sees: viewport, column and each image's width (to 0.1 px)."""
    return m.viewport, m.column, [(f["src"], round(f["width"], 1)) for f in m.figures]


@pytest.mark.browser
@pytest.mark.slow
def test_the_phone_check_finds_a_figure_with_its_wide_layout_only_and_one_that_shows_nothing(tmp_path, chromium):
    """Today's pages: the wide image alone, shrunk to the phone's column."""
    page = _book_page(tmp_path, '<figure><img src="wide.svg"></figure>'
                      '<figure><img src="wide.svg" style="display:none"></figure>')
    problems = layoutcheck.small_figure_text(browser.measure(page, PHONE, browser=chromium))
    assert len(problems) == 2, problems
    assert "shows none of its images" in problems[0]
    assert "wide.svg shown" in problems[1] and "(< 9 pt)" in problems[1]


@pytest.mark.parametrize("widths", [(), (0,), (390, -1)])
def test_measure_widths_refuses_no_width_or_one_not_positive(widths, tmp_path):
    """Before Chromium starts: an empty list would measure nothing and pass every check."""
    with pytest.raises(ValueError, match="at least one positive width"):
        browser.measure_widths(tmp_path / "page.html", widths, browser="chromium")
