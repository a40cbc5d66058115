#!/usr/bin/env python3
"""The book executed in the gpu profile on a GPU machine, and its import as recorded notebooks.

    python3 scripts/gpu_session/gpu_book.py run --out OUT --profile gpu --site WHEEL_SITE [NOTEBOOK ...]
    python3 scripts/gpu_session/gpu_book.py import TARBALL [--dest results/gpu/book]

``run`` is called by ``scripts/gpu_session/gpu_book.sh`` once the wheelhouse is installed and critscale is on the
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

``import`` checks a tarball before it writes anything: its members are exactly those a run packs, each
within its size limit (read from the member headers, before any data is unpacked); ``provenance.json``
is of the gpu profile, a known GPU and its driver, a commit of this repository's history, ISO dates,
finite positive wall times and the version of every package that executed the book, and names every
notebook of ``notebooks/`` (and no other) as run ok; each executed notebook is a valid notebook (nbformat)
without an error output or a failed cell and without script in what the page renders; no JSON holds a
non-finite number or an absolute machine path.  Then it replaces ``--dest`` with the notebooks, results
and provenance (staged beside it and renamed into place), so that ``make book PROFILE=gpu`` renders them
on a machine without a GPU.  Exit status 2 and one line per problem when it refuses.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "gpu_session"))  # gpu_intake
LAST = "99_reproducibility"
IMPORTS = ("papermill", "jupytext", "ipykernel", "nbclient", "nbformat", "jupyter_client", "numpy", "scipy",
           "pandas", "matplotlib", "seaborn", "yaml", "torch", "transformers", "critscale", "critscale.bookbuild")
VERSIONS = ("torch", "triton", "transformers", "numpy", "scipy", "pandas", "matplotlib", "seaborn", "papermill",
            "jupytext", "ipykernel", "nbclient", "nbformat")
ESTIMATE = re.compile(r"^#\s*gpu-book:\s*about\s+(\d+)\s*s", re.M)
TAR_LIMIT = 15 * 2**20  # the GPU machine returns files of at most 16 MiB
DEADLINE_RESERVE_S = 45  # after the chapters: 99_reproducibility and the packing


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
    if skip:  # the CPU check of this script (scripts/gpu_session/gpu_wheelhouse_check.sh) has no torch for Python 3.12
        print(f"[gpu_book] not checked, GPU_BOOK_SKIP_IMPORTS: {', '.join(skip)}", flush=True)
    try:
        preflight(site, skip)
    except Refused as exc:
        print(f"gpu_book: this Python cannot execute the book:\n{exc}", file=sys.stderr)
        return 2
    from critscale.triton_backend import choose

    choose(interpreter=args.profile != "gpu")  # for every notebook this run executes
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
BOOK_VERSIONS = ("python", *VERSIONS)  # what executed the notebooks: each must have a version
DRIVER_VERSION = re.compile(r"^\d+(\.\d+)+$")  # nvidia-smi's driver_version, e.g. "580.159.04"
MiB = 2**20
BOOK_LIMITS = {"provenance.json": 1 * MiB, "executed": 32 * MiB, "results": 8 * MiB, "logs": 4 * MiB,
               "figures": 8 * MiB}
BOOK_TOTAL = 192 * MiB  # the tarball is at most TAR_LIMIT packed; notebooks and JSON compress a few times
FIGURE = re.compile(r"^results/figures/(?P<nb>[^/]+)/[A-Za-z0-9_.\-]+\.(png|svg)$")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# A machine's absolute path in a string: a file:// URL (but for the tree, scrubbed to file://<repo>), a path
# under a folder of the machine's own (after a character that cannot end a relative path's component), or
# a Windows user folder.
MACHINE_PATH = re.compile(r"file://(?!<repo>)|(?<![\w.~>\-])/(tmp|root|work|home|opt|usr|Users|var|mnt|srv|private"
                          r"|scratch)/"
                          r"|\b[A-Za-z]:\\(Users|home)\\")
# Embedded binary data (an image's base64, whole or in a data: URI) is not text: "/tmp/" can occur in it by chance.
BASE64 = re.compile(r"data:[\w/+.\-]*;base64,[A-Za-z0-9+/=\n]*|^[A-Za-z0-9+/=\n]{256,}$")
ACTIVE = re.compile(r"<\s*script\b|javascript\s*:|<\s*(iframe|object|embed)\b", re.I)  # anywhere
HANDLER = re.compile(r"<[^<>]*\son[a-z]+\s*=", re.I)  # an event handler attribute, in HTML and SVG
SCRIPT_MIMES = ("application/javascript", "text/javascript", "application/x-javascript")
GLUE_PREFIX = "application/papermill.record/"  # critscale.page.pagedata's glue: the mime type follows
NARROW_METADATA = "critscale/narrow"  # critscale.page.pagedata.NARROW_METADATA: a figure's phone layout, shown by the HTML


def book_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("*.md"))


def book_layout(names: list[str]):
    """What a book tarball may hold: each notebook's executed copy (required), results, figures and log."""
    from gpu_intake import Layout

    known = set(names)

    def limit(member: str) -> int | None:
        if member == "provenance.json":
            return BOOK_LIMITS[member]
        figure = FIGURE.match(member)
        if figure:
            return BOOK_LIMITS["figures"] if figure["nb"] in known else None
        for sub, suffix in (("executed", ".ipynb"), ("results", ".json"), ("logs", ".log")):
            folder, _, file = member.partition("/")
            if folder == sub and file.endswith(suffix) and file[: -len(suffix)] in known:
                return BOOK_LIMITS[sub]
        return None

    folders = {"executed", "results", "logs", "results/figures", *(f"results/figures/{nb}" for nb in names)}
    required = {"provenance.json", *(f"executed/{nb}.ipynb" for nb in names)}
    return Layout(limit=limit, folders=frozenset(folders), required=frozenset(required), total=BOOK_TOTAL,
                  packed=16 * MiB, members=4000)


def check_provenance(prov: dict, profile: str, names: list[str]) -> list[str]:
    """Problems of the book's ``provenance.json``: every field present and of a value that checks out."""
    from critscale.page.gpu_results import GpuResultError, validate_provenance

    lacking = [k for k in REQUIRED_PROVENANCE if k not in prov]
    if lacking:
        return [f"provenance.json lacks {', '.join(lacking)}"]
    problems = []
    if prov["profile"] != profile:
        problems.append(f"provenance.json: profile is {prov['profile']!r}, expected {profile!r}")
    try:
        validate_provenance(prov, "provenance.json", versions_required=BOOK_VERSIONS, full_history=True)
    except GpuResultError as err:
        problems.append(str(err))
    if not isinstance(prov["driver"], str) or not DRIVER_VERSION.match(prov["driver"]):
        problems.append(f"provenance.json: driver is {prov['driver']!r}, not an NVIDIA driver version")
    if prov.get("imports_not_checked", []) != []:
        problems.append(f"provenance.json: imports_not_checked is {prov['imports_not_checked']!r}: "
                        "the run did not check that everything imports")
    runs = prov["notebooks"]
    if not isinstance(runs, dict):
        return problems + [f"provenance.json: notebooks is {type(runs).__name__}, not a mapping"]
    problems += [f"provenance.json: names notebook {nb!r}, which the book does not have"
                 for nb in sorted(set(runs) - set(names))]
    for nb in names:
        run = runs.get(nb)
        status = run.get("status") if isinstance(run, dict) else None
        seconds = run.get("seconds") if isinstance(run, dict) else None
        if status != "ok":
            problems.append(f"{nb}: {status or 'not executed'}")
        elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
            problems.append(f"provenance.json: {nb} ran for {seconds!r}, not a finite positive number of seconds")
    return problems


def _strings(value):
    """Every string of a parsed JSON value, keys included (without recursion: any depth that parsed)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def machine_paths(value) -> list[str]:
    """The absolute machine paths found in the strings of ``value`` (each with a little context), sorted."""
    hits = set()
    for s in _strings(value):
        s = BASE64.sub("", s)
        for m in MACHINE_PATH.finditer(s):
            hits.add(s[m.start(): m.start() + 40].split("\n")[0])
    return sorted(hits)


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def check_output(where: str, output: dict) -> list[str]:
    """Problems of one cell output: an error, or active content (script) in what the page renders."""
    if output.get("output_type") == "error":
        return [f"{where} has an error output ({output.get('ename')}: {str(output.get('evalue'))[:120]})"]
    problems = []
    narrow = (output.get("metadata") or {}).get(NARROW_METADATA) or {}
    for key, value in [*(output.get("data") or {}).items(), *narrow.items()]:
        mime = key[len(GLUE_PREFIX):] if key.startswith(GLUE_PREFIX) else key
        body = _joined(value)
        if mime in SCRIPT_MIMES:
            problems.append(f"{where} has a {key} output (script is not imported)")
        elif mime in ("text/html", "image/svg+xml", "text/markdown"):
            found = ACTIVE.search(body) or (HANDLER.search(body) if mime != "text/markdown" else None)
            if found:
                problems.append(f"{where}: its {key} output holds {found.group(0)[-40:]!r} (script is not imported)")
    return problems


def check_notebook(member: str, data: bytes) -> list[str]:
    """Problems of an executed notebook: not a valid notebook, an error or failed cell, active content."""
    import warnings

    import nbformat

    from gpu_intake import IntakeError, strict_json

    try:
        raw = strict_json(data, member)
    except IntakeError as err:
        return [str(err)]
    if raw.get("nbformat") != 4:
        return [f"{member}: not a version-4 notebook (nbformat {raw.get('nbformat')!r})"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            nb = nbformat.from_dict(raw)
            nbformat.validate(nb)
        except nbformat.ValidationError as err:
            return [f"{member}: not a valid notebook ({str(err.message)[:160]})"]
        except Exception as err:  # nbformat's reader on a malformed structure
            return [f"{member}: not a valid notebook ({type(err).__name__}: {str(err)[:160]})"]
    problems = []
    if (nb.metadata.get("papermill") or {}).get("exception"):
        problems.append(f"{member}: papermill records an exception in the run")
    for i, cell in enumerate(nb.cells):
        where = f"{member}: cell {i}"
        if cell.cell_type != "code":
            found = ACTIVE.search(_joined(cell.source))
            if found:
                problems.append(f"{where} ({cell.cell_type}) holds {found.group(0)[-40:]!r} (script is not imported)")
            continue
        run = cell.metadata.get("papermill") or {}
        if run.get("exception") or run.get("status") == "failed":
            problems.append(f"{where} failed (papermill status {run.get('status')!r})")
        for output in cell.get("outputs", []):
            problems += check_output(where, output)
    hits = machine_paths(raw)
    if hits:
        problems.append(f"{member}: absolute machine paths ({'; '.join(repr(h) for h in hits[:3])})")
    return problems[:5]


def check_member(member: str, data: bytes) -> list[str]:
    """Problems of one member of the book tarball other than a notebook and the provenance."""
    from gpu_intake import IntakeError, strict_json, text

    try:
        if member.endswith(".png"):
            return [] if data.startswith(PNG_MAGIC) else [f"{member}: not a PNG image"]
        if member.endswith((".svg", ".log")):
            body = text(data, member)
            found = (ACTIVE.search(body) or HANDLER.search(body)) if member.endswith(".svg") else None
            return [f"{member}: holds {found.group(0)[-40:]!r} (script is not imported)"] if found else []
        value = strict_json(data, member)
    except IntakeError as err:
        return [str(err)]
    nb = Path(member).stem
    if value.get("notebook", nb) != nb:
        return [f"{member}: the results of notebook {value.get('notebook')!r}, not of {nb}"]
    hits = machine_paths(value)
    return [f"{member}: absolute machine paths ({'; '.join(repr(h) for h in hits[:3])})"] if hits else []


def check_book(files: dict[str, bytes], profile: str) -> list[str]:
    """Problems of a book tarball's files (empty when they may be imported)."""
    from gpu_intake import IntakeError, strict_json

    names = book_names()
    try:
        prov = strict_json(files["provenance.json"], "provenance.json")
        problems = check_provenance(prov, profile, names)
        hits = machine_paths(prov)
        if hits:
            problems.append(f"provenance.json: absolute machine paths ({'; '.join(repr(h) for h in hits[:3])})")
    except IntakeError as err:
        problems = [str(err)]
    for member in sorted(files):
        if member.endswith(".ipynb"):
            problems += check_notebook(member, files[member])
        elif member != "provenance.json":
            problems += check_member(member, files[member])
    return problems


def read_book(tarball: Path, profile: str) -> dict[str, bytes]:
    """The checked files of a book tarball; ``gpu_intake.IntakeError`` with one line per problem otherwise."""
    from gpu_intake import IntakeError, read_tarball

    files = read_tarball(tarball, book_layout(book_names()))
    problems = check_book(files, profile)
    if problems:
        raise IntakeError("\n".join(f"{tarball.name}: {p}" for p in problems))
    return files


def stage_book(files: dict[str, bytes], folder: Path) -> None:
    """Write what the book import keeps (executed notebooks, results, provenance) into a new ``folder``."""
    (folder / "executed").mkdir(parents=True)
    (folder / "results").mkdir()
    for member, data in sorted(files.items()):
        top = member.split("/")[0]
        if member == "provenance.json" or (top in ("executed", "results") and member.count("/") == 1):
            (folder / member).write_bytes(data)


def imported_line(files: dict[str, bytes], dest: Path) -> str:
    prov = json.loads(files["provenance.json"])
    where = dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest
    return (f"gpu_book import: {len(prov['notebooks'])} notebooks of commit {prov['commit']} ({prov['device']}, "
            f"{prov['date_utc']}) in {where}")


def import_tarball(args) -> int:
    from gpu_intake import IntakeError, remove, staging_folder, swap_in

    dest = (ROOT / args.dest).resolve() if not Path(args.dest).is_absolute() else Path(args.dest)
    try:
        files = read_book(Path(args.tarball), args.profile)
    except IntakeError as err:
        print("\n".join(f"gpu_book import: refusing {line}" for line in str(err).splitlines()), file=sys.stderr)
        return 2
    try:
        stage = staging_folder(dest)
        try:  # one run only: nothing of an earlier import is kept
            stage_book(files, stage / "book")
            swap_in([(stage / "book", dest)], stage / ".replaced")
        finally:
            remove(stage)
    except OSError as err:
        print(f"gpu_book import: nothing imported: cannot write beside {dest} ({err})", file=sys.stderr)
        return 1
    print(imported_line(files, dest))
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
