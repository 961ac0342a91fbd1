"""Where a streamed table's rows go on their way to its Parquet member.

:class:`RowGroups` gathers Parquet-ready parts into row groups of exactly the seal's
size and writes them to a temporary file; :class:`Background` does that on a thread
while the survey reads on; :class:`Spill` keeps converted parts beyond the memory
budget in a temporary Arrow IPC stream (``bundler/campaign/stream.py``, ADR 0005).
"""

from __future__ import annotations

import contextlib
import queue
import tempfile
import threading
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.format.tables import PARQUET_OPTIONS

__all__ = ["Background", "RowGroups", "Spill", "release"]


class Spill:
    """Converted blocks in a temporary Arrow IPC stream, written and read back in order.

    The file is unlinked at creation (``tempfile.TemporaryFile``): nothing is left
    behind whatever happens to the process.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._fh = tempfile.TemporaryFile(prefix="reprobundle-spill-")  # noqa: SIM115
        self._schema = schema
        self._writer: Any = pa.ipc.new_stream(pa.PythonFile(self._fh, mode="w"), schema)
        self._reader: Any = None

    def put(self, part: pa.Table) -> None:
        """Append ``part`` (at least one row) as one record batch."""
        arrays: list[Any] = [c.chunk(0) for c in part.combine_chunks().columns]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def get(self) -> pa.Table:
        if self._reader is None:
            self._writer.close()
            self._fh.seek(0)
            self._reader = pa.ipc.open_stream(pa.PythonFile(self._fh, mode="r"))
        return pa.Table.from_batches([self._reader.read_next_batch()], schema=self._schema)

    def close(self) -> None:
        self._fh.close()


class RowGroups:
    """Parquet-ready parts gathered into row groups of exactly ``rows`` rows, each column
    contiguous, written to a temporary file as they fill (Arrow writes by name, its own
    file output: the writing thread does not hold the GIL)."""

    def __init__(self, schema: pa.Schema, rows: int) -> None:
        self.file = tempfile.NamedTemporaryFile(prefix="reprobundle-", suffix=".parquet")  # noqa: SIM115
        options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
        self._writer = pq.ParquetWriter(self.file.name, schema, **options)
        self._schema = schema
        self._rows = rows
        # Per column, the chunks not yet written (columns combined one at a time, each
        # column's chunks let go once copied: a row group's peak is one column's copy).
        self._pending: list[list[pa.Array[Any]]] = [[] for _ in schema]
        self._held = 0

    def add(self, part: pa.Table) -> None:
        """Append ``part``'s rows; write every row group they complete."""
        for col, arr in zip(self._pending, part.columns, strict=True):
            col.extend(arr.chunks)
        self._held += part.num_rows
        while self._held >= self._rows:
            self._write(self._rows)

    def finish(self) -> BinaryIO:
        """Write the last, shorter row group and the footer; the file, at its end."""
        if self._held:
            self._write(self._held)
        self._writer.close()
        self._handed_out = True
        return cast(BinaryIO, self.file)

    def close(self) -> None:
        """Remove the file, written or not, unless :meth:`finish` handed it out."""
        self._pending = []
        with contextlib.suppress(Exception):
            self._writer.close()
        if not getattr(self, "_handed_out", False):
            self.file.close()

    def _write(self, n: int) -> None:
        group = pa.Table.from_arrays(
            [_first_rows(chunks, n) for chunks in self._pending], schema=self._schema
        )
        self._held -= n
        self._writer.write_table(group, row_group_size=self._rows)


def release(early: Background, groups: RowGroups) -> None:
    """Stop ``early``'s thread and remove ``groups``' file (idempotent)."""
    with contextlib.suppress(Exception):
        early.join()
    groups.close()


def _first_rows(chunks: list[pa.Array[Any]], n: int) -> pa.Array[Any]:
    """The first ``n`` values of ``chunks`` as one array, taken out of ``chunks``."""
    take: list[pa.Array[Any]] = []
    got = 0
    while got < n:
        arr = chunks.pop(0)
        if got + len(arr) > n:
            chunks.insert(0, arr.slice(n - got))
            arr = arr.slice(0, n - got)
        take.append(arr)
        got += len(arr)
    return pa.concat_arrays(take) if len(take) != 1 else take[0]


class Background:
    """Row groups written by a thread while the survey reads on (issue 22): parts are
    queued in file order (at most two waiting), the writer's error re-raised on join."""

    def __init__(self, groups: RowGroups) -> None:
        self.groups = groups
        self._queue: queue.Queue[pa.Table | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="row-groups", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (part := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self.groups.add(part)
                except BaseException as exc:
                    self._error = exc

    def put(self, part: pa.Table) -> None:
        """Queue ``part`` (blocks while two wait)."""
        self._queue.put(part)

    def join(self) -> None:
        """Wait until every queued part is written; re-raise the writer's error."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
