#!/usr/bin/env python3
"""critscale as a wheel for a GPU machine, built here from the tree and installed there from the same tree.

    python3 scripts/gpu_session/gpu_critscale_wheel.py build DIR        # here (`make gpu-wheelhouse`): DIR/critscale-*.whl
    python3 scripts/gpu_session/gpu_critscale_wheel.py install DIR SITE  # there: check the wheel against the tree, install

The package layout is the one ``pyproject.toml`` declares (``critscale.kernels`` from ``kernels/``), built by
pip like any install.  ``build`` builds from the files git tracks or would track (their working-tree content),
so nothing ignored (``build/``, caches) reaches the wheel.  ``install`` first checks that every module of the
wheel is byte for byte the tree's module at the path ``pyproject.toml`` maps it to, and that the tree has no
module the wheel lacks: a wheel built before an edit is refused in one line (exit 2), never installed.
Standard library only: it runs where critscale is not installed yet.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ("pyproject.toml", "README.md", "LICENSE")


class Refused(Exception):
    """The wheel cannot be used with this tree (the message says why, in one line)."""


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Each package of ``pyproject.toml`` and the folder of the tree it is built from."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = config["package-dir"]
    return {name: root / dirs[name] for name in config["packages"]}


def tree_modules(root: Path = ROOT) -> dict[str, bytes]:
    """The modules the wheel must hold: path inside the wheel (``critscale/kernels/qk.py``) to content."""
    modules = {}
    for name, folder in package_dirs(root).items():
        prefix = name.replace(".", "/")
        for path in sorted(folder.glob("*.py")):
            modules[f"{prefix}/{path.name}"] = path.read_bytes()
    return modules


def wheel_modules(wheel: Path) -> dict[str, bytes]:
    """The Python modules of a wheel (its ``.dist-info`` left out), path to content."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return {n: zf.read(n) for n in zf.namelist() if n.endswith(".py") and ".dist-info/" not in n}
    except (OSError, zipfile.BadZipFile) as err:
        raise Refused(f"{wheel}: not a readable wheel ({err})") from None


def check_wheel(wheel: Path, root: Path = ROOT) -> None:
    """Raise :class:`Refused` unless the wheel holds exactly the tree's modules."""
    have, want = wheel_modules(wheel), tree_modules(root)
    differ = sorted(p for p in want.keys() & have.keys() if have[p] != want[p])
    missing, extra = sorted(want.keys() - have.keys()), sorted(have.keys() - want.keys())
    for problem, paths in (("differs from the tree's", differ), ("is missing from it", missing),
                           ("is in it but not in the tree", extra)):
        if paths:
            more = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
            raise Refused(f"{wheel.name} was not built from this tree: {paths[0]} {problem}{more}; rebuild it "
                          f"with `.venv/bin/python scripts/gpu_session/gpu_critscale_wheel.py build {wheel.parent}` "
                          "(`make gpu-wheelhouse` does too)")


def find_wheel(folder: Path) -> Path:
    """The one critscale wheel in ``folder``."""
    wheels = sorted(folder.glob("critscale-*.whl"))
    if len(wheels) != 1:
        raise Refused(f"{folder}: {len(wheels)} critscale wheels, not one "
                      f"(`.venv/bin/python scripts/gpu_session/gpu_critscale_wheel.py build {folder}` builds it)")
    return wheels[0]


def tracked_files(root: Path = ROOT) -> list[str]:
    """The packaging inputs git tracks or would track (ignored files left out)."""
    dirs = sorted({str(p.relative_to(root)) for p in package_dirs(root).values()})
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *PACKAGING, *dirs],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if (root / line).is_file()]


def build(dest: Path, root: Path = ROOT, python: str = sys.executable) -> Path:
    """Build critscale's wheel into ``dest`` (replacing an earlier one) from the tree's tracked files."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("critscale-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        for rel in tracked_files(root):
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, Path(tmp) / rel)
        subprocess.run([python, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--no-build-isolation", "--wheel-dir", str(dest), tmp], check=True)
    wheel = find_wheel(dest)
    check_wheel(wheel, root)
    return wheel


def install(folder: Path, site: Path, root: Path = ROOT) -> Path:
    """Check the wheel in ``folder`` against the tree and install it (no index, no dependencies) into ``site``."""
    wheel = find_wheel(folder)
    check_wheel(wheel, root)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                    "--no-deps", "--no-compile", "--no-cache-dir", "--target", str(site), str(wheel)], check=True)
    return wheel


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the wheel from the tree into DIR")
    b.add_argument("dir", type=Path)
    i = sub.add_parser("install", help="check DIR's wheel against the tree and install it into SITE")
    i.add_argument("dir", type=Path)
    i.add_argument("site", type=Path)
    args = ap.parse_args(argv)
    try:
        wheel = build(args.dir) if args.cmd == "build" else install(args.dir, args.site)
    except Refused as err:
        print(f"gpu_critscale_wheel: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"gpu_critscale_wheel: {' '.join(err.cmd[:4])} ... failed (status {err.returncode})", file=sys.stderr)
        return 1
    print(f"gpu_critscale_wheel: {args.cmd} {wheel.name}" + (f" into {args.site}" if args.cmd == "install" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
