"""The ``comparisons`` table read column-wise: its ``metrics`` object as a map column.

A comparisons table has one row per compared request pair; each row's ``metrics`` is an
object of metric name -> number, stored as ``map<string, float64>`` with entries sorted
by name (``rows_to_table``). The per-row path costs Python work per entry; here the
file is read as :mod:`bundler.campaign.columnar` reads receipts, and the ``metrics``
objects become the map column in bulk. Same contract (``docs/adr/0005-columnar-seal.md``):
accept only what the per-row path accepts, and store the same values, else ``None``
(per-row).

- JSON Lines: Arrow's JSON reader reads ``metrics`` as a struct with one float64 child
  per metric name (an explicit type, so every number is parsed from its own text as a
  double, as ``float()`` of Python's value is). Arrow gives every name a slot in every
  row, so the names are found first (:func:`_read_whole`), and a file
  whose names times rows exceed :data:`MAX_METRIC_CELLS` goes per-row. A name Arrow
  reads as null in a row is absent there, unless the text may hold ``"name": null``
  (invalid per row): then per-row. An integer literal ``-0`` is 0.0 per row but -0.0
  for Arrow: any negative zero goes per-row.
- CSV: each ``metrics.<name>`` column is a number column that must be filled in every
  row (an empty cell is a ``null`` entry per row: invalid).
- Key order is lost, and the map does not need it (entries are sorted by name); the
  sanitizer does (it numbers pseudonyms and finds colliding names in row and key
  order): seal reads the table again per row when a metric name would change under
  the rules (``bundler/seal.py`` ``_needs_rows``), so here names are never scrubbed.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bundler.campaign.columnar import (
    _PLAIN_NAME,
    ColumnTable,
    UnknownColumn,
    _checked,
    _contiguous,
    _escaped_key_null,
    _header_names,
    _json_table,
    _line_breaks,
    _null_member,
    _present,
    _read_csv,
    _read_type,
    _unknown_ok,
    no_negative_zero,
    read_table_file,
)
from bundler.campaign.table_columns import field_kinds
from bundler.format.tables import arrow_schema, table_schema

__all__ = ["MAX_METRIC_CELLS", "METRICS", "read_comparisons"]

NAME = "comparisons"
METRICS = "metrics"
MAX_METRIC_CELLS = 1 << 24
"""Metric names × rows above which a JSON Lines file goes per-row: Arrow's reader gives
every name a (null) slot in every row, 9 bytes each (144 MiB here), whether the row
has it or not."""
_SAMPLE_BYTES = 4 << 20
"""The first piece (whose names are tried for the whole file) is cut from this many bytes."""
_METRIC_PREFIX = "metrics."
_NUMBER_PROP: dict[str, Any] = {"type": "number"}

Plan = dict[str, tuple[dict[str, Any], list[str], bool]]


def _plan() -> Plan | None:
    """field -> (property, kinds, required) of every field but ``metrics``."""
    schema = table_schema(NAME)
    required = set(schema.get("required", []))
    out: Plan = {}
    for field, prop in schema["properties"].items():
        if field == METRICS:
            continue
        kinds = field_kinds(prop)
        if kinds is None:
            return None
        out[field] = (prop, kinds, field in required)
    return out


def _map_type() -> Any:
    return arrow_schema(NAME).field(METRICS).type


def _map(offsets: np.ndarray[Any, Any], keys: pa.Array[Any], items: pa.Array[Any]) -> pa.Array[Any]:
    maps: Any = pa.MapArray
    out: pa.Array[Any] = maps.from_arrays(
        pa.array(offsets, pa.int32()), keys, items, type=_map_type()
    )
    return out


def _metrics_map(names: list[str], children: list[pa.Array[Any]], rows: int) -> pa.Array[Any]:
    """The map column: per row, the non-null children's (name, value), sorted by name
    as Python sorts strings (code points), which is what ``rows_to_table`` stores."""
    order = sorted(range(len(names)), key=names.__getitem__)
    offsets: np.ndarray[Any, Any] = np.zeros(rows + 1, np.int64)
    if not order:
        return _map(offsets, pa.array([], pa.string()), pa.array([], pa.float64()))
    values = np.column_stack([children[i].to_numpy(zero_copy_only=False) for i in order])
    valid = np.column_stack(
        [np.asarray(pc.is_valid(children[i]).to_numpy(zero_copy_only=False)) for i in order]
    )
    offsets[1:] = np.cumsum(valid.sum(axis=1))
    # Boolean indexing walks the matrix row by row: entries in row order, names sorted.
    which = np.broadcast_to(np.arange(len(order)), valid.shape)[valid]
    keys = pc.take(pa.array([names[i] for i in order], pa.string()), pa.array(which))
    return _map(offsets, keys, pa.array(values[valid], pa.float64()))


def _pieces(data: bytes, breaks: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """(start, end) byte ranges of whole lines, each small enough for Arrow to read safely.

    Every key is followed by a colon, so a piece's lines × colons bounds the slots
    Arrow fills reading it (rows × names at every level).
    """
    buf = np.frombuffer(data, np.uint8)
    ends = breaks + 1 if data.endswith(b"\n") else np.append(breaks + 1, len(data))
    colons = np.searchsorted(np.flatnonzero(buf == 0x3A), ends)  # colons before each end
    out: list[tuple[int, int]] = []
    start_line, start_colons, start_byte = 0, 0, 0
    n = len(ends)
    while start_line < n:
        # The longest run of lines from start_line whose lines × colons stays in budget
        # (both grow with the run, so the first line past it ends the piece).
        lo = start_line + 1
        hi = bisect.bisect_right(
            range(n + 1),
            MAX_METRIC_CELLS,
            lo=lo,
            key=lambda e: (e - start_line) * (int(colons[e - 1]) - start_colons),
        )
        end_line = max(lo, hi - 1)
        end_byte = int(ends[end_line - 1])
        out.append((start_byte, end_byte))
        start_line, start_colons, start_byte = end_line, int(colons[end_line - 1]), end_byte
    return out


def _names_in(table: pa.Table) -> list[str] | None:
    """The metric names of a piece read with ``metrics`` inferred; None if not objects."""
    if METRICS not in table.column_names:
        return []
    typ = table.schema.field(METRICS).type
    if not pa.types.is_struct(typ):
        return None
    return [typ.field(i).name for i in range(typ.num_fields)]


def _metric_names(
    data: bytes, pieces: list[tuple[int, int]], schema: pa.Schema, longest: int, limit: int
) -> list[str] | None:
    """Every metric name in order of first appearance, or None when ``metrics`` is not an
    object of at most ``limit`` names (then: per-row)."""
    names: dict[str, None] = {}
    view = memoryview(data)
    for start, end in pieces:
        found = _names_in(_json_table(bytes(view[start:end]), schema, "infer", longest))
        if found is None:
            return None
        names.update(dict.fromkeys(found))
        if len(names) > limit:
            return None
    return list(names)


def _with_metrics(scalar: pa.Schema, names: list[str]) -> pa.Schema:
    return pa.schema([*scalar, (METRICS, pa.struct([(n, pa.float64()) for n in names]))])


def _read_whole(
    data: bytes, breaks: np.ndarray[Any, Any], scalar: pa.Schema, longest: int
) -> tuple[pa.Table, list[str]] | None:
    """The file read by Arrow with ``metrics`` a struct of float64 children, one per name
    (each number parsed from its own text as a double), and the names; None when there
    are too many names for the rows (:data:`MAX_METRIC_CELLS`) or ``metrics`` is not an
    object.

    The first piece's names usually are all of them: the whole file is then read with
    those and any other field refused (one read). A file whose first piece has fields
    beyond the schema, or whose later lines bring one, is surveyed piece by piece first.
    """
    rows = len(breaks) + (0 if data.endswith(b"\n") else 1)
    limit = MAX_METRIC_CELLS // max(rows, 1)
    # The first piece is cut from the first lines (the colon count is a pass over them).
    head = int(np.searchsorted(breaks, _SAMPLE_BYTES))
    end = len(data) if head >= len(breaks) else int(breaks[head]) + 1
    start, end = _pieces(data[:end], breaks[: head + 1])[0]
    sample = _json_table(data[start:end], scalar, "infer", longest)
    first = _names_in(sample)
    if first is None or len(first) > limit:
        return None
    whole = end == len(data)
    if not whole and set(sample.column_names) <= {*scalar.names, METRICS}:
        try:
            return _json_table(data, _with_metrics(scalar, first), "error", longest), first
        except pa.ArrowInvalid:
            pass  # a field the first piece lacks (or an error the survey meets again)
    names = first if whole else _metric_names(data, _pieces(data, breaks), scalar, longest, limit)
    if names is None:
        return None
    return _json_table(data, _with_metrics(scalar, names), "infer", longest), names


def _explicit_null(data: bytes, names: list[str]) -> bool:
    """Whether some metric among ``names`` (read as null somewhere) may be written
    ``"name": null`` in the text: invalid per row, absent for Arrow. Exact for plain
    names, as for unknown fields (:func:`bundler.campaign.columnar._present`)."""
    if not names or b"null" not in data:
        return False
    if _escaped_key_null(data):
        return True
    return any(
        not _PLAIN_NAME.match(n) or re.search(_null_member(n).encode("utf-8"), data) is not None
        for n in names
    )


def _metrics_ok(children: list[pa.Array[Any]]) -> bool:
    """Finite doubles, no negative zero (``-0`` is an integer per row: 0.0)."""
    for child in children:
        valid = child.drop_null()
        if len(valid) == 0:
            continue
        values = valid.to_numpy(zero_copy_only=False)
        if not np.isfinite(values).all() or not no_negative_zero(valid):
            return False
    return True


def _ordered(columns: dict[str, pa.Array[Any]]) -> pa.Table:
    """``columns`` in the bundle schema's order (without ``extra``)."""
    names = [f.name for f in arrow_schema(NAME) if f.name in columns]
    return pa.table({n: columns[n] for n in names})


def _read_jsonl(data: bytes, plan: Plan) -> ColumnTable | None:  # noqa: PLR0911
    """:func:`bundler.campaign.columnar._read_jsonl` with ``metrics`` read as a struct."""
    found = _line_breaks(data)
    if found is None:
        return None
    breaks, longest, lines = found
    scalar = pa.schema([(f, _read_type(k)) for f, (_, k, _) in plan.items()])
    read = _read_whole(data, breaks, scalar, longest)
    if read is None:
        return None
    table, names = read
    schema = _with_metrics(scalar, names)
    struct = schema.field(METRICS).type
    unknown = [f for f in table.schema if f.name not in plan and f.name != METRICS]
    if any(pa.types.is_temporal(f.type) for f in unknown):
        typed = [(f.name, pa.string() if pa.types.is_temporal(f.type) else f.type) for f in unknown]
        table = _json_table(data, pa.schema([*schema, *typed]), "error", longest)
    if table.num_rows != lines or table.schema.field(METRICS).type != struct:
        return None
    col_names, chunked = table.column_names, list(table.columns)
    del table
    columns = _contiguous(col_names, chunked)
    metrics = cast(pa.StructArray, columns.pop(METRICS))
    if metrics.null_count:
        return None  # missing or null: required, the per-row path names it
    children = metrics.flatten()
    with_nulls = [n for n, c in zip(names, children, strict=True) if c.null_count]
    if _explicit_null(data, with_nulls) or not _metrics_ok(children):
        return None
    extra = {f.name: columns.pop(f.name) for f in unknown}
    if not all(_unknown_ok(a) for a in extra.values()):
        return None
    present = _present(data, extra, breaks) if extra else {}
    if present is None:
        return None
    checked = _checked(columns, plan, lines)
    if checked is None:
        return None
    out = {n: checked.column(n).combine_chunks() for n in checked.column_names}
    out[METRICS] = _metrics_map(names, children, lines)
    unknown_cols = tuple(UnknownColumn(n, a, present[n]) for n, a in extra.items())
    return ColumnTable(_ordered(out), 1, unknown_cols)


def _read_csv_table(data: bytes, plan: Plan) -> ColumnTable | None:
    """CSV: every ``metrics.<name>`` column a number filled in every row."""
    cells = _header_names(data.split(b"\n", 1)[0].decode("utf-8"))
    if cells is None:
        return None
    metric_cols = [c for c in cells if c.startswith(_METRIC_PREFIX)]
    if not metric_cols or METRICS in cells:
        return None  # no metrics (required), or a `metrics` column too: per row decides
    number = (_NUMBER_PROP, ["number"], True)
    ct = _read_csv(data, {**plan, **dict.fromkeys(metric_cols, number)})
    if ct is None:
        return None
    names = [c.removeprefix(_METRIC_PREFIX) for c in metric_cols]
    children = [ct.column(c) for c in metric_cols]
    if not _metrics_ok(children):
        return None
    out = {n: ct.column(n) for n in plan}
    out[METRICS] = _metrics_map(names, children, ct.num_rows)
    return ColumnTable(_ordered(out), ct.first_line, ct.unknown)


def read_comparisons(path: Path, *, data: bytes | None = None) -> ColumnTable | None:
    """:func:`bundler.campaign.columnar.read_columnar` for the comparisons table file
    ``path`` (``.jsonl`` or ``.csv``; ``data``: its content, already read): the table
    read and checked column-wise, or None to go per-row."""
    plan = _plan()
    if plan is None:
        return None
    return read_table_file(
        path, data, lambda d: _read_jsonl(d, plan), lambda d: _read_csv_table(d, plan)
    )
