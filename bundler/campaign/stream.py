"""A large receipts table (JSON Lines or CSV) sealed in blocks: read, check, scrub, write, in
bounded memory.

``docs/adr/0005-columnar-seal.md`` § Streaming. The file is read once, a block
(``StreamLimits.block_bytes`` of whole lines; of a CSV file, whole records after
its header line) at a time, hashed as it is read:

1. :func:`survey` (at load): each block is read and checked as
   :func:`~bundler.campaign.columnar.read_jsonl_block` (or ``read_csv_block``, the
   header line and the block) checks a whole file (any block not sure: the caller
   reads the file whole, column-wise or per-row, as before), by
   ``StreamLimits.workers`` threads at once (Arrow's parser, ``pyarrow.compute``,
   numpy and hashlib release the GIL), merged in file order; the row-local cross
   checks run per block; ``request_id`` is kept as a 64-bit hash per row (8 bytes
   a row), duplicates are found on the sorted hashes and confirmed exactly by a
   second read of the colliding rows only; the distinct values the sanitizer must
   see (:meth:`Sanitizer.picks`) are kept per column with their counts, in order of
   first appearance, so that seal can number pseudonyms exactly as a whole-column
   scrub does. A block with no such value is final: its rows are converted to the
   Parquet member's table at once and held, in memory up to
   ``StreamLimits.hold_bytes``, then in a temporary Arrow IPC stream file. A block
   with values to scrub keeps only its place in the file and its SHA-256.
2. :func:`write_parquet` (at seal): the held blocks in file order, each block to
   scrub read again (its digest must not have changed) and scrubbed with the
   primed sanitizer; rows are gathered into row groups of exactly
   ``row_group_rows`` rows, each column contiguous: ``pyarrow.parquet.ParquetWriter``
   then writes the bytes ``write_table`` writes for the whole table.

What grows with the file: 8 bytes a row of id hashes during the survey and the
spill file on disk (about the Parquet member's table, uncompressed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import weakref
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bundler._internal.confined import ChangedFileError, ConfinedTree, FileIdentity
from bundler.campaign.columnar import (
    JSON_BLOCK_BYTES,
    ColumnTable,
    read_csv_block,
    read_jsonl_block,
    to_bundle_table,
)
from bundler.campaign.extra import UnknownColumn
from bundler.campaign.row_groups import Background, RowGroups, Spill, release
from bundler.campaign.sanitize import Sanitizer
from bundler.campaign.sanitize_rules import is_secret_name
from bundler.campaign.stream_blocks import csv_blocks, csv_header, jsonl_blocks, stamp
from bundler.errors import CampaignError, Problem
from bundler.format.contract import TableView, receipt_block_checks
from bundler.format.tables import (
    EXTRA_COLUMN,
    PARQUET_OPTIONS,
    arrow_schema,
    scrubbable,
    table_schema,
)

__all__ = ["STREAMED_TABLES", "StreamLimits", "StreamedTable", "survey", "write_parquet"]

STREAMED_TABLES = frozenset({"receipts"})
"""Tables sealed in blocks when their JSON Lines or CSV file is large."""

_P = 0x100000001B3  # odd: invertible modulo 2**64
_P_INV = pow(_P, -1, 1 << 64)
_MIX = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class StreamLimits:
    """When and in what pieces a table is streamed."""

    min_bytes: int = 64 << 20
    """A ``.jsonl`` or ``.csv`` table file of at least this size is streamed; smaller ones are
    read whole."""
    block_bytes: int = JSON_BLOCK_BYTES
    """Bytes read and parsed at a time (whole lines, or CSV records; a longer one makes a
    longer block)."""
    row_group_rows: int = PARQUET_OPTIONS["row_group_size"]
    """Rows per Parquet row group: ``PARQUET_OPTIONS["row_group_size"]`` of the seal."""
    hold_bytes: int = 512 << 20
    """Converted blocks held in memory up to this many bytes; the rest go to a temporary file."""
    workers: int = max(1, min(os.cpu_count() or 1, 4))
    """Blocks surveyed at once (threads)."""


@dataclass
class _Held:
    """One surveyed block as the writer will take it: rows ready to write (in memory or
    spilled), or the place of lines to read again and scrub."""

    rows: int
    part: pa.Table | None = None
    spilled: bool = False
    offset: int = 0
    length: int = 0
    first_line: int = 0
    digest: bytes = b""


@dataclass
class StreamedTable:
    """A table checked block by block, held for the writer (see the module docstring)."""

    name: str
    rel: str
    root: Path
    identity: FileIdentity
    limits: StreamLimits
    stamp: tuple[int, int] = (0, 0)
    """(size, modification time in ns) of the file when the survey read it."""
    header: bytes | None = None
    """A CSV file's header line, its line break included, as the survey read it (each
    block is parsed after it); None for JSON Lines."""
    num_rows: int = 0
    unknown: list[str] = field(default_factory=list)
    """Unknown field names, in order of first appearance."""
    picked: dict[str, dict[str, int]] = field(default_factory=dict)
    """Scrubbed field -> its distinct values the sanitizer must see, with their row counts,
    in order of first appearance (schema fields first, then ``extra.<name>``)."""
    referenced: set[str] = field(default_factory=set)
    """The request ids other tables refer to that this table holds."""
    held: list[_Held] = field(default_factory=list)
    held_bytes: int = 0
    spill: Spill | None = None
    groups: RowGroups | None = None
    """The table's Parquet member being written."""
    early: Background | None = None
    """Writes the table's first row groups while the survey reads on, as long as every
    block so far is final (nothing to scrub); None once one is not."""

    def hold(self, block: _Held) -> None:
        """Keep ``block`` for the writer: written at once while every block so far is
        final, else held in memory while under ``limits.hold_bytes``, else spilled."""
        if self.early is not None:
            if block.part is not None:
                if block.part.num_rows:
                    self.early.put(block.part)
                return
            self.early.join()  # the blocks from here on wait for the primed sanitizer
            self.early = None
        part = block.part
        if part is not None and part.num_rows:
            size = int(part.nbytes)
            if self.held_bytes + size > self.limits.hold_bytes:
                if self.spill is None:
                    self.spill = Spill(part.schema)
                    weakref.finalize(self, self.spill.close)
                self.spill.put(part)
                block.part, block.spilled = None, True
            else:
                self.held_bytes += size
        self.held.append(block)

    def close(self) -> None:
        """Let go of held rows, stop the writing thread, remove the temporary files."""
        self.held.clear()
        if self.early is not None:
            with contextlib.suppress(Exception):
                self.early.join()
            self.early = None
        if self.groups is not None:
            self.groups.close()
            self.groups = None
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    @property
    def first_record(self) -> int:
        """The number the per-row path gives the file's first record (``line N``): a JSON
        Lines row is its line; ``csv.DictReader`` numbers records from 2, the header
        being line 1, whatever lines a record spans."""
        return 1 if self.header is None else 2

    def split(self, fh: BinaryIO) -> Iterator[tuple[int, bytes | memoryview]]:
        """(offset, bytes) of each block of the file, as the survey cuts it."""
        if self.header is None:
            return jsonl_blocks(fh, self.limits.block_bytes)
        return csv_blocks(fh, self.limits.block_bytes, len(self.header))

    def read(
        self, data: bytes | memoryview, first: int, *, again: bool = False
    ) -> ColumnTable | None:
        """One block read and checked, its rows numbered from ``first``."""
        return _read_block(self.name, self.header, data, first, again=again)

    def _open(self, tree: ConfinedTree) -> int:
        tree.files[self.rel] = self.identity
        try:
            return tree.open(self.rel)
        except (ChangedFileError, OSError):
            raise self._changed() from None  # replaced, removed, now a link

    def blocks(self) -> Iterator[ColumnTable]:
        """The table's blocks again, as :func:`survey` read them (to locate duplicate ids:
        nothing read here is sealed, so the file is recognised by identity, size and
        modification time rather than hashed again).

        Raises:
            CampaignError: the file is no longer the file surveyed.
        """
        with ConfinedTree(self.root) as tree, os.fdopen(self._open(tree), "rb") as fh:
            if stamp(fh) != self.stamp:
                raise self._changed()
            line = self.first_record
            for _, data in self.split(fh):
                ct = self.read(data, line, again=True)
                if ct is None:
                    raise self._changed()
                line += ct.num_rows
                yield ct
            if stamp(fh) != self.stamp:
                raise self._changed()

    def parts(self, convert: Any) -> Iterator[pa.Table]:
        """The held blocks in file order, as Parquet-ready tables; a block to scrub is read
        again (its SHA-256 must be the survey's) and converted by ``convert(ColumnTable)``.

        Raises:
            CampaignError: a block read again is no longer the block surveyed.
        """
        with ConfinedTree(self.root) as tree:
            fh: BinaryIO | None = None
            try:
                for i, block in enumerate(self.held):
                    self.held[i] = _Held(0)  # let go of the rows as they are handed out
                    if block.part is not None:
                        yield block.part
                    elif block.spilled:
                        assert self.spill is not None
                        yield self.spill.get()
                    elif block.rows:
                        if fh is None:
                            fh = os.fdopen(self._open(tree), "rb")
                        yield convert(self._again(fh, block))
            finally:
                if fh is not None:
                    fh.close()

    def _again(self, fh: BinaryIO, block: _Held) -> ColumnTable:
        fh.seek(block.offset)
        data = fh.read(block.length)
        if hashlib.sha256(data).digest() != block.digest:
            raise self._changed()
        ct = self.read(data, block.first_line, again=True)
        if ct is None:
            raise self._changed()
        return ct

    def _changed(self) -> CampaignError:
        return CampaignError(
            f"{self.rel}: changed while being sealed; nothing written",
            [Problem(self.rel, None, None, "changed while being sealed (read twice)")],
        )


def _read_block(
    name: str, header: bytes | None, data: bytes | memoryview, first: int, *, again: bool = False
) -> ColumnTable | None:
    """A block of a JSON Lines file (``header`` None) or of a CSV file, read and checked
    (:func:`read_jsonl_block`, :func:`read_csv_block`)."""
    if header is None:
        return read_jsonl_block(bytes(data), name, first, again=again)
    return read_csv_block(header, data, name, first, again=again)


def _hash64(arr: pa.Array[Any]) -> np.ndarray[Any, Any]:
    """A 64-bit hash of each string of ``arr`` (no nulls), in bulk.

    Polynomial over the UTF-8 bytes modulo 2**64, then mixed; not collision-proof
    (a collision only costs an exact re-check of the colliding rows).
    """
    arr = arr.cast(pa.large_string())
    n = len(arr)
    bufs: list[Any] = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int64, count=n + 1, offset=arr.offset * 8)
    first, last = int(offsets[0]), int(offsets[-1])
    data = (
        np.frombuffer(bufs[2], np.uint8)[first:last].astype(np.uint64)
        if bufs[2] is not None
        else np.zeros(0, np.uint64)
    )
    powers = np.cumprod(np.full(len(data), _P, np.uint64))
    sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(data * powers)])
    inv = np.concatenate([np.ones(1, np.uint64), np.cumprod(np.full(len(data), _P_INV, np.uint64))])
    starts, ends = offsets[:-1] - first, offsets[1:] - first
    h = (sums[ends] - sums[starts]) * inv[starts]
    h ^= (ends - starts).astype(np.uint64) * np.uint64(_MIX)
    h ^= h >> np.uint64(31)
    h *= np.uint64(_MIX)
    out: np.ndarray[Any, Any] = h ^ (h >> np.uint64(29))
    return out


def objects_untouched(san: Sanitizer, unknown: Sequence[UnknownColumn]) -> bool:
    """Whether no rule of ``san`` looks at any key or string of the object- or array-valued
    unknown fields (``canonical`` columns), and none of their names is secret-like.

    Per row, objects are scrubbed key by key and value by value, row by row, numbering
    pseudonyms and counting hits in that order; column-wise they are kept as text.
    The two agree only when no rule hits any of their keys or distinct strings
    (:meth:`Sanitizer.changes_some`: the RE2 gate, then the rules on what it picks;
    a text no rule hits is neither changed, counted nor numbered). Otherwise the
    caller reads the rows (rare: an address inside an object field).
    """
    for u in unknown:
        if not u.canonical:
            continue
        names = [u.name.rsplit(".", 1)[-1], *u.keys]
        if any(is_secret_name(n) for n in names):
            return False
        texts = [pa.array(list(u.keys), pa.string()), *u.leaves]
        if any(len(t) and san.changes_some(t) for t in texts):
            return False
    return True


def _scrub_columns(name: str, ct: ColumnTable) -> Iterator[tuple[str, pa.Array[Any]]]:
    """(field, column) in the order ``to_bundle_table`` scrubs them, secret-named left out
    (those are redacted whole per value, with no pseudonyms to number)."""
    props = table_schema(name)["properties"]
    for f in arrow_schema(name):
        if f.name != EXTRA_COLUMN and scrubbable(props[f.name]) and not is_secret_name(f.name):
            yield f.name, ct.column(f.name)
    for u in ct.unknown:
        # As scrub_arrow tells a secret name: the last dotted part of the field.
        secret = is_secret_name(u.name.rsplit(".", 1)[-1])
        if pa.types.is_string(u.values.type) and not secret and not u.canonical:
            yield f"{EXTRA_COLUMN}.{u.name}", u.values


def _redacted_columns(name: str, ct: ColumnTable) -> bool:
    """Whether the block has a secret-named string column with a value (redacted whole)."""
    props = table_schema(name)["properties"]
    for f in arrow_schema(name):
        secret = f.name != EXTRA_COLUMN and scrubbable(props[f.name]) and is_secret_name(f.name)
        if secret and ct.column(f.name).null_count < ct.num_rows:
            return True
    return any(
        pa.types.is_string(u.values.type)
        and is_secret_name(u.name.rsplit(".", 1)[-1])
        and u.values.null_count < len(u.values)
        for u in ct.unknown
    )


def _picked(san: Sanitizer, arr: pa.Array[Any], unique: bool = False) -> dict[str, int]:
    """The distinct values of ``arr`` the sanitizer must see, with their row counts, in
    order of first appearance. ``unique``: the column's values are distinct (``request_id``:
    a duplicate is a problem, and a table with problems is never written), so they are
    not hashed to find it out."""
    if unique:
        rows = san.picks(arr)
        return {arr[i].as_py(): 1 for i in rows.tolist()}
    enc: Any = pc.dictionary_encode(arr)
    uniques, indices = enc.dictionary, enc.indices
    if len(uniques) == 0:
        return {}
    picked = san.picks(uniques)
    if len(picked) == 0:
        return {}
    counts = np.bincount(indices.drop_null().to_numpy(), minlength=len(uniques))
    return {uniques[i].as_py(): int(counts[i]) for i in picked.tolist()}


@dataclass
class _Surveyed:
    """What one block's survey found (computed in a worker thread)."""

    rows: int
    columns: ColumnTable
    """The block's rows, numbered from line 1 (the merge numbers them in the file)."""
    hashes: np.ndarray[Any, Any]
    referenced: list[str]
    unknown: list[str]
    picks: list[tuple[str, dict[str, int]]]
    part: pa.Table | None
    digest: bytes


@dataclass(frozen=True)
class _Context:
    name: str
    rel: str
    header: bytes | None
    attempts: set[str]
    arms: set[str]
    probe: pa.Array[Any]
    san: Sanitizer


def _survey_block(ctx: _Context, data: bytes | memoryview) -> _Surveyed | None:
    """Pass 1 over one block; None when it is not surely valid."""
    ct = _read_block(ctx.name, ctx.header, data, 1)
    if ct is None or not objects_untouched(ctx.san, ct.unknown):
        return None
    ids = ct.column("request_id")
    referenced: list[str] = []
    if len(ctx.probe):
        found = pc.filter(ctx.probe, pc.is_in(ctx.probe, value_set=ids)).to_pylist()
        referenced = [v for v in found if isinstance(v, str)]
    picks = [
        (f, _picked(ctx.san, arr, f == "request_id")) for f, arr in _scrub_columns(ctx.name, ct)
    ]
    # The picks are a superset (an RE2 gate per rule); a value no rule changes is left
    # as it is, counted nowhere and numbered never, whatever the other blocks hold.
    # Nothing changes the sanitizer during the survey, so workers may ask it.
    changing = any(ctx.san.would_change(t) for _, p in picks for t in p)
    final = not changing and not _redacted_columns(ctx.name, ct)
    return _Surveyed(
        rows=ct.num_rows,
        columns=ct,
        hashes=_hash64(ids),
        referenced=referenced,
        unknown=[u.name for u in ct.unknown],
        picks=picks,
        # Nothing in this block is scrubbed, whatever the others hold: its rows are final.
        part=to_bundle_table(ctx.name, ct) if final else None,
        digest=b"" if final else hashlib.sha256(data).digest(),
    )


def survey(  # noqa: PLR0917
    tree: ConfinedTree,
    rel: str,
    name: str,
    limits: StreamLimits,
    context: tuple[set[str], set[str], set[str]],
    san: Sanitizer,
) -> tuple[StreamedTable, list[Problem]] | None:
    """Pass 1 over table ``name`` in walked file ``rel``: checks, duplicates, what to scrub.

    ``context``: (known attempt ids, known arms, request ids other tables refer to).
    None when some block is not surely valid (the file is then read whole, as it
    would have been, column-wise or per-row: the per-row path locates every problem).
    """
    attempts, arms, wanted = context
    probe = pa.array(sorted(wanted), pa.string())
    fd = tree.open(rel)
    st = StreamedTable(name, rel, tree.root, tree.files[rel], limits)
    st.groups = RowGroups(arrow_schema(name), limits.row_group_rows)
    st.early = Background(st.groups)
    # A loaded table that is never sealed (a caller that only checks) still stops its
    # writing thread and removes its files once it is let go.
    weakref.finalize(st, release, st.early, st.groups)
    problems: list[Problem] = []
    hashes: list[np.ndarray[Any, Any]] = []
    ok = False
    inflight: deque[tuple[int, int, Future[_Surveyed | None]]] = deque()
    pool = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="survey")
    try:
        with os.fdopen(fd, "rb") as fh:
            st.stamp = stamp(fh)
            if rel.endswith(".csv"):
                # Every block is parsed after the header (its quoting checked there);
                # none (no record) or a longer one: read whole.
                st.header = csv_header(fh.fileno())
                if st.header is None:
                    return None
            ctx = _Context(name, rel, st.header, attempts, arms, probe, san)
            for offset, data in st.split(fh):
                inflight.append((offset, len(data), pool.submit(_survey_block, ctx, data)))
                del data
                # At most one block waits beyond those being surveyed (bounded memory).
                while len(inflight) > limits.workers:
                    if not _merge(st, ctx, inflight.popleft(), hashes, problems):
                        return None
            while inflight:
                if not _merge(st, ctx, inflight.popleft(), hashes, problems):
                    return None
        # A CSV file without a record is refused by the whole-file reader: so here.
        ok = st.num_rows > 0 or st.header is None
        if not ok:
            return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if not ok:
            st.close()
    # Scrubbed columns in whole-table order: schema fields, then unknown ones as first met.
    order = [f for f in st.picked if not f.startswith(f"{EXTRA_COLUMN}.")]
    order += [f"{EXTRA_COLUMN}.{u}" for u in st.unknown if f"{EXTRA_COLUMN}.{u}" in st.picked]
    st.picked = {f: st.picked[f] for f in order}
    everything = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    del hashes
    everything.sort()
    same = everything[1:] == everything[:-1]
    if same.any():
        problems += _duplicates(st, np.unique(everything[1:][same]))
    return st, problems


def _merge(
    st: StreamedTable,
    ctx: _Context,
    item: tuple[int, int, Future[_Surveyed | None]],
    hashes: list[np.ndarray[Any, Any]],
    problems: list[Problem],
) -> bool:
    """Add one block's survey to ``st``, in file order; False when the block was not sure."""
    offset, length, fut = item
    got = fut.result()
    if got is None:
        return False
    line = st.num_rows + st.first_record  # rows numbered at the merge, in file order
    ct = dataclasses.replace(got.columns, first_line=line)
    problems += receipt_block_checks(TableView(st.rel, columns=ct), ctx.attempts, ctx.arms)
    del ct
    st.num_rows += got.rows
    hashes.append(got.hashes)
    st.referenced.update(got.referenced)
    st.unknown += [u for u in got.unknown if u not in st.unknown]
    for fname, picked in got.picks:
        into = st.picked.setdefault(fname, {})
        for text, n in picked.items():
            into[text] = into.get(text, 0) + n
    st.hold(_Held(got.rows, got.part, False, offset, length, line, got.digest))
    return True


def _duplicates(st: StreamedTable, colliding: np.ndarray[Any, Any]) -> list[Problem]:
    """The rows whose ``request_id`` occurs twice or more, in file order (read again)."""
    seen: list[tuple[str, str]] = []
    for ct in st.blocks():
        ids = ct.column("request_id")
        for i in np.flatnonzero(np.isin(_hash64(ids), colliding)).tolist():
            seen.append((ct.label(i), str(ids[i].as_py())))
    counts = Counter(v for _, v in seen)
    return [
        Problem(st.rel, label, "request_id", f"duplicate request_id {v!r}")
        for label, v in seen
        if counts[v] > 1
    ]


def write_parquet(st: StreamedTable, san: Sanitizer) -> BinaryIO:
    """Pass 2: the rest of the table's Parquet member, scrubbed, row group by row group;
    the member's temporary file (at its end), which the caller closes.

    ``san`` must have been primed with ``st.picked`` (:meth:`Sanitizer.prime_column`).
    The held rows are let go as they are written.
    """
    member = f"tables/{st.name}.parquet"

    def scrub(fname: str, arr: pa.Array[Any]) -> pa.Array[Any]:
        return san.scrub_arrow(arr, member, fname, count=False)

    def convert(ct: ColumnTable) -> pa.Table:
        return to_bundle_table(st.name, ct, scrub=scrub)

    if st.early is not None:
        st.early.join()
        st.early = None
    groups = st.groups
    assert groups is not None, "written once"
    try:
        for part in st.parts(convert):
            groups.add(part)
        out = groups.finish()
        st.groups = None  # the caller owns the file now
    finally:
        st.close()
    # Arrow's allocator keeps freed row groups for reuse; the container, written next,
    # needs the room (10M seed rows: the seal's peak is at its end).
    pa.default_memory_pool().release_unused()
    return out
