"""Taking a GPU machine's tarball into the repository: bounded reading, strict decoding, an all-or-nothing swap.

``read_tarball`` reads a ``.tar.gz`` into memory member by member, refusing from each member's header,
before its data is read, what the tarball may not hold: a name outside the declared layout, a link or a
device, a duplicate, a member over its size limit or a total over the tarball's.  The decompressed stream
itself is bounded, so that no header, padding or trailing data can inflate past the limit either.
``text`` and ``strict_json`` decode a member (UTF-8 text; JSON without ``Infinity`` or ``NaN``).
``swap_in`` replaces files and folders of the repository by staged ones with renames, undoing the renames
already done when one fails, so that an import changes everything or nothing.

Every refusal is an :class:`IntakeError` whose message is one line naming the tarball or member.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")  # what the sessions write; anything else is refused
KIND = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device",
        tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a FIFO"}


class IntakeError(ValueError):
    """A tarball or one of its members that must not be imported; the message is one line."""


@dataclass(frozen=True)
class Layout:
    """What a tarball may hold.

    ``limit(name)`` is the size limit in bytes of a file member of that name, ``None`` for a name the
    tarball may not hold; ``folders`` the folder members it may hold; ``required`` the file members it
    must hold; ``total`` the limit of the files' sizes together; ``packed`` that of the tarball itself.
    """

    limit: Callable[[str], int | None]
    folders: frozenset[str]
    required: frozenset[str]
    total: int
    packed: int
    members: int = 1000

    @property
    def stream(self) -> int:
        """The most the decompressed tar stream may hold: the files, and for each member a header and
        padding (1 KiB; a long name takes one block more), and the end blocks."""
        return self.total + 2048 * self.members + 2**20


class _Bounded:
    """A read-only stream that refuses to give more than ``limit`` bytes of ``raw``."""

    def __init__(self, raw, limit: int, what: str):
        self.raw, self.left, self.what = raw, limit, what

    def read(self, size: int = -1) -> bytes:
        want = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        data = self.raw.read(want)
        self.left -= len(data)
        if self.left < 0:
            raise IntakeError(f"{self.what}: decompresses to more than its limit (a tarball bomb?)")
        return data


def _member_name(member: tarfile.TarInfo, where: str) -> str:
    name = member.name[2:] if member.name.startswith("./") else member.name
    name = name.rstrip("/") if member.isdir() else name
    if member.isdir() and name in ("", "."):
        return "."  # the tarball's own top folder (``tar -C DIR .``)
    path = PurePosixPath(name)
    if not NAME.match(name) or path.is_absolute() or any(p in ("", ".", "..") for p in name.split("/")):
        raise IntakeError(f"{where}: member {member.name!r} has a name the session does not write")
    return name


def _size(n: int) -> str:
    return f"{n} bytes" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def read_tarball(path: Path, layout: Layout) -> dict[str, bytes]:
    """The file members of ``path`` (name -> content), each checked against ``layout`` from its header."""
    where = path.name
    try:
        packed = path.stat().st_size
        if not path.is_file():
            raise IntakeError(f"{where}: not a regular file")
    except OSError as err:
        raise IntakeError(f"{where}: cannot be read ({err.strerror})") from None
    if packed == 0:
        raise IntakeError(f"{where}: an empty file, not a gzip tarball")
    if packed > layout.packed:
        raise IntakeError(f"{where}: {_size(packed)}, more than the {_size(layout.packed)} a session packs")
    files: dict[str, bytes] = {}
    try:
        with open(path, "rb") as raw:
            if raw.read(2) != b"\x1f\x8b":
                raise IntakeError(f"{where}: not a gzip file")
            raw.seek(0)
            stream = _Bounded(gzip.GzipFile(fileobj=raw, mode="rb"), layout.stream, where)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                total = 0
                for count, member in enumerate(tar, start=1):
                    if count > layout.members:
                        raise IntakeError(f"{where}: more than {layout.members} members")
                    total += _check_member(member, files, layout, total, where)
                    if member.isfile():
                        data = tar.extractfile(member).read()
                        if len(data) != member.size:
                            raise IntakeError(f"{where}: member {member.name}: truncated")
                        files[_member_name(member, where)] = data
            while stream.read(2**16):  # the rest of the gzip stream: its checksum, and nothing after it
                pass
    except IntakeError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
        raise IntakeError(f"{where}: not a readable gzip tarball ({type(err).__name__}: {err})") from None
    missing = sorted(layout.required - set(files))
    if missing:
        raise IntakeError(f"{where}: lacks {', '.join(missing)}")
    return files


def _check_member(member: tarfile.TarInfo, files: dict, layout: Layout, total: int, where: str) -> int:
    """The member's size when ``layout`` allows it (name, kind, size, running total); else :class:`IntakeError`."""
    name = _member_name(member, where)
    if name == ".":
        return 0
    if name in files:
        raise IntakeError(f"{where}: member {name} appears twice")
    if member.isdir():
        if name not in layout.folders:
            raise IntakeError(f"{where}: folder {name}/ is not one the session writes")
        return 0
    if not member.isfile():
        raise IntakeError(f"{where}: member {name} is {KIND.get(member.type, 'not a regular file')}")
    limit = layout.limit(name)
    if limit is None:
        raise IntakeError(f"{where}: member {name} is not a file the session writes")
    if member.size > limit:
        raise IntakeError(f"{where}: member {name} is {_size(member.size)}, more than its limit of {_size(limit)}")
    if total + member.size > layout.total:
        raise IntakeError(f"{where}: its members add up to more than {_size(layout.total)}")
    return member.size


def text(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text without NUL characters; :class:`IntakeError` naming ``name`` otherwise."""
    try:
        out = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise IntakeError(f"{name}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    if "\x00" in out:
        raise IntakeError(f"{name}: not text (a NUL character at offset {out.index(chr(0))})")
    return out


def strict_json(data: bytes, name: str, kind: type = dict):
    """``data`` parsed as JSON without non-finite numbers, of type ``kind``; :class:`IntakeError` otherwise."""
    from critscale.page.gpu_results import GpuResultError, loads

    try:
        value = loads(text(data, name), name)
    except GpuResultError as err:
        raise IntakeError(str(err)) from None
    if not isinstance(value, kind):
        raise IntakeError(f"{name}: a JSON {type(value).__name__}, not {'an object' if kind is dict else kind.__name__}")
    return value


def staging_folder(dest: Path) -> Path:
    """A new empty folder beside ``dest`` (the same file system, so that renames are atomic)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}-import-", dir=dest.parent))


def swap_in(pairs: list[tuple[Path, Path]], backup: Path) -> None:
    """Put each staged path at its target (``(staged, target)``), the replaced ones moved into ``backup``.

    On any failure the renames already done are undone and the error is raised again."""
    backup.mkdir(parents=True, exist_ok=True)
    done: list[tuple[Path, Path, Path | None]] = []
    try:
        for i, (staged, target) in enumerate(pairs):
            old = None
            if target.exists() or target.is_symlink():
                old = backup / f"{i}-{target.name}"
                os.replace(target, old)
            done.append((staged, target, old))
            os.replace(staged, target)
    except BaseException:
        for staged, target, old in reversed(done):
            if target.exists() and not staged.exists():
                os.replace(target, staged)
            if old is not None:
                os.replace(old, target)
        raise


def remove(path: Path) -> None:
    """Remove a staging folder (whatever is left in it)."""
    shutil.rmtree(path, ignore_errors=True)
