"""Stage the book of one profile and render it with jupyter-book, quietly.

The book is rendered from a staged copy, ``build/site/<profile>/``: the prose of
``book/``, the executed notebooks of this profile (``generated/``), and the files made
here (``_generated/``): the appendix's table of family names, the landing page's key
results, its headline figure and its citation, and (HTML only) the downloadable source
archive and wheel under ``_vendor/downloads/`` (served from the HTML root).
jupyter-book's own output goes to ``build/logs/<profile>/jupyter-book-<builder>.log``;
the terminal gets its warnings and errors only.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from ..page import reader_names
from ..page.provenance import git_commit
from . import downloads, latexstructure, summaries
from .notebook import Layout, notebook_names

HEADLINE = ("06_gumbel_window", "gumbel_collapse_fig")  # the landing page's figure
MATHJAX = Path("build") / "vendor" / "mathjax"


class SiteError(RuntimeError):
    """The book could not be staged or rendered."""


def site_dir(layout: Layout, builder: str = "html") -> Path:
    """``build/site/<profile>`` for the HTML, ``build/pdf/<profile>`` for the PDF.

    The two are staged apart: their pages differ (folded code is left out of print, the
    landing page is one chapter there), and Sphinx would otherwise reuse one builder's
    parsed pages for the other.
    """
    return layout.root / "build" / ("site" if builder == "html" else "pdf") / layout.profile


def toc_notebooks(root: Path) -> list[str]:
    """The notebooks in the order of ``book/_toc.yml``."""
    return re.findall(r"file: generated/(\w+)", (root / "book" / "_toc.yml").read_text())


def stage(layout: Layout, builder: str) -> Path:
    """Copy and generate everything the book needs into ``site_dir(layout, builder)``."""
    root, site = layout.root, site_dir(layout, builder)
    missing = [n for n in notebook_names(root) if not (layout.executed / f"{n}.ipynb").exists()]
    if missing:
        raise SiteError(f"not executed in the {layout.profile} profile: {', '.join(missing)}")
    for name in ("generated", "_generated"):
        shutil.rmtree(site / name, ignore_errors=True)
    shutil.copytree(root / "book", site, dirs_exist_ok=True)
    (site / "generated").mkdir()
    for name in notebook_names(root):
        shutil.copy2(layout.executed / f"{name}.ipynb", site / "generated")
        if builder == "pdf":
            _print_without_folded_code(site / "generated" / f"{name}.ipynb")
    generated = site / "_generated"
    generated.mkdir()
    (generated / "family_names.md").write_text(reader_names.mapping_table())
    _recorded_tables(layout, generated / "tables")
    sources = [root / "notebooks" / f"{n}.md" for n in toc_notebooks(root)]
    (generated / "key_results.md").write_text(summaries.key_results(sources, site / "generated"))
    notebook, key = HEADLINE
    for suffix in ("svg", "png"):
        figure = layout.results / "figures" / notebook / f"{key}.{suffix}"
        if figure.exists():
            shutil.copy2(figure, generated / f"headline.{suffix}")
        narrow = layout.results / "figures" / notebook / f"{key}.narrow.{suffix}"  # its phone layout
        if narrow.exists():  # (figurelayouts shows it on narrow screens)
            shutil.copy2(narrow, generated / f"headline-narrow.{suffix}")
    if not (generated / "headline.png").exists():
        raise SiteError(f"the headline figure {notebook}/{key} was not recorded")
    commit = git_commit()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    (generated / "cite.md").write_text(downloads.citation(root, commit, date))
    config = yaml.safe_load((root / "book" / "_config.yml").read_text())
    if builder == "html":
        vendor = site / "_vendor"
        for old in (vendor / "downloads", site / "_build" / "html" / "downloads"):
            shutil.rmtree(old, ignore_errors=True)  # an earlier build's archive would stay linked
        archive = downloads.source_archive(root, commit, vendor / "downloads")
        wheel = downloads.wheel(archive, vendor / "downloads")
        shutil.rmtree(vendor / "mathjax", ignore_errors=True)
        shutil.copytree(root / MATHJAX, vendor / "mathjax")
        config["sphinx"]["config"]["html_context"] = {
            "critscale_archive": archive.name, "critscale_wheel": wheel.name,
            "critscale_commit": commit, "critscale_version": downloads.version(root)}
        if wheel.name != downloads.wheel_name(root):
            raise SiteError(f"pip made {wheel.name}, expected {downloads.wheel_name(root)}")
    (generated / "rerun.md").write_text(downloads.rerun_instructions(
        downloads.wheel_name(root), downloads.archive_name(commit), linked=builder == "html"))
    if builder == "pdf":
        _one_introduction_chapter(site / "intro.md")
        latexstructure.mark(site)  # parts and chapter numbers as in the HTML
        config["sphinx"]["config"].pop("html_extra_path")  # MathJax and the downloads: HTML only
        config["parse"]["myst_enable_extensions"].append("attrs_block")  # the appendix's {.longtable}
    (site / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return site


def _one_introduction_chapter(path: Path) -> None:
    """In print the landing page's sections would each become a chapter (LaTeX takes the root
    page's title as the book's): they become the sections of one "Introduction" chapter."""
    lines = path.read_text().split("\n")
    title = next(i for i, line in enumerate(lines) if line.startswith("# "))
    body = [("#" + line) if line.startswith("## ") else line for line in lines[title + 1:]]
    path.write_text("\n".join(lines[:title + 1] + ["", "## Introduction", ""] + body))


def _recorded_tables(layout: Layout, folder: Path) -> None:
    """Every table recorded by this build as MyST, ``<folder>/<notebook>/<key>.md``.

    Prose pages include these (``{include}``) to show another page's table: myst-nb's
    cross-page glue carries only plain text, and an included table is typeset by both
    the HTML and the LaTeX builder.
    """
    import pandas as pd

    from ..page.pagedata import load_results, with_reader_names
    from ..page.tables import to_markdown

    for path in sorted(layout.results.glob("*.json")):
        values = load_results(path.stem, layout.results).get("values", {})
        for key, value in values.items():
            if isinstance(value, dict) and set(value) == {"columns", "records"}:
                table = pd.DataFrame(value["records"], columns=value["columns"])
                (folder / path.stem).mkdir(parents=True, exist_ok=True)
                (folder / path.stem / f"{key}.md").write_text(to_markdown(with_reader_names(table)))


def _print_without_folded_code(path: Path) -> None:
    """In print, folded code is left out (a PDF cannot unfold it); shown code stays."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "hide-input" in tags:
            cell.metadata["tags"] = [("remove-input" if t == "hide-input" else t) for t in tags]
    nbformat.write(nb, path)


def _jupyter_book(site: Path, builder: str, log: Path) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", "-q", "-W", "-n",
               "--keep-going", "--builder", builder, str(site)]
    log.parent.mkdir(parents=True, exist_ok=True)
    # LaTeX writes its log in the fonts' 8-bit encodings: decode leniently
    run = subprocess.run(command, capture_output=True, text=True, errors="replace")
    log.write_text(run.stdout + run.stderr)
    return run


def _problems(output: str) -> list[str]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)  # sphinx colours its messages
    return [line for line in plain.splitlines()
            if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|Error\b|Exception\b", line)]


def render(layout: Layout, builder: str) -> Path:
    """Stage and build; the path of the index.html or the PDF.  ``SiteError`` on any warning."""
    site = stage(layout, builder)
    jb_builder = "html" if builder == "html" else "pdflatex"
    log = layout.logs / f"jupyter-book-{builder}.log"
    run = _jupyter_book(site, jb_builder, log)
    shown = _problems(run.stdout + run.stderr)
    if run.returncode != 0 or shown:
        lines = shown or (run.stdout + run.stderr).splitlines()[-40:]
        raise SiteError("jupyter-book failed:\n" + "\n".join(lines) + f"\n(full log: {log})")
    if builder == "html":
        return site / "_build" / "html" / "index.html"
    pdf = site / "_build" / "latex" / "book.pdf"
    tex_log = (site / "_build" / "latex" / "book.log").read_text(errors="replace")
    undefined = re.findall(r"LaTeX Warning: (?:Reference|Citation|Hyper reference) `([^']+)' .*undefined", tex_log)
    if undefined or not pdf.exists():
        raise SiteError(f"LaTeX left {len(undefined)} undefined references "
                        f"({', '.join(sorted(set(undefined))[:10])}); log: {site / '_build/latex/book.log'}")
    return pdf
