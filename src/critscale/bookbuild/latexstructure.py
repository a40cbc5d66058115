"""The PDF's structure is the HTML's: parts, chapter numbers, unnumbered front and back matter.

``mark(site)`` edits the book staged for the LaTeX builder (``build/pdf/<profile>/``), never the HTML's:

- the first page of each part of ``_toc.yml`` opens with ``\\part{<caption>}``;
- the notebook ``NN_name`` is Chapter NN, the number its exercises and the HTML's file names carry
  (``\\setcounter{chapter}{NN-1}`` before its title);
- every other page (the introduction of the landing page, the reconstruction, the reproducibility
  page, the appendix, the bibliography) is a chapter without a number (``\\critscaleunnumbered``,
  defined in the LaTeX preamble of ``book/_config.yml``), listed in the contents all the same.

Each mark is a raw LaTeX block placed before the page's title (and its label).
``expected_outline(root)`` is what the PDF's outline must then hold, read from the same sources as
the HTML's table of contents: ``(kind, number, title)`` with kind ``part`` or ``chapter`` and
number None for unnumbered chapters and for parts.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

NUMBERED = re.compile(r"generated/(\d\d)_\w+$")
LABEL = re.compile(r"^\(\S+\)=\s*$")
INTRODUCTION = "## Introduction"  # the landing page's single chapter in print (site._one_introduction_chapter)


class StructureError(ValueError):
    """The staged book lacks a page or a title the structure needs."""


def _raw(commands: list[str]) -> str:
    return "```{raw} latex\n" + "\n".join(commands) + "\n```\n"


def chapter_number(file: str) -> int | None:
    """The chapter number of a toc entry: ``generated/05_ladder`` -> 5; None for unnumbered pages (99 and prose)."""
    match = NUMBERED.search(file)
    if not match or match.group(1) == "99":
        return None
    return int(match.group(1))


def toc_entries(toc: dict) -> list[tuple[str | None, str]]:
    """``(part caption or None, file)`` for every chapter of a jupyter-book ``_toc.yml``, in order;
    the caption is given on the first chapter of each part only."""
    entries = []
    for part in toc.get("parts", []):
        for i, chapter in enumerate(part.get("chapters", [])):
            entries.append((part["caption"] if i == 0 else None, chapter["file"]))
    return entries


def _marks(caption: str | None, file: str) -> list[str]:
    commands = [rf"\part{{{caption}}}"] if caption else []
    number = chapter_number(file)
    commands.append(r"\critscaleunnumbered" if number is None else rf"\setcounter{{chapter}}{{{number - 1}}}")
    return commands


def _insert_before_title(lines: list[str], title: int, block: str) -> list[str]:
    at = title - 1 if title > 0 and LABEL.match(lines[title - 1]) else title
    return lines[:at] + block.rstrip("\n").split("\n") + [""] + lines[at:]


def _mark_markdown(path: Path, commands: list[str], heading: str = "# ") -> None:
    lines = path.read_text().split("\n")
    title = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if title is None:
        raise StructureError(f"{path}: no title line starting with {heading!r} to mark for LaTeX")
    path.write_text("\n".join(_insert_before_title(lines, title, _raw(commands))))


def _mark_notebook(path: Path, commands: list[str]) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.search(r"^# ", cell.source, re.M):
            lines = cell.source.split("\n")
            title = next(i for i, line in enumerate(lines) if line.startswith("# "))
            cell.source = "\n".join(_insert_before_title(lines, title, _raw(commands)))
            nbformat.write(nb, path)
            return
    raise StructureError(f"{path}: no markdown cell with a title to mark for LaTeX")


def mark(site: Path) -> None:
    """Put the part, number and no-number marks into the staged pages of ``site`` (module docstring)."""
    toc = yaml.safe_load((site / "_toc.yml").read_text())
    _mark_markdown(site / f"{toc['root']}.md", [r"\critscaleunnumbered"], heading=INTRODUCTION)
    for caption, file in toc_entries(toc):
        commands = _marks(caption, file)
        if (site / f"{file}.ipynb").exists():
            _mark_notebook(site / f"{file}.ipynb", commands)
        elif (site / f"{file}.md").exists():
            _mark_markdown(site / f"{file}.md", commands)
        else:
            raise StructureError(f"{site}: no page {file}.md or {file}.ipynb for the toc entry {file!r}")


def _title(path: Path) -> str:
    for line in path.read_text().split("\n"):
        if line.startswith("# "):
            return line[2:].strip()
    raise StructureError(f"{path}: no title line")


def expected_outline(root: Path) -> list[tuple[str, int | None, str]]:
    """The parts and chapters the PDF's outline must list, from ``book/_toc.yml`` and the pages' titles."""
    toc = yaml.safe_load((root / "book" / "_toc.yml").read_text())
    outline = [("chapter", None, "Introduction")]
    for caption, file in toc_entries(toc):
        if caption:
            outline.append(("part", None, caption))
        source = (root / "notebooks" / f"{file.split('/', 1)[1]}.md" if file.startswith("generated/")
                  else root / "book" / f"{file}.md")
        outline.append(("chapter", chapter_number(file), _title(source)))
    return outline
