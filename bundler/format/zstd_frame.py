"""One zstd frame, decompressed a few blocks at a time: bounded in output whatever it claims.

The bundle reader (:mod:`bundler.format.container`) pulls the tar stream
through :class:`FramePull`; see the "Reader bounds" section of
``specs/bundle-format.md``.
"""

from __future__ import annotations

from typing import BinaryIO

import zstandard

from bundler.errors import BundleFormatError

__all__ = ["ZSTD_MAGIC", "FramePull"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BLOCKS_PER_FEED = 8  # zstd blocks fed at once: at most 8 x 128 KiB of output per call


class FramePull:
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
