"""The private folders of one notebook run, and the removal of those a killed run left behind.

A run owns two folders: its staging folder ``build/staging/<build>/<notebook>.<token>/``, which holds
its outputs until they are complete, and its kernel's socket folder ``<tmp>/critscale-kernel-<token>/``.
Beside the staging folder, the file ``<notebook>.<token>.lock`` names the socket folder and is held
locked (``flock``) by the run for as long as its process lives; the operating system releases the lock
when the process dies, however it dies (SIGKILL included).

Every run first calls :func:`clean`, which removes the folders of each run whose lock it can take (its
process is dead) and every staging folder that has no lock file (a dead run's, or an older driver's).
A live run's folders are never touched: its lock cannot be taken.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SOCKETS_PREFIX = "critscale-kernel-"
LOCK_SUFFIX = ".lock"
PENDING_SUFFIX = ".lock.new"  # a lock file before it is renamed to its name, already held
PENDING_GRACE_S = 60.0  # a pending lock file younger than this may belong to a run that is starting


@dataclass
class Run:
    """The folders of one live run and the descriptor that holds its lock."""

    stage: Path
    sockets: Path
    lock: Path
    fd: int

    def close(self) -> None:
        """Remove the socket folder, then the staging folder, then the lock (a lock outlives its folders)."""
        try:
            shutil.rmtree(self.sockets, ignore_errors=True)
            shutil.rmtree(self.stage, ignore_errors=True)
            self.lock.unlink(missing_ok=True)
        finally:
            os.close(self.fd)


def start(root: Path, name: str) -> Run:
    """Clean ``root`` of dead runs, then make this run's locked lock file, staging and socket folders."""
    root.mkdir(parents=True, exist_ok=True)
    clean(root)
    token = f"{os.getpid()}-{secrets.token_hex(4)}"
    sockets = Path(tempfile.gettempdir()) / f"{SOCKETS_PREFIX}{token}"
    lock = root / f"{name}.{token}{LOCK_SUFFIX}"
    fd = _held_file(lock, str(sockets))
    run = Run(stage=root / f"{name}.{token}", sockets=sockets, lock=lock, fd=fd)
    try:
        run.stage.mkdir()
        sockets.mkdir(mode=0o700)
    except BaseException:
        run.close()
        raise
    return run


def _held_file(path: Path, content: str) -> int:
    """Create ``path`` holding ``content``, locked by the returned descriptor from before it has its name."""
    pending = path.with_name(f".{path.name[: -len(LOCK_SUFFIX)]}{PENDING_SUFFIX}")
    fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, content.encode())
        os.replace(pending, path)
    except BaseException:
        os.close(fd)
        pending.unlink(missing_ok=True)
        raise
    return fd


def _take(path: Path) -> int | None:
    """A descriptor holding ``path``'s lock when no live process holds it, else None (also when it is gone)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _remove_sockets(text: str) -> None:
    """Remove the socket folder a lock file names, if it is one this module makes and this user owns."""
    path = Path(text.strip())
    if path.parent != Path(tempfile.gettempdir()) or not path.name.startswith(SOCKETS_PREFIX):
        return
    try:
        if not path.is_symlink() and path.is_dir() and path.stat().st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


def clean(root: Path) -> list[Path]:
    """Remove the folders of dead runs under ``root`` (and their socket folders); the paths removed."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for lock in sorted(root.glob(f"*{LOCK_SUFFIX}")):
        fd = _take(lock)
        if fd is None:
            continue
        try:
            _remove_sockets(os.read(fd, 4096).decode(errors="replace"))
            stage = lock.with_name(lock.name[: -len(LOCK_SUFFIX)])
            shutil.rmtree(stage, ignore_errors=True)
            lock.unlink(missing_ok=True)
            removed.append(stage)
        finally:
            os.close(fd)
    for pending in sorted(root.glob(f".*{PENDING_SUFFIX}")):
        try:
            young = time.time() - pending.stat().st_mtime < PENDING_GRACE_S
        except FileNotFoundError:
            continue
        fd = None if young else _take(pending)
        if fd is not None:
            pending.unlink(missing_ok=True)
            os.close(fd)
            removed.append(pending)
    for stage in sorted(root.iterdir()):
        # a run makes its lock file before its staging folder and removes it after: no lock, no live run
        if stage.is_dir() and not stage.is_symlink() and not stage.with_name(stage.name + LOCK_SUFFIX).exists():
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed
