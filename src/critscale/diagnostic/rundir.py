"""The run directory of a diagnosis, and the provenance of everything written into it.

:func:`check_out_dir` runs before any computation: ``--out`` must not be empty, must not be an
existing file, device or symbolic link, its parent must exist, and it is created (if missing) and
probed for writing.
An existing directory that is not empty is refused unless ``force``.
With ``force`` only the files of the earlier diagnosis recorded there are replaced (:func:`previous_outputs`):
files of the known output names (:data:`OUTPUT_NAMES`) that the directory's own ``run.json`` lists
with the SHA-256 they still have, regular files inside the directory, never links.
Any other file of a known output name is refused with one line, so ``--force`` never removes or
overwrites a file that no diagnosis recorded, and no file of an earlier run survives beside the new ones.

Outputs are written into a staging folder inside the run directory (:func:`staging`) and renamed
into place by :func:`commit`, ``run.json`` last: a directory without ``run.json`` holds no whole run.
The staging folder of a run that died is removed by the next run given ``--force``.
``run.json`` records the command, the inputs with their SHA-256 hashes, the commit, the date, the
versions, the schedule's and the report's file names and every output with its SHA-256 hash; JSON, text,
HTML and PNG outputs also carry it inside.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from critscale.page import provenance

RUN_FILE = "run.json"
TABLES = ("heads.csv", "nulls.csv", "bins.csv", "entropy_curves.csv", "profiles.csv", "rows.csv.gz")
SCHEDULE_FILE = "schedule.json"
REPORT_FILE = "report.html"
TEXTS = ("summary.json", "summary.txt", SCHEDULE_FILE, REPORT_FILE)
FIGURE_NAMES = ("kappa_vs_n", "head_maps", "profiles", "entropy_curves", "operating_points", "law_shares")
OUTPUT_NAMES = TABLES + TEXTS + tuple(f"{name}.png" for name in FIGURE_NAMES) + (RUN_FILE,)
STAGING_PREFIX = ".critscale-staging-"
"""Name of the staging folder of a run in progress: this prefix and the process id."""
MAX_RUN_FILE_BYTES = 1 << 20  # a run.json is a few kB; a larger one is not a manifest of a diagnosis
COMMAND = "python -m critscale diagnose"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class OutputError(ValueError):
    """``--out`` cannot hold the results."""


def shown(path) -> str:
    """``path`` for a one-line message: shortened in the middle when longer than 120 characters."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]} ({len(text)} characters)"


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a file"


def _lstat(path: Path, what: str):
    """``os.lstat(path)``, or None when nothing is there; :class:`OutputError` names any other problem."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise OutputError(f"{what} {shown(path)} cannot be used: {err.strerror}") from None


def check_out_dir(path, *, force: bool = False) -> Path:
    """Validate ``path`` as the run directory and create it; :class:`OutputError` names the problem."""
    if path is None or str(path).strip() == "":
        raise OutputError("--out is empty: give a directory for the results")
    out = Path(path).expanduser()
    info = _lstat(out, "--out")
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise OutputError(f"--out {shown(out)} is a symbolic link: give the directory itself "
                              "(results written through a link land in another directory)")
        if not stat.S_ISDIR(info.st_mode):
            raise OutputError(f"--out {shown(out)} is {_kind(info.st_mode)}, not a directory")
        try:
            present = sorted(os.listdir(out))
        except OSError as err:
            raise OutputError(f"--out {shown(out)} cannot be read: {err.strerror}") from None
        if present and not force:
            listed = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
            unfinished = "" if RUN_FILE in present or not any(_staging_pid(n) for n in present) else (
                f"; without {RUN_FILE} it holds no whole run, only what a run that did not finish left")
            raise OutputError(f"--out {shown(out)} is not empty ({listed}{unfinished}); give a new directory, or "
                              "--force to replace the results of an earlier diagnosis there")
        if present:
            previous_outputs(out)  # refuses, before any computation, what --force would not replace
    else:
        parent = out.parent
        if not parent.is_dir():
            raise OutputError(f"--out {shown(out)}: its parent {shown(parent)} is not an existing directory")
        try:
            out.mkdir()
        except OSError as err:
            raise OutputError(f"--out {shown(out)} cannot be created: {err.strerror}") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=".critscale-probe-", dir=out)  # a new file, never through a link
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        if info is None:
            out.rmdir()
        raise OutputError(f"--out {shown(out)} is not writable: {err.strerror}") from None
    return out


def _recorded_outputs(out: Path) -> dict[str, str]:
    """Output name -> SHA-256 as the directory's own ``run.json`` records them ({} without one)."""
    path = out / RUN_FILE
    info = _lstat(path, "run manifest")
    if info is None:
        return {}
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"is {_kind(info.st_mode)}, not a file"
    elif info.st_size > MAX_RUN_FILE_BYTES:
        problem = f"holds {info.st_size} bytes, more than a run manifest ({MAX_RUN_FILE_BYTES})"
    else:
        try:
            manifest = json.loads(path.read_bytes().decode("utf-8"))
            entries = manifest["outputs"]
            if not (isinstance(manifest["command"], str) and manifest["command"].startswith(COMMAND)):
                raise ValueError
            recorded = {e["file"]: e["sha256"] for e in entries}
            if not all(isinstance(n, str) and isinstance(h, str) and _SHA256.fullmatch(h)
                       for n, h in recorded.items()):
                raise ValueError
            return recorded
        except (ValueError, KeyError, TypeError, AttributeError):
            problem = f"is not the manifest of a diagnosis (JSON with '{COMMAND} ...' and its outputs)"
    raise OutputError(f"--out {shown(out)}: {RUN_FILE} {problem}; --force replaces only what a diagnosis recorded "
                      "there: move it away or give a new directory")


def previous_outputs(out: Path) -> list[str]:
    """Names of the files of the earlier diagnosis in ``out``, ``run.json`` first, for :func:`commit` to replace.

    Every file there with a name of :data:`OUTPUT_NAMES` must be a regular file (not a link) that the
    directory's own ``run.json`` lists with the SHA-256 it has now; :class:`OutputError` names the first
    that is not, and nothing is removed.
    """
    present = [name for name in OUTPUT_NAMES if _lstat(out / name, "output") is not None]
    recorded = _recorded_outputs(out)
    for name in present:
        if name == RUN_FILE:
            continue
        mode = os.lstat(out / name).st_mode
        if not stat.S_ISREG(mode):
            problem = f"is {_kind(mode)}, not a file a diagnosis wrote"
        elif name not in recorded:
            problem = f"is not among the outputs that {RUN_FILE} there records" if recorded else (
                f"is not recorded by any {RUN_FILE} there (an incomplete run, or not a diagnosis's)")
        elif sha256_file(out / name) != recorded[name]:
            problem = f"differs from the SHA-256 that {RUN_FILE} there records (changed since that run)"
        else:
            continue
        raise OutputError(f"--out {shown(out)}: {name} {problem}; --force does not replace it: move it away or "
                          "give a new directory")
    return [RUN_FILE] * (RUN_FILE in present) + [name for name in present if name != RUN_FILE]


def _staging_pid(name: str) -> int | None:
    suffix = name[len(STAGING_PREFIX):]
    return int(suffix) if name.startswith(STAGING_PREFIX) and suffix.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def remove_stale_staging(out: Path) -> list[str]:
    """Remove the staging folders in ``out`` of runs whose process is gone; returns their names."""
    removed = []
    for name in sorted(os.listdir(out)):
        pid = _staging_pid(name)
        path = out / name
        if pid is None or pid == os.getpid() or _alive(pid) or not stat.S_ISDIR(os.lstat(path).st_mode):
            continue
        shutil.rmtree(path)  # removes links inside, never what they point to
        removed.append(name)
    return removed


@contextlib.contextmanager
def staging(out: Path):
    """A fresh staging folder in ``out`` for this run's outputs; removed, with what it holds, on any failure."""
    out = Path(out)
    remove_stale_staging(out)
    stage = out / f"{STAGING_PREFIX}{os.getpid()}"
    if os.path.lexists(stage):  # left by an earlier process of the same id
        if stat.S_ISDIR(os.lstat(stage).st_mode):
            shutil.rmtree(stage)
        else:
            stage.unlink()
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if stage.exists():
        shutil.rmtree(stage, ignore_errors=True)


def commit(stage: Path, out: Path, written: list[Path], manifest: dict) -> list[Path]:
    """Write ``run.json`` beside the staged ``written`` files and rename them all into ``out``, ``run.json`` last.

    The earlier diagnosis's files (:func:`previous_outputs`) are removed first, its ``run.json`` before
    the others.  When a rename fails, the files already renamed are removed: ``out`` never holds part
    of a run beside a ``run.json``.  Returns the paths in ``out``.
    """
    staged = list(written) + [write_run_manifest(stage, manifest, written)]
    for name in previous_outputs(out):
        (out / name).unlink()
    moved = []
    try:
        for path in staged:
            target = out / path.name
            os.replace(path, target)
            moved.append(target)
    except BaseException:
        for target in moved:
            target.unlink(missing_ok=True)
        raise
    return moved


def sha256_file(path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def describe_input(role: str, path, **extra) -> dict:
    """An input with its SHA-256: of the file, or of a directory's files (names and hashes, sorted)."""
    p = Path(path)
    entry = {"role": role, "path": str(path)}
    if p.is_file():
        entry.update(bytes=p.stat().st_size, sha256=sha256_file(p))
    elif p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file())
        listing = "\n".join(f"{f.name} {sha256_file(f)}" for f in files)
        entry.update(files=[f.name for f in files], sha256=hashlib.sha256(listing.encode()).hexdigest(),
                     sha256_of="the sorted lines '<file name> <sha256>' of the directory's files")
    else:
        entry.update(sha256=None, note="not a local file (a hub name); no hash")
    entry.update(extra)
    return entry


def cache_description() -> str:
    """The cache directory of this run and where it comes from (``CRITSCALE_CACHE`` or the default)."""
    from critscale import cache

    chosen = os.environ.get(cache.ENV_VAR)
    origin = f"{cache.ENV_VAR}={chosen}" if chosen else f"{cache.ENV_VAR} not set: the user's cache directory"
    return f"{cache.cache_root()} ({origin})"


def run_manifest(argv, inputs: list[dict]) -> dict:
    """Command, inputs, commit, date, device, versions and cache directory of this run."""
    return {"command": " ".join(["python -m critscale"] + [str(a) for a in argv]),
            "inputs": inputs, "commit": provenance.git_commit(),
            "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "device": provenance.device_description(), "python": sys.version.split()[0],
            "packages": provenance.package_versions(), "cache": cache_description()}


def write_run_manifest(out: Path, manifest: dict, written: list[Path]) -> Path:
    """``run.json``: the run manifest plus every output with its SHA-256."""
    path = out / RUN_FILE
    outputs = [{"file": p.name, "sha256": sha256_file(p)} for p in written]
    path.write_text(json.dumps({**manifest, "outputs": outputs}, indent=1) + "\n")
    return path
