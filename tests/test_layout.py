"""The tree's rooms: the page-making modules in critscale.page (re-exported as cs.*), a borrowed GPU machine's
plumbing in scripts/gpu_session/ with a README naming each script, and every script path the manuals name exists."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "critscale"
PAGE = ("pagedata", "plotting", "narrowfigure", "tables", "keys", "reader_names", "provenance", "gpu_results",
        "resultmap")
SESSION = ("gpu_session.sh", "gpu_book.sh", "gpu_book.py", "gpu_gpt2_session.sh", "gpu_wheelhouse.sh",
           "gpu_wheelhouse.txt", "gpu_wheelhouse_check.sh", "gpu_critscale_wheel.py", "gpu_import.py", "gpu_intake.py")


def test_the_page_making_modules_are_one_subpackage_and_cs_still_reaches_them():
    """They sat among the theory modules at the top of src/critscale/; cs.record, cs.plotting, ... keep working."""
    import critscale as cs

    assert [n for n in PAGE if not (SRC / "page" / f"{n}.py").exists()] == []
    assert [n for n in PAGE if (SRC / f"{n}.py").exists()] == []
    for name in set(PAGE) - {"narrowfigure"}:
        assert getattr(cs, name) is importlib.import_module(f"critscale.page.{name}"), name
    assert cs.record is cs.pagedata.record and cs.record_figure is cs.pagedata.record_figure


def test_one_word_one_module_name():
    """gpu_records, recorded.py and gpu_suite/records.py beside cs.record; gpt2/ the trainer; two families.py."""
    gone = ["gpu_records.py", "gpt2", "models/families.py", "models/gpt2_family.py", "models/llama_family.py",
            "diagnostic/recorded.py"]
    assert [g for g in gone if (SRC / g).exists()] == []
    assert not (ROOT / "scripts" / "gpu_suite" / "records.py").exists()
    for module in ("critscale.trainer.train", "critscale.models.architectures", "critscale.diagnostic.gpu_runs"):
        importlib.import_module(module)


def test_the_borrowed_machines_plumbing_is_one_folder_whose_readme_names_each_script():
    folder = ROOT / "scripts" / "gpu_session"
    readme = (folder / "README.md").read_text()
    held = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "README.md")
    assert held == sorted(SESSION)
    assert [n for n in held if f"`{n}" not in readme] == []
    assert [n for n in SESSION if (ROOT / "scripts" / n).exists()] == []


def test_every_script_path_the_makefile_and_the_manuals_name_exists():
    named = set()
    for doc in [ROOT / "Makefile", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                *sorted((ROOT / "scripts").rglob("*.sh")), *sorted((ROOT / "scripts").rglob("*.py"))]:
        named |= {(doc.relative_to(ROOT), m) for m in re.findall(r"\bscripts/[\w/]+\.(?:sh|py|txt)\b", doc.read_text())}
    assert named
    assert sorted((str(doc), path) for doc, path in named if not (ROOT / path).exists()) == []


def _relative_imports(path: Path) -> set[str]:
    """The sibling modules a module imports (``from .x import``), at its top or inside its functions."""
    import ast

    tree = ast.parse(path.read_text())
    return {node.module.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_the_models_modules_import_in_one_direction():
    """models/families.py imported its two architecture modules, which imported it back (lazily, to break the loop);
    the lookup of the architecture that applies is its own module (registry), above both."""
    folder = SRC / "models"
    graph = {p.stem: _relative_imports(p) & {q.stem for q in folder.glob("*.py")} for p in folder.glob("*.py")}
    graph.pop("__init__")

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in graph.get(start, ()))

    assert sorted(m for m in graph if reaches(m, m)) == []
