"""Tests of the build pipeline itself: configuration agreement, notebook structure,
the executed ci-profile notebooks and the rendered HTML of `make test`."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.md"))
PROFILES = ("ci", "cpu", "gpu")
EXECUTED = ROOT / "build" / "executed" / "ci"
HTML = ROOT / "build" / "site" / "ci" / "_build" / "html"


# ---------------------------------------------------------------- configuration agreement
def _makefile_extras() -> list[str]:
    match = re.search(r"^EXTRAS\s*:?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert match, "Makefile defines no EXTRAS"
    return match.group(1).split(",")


def test_environment_yml_installs_the_makefile_extras_from_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = _makefile_extras()
    assert set(extras) <= set(pyproject["project"]["optional-dependencies"]), extras
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert f"-e .[{','.join(extras)}]" in pip_section
    assert "-c constraints.txt" in pip_section


def test_torch_and_triton_pins_agree_everywhere():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["kernels"]
    constraints = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().split()
                       if "==" in line)
    for package in ("torch", "triton"):
        pins = [d for d in deps if re.match(rf"{package}\b", d)]
        assert len(pins) == 1 and "==" in pins[0], f"{package} must be pinned exactly in pyproject: {pins}"
        assert constraints[package] == pins[0].split("==")[1], f"constraints.txt disagrees on {package}"
    book = pyproject["project"]["optional-dependencies"]["book"]
    assert any(re.match(r"jupyter-book.*<2", d) for d in book), "jupyter-book 2.x cannot build offline"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^(make \w+)", readme, re.M)
    assert commands[:2] == ["make book", "make test"], "the README must open with the two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), ".ci/run must run the README's test command"


# ---------------------------------------------------------------- notebook structure
def _code_cells(text: str):
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_one_parameters_cell_and_a_params_file_per_profile(source):
    cells = _code_cells(source.read_text())
    params_cells = [c for c in cells if re.match(r"\s*:tags: \[parameters\]", c)]
    assert len(params_cells) == 1, f"{source.name}: exactly one parameters cell"
    names = set(re.findall(r"^(\w+)\s*=", params_cells[0], re.M))
    assert "profile" in names, f"{source.name}: the parameters cell must define `profile`"
    # papermill silently skips lines it cannot parse (e.g. a comment holding '='), and then
    # drops the injected value with only a warning: every assignment must be parseable.
    from papermill.translators import PythonTranslator

    cell_source = params_cells[0].split("\n", 1)[1]
    parsed = {p.name for p in PythonTranslator.inspect({"source": cell_source})}
    assert parsed == names, f"{source.name}: papermill cannot parse parameters {names - parsed}"
    for profile in PROFILES:
        path = ROOT / "params" / profile / f"{source.stem}.yaml"
        assert path.exists(), f"missing {path.relative_to(ROOT)}"
        keys = set(yaml.safe_load(path.read_text()) or {})
        unknown = keys - names
        assert not unknown, f"{path.relative_to(ROOT)} sets parameters the notebook lacks: {unknown}"


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    for source in NOTEBOOKS:
        assert f"generated/{source.stem}" in toc, f"{source.name} is not in book/_toc.yml"


# ---------------------------------------------------------------- executed notebooks (ci)
def _executed():
    if not EXECUTED.exists():
        pytest.skip("build/executed/ci missing: run `make test`")
    paths = sorted(EXECUTED.glob("*.ipynb"))
    assert {p.stem for p in paths} == {s.stem for s in NOTEBOOKS}, "not every notebook was executed"
    return paths


def _outputs(path: Path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        yield from cell.get("outputs", [])


@pytest.mark.book
def test_executed_notebooks_have_no_error_output():
    for path in _executed():
        errors = [o for o in _outputs(path) if o.get("output_type") == "error"]
        assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"


@pytest.mark.book
def test_glued_figures_are_images_not_text():
    prefix = "application/papermill.record/"
    figures = 0
    for path in _executed():
        for output in _outputs(path):
            data = output.get("data", {})
            text = data.get(prefix + "text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if text.startswith("<Figure"):
                figures += 1
                assert prefix + "image/png" in data, f"{path.name}: a glued figure has no PNG"
    assert figures > 0, "no glued figure found at all"


# ---------------------------------------------------------------- rendered HTML (ci)
def _html_files():
    if not (HTML / "index.html").exists():
        pytest.skip("build/site/ci/_build/html missing: run `make test`")
    return sorted(HTML.rglob("*.html"))


@pytest.mark.book
def test_html_loads_no_external_script_or_stylesheet():
    external = re.compile(r"""<(script|link)\b[^>]*\b(src|href)=["'](https?:)?//""", re.I)
    for page in _html_files():
        for match in external.finditer(page.read_text(errors="replace")):
            tag = match.group(0)
            if match.group(1).lower() == "link" and "stylesheet" not in tag and "preload" not in tag:
                continue  # plain hyperlinks in <link rel="canonical"> etc. load nothing
            pytest.fail(f"{page.relative_to(HTML)} loads an external resource: {tag}")


@pytest.mark.book
def test_mathjax_is_served_by_the_book():
    _html_files()
    landing = (HTML / "intro.html").read_text()
    assert re.search(r'src="[^"]*mathjax/tex-chtml\.js[^"]*"', landing)
    assert (HTML / "mathjax" / "tex-chtml.js").exists()


@pytest.mark.book
def test_every_chapter_and_the_bibliography_render():
    pages = {p.relative_to(HTML).as_posix() for p in _html_files()}
    for source in NOTEBOOKS:
        assert f"generated/{source.stem}.html" in pages
    assert "bibliography.html" in pages
    landing = (HTML / "intro.html").read_text()
    assert "<table" in landing, "the landing page lost its glued ladder table"
