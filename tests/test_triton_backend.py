"""One place decides where Triton runs the kernels: critscale.triton_backend.choose."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from critscale import triton_backend

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh(monkeypatch):
    """A process where triton is not imported yet and TRITON_INTERPRET is unset."""
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return monkeypatch


@pytest.mark.parametrize("cuda, value, when_unset, interpreter", [
    (False, None, None, True), (True, None, None, False),  # unset: the interpreter exactly without CUDA
    (True, "", None, False),  # empty (what make exports before the venv exists) counts as unset
    (True, None, True, True), (False, None, False, False),  # unset: when_unset decides
    (True, "1", None, True), (False, "0", True, False),  # explicit: it stands, CUDA or not
])
def test_choose_decides_and_exports_the_choice(fresh, cuda, value, when_unset, interpreter):
    fresh.setattr(triton_backend, "_cuda_device", lambda: cuda)
    if value is not None:
        fresh.setenv("TRITON_INTERPRET", value)
    assert triton_backend.choose(when_unset=when_unset) is interpreter
    assert os.environ["TRITON_INTERPRET"] == ("1" if interpreter else "0")


def test_an_explicit_choice_overrides_the_environment(fresh):
    fresh.setenv("TRITON_INTERPRET", "0")
    assert triton_backend.choose(interpreter=True) is True and os.environ["TRITON_INTERPRET"] == "1"


@pytest.mark.parametrize("value", ["true", "2", " 1"])
def test_another_value_of_the_variable_is_refused(fresh, value):
    fresh.setenv("TRITON_INTERPRET", value)
    with pytest.raises(ValueError, match=re.escape(f"TRITON_INTERPRET={value!r}: use 1")):
        triton_backend.choose()


def test_a_choice_triton_was_not_imported_with_is_refused(fresh):
    fresh.setattr(triton_backend, "_cuda_device", lambda: False)
    fresh.setitem(sys.modules, "triton", object())
    with pytest.raises(RuntimeError, match="triton was already imported with TRITON_INTERPRET=unset"):
        triton_backend.choose()
    fresh.setenv("TRITON_INTERPRET", "1")
    assert triton_backend.choose() is True  # the choice triton was imported with is fine


def test_the_command_prints_the_choice_and_refuses_a_bad_value_in_one_line():
    run = lambda value: subprocess.run([sys.executable, "-m", "critscale.triton_backend"], capture_output=True,
                                       text=True, timeout=120, env=dict(os.environ, TRITON_INTERPRET=value))
    ok, bad = run("1"), run("yes")
    assert ok.returncode == 0 and ok.stdout == "1\n"
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "TRITON_INTERPRET='yes'" in bad.stderr


SETTERS = re.compile(r"environ\.setdefault\(\s*[\"']TRITON_INTERPRET|environ\[[\"']TRITON_INTERPRET[\"']\]\s*=|"
                     r"export TRITON_INTERPRET=|TRITON_INTERPRET \?= |nvidia-smi[^\n]*echo [01]")


def test_nothing_else_decides_the_backend():
    """The Makefile (nvidia-smi), the tests' conftest, cli.py, kernels/__init__.py, gpu_suite/env.py, gpu_gpt2.py
    and the shell scripts each decided TRITON_INTERPRET; now only critscale.triton_backend sets it."""
    files = [ROOT / "Makefile", ROOT / "tests" / "conftest.py", *sorted((ROOT / "src").rglob("*.py")),
             *sorted((ROOT / "kernels").rglob("*.py")), *sorted((ROOT / "scripts").rglob("*.py")),
             *sorted((ROOT / "scripts").rglob("*.sh"))]
    offenders = [str(f.relative_to(ROOT)) for f in files
                 if f.name != "triton_backend.py" and SETTERS.search(f.read_text())]
    assert offenders == []
    assert "choose()" in (ROOT / "kernels" / "__init__.py").read_text().replace("_choose_triton_backend()", "choose()")


def test_the_command_line_refuses_a_bad_value_in_one_line(tmp_path, monkeypatch, capsys):
    """cli.py set TRITON_INTERPRET itself (setdefault on CPU) and let a value such as 'yes' through to triton;
    now triton_backend decides, and the command refuses the value in one line with exit 2, writing nothing."""
    import numpy as np

    from checks import one_line_error
    from critscale.cli import main

    path = tmp_path / "qk.npz"
    rng = np.random.default_rng(0)
    shape = (1, 1, 2, 128, 8)
    np.savez(path, q=rng.standard_normal(shape).astype(np.float32), k=rng.standard_normal(shape).astype(np.float32))
    monkeypatch.setenv("TRITON_INTERPRET", "yes")
    out = tmp_path / "out"
    assert main(["diagnose", "--qk", str(path), "--out", str(out), "--no-figures", "--no-progress"]) == 2
    one_line_error(capsys, "TRITON_INTERPRET='yes'", "use 1")
    assert not out.exists()
