"""critscale reaches a GPU machine as an installed package: its wheel, checked against the tree, never a copy.

``scripts/gpu_session/gpu_critscale_wheel.py`` builds the wheel here and checks it there, module by module, against the
tree at the paths ``pyproject.toml`` maps (``critscale.kernels`` from ``kernels/``).
"""

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts" / "gpu_session"), str(ROOT / "scripts")]  # the session plumbing, gpu_suite

import gpu_critscale_wheel as gcw  # noqa: E402


def _wheel(path: Path, modules: dict) -> Path:
    """A wheel-shaped zip holding ``modules`` (path to bytes) and a dist-info."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in modules.items():
            zf.writestr(name, data)
        zf.writestr("critscale-0.1.0.dist-info/METADATA", "Name: critscale\n")
    path.write_bytes(buf.getvalue())
    return path


def test_no_script_rebuilds_the_kernels_package_by_hand():
    """The scripts copied kernels/ into a copy of src/critscale (three shell scripts) or loaded it with
    spec_from_file_location (gpu_suite/env.py); the package now comes only from pip."""
    offenders = []
    for path in sorted((ROOT / "scripts").rglob("*")):
        if path.suffix in (".sh", ".py") and path.name != "gpu_critscale_wheel.py":
            text = path.read_text()
            for needle in ("cp -r kernels", "cp -r src/critscale", "spec_from_file_location"):
                if needle in text:
                    offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
    assert not (ROOT / "scripts" / "gpu_run.sh").exists()


def test_the_wheel_maps_the_kernels_where_pyproject_says():
    modules = gcw.tree_modules()
    assert modules["critscale/kernels/__init__.py"] == (ROOT / "kernels" / "__init__.py").read_bytes()
    assert modules["critscale/diagnostic/__init__.py"] == (ROOT / "src/critscale/diagnostic/__init__.py").read_bytes()


@pytest.mark.parametrize("edit, words", [
    (lambda m: m.update({"critscale/kernels/qk.py": m["critscale/kernels/qk.py"] + b"\n# edited\n"}),
     "critscale/kernels/qk.py differs from the tree's"),
    (lambda m: m.pop("critscale/kernels/tiles.py"), "critscale/kernels/tiles.py is missing from it"),
    (lambda m: m.update({"critscale/kernels/old.py": b"x = 1\n"}), "critscale/kernels/old.py is in it but not"),
])
def test_a_wheel_that_is_not_the_trees_is_refused_in_one_line(tmp_path, edit, words):
    modules = gcw.tree_modules()
    gcw.check_wheel(_wheel(tmp_path / "good.whl", modules))  # the tree's own modules pass
    edit(modules)
    rebuild = "rebuild it with `.venv/bin/python scripts/gpu_session/gpu_critscale_wheel.py build"
    with pytest.raises(gcw.Refused, match=rebuild) as err:
        gcw.check_wheel(_wheel(tmp_path / "critscale-0.1.0-py3-none-any.whl", modules))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_install_refuses_a_stale_wheel_with_exit_2_and_installs_nothing(tmp_path):
    wheels = tmp_path / "wh"
    wheels.mkdir()
    modules = gcw.tree_modules()
    modules["critscale/softmax.py"] = b"stale = True\n"
    _wheel(wheels / "critscale-0.1.0-py3-none-any.whl", modules)
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_session" / "gpu_critscale_wheel.py"), "install", str(wheels),
                           str(site)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "critscale/softmax.py differs" in proc.stderr
    assert not site.exists()


def test_the_suite_refuses_to_run_without_an_installed_critscale():
    """gpu_suite.env used to load critscale and critscale.kernels from the tree when they were not installed;
    now it says in one line that critscale must be installed (-S: no site-packages, so no critscale)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpu_suite import env\n"
            "try:\n env.ensure_importable()\nexcept ImportError as e:\n print(e); sys.exit(3)")
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT / "scripts")], capture_output=True, text=True,
                          timeout=60, cwd="/")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "critscale.kernels cannot be imported" in proc.stdout and "install critscale" in proc.stdout


@pytest.mark.slow
def test_the_built_wheel_installs_a_critscale_whose_kernels_are_the_trees(tmp_path):
    wheel = gcw.build(tmp_path / "wh")
    site = tmp_path / "site"
    assert gcw.install(tmp_path / "wh", site) == wheel
    installed = site / "critscale" / "kernels" / "dispatch.py"
    assert installed.read_bytes() == (ROOT / "kernels" / "dispatch.py").read_bytes()
    assert not (site / "kernels").exists()
