#!/usr/bin/env python3
"""The book executed in the gpu profile on a GPU machine, and its import as recorded notebooks.

    python3 scripts/gpu_book.py run --out OUT --profile gpu --site WHEEL_SITE [NOTEBOOK ...]
    python3 scripts/gpu_book.py import TARBALL [--dest results/gpu/book]

``run`` is called by ``scripts/gpu_book.sh`` once the wheelhouse is installed and critscale is on the
path.  It checks first that everything imports and that every requirement of the wheels is met by what
is installed (exit 2 with the list, before any notebook runs), and that the recorded GPU results pass
their schema (the build driver's ``check-gpu``), then executes the chapters in parallel (longest first,
by the estimate in each ``params/<profile>/<nb>.yaml``: a comment ``# gpu-book: about N s``), each
through the book's build driver exactly as the Makefile runs it (``python -m critscale.bookbuild notebook
NB --profile P``: the parameter file checked against the notebook, execution in a staging folder, outputs
moved into ``build/`` only when every cell ran), then ``99_reproducibility``, and packs
``OUT/gpu_book.tar.gz``: ``executed/<nb>.ipynb``, ``results/<nb>.json``, ``results/figures/``, ``logs/``
and ``provenance.json`` (device, driver, versions, commit, date, and each notebook's status and wall
time).  Absolute paths of the machine (the tree, the wheel site) are replaced by ``<repo>`` and ``<site>``
in what is packed.

``import`` checks a tarball (gpu profile, every notebook of ``notebooks/`` present and executed without
error, provenance complete, no absolute machine path left) and replaces ``--dest`` with its notebooks,
results and provenance, so that ``make book PROFILE=gpu`` renders them on a machine without a GPU.
Exit status 2 and one line per problem when it refuses.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAST = "99_reproducibility"
IMPORTS = ("papermill", "jupytext", "ipykernel", "nbclient", "nbformat", "jupyter_client", "numpy", "scipy",
           "pandas", "matplotlib", "seaborn", "yaml", "torch", "transformers", "critscale", "critscale.bookbuild")
VERSIONS = ("torch", "triton", "transformers", "numpy", "scipy", "pandas", "matplotlib", "seaborn", "papermill",
            "jupytext", "ipykernel", "nbclient", "nbformat")
ESTIMATE = re.compile(r"^#\s*gpu-book:\s*about\s+(\d+)\s*s", re.M)
TAR_LIMIT = 15 * 2**20  # the GPU machine returns files of at most 16 MiB
DEADLINE_RESERVE_S = 45  # after the chapters: 99_reproducibility and the packing
MACHINE_PATHS = ("/tmp/", "/root/", "/work/", "/home/", "/opt/", "/usr/")


class Refused(ValueError):
    """The check found problems; each is one line of the message."""


# ----------------------------------------------------------------------------------------------
# Before running: everything imports, every requirement of the carried wheels is met
# ----------------------------------------------------------------------------------------------


def unmet_requirements(site: Path) -> list[str]:
    """One line per requirement of a distribution in ``site`` that the installed packages do not meet."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.version import Version

    problems = []
    for dist in metadata.distributions(path=[str(site)]):
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{dist.metadata['Name']} needs {req}: {req.name} is not installed")
                continue
            if req.specifier and not req.specifier.contains(Version(have), prereleases=True):
                problems.append(f"{dist.metadata['Name']} needs {req}: {req.name} {have} is installed")
    return problems


def preflight(site: Path, skip: tuple[str, ...] = ()) -> None:
    """Raise :class:`Refused` listing what cannot be imported or what the wheels' requirements lack."""
    import importlib

    problems = []
    for name in (m for m in IMPORTS if m not in skip):
        try:
            importlib.import_module(name)
        except Exception as exc:
            problems.append(f"cannot import {name}: {type(exc).__name__}: {exc}")
    problems += unmet_requirements(site)
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        KernelSpecManager().get_kernel_spec("python3")
    except Exception as exc:
        problems.append(f"no python3 kernel: {type(exc).__name__}: {exc}")
    if problems:
        raise Refused("\n".join(problems))


def versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def device() -> tuple[str, str]:
    """(device name, driver) from nvidia-smi, or a CPU description."""
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()[0]
        name, driver = (v.strip() for v in line.split(","))
        return name, driver
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return f"CPU only ({platform.machine()}, {os.cpu_count()} cores)", "none"


# ----------------------------------------------------------------------------------------------
# Running the notebooks
# ----------------------------------------------------------------------------------------------


def estimate_s(profile: str, nb: str) -> float | None:
    """The wall-time estimate written in ``params/<profile>/<nb>.yaml`` (``# gpu-book: about N s``)."""
    m = ESTIMATE.search((ROOT / "params" / profile / f"{nb}.yaml").read_text())
    return float(m.group(1)) if m else None


DRIVER = ("-m", "critscale.bookbuild")


def check_records(profile: str, logs: Path) -> None:
    """The driver's ``check-gpu`` (the Makefile runs it before any notebook): :class:`Refused` with its error."""
    proc = subprocess.run([sys.executable, *DRIVER, "check-gpu", "--profile", profile], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    (logs / "check-gpu.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise Refused(f"recorded GPU results: {(proc.stderr or proc.stdout).strip()}")


def execute(nb: str, profile: str, threads: int, timeout_s: float, logs: Path) -> dict:
    """One notebook through the build driver, as the Makefile runs it; its status and wall time.

    The driver leaves all of the notebook's outputs in ``build/`` or none; a run past ``timeout_s`` is
    killed with its kernel (the driver's process group)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    env.pop("CRITSCALE_BUILD_SESSION", None)  # the Makefile's per-build timing log: not kept here
    t0 = time.time()
    with open(logs / f"{nb}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, *DRIVER, "notebook", nb, "--profile", profile], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    secs = round(time.time() - t0, 1)
    status = {0: "ok", None: "timed out", 2: "refused its parameters (exit 2)"}.get(code, f"failed (exit {code})")
    print(f"[gpu_book] {nb}: {status} in {secs:.0f} s (estimate {estimate_s(profile, nb)} s)", flush=True)
    return {"status": status, "seconds": secs, "estimate_s": estimate_s(profile, nb), "threads": threads}


PYTHON_LIB = re.compile(r"/[^\s\"'<>:]*?/(site-packages|dist-packages)/")
IPYKERNEL_CELL = re.compile(r"/tmp/ipykernel_\d+/")  # where IPython files a cell's code (in warnings)


def scrub(text: str, site: Path) -> str:
    """The machine's absolute paths replaced: the wheel site by ``<site>``, the tree by ``<repo>``, the
    interpreter's library folders and IPython's cell files (in warnings and tracebacks) by
    ``<python>/site-packages`` and ``<cell>/``."""
    text = text.replace(str(site.parent), "<site>").replace(str(ROOT), "<repo>")
    text = IPYKERNEL_CELL.sub("<cell>/", text)
    return PYTHON_LIB.sub(lambda m: f"<python>/{m.group(1)}/", text)


def pack(out: Path, profile: str, provenance: dict, site: Path, logs: Path) -> Path:
    """``OUT/gpu_book.tar.gz`` of the notebooks this run executed (without the figures folder if it would
    exceed the return limit)."""
    names = sorted(provenance["notebooks"])
    exec_dir, res_dir = ROOT / "build" / "executed" / profile, ROOT / "build" / "results" / profile
    tar_path = out / "gpu_book.tar.gz"
    for with_figures in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            stage = Path(tmp)
            for sub, src, suffix in (("executed", exec_dir, ".ipynb"), ("results", res_dir, ".json"),
                                     ("logs", logs, ".log")):
                (stage / sub).mkdir()
                for f in (src / f"{nb}{suffix}" for nb in names):
                    if f.exists():
                        (stage / sub / f.name).write_text(scrub(f.read_text(), site))
            for nb in names if with_figures else ():
                if (res_dir / "figures" / nb).exists():
                    shutil.copytree(res_dir / "figures" / nb, stage / "results" / "figures" / nb)
            provenance["figures_packed"] = with_figures
            (stage / "provenance.json").write_text(json.dumps(provenance, indent=1))
            with tarfile.open(tar_path, "w:gz") as tar:
                for item in sorted(stage.iterdir()):
                    tar.add(item, arcname=item.name)
        if tar_path.stat().st_size <= TAR_LIMIT:
            break
        print(f"[gpu_book] {tar_path.stat().st_size / 2**20:.1f} MiB with figures: packing without the figures "
              "folder (the notebooks hold every figure)", flush=True)
    return tar_path


def run(args) -> int:
    site = Path(args.site).resolve()
    skip = tuple(m for m in os.environ.get("GPU_BOOK_SKIP_IMPORTS", "").split(",") if m)
    if skip:  # the CPU check of this script (scripts/gpu_wheelhouse_check.sh) has no torch for Python 3.12
        print(f"[gpu_book] not checked, GPU_BOOK_SKIP_IMPORTS: {', '.join(skip)}", flush=True)
    try:
        preflight(site, skip)
    except Refused as exc:
        print(f"gpu_book: this Python cannot execute the book:\n{exc}", file=sys.stderr)
        return 2
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))
    chosen = args.notebooks or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        print(f"gpu_book: no such notebook: {', '.join(unknown)}", file=sys.stderr)
        return 2
    chapters = sorted((nb for nb in chosen if nb != LAST), key=lambda nb: -(estimate_s(args.profile, nb) or 0))
    cores = os.cpu_count() or 1
    jobs = max(1, int(os.environ.get("GPU_BOOK_JOBS", min(len(chapters), cores) or 1)))
    threads = {nb: max(1, cores // jobs) for nb in chapters}
    if chapters:  # the cores left over go to the longest chapter, which starts first
        threads[chapters[0]] += max(0, cores - jobs * threads[chapters[0]])
    timeout_s = float(os.environ.get("GPU_BOOK_NB_TIMEOUT", 480))
    if os.environ.get("GPU_BOOK_DEADLINE"):  # epoch seconds by which everything must be packed
        timeout_s = min(timeout_s, float(os.environ["GPU_BOOK_DEADLINE"]) - time.time() - DEADLINE_RESERVE_S)
        if timeout_s < 60:
            print(f"gpu_book: only {timeout_s:.0f} s left before GPU_BOOK_DEADLINE; not starting", file=sys.stderr)
            return 2
    logs = ROOT / "build" / "gpu-book" / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    try:
        check_records(args.profile, logs)
    except Refused as exc:
        print(f"gpu_book: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    print(f"[gpu_book] {len(chapters)} chapters, {jobs} at a time on {cores} cores; profile {args.profile}",
          flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip(chapters, pool.map(lambda nb: execute(nb, args.profile, threads[nb], timeout_s, logs),
                                           chapters)))
    if LAST in chosen:
        done[LAST] = execute(LAST, args.profile, cores, DEADLINE_RESERVE_S - 10, logs)
    name, driver = device()
    provenance = {"profile": args.profile, "device": name, "driver": driver, "versions": versions(),
                  "commit": os.environ.get("CRITSCALE_COMMIT", "unknown"),
                  "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "wall_time_s": round(time.time() - started, 1), "cores": cores, "jobs": jobs,
                  "imports_not_checked": list(skip),
                  "notebooks": dict(sorted(done.items()))}
    tar_path = pack(Path(args.out), args.profile, provenance, site, logs)
    failed = [nb for nb, r in done.items() if r["status"] != "ok"]
    print(f"[gpu_book] {len(done) - len(failed)} of {len(done)} notebooks ok in {provenance['wall_time_s']:.0f} s; "
          f"{tar_path} {tar_path.stat().st_size / 2**20:.1f} MiB" + (f"; failed: {', '.join(failed)}" if failed else ""),
          flush=True)
    return 0 if not failed else 1


# ----------------------------------------------------------------------------------------------
# Import into the repository
# ----------------------------------------------------------------------------------------------

REQUIRED_PROVENANCE = ("profile", "device", "driver", "versions", "commit", "date_utc", "wall_time_s", "notebooks")


def check_staged(stage: Path, profile: str) -> dict:
    """The provenance of an unpacked tarball; :class:`Refused` with every problem found."""
    problems = []
    prov_path = stage / "provenance.json"
    if not prov_path.exists():
        raise Refused("provenance.json is missing")
    prov = json.loads(prov_path.read_text())
    problems += [f"provenance.json lacks {k}" for k in REQUIRED_PROVENANCE if k not in prov]
    if prov.get("profile") != profile:
        problems.append(f"profile is {prov.get('profile')!r}, expected {profile!r}")
    for nb in sorted(p.stem for p in (ROOT / "notebooks").glob("*.md")):
        status = prov.get("notebooks", {}).get(nb, {}).get("status")
        if status != "ok":
            problems.append(f"{nb}: {status or 'not executed'}")
        elif not (stage / "executed" / f"{nb}.ipynb").exists():
            problems.append(f"{nb}: executed/{nb}.ipynb is missing")
    for f in sorted(stage.rglob("*")):
        if f.suffix in (".ipynb", ".json"):
            text = f.read_text()
            hits = sorted({p for p in MACHINE_PATHS if f'"{p}' in text or f" {p}" in text or f"'{p}" in text})
            if hits:
                problems.append(f"{f.relative_to(stage)}: absolute machine paths ({', '.join(hits)})")
    if problems:
        raise Refused("\n".join(problems))
    return prov


def import_tarball(args) -> int:
    dest = (ROOT / args.dest).resolve() if not Path(args.dest).is_absolute() else Path(args.dest)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        with tarfile.open(args.tarball, "r:gz") as tar:
            tar.extractall(stage, filter="data")
        try:
            prov = check_staged(stage, args.profile)
        except Refused as exc:
            print(f"gpu_book import: refusing {args.tarball}:\n{exc}", file=sys.stderr)
            return 2
        shutil.rmtree(dest, ignore_errors=True)  # one run only: nothing of an earlier import is kept
        (dest / "executed").mkdir(parents=True)
        (dest / "results").mkdir()
        for f in sorted((stage / "executed").glob("*.ipynb")):
            shutil.copy2(f, dest / "executed" / f.name)
        for f in sorted((stage / "results").glob("*.json")):
            shutil.copy2(f, dest / "results" / f.name)
        shutil.copy2(stage / "provenance.json", dest / "provenance.json")
    print(f"gpu_book import: {len(prov['notebooks'])} notebooks of commit {prov['commit']} ({prov['device']}, "
          f"{prov['date_utc']}) in {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute the notebooks and pack them (on the GPU machine)")
    r.add_argument("--out", required=True)
    r.add_argument("--profile", default="gpu")
    r.add_argument("--site", required=True, help="the folder the wheelhouse was installed into")
    r.add_argument("notebooks", nargs="*", help="a subset (default: every notebook, 99_reproducibility last)")
    i = sub.add_parser("import", help="check a tarball and install it as the recorded gpu book")
    i.add_argument("tarball")
    i.add_argument("--dest", default="results/gpu/book")
    i.add_argument("--profile", default="gpu")
    args = ap.parse_args(argv)
    return run(args) if args.command == "run" else import_tarball(args)


if __name__ == "__main__":
    sys.exit(main())
