"""How `make test` runs pytest: one pytest-xdist worker per core, each module on one worker, one thread each.

The old target ran the whole suite in one process, on one of CI's two cores.
"""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest_line(*make_args: str) -> str:
    """The pytest command `make -n pytest` would run with ``make_args``."""
    run = subprocess.run(["make", "-n", "--no-print-directory", "pytest", *make_args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stdout.splitlines() if " -m pytest" in ln]
    assert len(lines) == 1, run.stdout
    return lines[0]


def test_make_runs_pytest_on_every_core_with_each_module_on_one_worker():
    """Two cores: two workers, a module's tests on one of them (its module-scoped fixtures, e.g. the GPU scripts'
    smoke runs and the calibration heads, built once; the browser checks' copies beside a page not raced)."""
    assert re.search(r"-m pytest -q -n 2 --dist loadscope\s*$", _pytest_line("JOBS=2"))
    assert " -n " not in _pytest_line("JOBS=2", "PYTEST_JOBS=1")  # one process when asked
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\n(\t.*\n)*\t\$\(PYTEST\)$", makefile, re.M), "make test runs $(PYTEST)"


def test_pytest_xdist_is_in_the_test_extra_and_pinned():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"pytest-xdist\b", req) for req in extra), extra
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert any(re.fullmatch(r"pytest-xdist==[\d.]+", ln) for ln in pins) and any(
        re.fullmatch(r"execnet==[\d.]+", ln) for ln in pins)


def test_an_xdist_worker_keeps_torch_to_one_thread():
    """Two workers each with a pool as wide as the machine would share two cores four ways (tests/conftest.py)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("not an xdist worker (`make test` runs pytest with -n)")
    import torch

    assert os.environ["OMP_NUM_THREADS"] == "1" and torch.get_num_threads() == 1
