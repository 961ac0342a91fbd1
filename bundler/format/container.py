"""The bundle container: one POSIX tar (pax) stream in one zstd frame.

Writing is deterministic: members in the order given, every header with
mtime 0, uid/gid 0, empty owner names and mode 0644, one zstd frame at a fixed
level with its content checksum. Reading is defensive: only regular files,
relative names without ``..``, no duplicates, bounded member and total sizes,
no trailing bytes. See ``docs/adr/0001-container-tar-zstd.md`` for why tar.

Reading is also bounded in memory, whatever the archive claims: the frame is
decompressed a few zstd blocks at a time (a block regenerates at most 128 KiB),
member bytes are hashed as they stream past, pax and GNU extension headers are
refused above a few KiB before they are read, and a member's content is kept
in memory only while it is small; larger ones go to an anonymous temporary
file (:class:`Member` reads them back on demand). See the "Reader bounds"
section of ``specs/bundle-format.md``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import tarfile
import tempfile
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import zstandard

from bundler.errors import BundleFormatError, Problem, UsageError
from bundler.format.tar_headers import ALLOWED_TYPES, TYPE_NAMES, bounded_tarinfo
from bundler.format.zstd_frame import ZSTD_MAGIC, FramePull

__all__ = [
    "ZSTD_LEVEL",
    "ZSTD_WORKERS",
    "ContentLimits",
    "Limits",
    "Member",
    "read_container",
    "write_container",
]

ZSTD_LEVEL = 1
"""The container frame's zstd level. Until issue 22 it was 10, then 3: for a serving
campaign's 178 MiB of carried JSON level 10 took 9.2 s, level 3 1.3 s (73.4 MiB) and
level 1 0.5 s for the fewest bytes (63.5 MiB), while the Parquet members inside (zstd
already) gain little from any (``bench/zstd_options.py``, ADR 0001)."""
ZSTD_WORKERS = max(1, min(os.cpu_count() or 1, 8))
"""zstd worker threads for the container frame. The frame is always written in zstd's
multi-threaded mode (1 or more workers), whose bytes do not depend on the number of
workers nor on how the input is fed (``tests/test_container.py`` checks 1, 2 and 4
workers and several chunkings): the same campaign seals to the same bytes on any
machine, and a tar of any size streams through without being held in memory."""

_CHUNK = 1 << 20  # member bytes are read, hashed and stored this many at a time


@dataclass(frozen=True)
class Limits:
    """Bounds a reader enforces before trusting an archive (documented in the spec).

    The first three bound what an archive may hold; the next three what reading
    it may cost, so that a small crafted file cannot make the reader allocate
    gigabytes. ``inline_*`` decide which members are kept in memory rather than
    in the temporary spill file; they change no verdict. The last two bound
    what ``bundler.verify`` hands to the JSON and Parquet parsers.
    """

    max_member_bytes: int = 1 << 30  # 1 GiB decompressed per member
    max_total_bytes: int = 4 << 30  # 4 GiB decompressed tar stream
    max_members: int = 100_000
    max_header_bytes: int = 8 << 10  # one pax / GNU long-name header or sparse map
    max_header_chain: int = 8  # extension headers in front of one member
    max_name_chars: int = 32 << 20  # every member name together
    inline_member_bytes: int = 16 << 20  # larger members are spilled to a temporary file
    inline_total_bytes: int = 64 << 20  # in-memory members together
    # Checked by bundler.verify before parsing what it must parse:
    max_json_cost: int = 256 << 20  # estimated memory to parse manifest, envelope or statement
    max_parquet_footer_bytes: int = 8 << 20  # a table's Parquet footer (metadata)


@dataclass(frozen=True)
class ContentLimits:
    """Bounds on what a verified bundle may *hold* before replay derives anything from it.

    :class:`Limits` bounds reading the archive; these bound the content, whose cost
    in replay grows with it (a signature says who sealed a bundle, not that its
    content is sane). Replay refuses a bundle over any of them up front, located
    (``bundler.content``). Each is far above an honest campaign and chosen so
    that replay of a bundle at every limit stays under 1 GiB of peak memory; the
    measured cost per row is in ``specs/bundle-format.md``.
    """

    max_table_rows: int = 2_000_000  # rows of any one table (Parquet footer)
    max_arms: int = 1_000  # arms in campaign.json, and distinct arms in receipts
    max_servers: int = 100_000  # distinct servers in receipts
    max_arm_pairs: int = 10_000  # baseline x candidate pairs of campaign.json's arms
    max_claims: int = 100_000  # rows of tables/claims.parquet
    max_gates: int = 10_000  # rows of tables/gates.parquet
    max_metric_entries: int = 2_000_000  # entries of every comparisons.metrics map together
    max_gate_checks: int = 1_000_000  # gate x recorded-metric evaluations


class _Spill:
    """An anonymous temporary file holding the members too large to keep in memory.

    Created on first use; closed (and, being unlinked, gone) when no member
    refers to it any more, or at interpreter exit.
    """

    def __init__(self) -> None:
        self._fh = tempfile.TemporaryFile(prefix="reprobundle-spill-")  # noqa: SIM115 - lives with its members
        self._lock = threading.Lock()
        self.end = 0
        # Closed when the last member referring to it is gone (or at exit), never left open.
        self.close = weakref.finalize(self, self._fh.close)

    def append(self, data: bytes) -> None:
        with self._lock:
            self._fh.seek(self.end)
            self._fh.write(data)
            self.end += len(data)

    def pread(self, offset: int, size: int) -> bytes:
        with self._lock:
            self._fh.seek(offset)
            data = self._fh.read(size)
        if len(data) != size:  # pragma: no cover - only if someone truncates our temp file
            raise OSError(errno.EIO, "spill file is shorter than what was written to it")
        return data


class _SpillReader(io.RawIOBase):
    """A seekable read-only view of one member inside the spill file."""

    def __init__(self, spill: _Spill, offset: int, size: int) -> None:
        self._spill = spill
        self._offset = offset
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self._size - self._pos))
        if n:
            b[:n] = self._spill.pread(self._offset + self._pos, n)
            self._pos += n
        return n


class Member:
    """One member read from a bundle: its name, size, SHA-256 and (when kept) its bytes.

    The bytes of a small member are held in memory; a large one's live in an
    anonymous temporary file and are read back by :meth:`open` (a seekable
    binary stream, the cheap way for large members) or :meth:`read_bytes`.
    ``data`` is :meth:`read_bytes`, kept for code written before members could
    be spilled. A member read with ``keep`` saying no has a size and digest but
    no bytes: reading it raises ``ValueError``.
    """

    __slots__ = ("_data", "_offset", "_spill", "name", "sha256", "size")

    def __init__(
        self,
        name: str,
        data: bytes | None,
        sha256: str,
        *,
        size: int | None = None,
        spill: _Spill | None = None,
        offset: int = 0,
    ) -> None:
        self.name = name
        self.sha256 = sha256
        self.size = size if size is not None else len(data) if data is not None else 0
        self._data = data
        self._spill = spill
        self._offset = offset

    def __repr__(self) -> str:
        where = "memory" if self.in_memory else "spill file" if self.spilled else "not kept"
        return f"Member({self.name!r}, {self.size:,} bytes, sha256 {self.sha256[:12]}…, {where})"

    @property
    def in_memory(self) -> bool:
        """True when the bytes are held in memory."""
        return self._data is not None

    @property
    def spilled(self) -> bool:
        """True when the bytes are in the temporary spill file."""
        return self._spill is not None

    def _no_content(self) -> ValueError:
        return ValueError(f"member {self.name!r} was read without keeping its content")

    def read_bytes(self) -> bytes:
        """All of the member's bytes (read back from the spill file when spilled)."""
        if self._data is not None:
            return self._data
        if self._spill is not None:
            return self._spill.pread(self._offset, self.size)
        raise self._no_content()

    @property
    def data(self) -> bytes:
        """The member's bytes: :meth:`read_bytes` (costs a read when spilled)."""
        return self.read_bytes()

    def open(self) -> BinaryIO:
        """A seekable binary stream over the member's bytes, without reading them all."""
        if self._data is not None:
            return io.BytesIO(self._data)
        if self._spill is not None:
            return io.BufferedReader(_SpillReader(self._spill, self._offset, self.size))
        raise self._no_content()


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mtime = 0
    ti.mode = 0o644
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.type = tarfile.REGTYPE
    return ti


_Sized = list[tuple[str, "bytes | BinaryIO", int]]
"""Members to write with their sizes."""


def _sized(members: Iterable[tuple[str, bytes | BinaryIO]]) -> _Sized:
    """The members with their sizes (a file's from its end), names checked first."""
    out: _Sized = []
    for name, data in members:
        check = member_name_problem(name)
        if check:
            raise ValueError(f"refusing to write member {name!r}: {check}")
        if isinstance(data, bytes):
            out.append((name, data, len(data)))
        else:
            data.seek(0, os.SEEK_END)
            out.append((name, data, data.tell()))
    return out


def _tar_size(members: _Sized) -> int:
    """The bytes :func:`_write_tar` will write: what ``TarFile.addfile`` and ``close``
    write, header by header (a pax header grows with a long or non-ASCII name)."""
    with tarfile.open(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT) as probe:
        total = 0
        for name, _, size in members:
            header = _tarinfo(name, size).tobuf(probe.format, probe.encoding, probe.errors)
            total += len(header) + -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
    total += 2 * tarfile.BLOCKSIZE  # the end-of-archive blocks
    return -(-total // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


class _Counted:
    """A write-only stream for ``tarfile`` over the zstd writer (``tell`` counts the tar)."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.count = 0

    def write(self, data: bytes) -> int:
        self._out.write(data)
        self.count += len(data)
        return len(data)

    def tell(self) -> int:
        return self.count


def _write_tar(raw: Any, members: _Sized) -> None:
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.copybufsize = _CHUNK  # type: ignore[attr-defined]  # fewer, larger writes (same bytes)
        for name, data, size in members:
            if isinstance(data, bytes):
                tar.addfile(_tarinfo(name, size), io.BytesIO(data))
            else:
                data.seek(0)
                tar.addfile(_tarinfo(name, size), data)


def write_container(
    out: BinaryIO,
    members: Iterable[tuple[str, bytes | BinaryIO]],
    *,
    workers: int = ZSTD_WORKERS,
) -> None:
    """Write ``members`` (name, bytes or a seekable file holding them, read from its
    start), in the order given, as a tar+zstd bundle.

    The tar's size (the frame's content size, written in the frame header) is worked
    out from the members' sizes first; the tar is then written straight through zstd's
    streaming API in multi-threaded mode: neither the tar nor the frame is held in
    memory or on disk (zstd refuses a tar whose length differs from the size it
    declared). ``workers``: zstd threads, at least 1 (any count writes the same bytes).
    """
    sized = _sized(members)
    size = _tar_size(sized)
    cctx = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, threads=max(1, workers), write_checksum=True, write_content_size=True
    )
    with cctx.stream_writer(cast(Any, out), size=size, closefd=False) as frame:
        _write_tar(_Counted(frame), sized)


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


def _open_regular(path: Path) -> BinaryIO:
    """Open ``path`` for reading, refusing anything but a regular file without blocking on it.

    Raises:
        UsageError: ``path`` is a FIFO, socket or device (exit 2: not a bundle file).
        IsADirectoryError: ``path`` is a directory (as ``open`` would).
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise UsageError(f"{path}: not a regular file ({kind}); give the bundle file itself")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _Reader:
    """The state of one ``read_container`` pass: checks every header, stores every member."""

    def __init__(
        self,
        lim: Limits,
        where: str,
        keep: Callable[[str], bool] | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.lim = lim
        self.where = where
        self.keep = keep
        self.progress = progress
        self.problems: list[Problem] = []
        self.members: list[Member] = []
        self.seen: set[str] = set()
        self.name_chars = 0
        self.inline_bytes = 0
        self.spill: _Spill | None = None

    def discard(self) -> None:
        """Reading failed: drop the members and close the spill file now."""
        self.members.clear()
        if self.spill is not None:
            self.spill.close()

    def take(self, tar: tarfile.TarFile, ti: tarfile.TarInfo) -> None:
        """Check one tar header; store its member, or record a problem."""
        lim, where = self.lim, self.where
        if len(self.members) + len(self.problems) >= lim.max_members:
            raise BundleFormatError(f"{where}: more than {lim.max_members:,} members")
        name = ti.name
        self.name_chars += len(name)
        if self.name_chars > lim.max_name_chars:
            raise BundleFormatError(
                f"{where}: member names exceed {lim.max_name_chars:,} characters together"
            )
        if ti.type not in ALLOWED_TYPES:
            kind = TYPE_NAMES.get(ti.type, f"type {ti.type!r}")
            self.problems.append(Problem(where, name, None, f"member is a {kind}"))
            return
        bad = member_name_problem(name)
        if bad:
            self.problems.append(Problem(where, name, None, bad))
            return
        if name in self.seen:
            self.problems.append(Problem(where, name, None, "duplicate member"))
            return
        self.seen.add(name)
        if ti.size > lim.max_member_bytes:
            raise BundleFormatError(
                f"{where}: member {name!r} declares {ti.size:,} bytes, over the "
                f"{lim.max_member_bytes:,}-byte bound (possible bomb)"
            )
        member = self._read(tar, ti, name)
        self.members.append(member)
        if self.progress:
            self.progress(member.size)

    def _read(self, tar: tarfile.TarFile, ti: tarfile.TarInfo, name: str) -> Member:
        """Stream one member's bytes through SHA-256 into memory, the spill file or nowhere."""
        size = ti.size
        kept = self.keep is None or self.keep(name)
        inline = kept and (
            size <= self.lim.inline_member_bytes
            and self.inline_bytes + size <= self.lim.inline_total_bytes
        )
        chunks: list[bytes] = []
        spill: _Spill | None = None
        offset = 0
        if kept and not inline:
            spill = self.spill = self.spill or _Spill()
            offset = spill.end
        digest = hashlib.sha256()
        ex = tar.extractfile(ti)
        left = size
        while left:
            chunk = ex.read(min(_CHUNK, left)) if ex else b""
            if not chunk:
                raise BundleFormatError(f"{self.where}: member {name!r} is truncated")
            digest.update(chunk)
            left -= len(chunk)
            if inline:
                chunks.append(chunk)
            elif spill is not None:
                spill.append(chunk)
        sha = digest.hexdigest()
        if inline:
            self.inline_bytes += size
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            return Member(name, data, sha)
        return Member(name, None, sha, size=size, spill=spill, offset=offset)


def read_container(
    path: Path,
    limits: Limits | None = None,
    progress: Callable[[int], None] | None = None,
    *,
    keep: Callable[[str], bool] | None = None,
) -> list[Member]:
    """Read and check every member of the bundle at ``path``.

    Structural problems of members (bad names, links, duplicates) are all
    collected and raised together. A truncated or corrupt stream, a bomb, an
    oversized member or header, or trailing bytes stop reading at once.

    Every member is hashed as it is read; ``keep(name)`` (default: every
    member) says whose bytes to keep for reading later. Kept bytes stay in
    memory within ``limits.inline_*`` and go to an anonymous temporary file
    beyond; the reader's own memory does not grow with what the archive holds.

    Raises:
        BundleFormatError: the archive is malformed or crafted.
        UsageError: ``path`` is not a regular file (a FIFO, device or socket).
        OSError: the file cannot be opened.
    """
    lim = limits or Limits()
    where = str(path)
    reader = _Reader(lim, where, keep, progress)
    done = False
    try:
        with _open_regular(Path(path)) as fh:
            if fh.read(4) != ZSTD_MAGIC:
                raise BundleFormatError(f"{where}: not a reprobundle archive (no zstd frame)")
            fh.seek(0)
            pull = FramePull(fh, lim.max_total_bytes, where)
            _read_tar(pull, reader)
            if pull.trailing:
                raise BundleFormatError(f"{where}: trailing bytes after the archive's zstd frame")
        if reader.problems:
            raise BundleFormatError(f"{where}: archive has unacceptable members", reader.problems)
        done = True
        return reader.members
    finally:
        if not done:
            reader.discard()


def _read_tar(pull: FramePull, reader: _Reader) -> None:
    where = reader.where
    try:
        with tarfile.open(  # type: ignore[call-overload]  # stream mode only calls read()
            fileobj=pull,
            mode="r|",
            tarinfo=bounded_tarinfo(reader.lim, where),
        ) as tar:
            while (ti := tar.next()) is not None:
                tar.members.clear()  # stream mode would keep every header otherwise
                reader.take(tar, ti)
        # tarfile stops at the end-of-archive blocks; drain the frame to see its end.
        while pull.read():
            pass
    except BundleFormatError:
        raise
    except (
        zstandard.ZstdError,
        tarfile.TarError,
        EOFError,
        ValueError,  # tarfile's int() of a malformed pax number or sparse map
        OverflowError,
        IndexError,
    ) as exc:
        raise BundleFormatError(
            f"{where}: archive is truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from exc
