"""``report.html``: one self-contained page per run, verdict first, rendered by headless Chromium.

The run directory is written by :func:`critscale.diagnostic.report.write_outputs` for a small diagnosis of q/k arrays
(two layers of Gaussian heads, 8 windows, figures included).  Without a browser the page is checked as text: every
``src`` and ``href`` is a ``data:`` URI (no address, no file beside it), there is no script, the verdict comes before
the per-layer table, the figures, the nulls and the provenance, and it shows the numbers of ``schedule.json`` as
:mod:`critscale.diagnostic.verdict` formats them.  In Chromium (``@pytest.mark.browser``): the page renders, no line
of the browser's log is a console message or an uncaught error, and the rendered DOM holds the same numbers.
Before this page the run directory held no report at all.
"""

import html
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from critscale.diagnostic import pipeline
from critscale.diagnostic.design import make_design
from critscale.diagnostic.report import write_outputs
from critscale.diagnostic.rundir import run_manifest
from critscale.diagnostic.schedule import Schedule
from critscale.diagnostic.verdict import RULE_HTML, layer_cells, model_cells
from critscale.diagnostic.windows import ArraySource

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    rng = np.random.default_rng(3)
    shape = (2, 3, 8, 128, 16)
    q = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    diag = pipeline.diagnose_source(ArraySource(q, k, 0.25), make_design("prefix", 128, queries=2),
                                    describe="q/k arrays <of a test> & co", nulls=("gauss_qk", "ptail1", "ptail2"),
                                    null_windows=8, null_replicates=0, backend="reference")
    out = tmp_path_factory.mktemp("run") / "out"
    out.mkdir()
    write_outputs(diag, out, manifest=run_manifest(["diagnose", "--qk", "qk.npz", "--out", str(out)], []))
    return out, Schedule.from_json(out / "schedule.json"), diag


def verdict_strings(schedule: Schedule) -> list[str]:
    """The numbers a reader must find: the model's share and growth factors, each layer's share, gamma and growth."""
    model = model_cells(schedule, RULE_HTML)
    wanted = [model["share"], model["gamma"], *[model[f"growth_{k}"] for k in (2, 4, 8)]]
    for cells in layer_cells(schedule, RULE_HTML):
        wanted += [cells["share"], cells["gamma"], cells["growth_2"], cells["growth_8"]]
    return wanted


def test_the_page_is_self_contained_and_leads_with_the_verdict(run):
    out, schedule, _ = run
    page = (out / "report.html").read_text(encoding="utf-8")
    links = re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)""", page, flags=re.I)
    assert links and all(link.startswith("data:") for link in links), [l[:40] for l in links if not l.startswith("data:")]
    assert not re.search(r"<script|@import|url\(|https?://", page, flags=re.I)
    assert page.count('src="data:image/png;base64,') == 6  # every figure of the run, embedded
    order = [page.index(f'id="{name}"') for name in ("verdict", "layers", "figures", "nulls", "provenance")]
    assert order == sorted(order)
    text = html.unescape(page)
    for wanted in verdict_strings(schedule):
        assert wanted in text, wanted
    assert "q/k arrays <of a test> & co" in text and "<of a test>" not in page  # escaped, shown as written
    for null in ("gauss_qk", "ptail1", "ptail2"):
        assert f"<td>{null}</td>" in page
    assert schedule.run["command"] in text and f"CRITSCALE_CACHE={os.environ['CRITSCALE_CACHE']}" in text


def test_the_page_of_a_run_without_figures_says_so(tmp_path, run):
    """--no-figures: the page says that the run wrote none instead of a silent empty section; run.json lists it."""
    _, _, diag = run
    written = write_outputs(diag, tmp_path, manifest=run_manifest(["diagnose", "--qk", "qk.npz", "--no-figures"], []),
                            figures=False)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "This run wrote no figures (--no-figures)." in page and "data:image/png" not in page
    assert {"report.html", "schedule.json"} <= {p.name for p in written}


def _chromium_or_skip():
    if CHROMIUM is None:
        if os.environ.get("CRITSCALE_REQUIRE_BROWSER") == "1":
            pytest.fail("CRITSCALE_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (install it, or set CRITSCALE_REQUIRE_BROWSER=1 to make this a failure)")
    return CHROMIUM


def _render(browser, page, profile):
    """Chromium's DOM of ``page`` and the lines of its log that are console messages or uncaught errors."""
    result = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                             "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", page.resolve().as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, [line for line in result.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.browser
@pytest.mark.slow
def test_chromium_renders_the_page_without_console_errors(run, tmp_path):
    """The report renders with no console line; the same check sees the error of a page whose script fails."""
    browser = _chromium_or_skip()
    out, schedule, _ = run
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>undefinedFunction()</script></body></html>")
    assert _render(browser, broken, tmp_path / "profile0")[1]  # the check can fail
    dom, console = _render(browser, out / "report.html", tmp_path / "profile")
    assert not console, console
    dom = html.unescape(dom)
    assert "<h2>Verdict</h2>" in dom and "</html>" in dom
    for wanted in verdict_strings(schedule):
        assert wanted in dom, wanted
