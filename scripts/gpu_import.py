#!/usr/bin/env python3
"""Bring one GPU session's files into the repository, refusing anything that does not check out.

    python3 scripts/gpu_import.py DIR          # `make gpu-import DIR=...`

``DIR`` holds what ``scripts/gpu_session.sh`` packed: ``gpu_results.tar.gz`` (the kernel tests, the
benchmark and the Monte-Carlo) and, when the book part ran, ``gpu_book.tar.gz``.  The results are checked
before anything is written: each JSON passes the provenance schema of ``critscale.gpu_records`` (a known
GPU, a commit of this repository's history, the versions), the benchmark is of schema ``critscale-bench/2``,
and the Monte-Carlo was made by the generator version the kernels have now (rows of another version are
other rows).  Then they replace their namesakes in ``results/gpu/``, and the book tarball goes through
``scripts/gpu_book.py import`` (its own checks).  Exit status 2 with one line per problem when it refuses.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ("kernels_tests.json", "kernels_tests.log", "kernels_bench.json", "kernels_bench.csv",
           "kernels_montecarlo.json", "kernels_montecarlo.csv", "kernels_run.json")
BENCH_SCHEMA = "critscale-bench/2"


def check_results(stage: Path) -> list[str]:
    """Problems of the unpacked results (empty when they may be imported)."""
    from critscale.gpu_records import GpuRecordError, validate
    from critscale.kernels import GENERATOR_VERSION

    problems = []
    for path in sorted(stage.glob("*.json")):
        data = json.loads(path.read_text())
        try:
            validate(data, path.name)
        except GpuRecordError as err:
            problems.append(str(err))
        if path.name == "kernels_bench.json" and data.get("schema") != BENCH_SCHEMA:
            problems.append(f"{path.name}: schema {data.get('schema')!r}, expected {BENCH_SCHEMA!r}")
        if path.name == "kernels_montecarlo.json":
            version = data.get("setup", {}).get("generator_version")
            if version != GENERATOR_VERSION:
                problems.append(f"{path.name}: generator version {version!r}, the kernels' is {GENERATOR_VERSION}")
    unknown = sorted(p.name for p in stage.iterdir() if p.name not in RESULTS)
    problems += [f"{name}: not a file the session writes" for name in unknown]
    return problems


def import_results(tarball: Path, dest: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        with tarfile.open(tarball, "r:gz") as tar:
            tar.extractall(stage, filter="data")
        problems = check_results(stage)
        if problems:
            print(f"gpu_import: refusing {tarball.name}:\n" + "\n".join(problems), file=sys.stderr)
            return 2
        names = sorted(p.name for p in stage.iterdir())
        for name in names:
            shutil.copy2(stage / name, dest / name)
    print(f"gpu_import: {', '.join(names)} -> {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, help="the folder with gpu_results.tar.gz (and gpu_book.tar.gz)")
    ap.add_argument("--dest", type=Path, default=ROOT / "results" / "gpu", help="where the results go")
    args = ap.parse_args(argv)
    results, book = args.dir / "gpu_results.tar.gz", args.dir / "gpu_book.tar.gz"
    if not results.exists() and not book.exists():
        print(f"gpu_import: neither gpu_results.tar.gz nor gpu_book.tar.gz in {args.dir}", file=sys.stderr)
        return 2
    status = import_results(results, args.dest.resolve()) if results.exists() else 0
    if status == 0 and book.exists():
        status = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_book.py"), "import", str(book),
                                 "--dest", str(args.dest.resolve() / "book")], cwd=ROOT).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
