"""The bundle container: one POSIX tar (pax) stream in one zstd frame.

Writing is deterministic: members in the order given, every header with
mtime 0, uid/gid 0, empty owner names and mode 0644, one zstd frame at a fixed
level with its content checksum. Reading is defensive: only regular files,
relative names without ``..``, no duplicates, bounded member and total sizes,
no trailing bytes. See ``docs/adr/0001-container-tar-zstd.md`` for why tar.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from bundler.errors import BundleFormatError, Problem

__all__ = [
    "ZSTD_LEVEL",
    "Limits",
    "Member",
    "read_container",
    "write_container",
]

ZSTD_LEVEL = 10
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Limits:
    """Bounds a reader enforces before trusting an archive (documented in the spec)."""

    max_member_bytes: int = 1 << 30  # 1 GiB decompressed per member
    max_total_bytes: int = 4 << 30  # 4 GiB decompressed tar stream
    max_members: int = 100_000


@dataclass(frozen=True)
class Member:
    """One member read from a bundle: its name, bytes and SHA-256."""

    name: str
    data: bytes
    sha256: str

    @property
    def size(self) -> int:
        """Size of the member in bytes."""
        return len(self.data)


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mtime = 0
    ti.mode = 0o644
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.type = tarfile.REGTYPE
    return ti


def write_container(out: BinaryIO, members: Iterable[tuple[str, bytes]]) -> None:
    """Write ``members`` (name, bytes), in the order given, as a tar+zstd bundle."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            check = member_name_problem(name)
            if check:
                raise ValueError(f"refusing to write member {name!r}: {check}")
            tar.addfile(_tarinfo(name, len(data)), io.BytesIO(data))
    cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, write_content_size=True)
    out.write(cctx.compress(raw.getvalue()))


def member_name_problem(name: str) -> str | None:  # noqa: PLR0911
    """Why ``name`` is not an acceptable member name, or ``None`` if it is."""
    if not name or "\x00" in name:
        return "empty name or NUL byte"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if "\\" in name:
        return "backslash in path"
    parts = name.split("/")
    if any(p == ".." for p in parts):
        return "path climbs out with '..'"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    if unicodedata.normalize("NFC", name) != name:
        return "name is not in Unicode NFC form"
    return None


class _ZstdPull(io.RawIOBase):
    """Pull-style decompression of exactly one zstd frame, bounded in output.

    Compressed input is fed in small slices so that a single call cannot
    expand past a few tens of MiB (a zstd RLE block turns a handful of bytes
    into 128 KiB); the running total is checked against ``limit``. After the
    frame ends, any byte left in the file is reported as trailing data.
    """

    _FEED = 4096

    def __init__(self, fh: BinaryIO, limit: int, where: str) -> None:
        self._fh = fh
        self._limit = limit
        self._where = where
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._buf = bytearray()
        self._done = False
        self.count = 0
        self.trailing = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while not self._buf and not self._done:
            chunk = self._fh.read(self._FEED)
            if not chunk:
                raise BundleFormatError(
                    f"{self._where}: archive is truncated (zstd frame ends early)"
                )
            out = self._d.decompress(chunk)
            self.count += len(out)
            if self.count > self._limit:
                raise BundleFormatError(
                    f"{self._where}: decompressed archive exceeds the {self._limit:,}-byte "
                    "bound (possible decompression bomb)"
                )
            self._buf += out
            if self._d.eof:
                self._done = True
                self.trailing = bool(self._d.unused_data) or bool(self._fh.read(1))

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        self._fill()
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        del self._buf[:n]
        return n


_ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
_TYPE_NAMES = {
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.DIRTYPE: "directory",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
}


def _take(  # noqa: PLR0917 - private helper of one loop
    tar: tarfile.TarFile,
    ti: tarfile.TarInfo,
    lim: Limits,
    where: str,
    seen: set[str],
    problems: list[Problem],
    count: int,
) -> Member | None:
    """Check one tar header; return its member, or record a problem and return None."""
    if count + len(problems) >= lim.max_members:
        raise BundleFormatError(f"{where}: more than {lim.max_members:,} members")
    name = ti.name
    if ti.type not in _ALLOWED_TYPES:
        kind = _TYPE_NAMES.get(ti.type, f"type {ti.type!r}")
        problems.append(Problem(where, name, None, f"member is a {kind}"))
        return None
    bad = member_name_problem(name)
    if bad:
        problems.append(Problem(where, name, None, bad))
        return None
    if name in seen:
        problems.append(Problem(where, name, None, "duplicate member"))
        return None
    seen.add(name)
    if ti.size > lim.max_member_bytes:
        raise BundleFormatError(
            f"{where}: member {name!r} declares {ti.size:,} bytes, over the "
            f"{lim.max_member_bytes:,}-byte bound (possible bomb)"
        )
    ex = tar.extractfile(ti)
    data = ex.read() if ex else b""
    if len(data) != ti.size:
        raise BundleFormatError(f"{where}: member {name!r} is truncated")
    return Member(name, data, hashlib.sha256(data).hexdigest())


def read_container(
    path: Path,
    limits: Limits | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Member]:
    """Read and check every member of the bundle at ``path``.

    Structural problems of members (bad names, links, duplicates, oversized
    members) are all collected and raised together. A truncated or corrupt
    stream, a bomb or trailing bytes stop reading at once.

    Raises:
        BundleFormatError: the archive is malformed or crafted.
        OSError: the file cannot be opened.
    """
    lim = limits or Limits()
    where = str(path)
    problems: list[Problem] = []
    members: list[Member] = []
    seen: set[str] = set()
    with Path(path).open("rb") as fh:
        if fh.read(4) != _ZSTD_MAGIC:
            raise BundleFormatError(f"{where}: not a reprobundle archive (no zstd frame)")
        fh.seek(0)
        pull = _ZstdPull(fh, lim.max_total_bytes, where)
        try:
            stream = io.BufferedReader(pull, buffer_size=1 << 16)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for ti in tar:
                    member = _take(tar, ti, lim, where, seen, problems, len(members))
                    if member is not None:
                        members.append(member)
                        if progress:
                            progress(member.size)
            # tarfile stops at the end-of-archive blocks; drain the frame to see its end.
            while stream.read(1 << 16):
                pass
        except BundleFormatError:
            raise
        except (zstandard.ZstdError, tarfile.TarError, EOFError) as exc:
            raise BundleFormatError(
                f"{where}: archive is truncated or corrupt ({type(exc).__name__}: {exc})"
            ) from exc
        if pull.trailing:
            raise BundleFormatError(f"{where}: trailing bytes after the archive's zstd frame")
    if problems:
        raise BundleFormatError(f"{where}: archive has unacceptable members", problems)
    return members
