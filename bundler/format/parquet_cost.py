"""What decoding a Parquet table would allocate, known before a single page is decoded.

A verified bundle is hostile input, and Parquet compresses each page on its own: a
page of one string repeated a billion times is a few kilobytes of zstd, and a
dictionary-encoded column can name one megabyte-long dictionary entry from every
row. The archive bounds (:class:`bundler.format.container.Limits`) see only the
Parquet file's bytes, so a 14 KB bundle could make a reader allocate gigabytes.

Two figures bound what a reader allocates, and :func:`table_cost_problems` compares
them with :class:`TableCostLimits` before any consumer reads a table:

1. **Page bytes**: the ``uncompressed_page_size`` of every page of every column
   chunk, read from the page headers themselves (Thrift compact protocol), which
   are what Arrow allocates when it decompresses a page; the column chunk totals in
   the footer are not trusted, since nothing makes a writer's totals match its
   pages.
2. **String bytes**: the bytes of every string value once dictionary codes are
   expanded, computed on the dictionary-coded column (reading it dictionary-coded
   costs at most the page bytes of 1.).

pyarrow exposes neither the page headers nor a memory cap, so the compact-protocol
reader below is ours: it reads only the three leading fields of a ``PageHeader`` and
skips the rest of the struct generically.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.errors import Problem
from bundler.format.container import Member

__all__ = ["Cost", "PageHeaderError", "TableCostLimits", "add_file_cost", "table_cost_problems"]


@dataclass(frozen=True)
class TableCostLimits:
    """Bounds on what decoding one bundle's tables may allocate (all tables together).

    An honest campaign is far below them: the 2,000,000-receipt table at replay's row
    limit (``ContentLimits.max_table_rows``) holds 75 MB of page bytes and 68 MB of
    strings by this bound (60 MB decoded). Chosen so that what a reader may decode stays
    well inside the 1 GiB that replay of any accepted bundle is held to.
    """

    max_page_bytes: int = 384 << 20
    """Uncompressed page bytes of every table together."""
    max_string_bytes: int = 256 << 20
    """String bytes of every table together, dictionary codes expanded."""
    max_pages: int = 1_000_000
    """Pages of every table together (each costs a header read)."""


class PageHeaderError(ValueError):
    """A page header that is not Thrift compact protocol, or points outside its column."""


# Thrift compact protocol type ids (the low nibble of a field header).
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = range(9, 13)
_MAX_HEADER = 1 << 20  # a page header with statistics is a few hundred bytes
_MAX_DEPTH = 16


class _Reader:
    """Thrift compact protocol over a bytes buffer (only what a PageHeader needs)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise PageHeaderError("page header runs past its column chunk")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise PageHeaderError("varint longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, kind: int, depth: int) -> None:  # noqa: C901, PLR0912 - a branch per wire type
        if depth > _MAX_DEPTH:
            raise PageHeaderError("page header nested too deeply")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.pos += 8
        elif kind == _BINARY:
            size = self.varint()  # read before moving on: ``pos += varint()`` loses its bytes
            self.pos += size
        elif kind in (_LIST, _SET):
            head = self.byte()
            size = head >> 4
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.skip(head & 0x0F, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, depth + 1)
                    self.skip(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            for _field, k in self.fields():
                self.skip(k, depth + 1)
        else:
            raise PageHeaderError(f"unknown Thrift compact type {kind}")
        if self.pos > len(self.data):
            raise PageHeaderError("page header runs past its column chunk")

    def fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of each field of the struct at the current position."""
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == _STOP:
                return
            delta = head >> 4
            last = last + delta if delta else self.zigzag()
            yield last, kind


@dataclass(frozen=True)
class _Page:
    """What a page header says about its page."""

    kind: int  # PageType: 0 data, 2 dictionary, 3 data v2
    uncompressed: int
    compressed: int
    header: int  # bytes of the header itself
    values: int  # num_values of the data or dictionary page header
    encoding: int  # the data page's value encoding (Parquet Encoding)


_DATA, _DICTIONARY, _DATA_V2 = 0, 2, 3
# Encoding ids whose values are dictionary codes: PLAIN_DICTIONARY, RLE_DICTIONARY.
_DICTIONARY_ENCODINGS = frozenset({2, 8})
# (page type, header field of its sub-header, field of num_values, field of encoding)
_SUB_HEADERS = {5: (1, 2), 7: (1, None), 8: (1, 4)}


def _sub_header(r: _Reader, num_field: int, enc_field: int | None) -> tuple[int, int]:
    values = encoding = -1
    for field, kind in r.fields():
        if field == num_field and kind == _I32:
            values = r.zigzag()
        elif field == enc_field and kind == _I32:
            encoding = r.zigzag()
        else:
            r.skip(kind, 2)
    return values, encoding


def _page_header(data: bytes) -> _Page:
    """The PageHeader at the start of ``data``."""
    r = _Reader(data)
    ints: dict[int, int] = {}
    values = encoding = -1
    for field, kind in r.fields():
        if field in (1, 2, 3) and kind == _I32:
            ints[field] = r.zigzag()
        elif field in _SUB_HEADERS and kind == _STRUCT:
            values, encoding = _sub_header(r, *_SUB_HEADERS[field])
        else:
            r.skip(kind, 1)
    if not {1, 2, 3} <= set(ints):
        raise PageHeaderError("page header without its type and sizes")
    if ints[2] < 0 or ints[3] < 0 or values < -1:
        raise PageHeaderError("page header with a negative size")
    return _Page(ints[1], ints[2], ints[3], r.pos, values, encoding)


_U32 = struct.Struct("<I")
_MAX_DICTIONARY_ENTRIES = 4_000_000
"""Entries of one dictionary page (each read in Python for its length): a dictionary page
is at most 1 MiB by default, some hundred thousand entries."""


@dataclass
class Cost:
    """What decoding the tables costs, added up page by page."""

    page_bytes: int = 0
    pages: int = 0
    string_bytes: int = 0
    """Strings decoded, dictionary codes expanded (an upper bound)."""


_CODECS: dict[str, Literal["zstd", "snappy", "gzip", "brotli", "lz4_raw"]] = {
    "ZSTD": "zstd",
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "BROTLI": "brotli",
    "LZ4_RAW": "lz4_raw",
}
"""Parquet codec names (column chunk metadata) as pyarrow names them."""


def _longest_entry(page: bytes, entries: int, fixed: int | None) -> int:
    """The longest value of a PLAIN-encoded dictionary page."""
    if fixed is not None:
        return fixed
    if entries > _MAX_DICTIONARY_ENTRIES:
        raise PageHeaderError(f"a dictionary page of {entries:,} entries")
    longest = pos = 0
    size_at = _U32.unpack_from
    end = len(page) - 4
    try:
        for _ in range(entries):
            if pos > end:
                raise PageHeaderError("dictionary page shorter than its entries")
            (size,) = size_at(page, pos)
            if size > longest:  # noqa: PLR1730 - a builtin call per entry costs twice as much
                longest = size
            pos += 4 + size
    except struct.error as exc:  # pragma: no cover - the bound above comes first
        raise PageHeaderError("dictionary page shorter than its entries") from exc
    if pos > len(page):
        raise PageHeaderError("dictionary page shorter than its entries")
    return longest


def _dictionary_page(fh: IO[bytes], page: _Page, codec: str, fixed: int | None) -> int:
    raw = fh.read(page.compressed)
    if len(raw) != page.compressed:
        raise PageHeaderError("dictionary page runs past the file")
    try:
        if codec == "UNCOMPRESSED":
            data = raw
        elif codec in _CODECS:
            data = pa.decompress(raw, page.uncompressed, codec=_CODECS[codec], asbytes=True)
        else:
            raise PageHeaderError(f"dictionary page compressed with {codec}, not read")
    except (pa.ArrowException, ValueError) as exc:
        if isinstance(exc, PageHeaderError):
            raise
        raise PageHeaderError(f"dictionary page does not decompress ({codec}): {exc}") from exc
    return _longest_entry(data, page.values, fixed)


def add_file_cost(
    fh: IO[bytes], meta: pq.FileMetaData, cost: Cost, limits: TableCostLimits
) -> None:
    """Add the page bytes, pages and (for string columns) string bytes of the Parquet file
    ``fh`` to ``cost``, from its page headers, decompressing only dictionary pages (after
    their size is counted against ``limits``).

    String bytes: a PLAIN data page holds its strings (its uncompressed size bounds them);
    a dictionary-coded one names ``num_values`` entries, each at most the dictionary's
    longest.

    Raises:
        PageHeaderError: a malformed page header, pages outside their column chunk, or more
            pages or page bytes than ``limits`` allow (checked before anything is read).
    """
    schema = meta.schema
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for c in range(group.num_columns):
            col = group.column(c)
            leaf = schema.column(c)
            string = leaf.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
            fixed = leaf.length if leaf.physical_type == "FIXED_LEN_BYTE_ARRAY" else None
            # An empty chunk (a table of 0 rows) may have a dictionary page and data page
            # offset 0; every real offset lies after the 4-byte "PAR1" magic.
            offsets: list[int | None] = [col.data_page_offset]
            if col.has_dictionary_page:
                offsets.append(col.dictionary_page_offset)
            valid = [o for o in offsets if o is not None and o >= 4]
            if not valid:
                if col.total_compressed_size:
                    raise PageHeaderError(f"column {col.path_in_schema!r} has no page offset")
                continue
            pos = start = min(valid)
            end = start + col.total_compressed_size
            longest = 0
            while pos < end:
                fh.seek(pos)
                page = _page_header(fh.read(min(_MAX_HEADER, end - pos)))
                cost.page_bytes += page.uncompressed
                cost.pages += 1
                if cost.pages > limits.max_pages or cost.page_bytes > limits.max_page_bytes:
                    return  # the caller names the limit; nothing more is read
                if string and page.kind == _DICTIONARY:
                    fh.seek(pos + page.header)
                    longest = max(longest, _dictionary_page(fh, page, col.compression, fixed))
                elif string and page.kind in (_DATA, _DATA_V2):
                    if page.encoding in _DICTIONARY_ENCODINGS:
                        cost.string_bytes += max(page.values, 0) * longest
                    else:
                        cost.string_bytes += page.uncompressed
                pos += page.header + page.compressed
            if pos != end:
                raise PageHeaderError(f"pages of column {col.path_in_schema!r} overrun the chunk")


def _over(count: int, limit: int, what: str, attr: str) -> str:
    return (
        f"{count:,} {what} in the tables so far, over the limit of {limit:,} "
        f"(TableCostLimits.{attr})"
    )


def table_cost_problems(
    members: Mapping[str, Member], limits: TableCostLimits | None = None
) -> list[Problem]:
    """Problems (member) where decoding the bundle's tables would cost more than ``limits``:
    page bytes and pages (from the page headers), and string bytes with dictionary codes
    expanded. Tables are visited in name order; the one that crosses a bound is named.
    Reads page headers and dictionary pages only: never a whole table.
    """
    lim = limits or TableCostLimits()
    cost = Cost()
    for name in sorted(n for n in members if n.startswith("tables/") and n.endswith(".parquet")):
        try:
            with members[name].open() as fh:
                add_file_cost(fh, pq.read_metadata(fh), cost, lim)
        except PageHeaderError as exc:
            return [Problem(name, None, None, f"not readable Parquet: {exc}")]
        except (pa.ArrowException, OSError, ValueError) as exc:
            return [Problem(name, None, None, f"not readable Parquet: {exc}")]
        for count, limit, what, attr in (
            (cost.pages, lim.max_pages, "pages", "max_pages"),
            (cost.page_bytes, lim.max_page_bytes, "page bytes", "max_page_bytes"),
            (cost.string_bytes, lim.max_string_bytes, "string bytes", "max_string_bytes"),
        ):
            if count > limit:
                return [Problem(name, None, None, _over(count, limit, what, attr))]
    return []
