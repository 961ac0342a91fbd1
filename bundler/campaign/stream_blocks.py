"""How a large table file is cut into blocks of whole records for the streamed seal.

JSON Lines: at a line break (:func:`jsonl_blocks`); CSV: at a line break after an even
number of quotes, which is a record boundary under RFC 4180 quoting (:func:`csv_blocks`;
each block is then checked for that quoting). Each block is read with ``pread`` of
exactly its bytes (``bundler/campaign/stream.py``, ADR 0005 § Streaming).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

__all__ = ["csv_blocks", "csv_header", "jsonl_blocks", "stamp"]


def stamp(fh: BinaryIO) -> tuple[int, int]:
    st = os.fstat(fh.fileno())
    return st.st_size, st.st_mtime_ns


_PEEK = 64 << 10
"""Bytes read before a block's planned end to find its last line break."""


def jsonl_blocks(fh: BinaryIO, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, whole lines) of ``fh``, about ``size`` bytes each (a JSON Lines block's
    lines are its rows: the caller numbers them).

    Each block is one ``pread`` of exactly its bytes: its end (the last line break
    before ``size`` bytes, or the first after them for a longer line) is found in a
    small window first, so no block is copied out of a larger read. Reads up to the
    file's size when it was opened.
    """
    fd = fh.fileno()
    total = os.fstat(fd).st_size
    offset = 0
    while offset < total:
        end = _block_end(fd, offset, min(offset + size, total), total)
        block = os.pread(fd, end - offset, offset)
        if len(block) != end - offset:
            return  # the file shrank: the caller's stamp check says so
        yield offset, block
        offset = end


def _block_end(fd: int, start: int, planned: int, total: int) -> int:
    """The offset just after the last line break in ``[start, planned)``; when there is
    none (a line longer than a block), just after the first one from ``planned`` on;
    ``total`` when there is no line break left."""
    if planned >= total:
        return total
    hi = planned
    while hi > start:  # backwards, a window at a time
        lo = max(start, hi - _PEEK)
        at = os.pread(fd, hi - lo, lo).rfind(b"\n")
        if at >= 0:
            return lo + at + 1
        hi = lo
    lo = planned
    while lo < total:  # a line longer than a block: forwards to its end
        at = os.pread(fd, _PEEK, lo).find(b"\n")
        if at >= 0:
            return lo + at + 1
        lo += _PEEK
    return total


def csv_header(fd: int) -> bytes | None:
    """A CSV file's first line, its line break included; None when it has none (no record)
    or is longer than ``_PEEK`` (each block is parsed after a copy of it: such a file is
    read whole)."""
    head = os.pread(fd, _PEEK, 0)
    at = head.find(b"\n")
    return head[: at + 1] if at >= 0 else None


def csv_blocks(fh: BinaryIO, size: int, start: int) -> Iterator[tuple[int, memoryview]]:
    """(offset, whole records) of the CSV file ``fh`` from ``start`` (the first record),
    about ``size`` bytes each.

    A record may span lines (a quoted field holds line breaks), so a block ends at
    the last line break with an even number of quotes before it in the block
    (:func:`_record_end`), which is a record's end when the file's quoting is RFC
    4180's: whether it is, each block's reader checks (a quote out of place there:
    the file is read whole). The block's planned bytes are read with one ``pread``;
    its incomplete last record is read again with the next block (a record longer
    than a block: twice the bytes are read, until one ends). Reads up to the
    file's size when it was opened.
    """
    fd = fh.fileno()
    total = os.fstat(fd).st_size
    offset = start
    while offset < total:
        want = max(size, 1)
        while True:
            end = min(offset + want, total)
            data = os.pread(fd, end - offset, offset)
            if len(data) != end - offset:
                return  # the file shrank: the caller's stamp check says so
            cut = len(data) if end == total else _record_end(data)
            if cut is not None:
                break
            want *= 2
        yield offset, memoryview(data)[:cut]
        offset += cut


def _record_end(data: bytes) -> int | None:
    """The offset just after the last line break of ``data`` with an even number of quotes
    before it, or None when there is none.

    Without a quote (memchr) the last line break; else the quotes are counted once,
    and the line breaks' parities are found backwards a window at a time (numpy),
    from the count of quotes after them.
    """
    if b'"' not in data:
        at = data.rfind(b"\n")
        return at + 1 if at >= 0 else None
    quotes_total = data.count(b'"')
    buf = np.frombuffer(data, np.uint8)
    later = 0  # quotes after the window
    hi = len(buf)
    while hi > 0:
        lo = max(0, hi - _PEEK)
        window = buf[lo:hi]
        breaks = np.flatnonzero(window == 0x0A)
        quotes = np.flatnonzero(window == 0x22)
        if len(breaks):
            before = quotes_total - later - (len(quotes) - np.searchsorted(quotes, breaks))
            even = np.flatnonzero(before % 2 == 0)
            if len(even):
                return lo + int(breaks[even[-1]]) + 1
        later += len(quotes)
        hi = lo
    return None
