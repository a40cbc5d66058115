"""The run directory of a diagnosis, and the provenance of everything written into it.

:func:`check_out_dir` runs before any computation: ``--out`` must not be empty, must not be an
existing file or device, its parent must exist, and it is created (if missing) and probed for
writing.  An existing directory that is not empty is refused unless ``force``; with ``force`` the
files a previous diagnosis wrote (every name in :data:`OUTPUT_NAMES` and every file listed in its
``run.json``) are removed before the new ones are written, so no file of an earlier run survives.
``run.json`` records the command, the inputs with their SHA-256 hashes, the commit, the date, the
versions and every output with its SHA-256 hash; JSON, text and PNG outputs also carry it inside.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
import sys
from pathlib import Path

from critscale import provenance

RUN_FILE = "run.json"
TABLES = ("heads.csv", "nulls.csv", "bins.csv", "entropy_curves.csv", "profiles.csv", "rows.csv.gz")
TEXTS = ("summary.json", "summary.txt")
FIGURE_NAMES = ("kappa_vs_n", "head_maps", "profiles", "entropy_curves", "operating_points", "law_shares")
OUTPUT_NAMES = TABLES + TEXTS + tuple(f"{name}.png" for name in FIGURE_NAMES) + (RUN_FILE,)


class OutputError(ValueError):
    """``--out`` cannot hold the results."""


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a file"


def check_out_dir(path, *, force: bool = False) -> Path:
    """Validate ``path`` as the run directory and create it; :class:`OutputError` names the problem."""
    if path is None or str(path).strip() == "":
        raise OutputError("--out is empty: give a directory for the results")
    out = Path(path).expanduser()
    if out.exists() or out.is_symlink():
        try:
            mode = out.stat().st_mode
        except OSError as err:
            raise OutputError(f"--out {out} cannot be used: {err.strerror}") from None
        if not stat.S_ISDIR(mode):
            raise OutputError(f"--out {out} is {_kind(mode)}, not a directory")
        present = sorted(p.name for p in out.iterdir())
        if present and not force:
            shown = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
            raise OutputError(f"--out {out} is not empty ({shown}); give a new directory, or --force to replace "
                              "the results of an earlier diagnosis there")
    else:
        parent = out.parent
        if not parent.is_dir():
            raise OutputError(f"--out {out}: its parent {parent} is not an existing directory")
        try:
            out.mkdir()
        except OSError as err:
            raise OutputError(f"--out {out} cannot be created: {err.strerror}") from None
    probe = out / f".critscale-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OutputError(f"--out {out} is not writable: {err.strerror}") from None
    return out


def clear_previous(out: Path) -> list[str]:
    """Remove every file an earlier diagnosis wrote into ``out``; returns their names."""
    names = set(OUTPUT_NAMES)
    record = out / RUN_FILE
    if record.is_file():
        try:
            names |= {entry["file"] for entry in json.loads(record.read_text()).get("outputs", [])}
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # an unreadable run.json is replaced below like any other output
    removed = []
    for name in sorted(names):
        target = out / Path(name).name  # never outside the run directory
        if target.is_file() or target.is_symlink():
            target.unlink()
            removed.append(target.name)
    return removed


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


def run_record(argv, inputs: list[dict]) -> dict:
    """Command, inputs, commit, date, device and versions of this run."""
    return {"command": " ".join(["python -m critscale"] + [str(a) for a in argv]),
            "inputs": inputs, "commit": provenance.git_commit(),
            "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "device": provenance.device_description(), "python": sys.version.split()[0],
            "packages": provenance.package_versions()}


def write_run_record(out: Path, record: dict, written: list[Path]) -> Path:
    """``run.json``: the run record plus every output with its SHA-256."""
    path = out / RUN_FILE
    outputs = [{"file": p.name, "sha256": sha256_file(p)} for p in written]
    path.write_text(json.dumps({**record, "outputs": outputs}, indent=1) + "\n")
    return path
