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
from typing import Any, BinaryIO

import zstandard

from bundler.errors import BundleFormatError, Problem, UsageError

__all__ = [
    "ZSTD_LEVEL",
    "ContentLimits",
    "Limits",
    "Member",
    "read_container",
    "write_container",
]

ZSTD_LEVEL = 10
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_BLOCKS_PER_FEED = 8  # zstd blocks fed at once: at most 8 x 128 KiB of output per call
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


class _FramePull:
    """Pull-style decompression of exactly one zstd frame, bounded in output.

    The frame is walked block by block (a 3-byte header gives each block's
    type and size) and fed to the decompressor a few whole blocks at a time.
    A zstd block regenerates at most 128 KiB, so one call yields at most
    ``_BLOCKS_PER_FEED`` x 128 KiB however well the input compresses (feeding
    fixed byte counts instead lets 4 KiB of RLE blocks expand to 128 MiB). The
    running total is checked against ``limit``. After the frame's last block
    and checksum, any byte left in the file is reported as trailing data.
    """

    def __init__(self, fh: BinaryIO, limit: int, where: str) -> None:
        self._fh = fh
        self._limit = limit
        self._where = where
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._out = b""
        self._pos = 0
        self._started = False
        self._last_block = False
        self._checksum = False
        self._fed_all = False
        self.count = 0
        self.trailing = False

    def _exact(self, n: int) -> bytes:
        data = self._fh.read(n)
        if len(data) != n:
            raise BundleFormatError(f"{self._where}: archive is truncated (zstd frame ends early)")
        return data

    def _next_input(self) -> bytes:
        """The next slice of the frame: its header, up to a few whole blocks, or its checksum."""
        if not self._started:
            self._started = True
            head = self._exact(5)  # magic, frame header descriptor
            fhd = head[4]
            single = bool(fhd & 0x20)
            size = (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + (int(single), 2, 4, 8)[fhd >> 6]
            self._checksum = bool(fhd & 0x04)
            return head + self._exact(size)
        if self._last_block:
            self._fed_all = True
            return self._exact(4) if self._checksum else b""
        parts: list[bytes] = []
        for _ in range(_BLOCKS_PER_FEED):
            head = self._exact(3)
            word = int.from_bytes(head, "little")
            kind = (word >> 1) & 3
            if kind == 3:
                raise BundleFormatError(
                    f"{self._where}: archive is truncated or corrupt (reserved zstd block type)"
                )
            parts += (head, self._exact(1 if kind == 1 else word >> 3))  # RLE: one byte
            if word & 1:
                self._last_block = True
                break
        return b"".join(parts)

    def _refill(self) -> bool:
        while not self._fed_all:
            data = self._next_input()
            out = self._d.decompress(data) if data else b""
            self.count += len(out)
            if self.count > self._limit:
                raise BundleFormatError(
                    f"{self._where}: decompressed archive exceeds the {self._limit:,}-byte "
                    "bound (possible decompression bomb)"
                )
            if self._fed_all:
                if not self._d.eof:
                    raise BundleFormatError(
                        f"{self._where}: archive is truncated or corrupt (zstd frame does not end)"
                    )
                self.trailing = bool(self._d.unused_data) or bool(self._fh.read(1))
            if out:
                self._out, self._pos = out, 0
                return True
        return False

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` decompressed bytes (b"" at the end of the frame)."""
        if self._pos >= len(self._out) and not self._refill():
            return b""
        if self._pos == 0 and (n < 0 or n >= len(self._out)):
            self._pos = len(self._out)
            return self._out
        end = len(self._out) if n < 0 else self._pos + n
        data = self._out[self._pos : end]
        self._pos += len(data)
        return data


_ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
_TYPE_NAMES = {
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.DIRTYPE: "directory",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
}
_EXTENSION_NAMES = {
    tarfile.XHDTYPE: "pax extended header",
    tarfile.SOLARIS_XHDTYPE: "pax extended header",
    tarfile.XGLTYPE: "pax global header",
    tarfile.GNUTYPE_LONGNAME: "GNU long-name header",
    tarfile.GNUTYPE_LONGLINK: "GNU long-link header",
}
_nti: Callable[[bytes], int] = tarfile.nti  # type: ignore[attr-defined]


@dataclass
class _HeaderBudget:
    """What one read may spend on extension headers."""

    lim: Limits
    where: str
    depth: int = 0  # extension headers being processed in front of the current member
    global_bytes: int = 0

    def too_big(self, what: str, offset: int, size: int) -> BundleFormatError:
        return BundleFormatError(
            f"{self.where}: {what} at tar offset {offset:,} declares {size:,} bytes, over the "
            f"{self.lim.max_header_bytes:,}-byte bound for headers (possible bomb)"
        )

    def too_long(self, what: str, offset: int) -> BundleFormatError:
        return BundleFormatError(
            f"{self.where}: {what} at tar offset {offset:,} runs past the "
            f"{self.lim.max_header_bytes:,}-byte bound for headers (possible bomb)"
        )


class _BoundedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that refuses oversized extension headers before reading them.

    ``tarfile`` reads a pax or GNU long-name header's whole declared size into
    memory, follows chains of them recursively and collects GNU sparse maps
    without bound. ``_proc_member`` is the hook tarfile documents for
    subclasses; the two sparse readers are bounded copies of tarfile's own.
    Each read uses its own subclass (:func:`_bounded_tarinfo`) holding its budget.
    """

    budget: _HeaderBudget

    def _proc_member(self, tf: tarfile.TarFile) -> tarfile.TarInfo:
        what = _EXTENSION_NAMES.get(self.type)
        if what is None:
            return super()._proc_member(tf)  # type: ignore[misc, no-any-return]
        b = self.budget
        if self.size > b.lim.max_header_bytes:
            raise b.too_big(what, self.offset, self.size)
        if self.type == tarfile.XGLTYPE:
            b.global_bytes += self.size
            if b.global_bytes > b.lim.max_header_bytes:
                raise b.too_big("pax global headers together", self.offset, b.global_bytes)
        if b.depth >= b.lim.max_header_chain:
            raise BundleFormatError(
                f"{b.where}: more than {b.lim.max_header_chain} extension headers in a row "
                f"at tar offset {self.offset:,}"
            )
        b.depth += 1
        try:
            return super()._proc_member(tf)  # type: ignore[misc, no-any-return]
        finally:
            b.depth -= 1

    def _proc_sparse(self, tf: tarfile.TarFile) -> tarfile.TarInfo:
        # Old GNU sparse member ('S'): refused later as a member type, but its
        # extension blocks must be walked to find the next header.
        structs, isextended, origsize = self._sparse_structs  # type: ignore[attr-defined]
        del self._sparse_structs  # type: ignore[attr-defined]
        fileobj: Any = tf.fileobj
        read = 0
        while isextended:
            read += tarfile.BLOCKSIZE
            if read > self.budget.lim.max_header_bytes:
                raise self.budget.too_long("GNU sparse map", self.offset)
            buf = fileobj.read(tarfile.BLOCKSIZE)
            if len(buf) != tarfile.BLOCKSIZE:
                raise tarfile.ReadError("unexpected end of data")
            for pos in range(0, 21 * 24, 24):
                try:
                    offset = _nti(buf[pos : pos + 12])
                    numbytes = _nti(buf[pos + 12 : pos + 24])
                except ValueError:
                    break
                if offset and numbytes:
                    structs.append((offset, numbytes))
            isextended = bool(buf[504])
        self.sparse = structs
        self.offset_data = fileobj.tell()
        tf.offset = self.offset_data + self._block(self.size)  # type: ignore[attr-defined]
        self.size = origsize
        return self

    def _proc_gnusparse_10(
        self, nxt: tarfile.TarInfo, pax_headers: dict[str, str], tf: tarfile.TarFile
    ) -> None:
        # GNU sparse format 1.0: the map sits in front of the member's data.
        fileobj: Any = tf.fileobj
        buf = fileobj.read(tarfile.BLOCKSIZE)
        read = len(buf)
        fields_raw, buf = buf.split(b"\n", 1)
        fields = int(fields_raw)
        sparse: list[int] = []
        while len(sparse) < fields * 2:
            if b"\n" not in buf:
                read += tarfile.BLOCKSIZE
                if read > self.budget.lim.max_header_bytes:
                    raise self.budget.too_long("GNU sparse map", self.offset)
                buf += fileobj.read(tarfile.BLOCKSIZE)
            number, buf = buf.split(b"\n", 1)
            sparse.append(int(number))
        nxt.offset_data = fileobj.tell()
        nxt.sparse = list(zip(sparse[::2], sparse[1::2], strict=False))  # type: ignore[assignment]


def _bounded_tarinfo(lim: Limits, where: str) -> type[tarfile.TarInfo]:
    """A fresh :class:`_BoundedTarInfo` subclass carrying one read's header budget."""
    return type("_BoundedTarInfo", (_BoundedTarInfo,), {"budget": _HeaderBudget(lim, where)})


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
        if ti.type not in _ALLOWED_TYPES:
            kind = _TYPE_NAMES.get(ti.type, f"type {ti.type!r}")
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
            if fh.read(4) != _ZSTD_MAGIC:
                raise BundleFormatError(f"{where}: not a reprobundle archive (no zstd frame)")
            fh.seek(0)
            pull = _FramePull(fh, lim.max_total_bytes, where)
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


def _read_tar(pull: _FramePull, reader: _Reader) -> None:
    where = reader.where
    try:
        with tarfile.open(  # type: ignore[call-overload]  # stream mode only calls read()
            fileobj=pull,
            mode="r|",
            tarinfo=_bounded_tarinfo(reader.lim, where),
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
