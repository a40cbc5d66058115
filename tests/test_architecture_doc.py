"""docs/architecture.md names the package's real rooms, every one of them, and the README links it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def library_lines():
    """The lines of the rooms tree inside src/critscale/, each cut before its description."""
    block = DOC.read_text().split("```text\n", 1)[1].split("```", 1)[0]
    inside = block.split("├── src/critscale/", 1)[1].split("├── kernels/", 1)[0]
    lines = []
    for line in inside.splitlines()[1:]:
        start = len(line) - len(line.lstrip("│├└─ "))
        if start <= 12:  # further right, the line only continues a description
            lines.append(re.split(r"\s{2,}", line[start:].strip())[0])
    return lines


def test_the_rooms_are_the_packages_modules_and_subpackages_all_of_them():
    named = set()
    for line in library_lines():
        named |= {n.strip().rstrip("/") for n in re.split(r"[,\s]+", line) if n.strip()}
    named.discard("")
    src = ROOT / "src" / "critscale"
    real = {p.stem for p in src.glob("*.py") if p.stem != "__init__"} | {p.name for p in src.iterdir()
                                                                          if (p / "__init__.py").exists()}
    assert named - real == set(), "the page names rooms that do not exist"
    assert real - named == set(), "the page leaves rooms out"


def test_the_page_has_a_diagram_and_the_readme_layout_links_it():
    text = DOC.read_text()
    assert "```mermaid\nflowchart" in text and "critscale.kernels" in text and "triton_backend" in text
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    assert "(docs/architecture.md)" in layout
