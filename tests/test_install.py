"""critscale installs into an environment people already have: ranges, extras, and the book's exact versions.

The old pyproject pinned ``torch==2.13.0`` and made gguf, accelerate and seaborn core requirements, so
``pip install`` into an environment with another torch replaced it.  The book's venv keeps its exact
versions through ``constraints.txt`` (``make env`` installs with ``-c constraints.txt``).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from critscale.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CORE = [Requirement(r) for r in PROJECT["dependencies"]]
OPTIONAL = {extra: [Requirement(r) for r in reqs] for extra, reqs in PROJECT["optional-dependencies"].items()}


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return {canonicalize_name(n): v for n, v in (line.split("==") for line in lines if "==" in line)}


def _gpu_versions() -> dict[str, str]:
    """The versions the kernels ran with on the GPU machine (results/gpu/kernels_tests.json)."""
    return json.loads((ROOT / "results" / "gpu" / "kernels_tests.json").read_text())["provenance"]["versions"]


def _requirement(name: str, reqs=CORE) -> Requirement:
    return next(r for r in reqs if canonicalize_name(r.name) == name)


def test_core_requirements_are_lower_bounds_that_admit_the_locked_and_newer_releases():
    """Every core requirement is a lower bound only (no ==, no upper bound) that admits constraints.txt's version;
    torch admits 2.13.0 (the book's), 2.11.0+cu130 (the GPU machine's) and a later 2.99; the old pin admitted only
    the first."""
    pins = _pins()
    for req in CORE:
        assert req.specifier and all(s.operator == ">=" for s in req.specifier), f"{req}: not a lower bound"
        assert req.specifier.contains(pins[canonicalize_name(req.name)]), f"{req} refuses the locked version"
    torch = _requirement("torch").specifier
    assert all(torch.contains(v) for v in ("2.13.0", "2.99", _gpu_versions()["torch"]))
    gpu = _gpu_versions()
    for name in ("numpy", "scipy"):
        assert _requirement(name).specifier.contains(gpu[name]), f"{name} {gpu[name]} of the GPU machine refused"


def test_optional_packages_are_extras_not_core_requirements():
    """gguf, accelerate and triton are in extras only (the old pyproject required gguf and accelerate), and each
    extra holds the packages critscale.extras names when one is missing (an install line that works)."""
    core = {canonicalize_name(r.name) for r in CORE}
    assert not core & {"gguf", "accelerate", "triton"}
    for extra, packages in EXTRAS.items():
        assert set(packages) <= {canonicalize_name(r.name) for r in OPTIONAL[extra]}, extra
    triton = _requirement("triton", OPTIONAL["kernels"]).specifier
    assert triton.contains(_pins()["triton"]) and triton.contains(_gpu_versions()["triton"])


def test_makefile_installs_every_extra_with_the_constraints():
    """The book's venv (`make env`) gets every extra (chapter 13 reads a GGUF file, chapter 12 runs the kernels,
    the tests place layers with a device map) and its exact versions from constraints.txt."""
    makefile = (ROOT / "Makefile").read_text()
    extras = set(re.search(r"^EXTRAS\s*:=\s*(\S+)\s*$", makefile, re.M).group(1).split(","))
    assert extras == set(OPTIONAL)
    assert re.search(r'pip install .*-c constraints\.txt -e "\.\[\$\(EXTRAS\)\]"', makefile)
    assert re.search(r"^export CRITSCALE_CACHE := \$\(CURDIR\)/build/", makefile, re.M)


def test_the_console_command_is_installed():
    """`critscale` is a console command of the install, running critscale.cli:main."""
    assert PROJECT["scripts"] == {"critscale": "critscale.cli:main"}
    (command,) = entry_points(group="console_scripts", name="critscale")
    assert command.value == "critscale.cli:main"


def test_readme_installs_with_extras_that_exist_and_says_where_the_cache_is():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"pip install [^`\n]*?\[([a-z,]+)\]", readme))
    assert named, "the README shows no pip install with extras"
    assert {e for group in named for e in group.split(",")} <= set(OPTIONAL)
    assert "critscale diagnose" in readme and "CRITSCALE_CACHE" in readme


def _fake_distribution(site: Path, name: str, version: str) -> None:
    """An installed distribution as pip sees it: a dist-info folder with its metadata, no code."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("test\n")
    (info / "RECORD").write_text("")


@pytest.mark.slow  # builds the wheel and installs it into a fresh venv: about 15 s
def test_pip_install_keeps_the_torch_an_environment_already_has(tmp_path):
    """A fresh venv holds every core requirement at its locked version except torch, at 2.11.0 (no index at all):
    pip installs critscale's wheel with its dependencies resolved and torch stays 2.11.0.  The old torch==2.13.0
    made pip look for 2.13.0 to replace it (here: no index, so the install failed)."""
    source = tmp_path / "source"
    for part in ("pyproject.toml", "README.md", "LICENSE"):
        (source / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, source / part)
    for folder in ("src", "kernels"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no machine-wide index, find-links or constraints
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run = dict(env=env, capture_output=True, text=True, timeout=120)
    built = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "wheels"),
                                  str(source)], **run)
    assert built.returncode == 0, built.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    pins = _pins()
    for req in CORE:
        name = canonicalize_name(req.name)
        _fake_distribution(site, name, "2.11.0" if name == "torch" else pins[name])
    installed = subprocess.run(pip + ["--python", str(python), "install", "--no-index", "--find-links",
                                      str(tmp_path / "wheels"), "critscale"], **run)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    versions = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                               "print(m.version('torch'), m.version('critscale'))"],
                              capture_output=True, text=True, check=True).stdout.split()
    assert versions == ["2.11.0", PROJECT["version"]]


BLOCKED_RUN = """
import sys
for name in ("gguf", "accelerate", "triton"):
    sys.modules[name] = None  # as if not installed: `import` fails and find_spec finds nothing
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=128, vocab_size=256, bos_token_id=None,
                           eos_token_id=None)).save_pretrained(sys.argv[1] + "/tiny")
open(sys.argv[1] + "/text.txt", "w").write("a text of some words to read, a few times over. " * 80)
from critscale.cli import main
sys.exit(main(["diagnose", "--model", sys.argv[1] + "/tiny", "--text", sys.argv[1] + "/text.txt", "--out",
               sys.argv[1] + "/out", "--device", "cpu", "--max-windows", "2", "--max-len", "128", "--nulls",
               "gauss_qk", "--null-windows", "2", "--no-progress"]))
"""


@pytest.mark.slow  # a fresh interpreter imports torch and transformers: about 10 s
def test_the_core_install_diagnoses_a_model_without_the_extras(tmp_path):
    """`critscale diagnose --model DIR`, figures included, with gguf, accelerate and triton absent: none of them is
    imported unless a GGUF file, a device map or the kernels are asked for.  It runs outside the checkout, as an
    installed package does: in the repository root the folder kernels/ is importable as a top-level `kernels`,
    which transformers probes for (its hub kernels) and imports."""
    env = dict(os.environ, TRITON_INTERPRET="1", HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", BLOCKED_RUN, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "heads.csv").is_file() and list((tmp_path / "out").glob("*.png"))
