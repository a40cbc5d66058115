"""Measure the rendered book in headless Chromium: what is wider than its column, how big figure text is.

``measure(page, width)`` opens one HTML page of a built book at a window ``width`` pixels wide
and returns what a reader would see there, as a ``Measurement``:

- ``tables``: every table of the article with its width (``scrollWidth``) and its container's
  ``clientWidth``, and the header cells whose text breaks inside a word;
- ``math``: every display equation (MathJax ``mjx-container[display]``) with the width of its
  typeset formula and of its box, and whether a scrolling box holds it;
- ``figures``: every image of the article with its rendered width in CSS pixels and the file it shows
  (0 for an image the page hides, e.g. the layout of a figure meant for another width);
- ``hidden_figures``: the figures of the article none of whose images is shown.

It needs no Python package and no driver: a copy of the page, written beside it (so that its
relative links resolve), carries a script that waits for MathJax and the images, measures, and
posts its result to a frame page, which writes it into its DOM for ``chromium --headless --dump-dom``.
The page is measured inside an ``<iframe>`` exactly ``width`` pixels wide: headless Chromium keeps
its window at least 500 px wide, so a phone's width exists only as a frame's.
``measure_widths(page, widths)`` measures several widths in one Chromium run, one frame per width
(each frame is its own viewport, so each width is measured as if alone; one run instead of one per
width roughly halves the time a page costs, most of which is Chromium's start).
Both copies are removed afterwards.  ``chromium()`` finds the browser or returns None.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
MARKER = "critscale-measure"
TIMEOUT_S = 120

# Runs in the page: waits for MathJax, fonts and images, then posts the measurements (JSON,
# URI-encoded so that no character needs escaping in the dumped HTML) to the frame's page.
_SCRIPT = r"""
<script>
(function () {
  function label(el) {
    var section = el.closest('section[id]');
    var text = (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
    return (section ? '#' + section.id + ': ' : '') + text;
  }
  function brokenHeader(cell) {
    // Lines taken by the cell's text (not its math) against its words: more lines than
    // words means a word was broken (a header set one letter per line).
    var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), node, tops = {};
    while ((node = walker.nextNode())) {
      if (node.parentElement.closest('mjx-container') || !node.textContent.trim()) continue;
      var range = document.createRange(); range.selectNodeContents(node);
      var rects = range.getClientRects();
      for (var i = 0; i < rects.length; i++) if (rects[i].width > 0) tops[Math.round(rects[i].top)] = 1;
    }
    var words = (cell.textContent || '').trim().split(/\s+/).filter(Boolean).length;
    return Object.keys(tops).length > Math.max(words, 1);
  }
  function scrolls(el, stop) {
    // The nearest box that does not let its content spill decides: one that scrolls shows
    // the whole equation to a reader who scrolls, one that hides it clips it.
    for (var e = el; e && e !== stop; e = e.parentElement) {
      var o = getComputedStyle(e).overflowX;
      if (o === 'auto' || o === 'scroll') return true;
      if (o === 'hidden' || o === 'clip') return false;
    }
    return false;
  }
  function measure() {
    var article = document.querySelector('article.bd-article') || document.body;
    var out = {viewport: document.documentElement.clientWidth, column: article.clientWidth,
               tables: [], math: [], figures: [], hidden_figures: []};
    article.querySelectorAll('table').forEach(function (t) {
      var box = t.parentElement;
      out.tables.push({label: label(t), width: Math.ceil(Math.max(t.scrollWidth, t.offsetWidth)),
                       box: box.clientWidth, column: article.clientWidth,
                       broken_headers: Array.prototype.filter.call(t.querySelectorAll('th'), brokenHeader)
                         .map(function (c) { return c.textContent.trim(); })});
    });
    article.querySelectorAll('mjx-container[display="true"]').forEach(function (m) {
      var formula = m.firstElementChild || m;
      var rect = formula.getBoundingClientRect();
      var box = m.parentElement;
      var boxRect = box.getBoundingClientRect();
      out.math.push({label: label(m), width: Math.ceil(Math.max(rect.width, m.scrollWidth)),
                     box: box.clientWidth, left: rect.left - boxRect.left,
                     right_edge: rect.right, scrolls: scrolls(m, article)});
    });
    article.querySelectorAll('img').forEach(function (img) {
      out.figures.push({src: img.getAttribute('src'), width: img.getBoundingClientRect().width,
                        natural: img.naturalWidth});
    });
    article.querySelectorAll('figure').forEach(function (f) {
      var images = f.querySelectorAll('img');
      var shown = Array.prototype.some.call(images, function (i) { return i.getBoundingClientRect().width > 0; });
      if (images.length && !shown) out.hidden_figures.push(label(f));
    });
    return out;
  }
  function done(result) {
    parent.postMessage(encodeURIComponent(JSON.stringify(result)), '*');
  }
  window.addEventListener('load', function () {
    var ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) || Promise.resolve();
    var images = Array.prototype.map.call(document.images, function (i) {
      return i.complete ? null : new Promise(function (r) { i.onload = i.onerror = r; });
    });
    Promise.all([ready, document.fonts.ready].concat(images)).then(function () {
      try { done(measure()); } catch (err) { done({error: String(err)}); }
    }, function (err) { done({error: 'MathJax failed: ' + err}); });
  });
})();
</script>
"""

# The window's page: one frame per measured width, one above the other, and the measurements each
# posts, in <pre id="MARKER-<width>">.
_FRAME = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">
<script>
window.addEventListener('message', function (e) {
  var frames = document.querySelectorAll('iframe');
  for (var i = 0; i < frames.length; i++) {
    if (frames[i].contentWindow !== e.source) continue;
    var pre = document.createElement('pre');
    pre.id = 'MARKER-' + frames[i].dataset.width;
    pre.textContent = e.data;
    document.body.appendChild(pre);
  }
});
</script>
FRAMES
</body></html>
""".replace("MARKER", MARKER)
_IFRAME = '<iframe src="SRC" data-width="WIDTH" style="border:0;display:block;width:WIDTHpx;height:HEIGHTpx"></iframe>'
MIN_WINDOW_PX = 500  # headless Chromium's narrowest window


class BrowserError(RuntimeError):
    """Chromium could not render a page or the page did not report its measurements."""


@dataclass
class Measurement:
    """What one page shows at one window width (see the module docstring)."""

    page: Path
    width: int
    viewport: int
    column: int
    tables: list[dict]
    math: list[dict]
    figures: list[dict]
    hidden_figures: list[str] = field(default_factory=list)


def chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable on ``PATH``, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _instrumented(page: Path) -> Path:
    """A copy of ``page`` beside it carrying the measuring script."""
    html = page.read_text(encoding="utf-8")
    if "</body>" not in html:
        raise BrowserError(f"{page}: no </body> tag to put the measuring script before")
    copy = page.with_name(f".{page.stem}.{MARKER}.html")
    copy.write_text(html.replace("</body>", _SCRIPT + "</body>", 1), encoding="utf-8")
    return copy


def _frame(copy: Path, widths: list[int], height: int) -> Path:
    """A page beside ``copy`` that shows it in one frame per width, each ``width`` x ``height`` pixels."""
    frame = copy.with_name(f"{copy.stem}.frame.html")
    src = urllib.parse.quote(copy.name)
    frames = "\n".join(_IFRAME.replace("SRC", src).replace("WIDTH", str(w)).replace("HEIGHT", str(height))
                       for w in widths)
    frame.write_text(_FRAME.replace("FRAMES", frames), encoding="utf-8")
    return frame


def _dump_dom(browser: str, url: str, width: int, height: int) -> str:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--allow-file-access-from-files", f"--window-size={width},{height}",
               "--virtual-time-budget=30000", "--dump-dom", url]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BrowserError(f"{url}: chromium did not finish within {TIMEOUT_S} s") from None
    if run.returncode != 0:
        tail = " ".join(run.stderr.split()[-30:])
        raise BrowserError(f"{url}: chromium exited with status {run.returncode} ({tail})")
    return run.stdout


def measure(page: Path, width: int, height: int = 900, browser: str | None = None) -> Measurement:
    """Render ``page`` in a frame ``width`` x ``height`` pixels and return its measurements."""
    return measure_widths(page, (width,), height, browser)[width]


def measure_widths(page: Path, widths, height: int = 900, browser: str | None = None) -> dict[int, Measurement]:
    """Render ``page`` once per width, all in one Chromium run (one frame each), and return width -> measurements.

    Each frame is its own viewport, so a page measured beside another width is measured as it would be alone."""
    widths = sorted(dict.fromkeys(int(w) for w in widths))
    if not widths or widths[0] <= 0:
        raise ValueError(f"widths: need at least one positive width in pixels, got {widths}")
    browser = browser or chromium()
    if browser is None:
        raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
    page = Path(page).resolve()
    copy = _instrumented(page)
    frame = _frame(copy, widths, height)
    try:
        dom = _dump_dom(browser, frame.as_uri(), max(widths[-1], MIN_WINDOW_PX) + 40, len(widths) * height + 40)
    finally:
        copy.unlink(missing_ok=True)
        frame.unlink(missing_ok=True)
    return {width: _measurement(page, width, dom) for width in widths}


def _measurement(page: Path, width: int, dom: str) -> Measurement:
    """The measurements the frame ``width`` pixels wide posted into the dumped ``dom``."""
    found = re.search(rf'<pre id="{MARKER}-{width}"[^>]*>([^<]*)</pre>', dom)
    if not found:
        raise BrowserError(f"{page}: the page did not report its measurements at {width} px "
                           "(MathJax or an image never loaded?)")
    data = json.loads(urllib.parse.unquote(found.group(1)))
    if "error" in data:
        raise BrowserError(f"{page}: the measuring script failed at {width} px: {data['error']}")
    return Measurement(page=page, width=width, **data)
