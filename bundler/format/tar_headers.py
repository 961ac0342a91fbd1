"""Tar headers read within bounds: member types, and extension headers refused before they are read.

``tarfile`` reads a pax or GNU long-name header's whole declared size into
memory and follows chains of them; :func:`bounded_tarinfo` gives one read of
:mod:`bundler.format.container` a ``TarInfo`` class that checks each against
the reader's limits first (the "Reader bounds" section of ``specs/bundle-format.md``).
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bundler.errors import BundleFormatError

__all__ = ["ALLOWED_TYPES", "TYPE_NAMES", "BoundedTarInfo", "HeaderLimits", "bounded_tarinfo"]


class HeaderLimits(Protocol):
    """The two bounds on extension headers (:class:`bundler.format.container.Limits` has them)."""

    @property
    def max_header_bytes(self) -> int:
        """Largest extension header or GNU sparse map (pax global headers: all together)."""
        ...

    @property
    def max_header_chain(self) -> int:
        """Most extension headers in a row in front of one member."""
        ...


ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
TYPE_NAMES = {
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

    lim: HeaderLimits
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


class BoundedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that refuses oversized extension headers before reading them.

    ``tarfile`` reads a pax or GNU long-name header's whole declared size into
    memory, follows chains of them recursively and collects GNU sparse maps
    without bound. ``_proc_member`` is the hook tarfile documents for
    subclasses; the two sparse readers are bounded copies of tarfile's own.
    Each read uses its own subclass (:func:`bounded_tarinfo`) holding its budget.
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


def bounded_tarinfo(lim: HeaderLimits, where: str) -> type[tarfile.TarInfo]:
    """A fresh :class:`BoundedTarInfo` subclass carrying one read's header budget."""
    return type("_BoundedTarInfo", (BoundedTarInfo,), {"budget": _HeaderBudget(lim, where)})
