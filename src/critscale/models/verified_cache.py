"""A cache directory that proves what it holds: its record lists the SHA-256 of each of its files.

The directory is built under a staging name ``.staging-<key>-<pid>-<start>-<random>`` beside it
(:func:`make_staging`), its record (a JSON file with ``"files": {name: {"bytes", "sha256"}}``) is
written last, and it is renamed into place (:func:`install`), replacing an invalid directory.
:func:`verify` checks a directory against its record before it is used: the same files, sizes and
hashes, nothing more.  A staging or discarded directory whose process has died (the pid and the
process start time in its name) is removed by :func:`remove_stale`, with one line on stderr.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path

FILES = "files"
STAGING, DISCARD = ".staging", ".discard"
_OWNED = re.compile(r"^\.(?:staging|discard)-(?P<key>[^-]+)-(?P<pid>\d+)-(?P<start>\d+)-[0-9a-f]+$")
# written by earlier versions (tempfile.mkdtemp(prefix=".<16 hex digits>-")) while saving, which takes seconds
_LEGACY = re.compile(r"^\.[0-9a-f]{16}-[a-z0-9_]{8}$")
LEGACY_AGE_S = 3600


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_record(directory: Path, record_name: str) -> dict:
    """``{name: {"bytes", "sha256"}}`` for every file of ``directory`` but its record."""
    return {f.name: {"bytes": f.stat().st_size, "sha256": file_sha256(f)}
            for f in sorted(directory.iterdir()) if f.name != record_name}


def write_record(directory: Path, record_name: str, record: dict) -> dict:
    """Write ``record`` plus the hashes of the directory's files as ``record_name``, last; return it."""
    record = {**record, FILES: files_record(directory, record_name)}
    (directory / record_name).write_text(json.dumps(record, indent=1))
    return record


def _read_record(directory: Path, record_name: str) -> tuple[dict | None, str | None]:
    file = directory / record_name
    if not file.is_file():
        return None, f"has no {record_name}"
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, f"has an unreadable {record_name} ({type(err).__name__})"
    files = record.get(FILES) if isinstance(record, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) and isinstance(v.get("sha256"), str)
                                              and isinstance(v.get("bytes"), int) for v in files.values()):
        return None, f"has a {record_name} without the hashes of its files (written by an older version)"
    return record, None


def verify(directory: Path, record_name: str) -> tuple[dict | None, str | None]:
    """``(record, None)`` when ``directory`` holds exactly the files of its record; ``(None, problem)`` when not.

    ``(None, None)``: there is no such directory.
    """
    if not os.path.lexists(directory):
        return None, None
    if not directory.is_dir() or directory.is_symlink():
        return None, "is not a directory"
    record, problem = _read_record(directory, record_name)
    if record is None:
        return None, problem
    listed = record[FILES]
    present = {f.name: f for f in directory.iterdir() if f.name != record_name}
    missing, extra = sorted(set(listed) - set(present)), sorted(set(present) - set(listed))
    if missing:
        return None, f"lacks {missing[0]}, which its record lists"
    if extra:
        return None, f"holds {extra[0]}, which its record does not list"
    for name, f in sorted(present.items()):
        if not f.is_file() or f.is_symlink():
            return None, f"holds {name}, which is not a plain file"
        if f.stat().st_size != listed[name]["bytes"]:
            return None, f"holds {name} of {f.stat().st_size:,} bytes where its record says {listed[name]['bytes']:,}"
        if file_sha256(f) != listed[name]["sha256"]:
            return None, f"holds {name}, whose SHA-256 is not the one its record lists"
    return record, None


def _start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (Linux), 0 where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``start`` (when known)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    return start == 0 or _start_time(pid) in (0, start)


def _owned_name(kind: str, key: str) -> str:
    pid = os.getpid()
    return f"{kind}-{key}-{pid}-{_start_time(pid)}-{secrets.token_hex(4)}"


def make_staging(root: Path, key: str) -> Path:
    """A new, empty staging directory for the cache ``key`` in ``root`` (``OSError`` if it cannot be made)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = root / _owned_name(STAGING, key)
    staging.mkdir(mode=0o755)
    return staging


def _stale(entry: Path) -> bool:
    match = _OWNED.match(entry.name)
    if match:
        return not _alive(int(match["pid"]), int(match["start"]))
    if _LEGACY.match(entry.name):
        return time.time() - entry.lstat().st_mtime > LEGACY_AGE_S
    return False


def remove_stale(root: Path, what: str = "cache") -> list[Path]:
    """Remove the staging and discarded directories in ``root`` left by processes that died; one line each."""
    removed = []
    if not root.is_dir():
        return removed
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.is_symlink() and _stale(entry):
            shutil.rmtree(entry, ignore_errors=True)
            if not os.path.lexists(entry):
                print(f"critscale: removed {entry}, an unfinished {what} left by a process that is no longer "
                      "running", file=sys.stderr)
                removed.append(entry)
    return removed


def discard(directory: Path) -> None:
    """Remove ``directory``: renamed aside first (so its name is free at once), then deleted."""
    aside = directory.parent / _owned_name(DISCARD, directory.name)
    try:
        os.rename(directory, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def install(staging: Path, directory: Path, record_name: str) -> None:
    """Rename the complete ``staging`` to ``directory``; an invalid ``directory`` there is replaced.

    A valid one (a concurrent builder finished first) is kept and ``staging`` removed.
    """
    for _attempt in range(3):
        try:
            os.rename(staging, directory)
            return
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
        if verify(directory, record_name)[0] is not None:
            shutil.rmtree(staging, ignore_errors=True)
            return
        if directory.is_dir() and not directory.is_symlink():
            discard(directory)
        else:
            directory.unlink()
    raise OSError(errno.EEXIST, f"{directory} keeps being replaced while this process installs its copy")
