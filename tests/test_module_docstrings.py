"""Module docstrings of the package say what the module holds, briefly: at most 30 lines, and no history.

families.py ran to 59 lines, laws.py to 48 (and told of "the issue that prompted this module"), schedule.py to
47, roots.py to 46 and nulls.py to 43; the derivations they held are now in the docstrings of the functions
that implement them.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "critscale"
MODULES = sorted(SRC.rglob("*.py"))
HISTORY = ("the version before", "that prompted", "used to be", "was replaced by", "an earlier version of this")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_docstring_is_short_and_tells_no_history(path):
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    assert doc.count("\n") + 1 <= 30, f"{path.relative_to(SRC)}: a module docstring of {doc.count(chr(10)) + 1} lines"
    for phrase in HISTORY:
        assert phrase not in doc.lower(), f"{path.relative_to(SRC)}: its docstring narrates history ({phrase!r})"
