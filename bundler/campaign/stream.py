"""A large JSON Lines receipts table sealed in blocks: read, check, scrub, write, in bounded memory.

``docs/adr/0005-columnar-seal.md`` § Streaming. Two passes over the file, each
holding one block (``StreamLimits.block_bytes`` of whole lines) and, when writing,
one Parquet row group:

1. :func:`survey` (at load): each block is read and checked as
   :func:`~bundler.campaign.columnar.read_jsonl_block` checks a whole file (any
   block not sure: the caller reads the file per-row, as before); the row-local
   cross checks run per block; ``request_id`` is kept as a 64-bit hash per row
   (8 bytes a row), duplicates are found on the sorted hashes and confirmed
   exactly by a second read of the colliding rows only; the distinct values the
   sanitizer must see (:meth:`Sanitizer.picks`) are kept per column with their
   counts, in order of first appearance, so that seal can number pseudonyms
   exactly as a whole-column scrub does.
2. :func:`write_parquet` (at seal): the file is read again (its SHA-256 must not
   have changed), each block scrubbed with the primed sanitizer and buffered into
   row groups of exactly ``row_group_rows`` rows, each column contiguous:
   ``pyarrow.parquet.ParquetWriter`` then writes the bytes ``write_table`` writes
   for the whole table.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bundler._internal.confined import ChangedFileError, ConfinedTree, FileIdentity
from bundler.campaign.columnar import (
    JSON_BLOCK_BYTES,
    ColumnTable,
    read_jsonl_block,
    to_bundle_table,
)
from bundler.campaign.sanitize import Sanitizer
from bundler.campaign.sanitize_rules import is_secret_name
from bundler.errors import CampaignError, Problem
from bundler.format.contract import TableView, receipt_block_checks
from bundler.format.tables import EXTRA_COLUMN, arrow_schema, scrubbable, table_schema

__all__ = ["STREAMED_TABLES", "StreamLimits", "StreamedTable", "survey", "write_parquet"]

STREAMED_TABLES = frozenset({"receipts"})
"""Tables sealed in blocks when their JSON Lines file is large."""

_P = 0x100000001B3  # odd: invertible modulo 2**64
_P_INV = pow(_P, -1, 1 << 64)
_MIX = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class StreamLimits:
    """When and in what pieces a table is streamed."""

    min_bytes: int = 64 << 20
    """A ``.jsonl`` table file of at least this size is streamed; smaller ones are read whole."""
    block_bytes: int = JSON_BLOCK_BYTES
    """Bytes read and parsed at a time (whole lines; a longer line makes a longer block)."""
    row_group_rows: int = 1 << 20
    """Rows per Parquet row group: ``PARQUET_OPTIONS["row_group_size"]`` of the seal."""


@dataclass
class StreamedTable:
    """A table checked block by block; its rows are read again when it is written."""

    name: str
    rel: str
    root: Path
    identity: FileIdentity
    limits: StreamLimits
    sha256: str = ""
    num_rows: int = 0
    unknown: list[str] = field(default_factory=list)
    """Unknown field names, in order of first appearance."""
    picked: dict[str, dict[str, int]] = field(default_factory=dict)
    """Scrubbed field -> its distinct values the sanitizer must see, with their row counts,
    in order of first appearance (schema fields first, then ``extra.<name>``)."""
    referenced: set[str] = field(default_factory=set)
    """The request ids other tables refer to that this table holds."""

    def blocks(self) -> Iterator[ColumnTable]:
        """The table's blocks again, as :func:`survey` read them.

        Raises:
            CampaignError: the file is no longer the file surveyed.
        """
        digest = hashlib.sha256()
        with ConfinedTree(self.root) as tree:
            tree.files[self.rel] = self.identity
            try:
                fd = tree.open(self.rel)
            except (ChangedFileError, OSError):
                raise self._changed() from None  # replaced, removed, now a link
            with os.fdopen(fd, "rb") as fh:
                for line, data in _blocks(fh, self.limits.block_bytes, digest):
                    # Nothing read here is kept unless the digest below matches.
                    ct = read_jsonl_block(data, self.name, line, again=True)
                    if ct is None:
                        raise self._changed()
                    yield ct
        if digest.hexdigest() != self.sha256:
            raise self._changed()

    def _changed(self) -> CampaignError:
        return CampaignError(
            f"{self.rel}: changed while being sealed; nothing written",
            [Problem(self.rel, None, None, "changed while being sealed (read twice)")],
        )


def _blocks(fh: BinaryIO, size: int, digest: Any) -> Iterator[tuple[int, bytes]]:
    """(first line number, whole lines) of ``fh``, about ``size`` bytes each, hashed."""
    carry = b""
    line = 1
    while chunk := fh.read(size):
        digest.update(chunk)
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            carry += chunk  # a line longer than a block: read on
            continue
        block = carry + chunk[:cut] if carry else chunk[:cut]
        carry = chunk[cut:]
        yield line, block
        line += block.count(b"\n")
    if carry:
        yield line, carry


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


def _scrub_columns(name: str, ct: ColumnTable) -> Iterator[tuple[str, pa.Array[Any]]]:
    """(field, column) in the order ``to_bundle_table`` scrubs them, secret-named left out
    (those are redacted whole per value, with no pseudonyms to number)."""
    props = table_schema(name)["properties"]
    for f in arrow_schema(name):
        if f.name != EXTRA_COLUMN and scrubbable(props[f.name]) and not is_secret_name(f.name):
            yield f.name, ct.column(f.name)
    for u in ct.unknown:
        # As scrub_arrow tells a secret name: the last dotted part of the field.
        if pa.types.is_string(u.values.type) and not is_secret_name(u.name.rsplit(".", 1)[-1]):
            yield f"{EXTRA_COLUMN}.{u.name}", u.values


def _pick(san: Sanitizer, arr: pa.Array[Any], into: dict[str, int]) -> None:
    enc: Any = pc.dictionary_encode(arr)
    uniques, indices = enc.dictionary, enc.indices
    if len(uniques) == 0:
        return
    picked = san.picks(uniques)
    if len(picked) == 0:
        return
    counts = np.bincount(indices.drop_null().to_numpy(), minlength=len(uniques))
    for i in picked.tolist():
        text = uniques[i].as_py()
        into[text] = into.get(text, 0) + int(counts[i])


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
    None when some block is not surely valid (the per-row path then reads the file
    and locates every problem).
    """
    attempts, arms, wanted = context
    probe = pa.array(sorted(wanted), pa.string())
    fd = tree.open(rel)
    st = StreamedTable(name, rel, tree.root, tree.files[rel], limits)
    problems: list[Problem] = []
    hashes: list[np.ndarray[Any, Any]] = []
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        for line, data in _blocks(fh, limits.block_bytes, digest):
            ct = read_jsonl_block(data, name, line)
            if ct is None:
                return None
            st.num_rows += ct.num_rows
            ids = ct.column("request_id")
            hashes.append(_hash64(ids))
            problems += receipt_block_checks(TableView(rel, columns=ct), attempts, arms)
            if len(probe):
                found = pc.filter(probe, pc.is_in(probe, value_set=ids)).to_pylist()
                st.referenced.update(v for v in found if isinstance(v, str))
            st.unknown += [u.name for u in ct.unknown if u.name not in st.unknown]
            for fname, arr in _scrub_columns(name, ct):
                _pick(san, arr, st.picked.setdefault(fname, {}))
    st.sha256 = digest.hexdigest()
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


def write_parquet(st: StreamedTable, san: Sanitizer, out: Path, options: dict[str, Any]) -> None:
    """Pass 2: the table's Parquet member into ``out``, scrubbed, row group by row group.

    ``san`` must have been primed with ``st.picked`` (:meth:`Sanitizer.prime_column`);
    ``options`` are ``pyarrow.parquet.write_table``'s, less ``row_group_size``.
    """
    member = f"tables/{st.name}.parquet"

    def scrub(fname: str, arr: pa.Array[Any]) -> pa.Array[Any]:
        return san.scrub_arrow(arr, member, fname, count=False)

    rows = st.limits.row_group_rows
    pending: list[pa.Table] = []
    held = 0
    with pq.ParquetWriter(str(out), arrow_schema(st.name), **options) as writer:
        for ct in st.blocks():
            part = to_bundle_table(st.name, ct, scrub=scrub)
            pending.append(part)
            held += part.num_rows
            while held >= rows:
                whole = pa.concat_tables(pending)
                writer.write_table(whole.slice(0, rows).combine_chunks(), row_group_size=rows)
                rest = whole.slice(rows)
                pending = [rest] if rest.num_rows else []
                held -= rows
        if held:
            writer.write_table(pa.concat_tables(pending).combine_chunks(), row_group_size=rows)
    pending.clear()
    # Arrow's allocator keeps freed row groups for reuse; the container, written next,
    # needs the room (10M seed rows: the seal's peak is at its end).
    pa.default_memory_pool().release_unused()
