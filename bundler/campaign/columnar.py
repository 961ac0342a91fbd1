"""Columnar reading and checking of large tables (receipts, telemetry, worker exits,
comparisons).

The per-row path (``bundler/campaign/load.py``: Python ``json``/``csv`` into row dicts,
then ``check_rows``) costs ~35 s for a million receipts, nearly all of it
per-value Python. Here the file is read by Arrow's JSON Lines or CSV reader with
an explicit schema, and every constraint of the table schema is checked over
whole columns with ``pyarrow.compute``.

Contract (``docs/adr/0005-columnar-seal.md``): :func:`read_columnar` may only
accept a file the per-row path accepts, and then yields exactly the values the
per-row path would store (same int64s, same IEEE doubles, same timestamps, same
strings). Whenever it is not sure -- any reader error, any value that fails a
check, any input the two readers might see differently (a byte-order mark, a
carriage return, a Unicode line separator, a surrogate escape, a blank line,
an unknown field holding an object or array) -- it returns ``None`` and the
caller runs the per-row path, which names the file, line and field of every problem.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson

from bundler._internal.jsonload import MAX_JSON_DEPTH
from bundler.campaign.extra import JCS_MAX_INT, UnknownColumn, extra_column, object_text
from bundler.campaign.table_columns import csv_booleans, field_kinds, is_boolean
from bundler.format.columns import all_true, numbers_ok, strings_ok
from bundler.format.tables import (
    EXTRA_COLUMN,
    arrow_schema,
    scrubbable,
    table_schema,
    timestamps_ns,
)

__all__ = [
    "COLUMNAR_TABLES",
    "PER_ROW_ENV",
    "ColumnTable",
    "UnknownColumn",
    "per_row_forced",
    "quotes_well_placed",
    "read_columnar",
    "read_csv_block",
    "read_jsonl_block",
    "to_bundle_table",
]

COLUMNAR_TABLES = frozenset({"receipts", "telemetry", "worker_exits"})
"""Tables read column-wise here when possible (the large ones whose every field and cross
check has a column-wise form); ``comparisons`` has its own reader on top of this one
(:mod:`bundler.campaign.comparison_columns`: its ``metrics`` object becomes a map column);
the others stay per-row."""

JSON_BLOCK_BYTES = 16 << 20
"""A streamed table is read, checked and converted this many bytes (of whole lines) at a time."""
JSON_INNER_BYTES = 2 << 20
"""Arrow's JSON reader parses a block in pieces of this many bytes, one per thread (a
longer line makes longer pieces)."""

PER_ROW_ENV = "REPROBUNDLE_SEAL_PER_ROW"
"""Set to ``1`` to force the per-row path (benchmarks time both in one run)."""

# Python's str.splitlines (the per-row JSONL path) and universal newlines (read_text)
# break lines at these too; Arrow breaks only at "\n". A BOM is kept by Python's
# "utf-8" codec (so the per-row path refuses the first line) but skipped by Arrow.
_OTHER_BREAKS = (
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1d",
    b"\x1e",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\xe2\x80\xa9",
)
_BOM = b"\xef\xbb\xbf"
_QUOTE, _COMMA, _LF = 0x22, 0x2C, 0x0A
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_INTEGER = "^-?[0-9]+$"
# Field names for which a `"name": null` match can only be a member (no quote, backslash,
# blank, comma or colon); explicit nulls of other names go per-row.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")
_NULL_AFTER = "[ \t]*:[ \t]*null"
_ESCAPED_KEY_NULL = re.compile(rb'\\[^"\n]*"' + _NULL_AFTER.encode())
_NUMBER = r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"


# RE2 reads \d as ASCII digits and $ as the end of the text only: stricter than Python.
def per_row_forced() -> bool:
    """Whether :data:`PER_ROW_ENV` asks for the per-row path."""
    return os.environ.get(PER_ROW_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class ColumnTable:
    """A table read and checked column-wise: typed columns, unscrubbed, in file order.

    Columns follow the table's Arrow schema (without ``extra``); each is one
    contiguous array. Fields beyond the schema are in ``unknown``, in order of
    first appearance, raw (unscrubbed). Row ``i`` came from line ``i + first_line``
    of its file.
    """

    table: pa.Table
    first_line: int
    unknown: tuple[UnknownColumn, ...] = ()

    @property
    def num_rows(self) -> int:
        """How many rows."""
        return int(self.table.num_rows)

    def label(self, index: int) -> str:
        """Where row ``index`` came from, as the per-row path says it (``line N``)."""
        return f"line {index + self.first_line}"

    def column(self, field: str) -> pa.Array[Any]:
        """The column ``field`` as one array."""
        col = self.table.column(field)
        if col.num_chunks == 1:
            return cast("pa.Array[Any]", col.chunk(0))  # already one array: no copy
        return col.combine_chunks()


def _plan(name: str) -> dict[str, tuple[dict[str, Any], list[str], bool]] | None:
    """field -> (property, kinds, required), or None if some field is not covered."""
    schema = table_schema(name)
    required = set(schema.get("required", []))
    out = {}
    for field, prop in schema["properties"].items():
        kinds = field_kinds(prop)
        if kinds is None:
            return None
        out[field] = (prop, kinds, field in required)
    return out


def _read_type(kinds: list[str]) -> Any:
    kind = next(k for k in kinds if k != "null")
    if kind == "integer":
        return pa.int64()
    if is_boolean(kinds):
        return pa.bool_()
    return pa.float64() if kind == "number" else pa.string()


def _checked(
    columns: dict[str, pa.Array[Any]],
    plan: dict[str, tuple[dict[str, Any], list[str], bool]],
    n: int,
    *,
    again: bool = False,
) -> pa.Table | None:
    """The typed table when every column satisfies the schema, else None.

    ``again`` (the same bytes, checked before): only what makes the values is done.
    """
    out: dict[str, pa.Array[Any]] = {}
    for field, (prop, kinds, required) in plan.items():
        arr = columns.get(field)
        if arr is None:
            arr = pa.nulls(n, type=_read_type(kinds))
        if arr.null_count and (required or "null" not in kinds):
            # Missing and null look alike once read; the per-row path tells them apart.
            return None
        if pa.types.is_string(arr.type):
            if not again and not strings_ok(arr, prop):
                return None
            if prop.get("format") == "date-time":
                try:
                    arr = timestamps_ns(arr)
                except (pa.ArrowInvalid, OverflowError):
                    return None
        elif not again and not (numbers_ok(arr, prop, kinds) and no_negative_zero(arr)):
            return None
        out[field] = arr
    return pa.table(out)


def no_negative_zero(arr: pa.Array[Any]) -> bool:
    """Whether no double of ``arr`` is a negative zero.

    The JSON literal ``-0`` is an integer per row (Python's ``json``: 0, sealed as 0.0)
    but -0.0 for Arrow, while ``-0.0`` is -0.0 for both: the text, not the value, decides,
    so a negative zero goes per-row (rare; the per-row path is the reference).
    """
    if not pa.types.is_floating(arr.type):
        return True
    values = arr.drop_null().to_numpy(zero_copy_only=False)
    return not bool(np.signbit(values[values == 0]).any())


def _text_ok(data: bytes) -> bool:
    """Whether Python's and Arrow's readers surely see the same lines and text."""
    if not data or data.startswith(_BOM):
        return False
    # Single bytes are memchr scans; the multi-byte breaks cannot occur in ASCII text.
    ascii_only = data.isascii()
    if any(b in data for b in _OTHER_BREAKS if len(b) == 1 or not ascii_only):
        return False
    if not ascii_only and not _is_utf8(data):
        return False
    # A backslash is one memchr away; the two-byte search costs 20 times more.
    return not (b"\\" in data and b"\\u" in data and _SURROGATE_ESCAPE.search(data))


def _is_utf8(data: bytes, block: int = 16 << 20) -> bool:
    """Whether ``data`` is UTF-8 as Python's strict codec reads it, decoded a block at a
    time (a whole decode would hold the file as a ``str``, up to 4 bytes a character)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for i in range(0, len(view), block):
            decoder.decode(view[i : i + block])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _json_table(
    data: bytes, schema: pa.Schema, unexpected: Literal["infer", "error"], longest: int
) -> pa.Table:
    """``data`` read by Arrow, in blocks of at least ``JSON_INNER_BYTES`` parsed by Arrow's
    threads (a block must hold the longest line, ``longest`` bytes; Arrow's reader
    refuses a line that straddles two blocks). Fields met in later blocks, or typed
    differently there (null, then text; integer, then double), are unified as the
    whole-file read unifies them. Any reader error raises.
    """
    inner = max(JSON_INNER_BYTES, 1 << int(longest + 1).bit_length())
    read_options = pjson.ReadOptions(use_threads=True, block_size=inner)
    parse_options = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unexpected)
    return pjson.read_json(
        cast(Any, pa.BufferReader(data)), read_options=read_options, parse_options=parse_options
    )


def _null_member(name: str) -> str:
    return '"' + re.escape(name) + '"' + _NULL_AFTER


def _escaped_key_null(data: bytes) -> bool:
    """Whether some key spelled with an escape (``"\\u0061"``) may hold ``null``."""
    return b"\\" in data and _ESCAPED_KEY_NULL.search(data) is not None


def _absent_keys(data: bytes) -> Callable[[str], bool]:
    """For :func:`object_text`: whether a key that Arrow read as null in some object
    is absent there, never ``null``: a plain name (as for :func:`_present`) whose
    ``"name": null`` occurs nowhere in ``data`` (at any level, in any object: a hit
    elsewhere only sends the file to the rows), no key in it spelled with an escape
    before a null."""
    escaped = functools.cache(lambda: _escaped_key_null(data))  # once, if ever asked

    def ok(name: str) -> bool:
        return (
            _PLAIN_NAME.match(name) is not None
            and not escaped()
            and re.search(_null_member(name).encode(), data) is None
        )

    return ok


def _present(
    data: bytes, arrays: dict[str, pa.Array[Any]], newlines: np.ndarray[Any, Any]
) -> dict[str, pa.Array[Any]] | None:
    """Which rows carry each unknown field; None when explicit nulls cannot be told apart.

    Arrow reads an absent field and ``null`` alike; the per-row path keeps ``"k":null``
    in ``extra``. For a plain name (letters, digits, ``_.-``) the text ``"k": null``
    can only be that member: inside a JSON string every quote is escaped, and none
    of those characters may follow a closing quote. So on the lines where Arrow read
    ``k`` as null, a regular expression tells null from absent, provided no key in
    the file is spelled with an escape before a null (then: per-row).
    """
    out: dict[str, pa.Array[Any]] = {n: pc.is_valid(a) for n, a in arrays.items()}
    with_nulls = [n for n, a in arrays.items() if a.null_count]
    if not with_nulls or b"null" not in data:
        return out
    if _escaped_key_null(data):
        return None
    lines: Any = None
    for n in with_nulls:
        arr = arrays[n]
        mask = out[n].to_numpy(zero_copy_only=False).copy()
        if _PLAIN_NAME.match(n) and 2 * arr.null_count <= len(arr):
            # Few nulls: only their lines are searched. A line where Arrow read a value
            # cannot also hold a null member of the same name: Arrow refuses a key given
            # twice in one object.
            if lines is None:
                lines = _lines(data, newlines, len(arr))
            nulls = np.flatnonzero(~mask)
            hit = pc.match_substring_regex(lines.take(pa.array(nulls)), _null_member(n))
            mask[nulls[hit.to_numpy(zero_copy_only=False)]] = True
        else:
            starts = _null_members(data, n, len(arr) - arr.null_count)
            if starts is None:
                return None
            if not starts:
                continue
            rows = np.searchsorted(newlines, np.array(starts, dtype=np.int64))
            if mask[rows].any():
                return None  # a value Arrow read where the text says null: not sure
            mask[rows] = True
        out[n] = pa.array(mask, pa.bool_())
    return out


def _lines(data: bytes, newlines: np.ndarray[Any, Any], rows: int) -> Any:
    """The ``rows`` lines of ``data`` as a string array over its bytes (no copy)."""
    offsets = np.zeros(rows + 1, np.int64)
    offsets[1 : len(newlines) + 1] = newlines[:rows] + 1
    offsets[len(newlines) + 1 :] = len(data)  # a last line without a line break
    return pa.LargeStringArray.from_buffers(
        rows, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)
    )


def _null_members(data: bytes, name: str, values: int) -> list[int] | None:
    """Offsets of every ``"name": null`` member (any spacing) in ``data``, where Arrow read
    ``values`` non-null values of ``name``; None when they cannot be told apart.

    Counting is cheaper than searching: every value read has its key's text
    ``"name"``, and so has every null member. When the text occurs exactly ``values``
    times there is no null member; when it occurs ``values`` times more than the usual
    spelling ``"name": null``, those are all of them (no key is spelled with an escape
    before a null: checked by the caller). Otherwise a regular expression walks the text.
    """
    if _PLAIN_NAME.match(name):
        keys = data.count(f'"{name}"'.encode())
        if keys == values:
            return []
        literal = f'"{name}": null'.encode()
        starts: list[int] = []
        at = data.find(literal)
        while at >= 0:
            starts.append(at)
            at = data.find(literal, at + len(literal))
        if keys == values + len(starts):
            return starts
    found = [m.start() for m in re.finditer(_null_member(name).encode("utf-8"), data)]
    if found and not _PLAIN_NAME.match(name):
        return None  # a quote or an escape in the name: the text alone cannot say
    return found


def _line_breaks(data: bytes) -> tuple[np.ndarray[Any, Any], int, int] | None:
    """(offset of every line break, the longest line's length, the number of lines) when
    every line of ``data`` opens an object (so none is blank or indented) and the last
    closes one, else None.

    One object per line, no blank lines: then row i is line i + 1, as the per-row path
    counts (two objects on one line give more rows than lines: the caller compares).
    pyarrow 26's JSON reader crashes the process (SIGSEGV) on a bare ``null`` line, and
    other non-object lines are the per-row path's to locate. One numpy pass over the
    bytes (a two-byte ``bytes.count`` costs three times as much).
    """
    if not data.startswith(b"{") or not data[-64:].rstrip(b" \t\n").endswith(b"}"):
        return None
    buf = np.frombuffer(data, np.uint8)
    breaks = np.flatnonzero(buf == 0x0A)
    following = breaks[:-1] + 1 if data.endswith(b"\n") else breaks + 1
    if len(following) and not bool((buf[following] == 0x7B).all()):
        return None
    ends = np.append(breaks, len(data)) if not data.endswith(b"\n") else breaks
    longest = int(np.diff(ends, prepend=-1).max()) if len(ends) else len(data)
    return breaks, longest, len(breaks) + (0 if data.endswith(b"\n") else 1)


def _contiguous(names: list[str], chunked: list[pa.ChunkedArray[Any]]) -> dict[str, pa.Array[Any]]:
    """Each column as one array. ``chunked`` is emptied as columns are copied, so a
    column's chunks are let go once copied when the caller holds no other reference
    (peak RSS: one column's copy, not the table's)."""
    out: dict[str, pa.Array[Any]] = {}
    for name in names:
        col = chunked.pop(0)
        # One chunk needs no copy (and pyarrow 26 fails to concatenate a list<null> chunk
        # holding a null list: "array slice would exceed array length").
        one: Any = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        out[name] = one
    return out


def _unknown_ok(arr: pa.Array[Any]) -> bool:
    """Whether the per-row path would store this inferred column's values exactly so."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
        return True
    if not (pa.types.is_int64(t) or pa.types.is_float64(t)):
        return False  # objects, arrays: the per-row path
    valid: Any = arr.drop_null()
    if len(valid) == 0:
        return True
    if pa.types.is_float64(t):
        if not all_true(pc.is_finite(valid)):
            return False
        # An integer literal beyond 2**53 is refused per row; in a double column it
        # cannot be told from a float literal, so any big integral value goes per-row.
        valid = pc.if_else(pc.equal(pc.trunc(valid), valid), valid, 0.0)
    mm: Any = pc.min_max(pc.abs(valid)).as_py()
    return bool(mm["max"] <= JCS_MAX_INT)


def _read_jsonl(  # noqa: PLR0911
    data: bytes, plan: dict[str, tuple[dict[str, Any], list[str], bool]], *, again: bool = False
) -> ColumnTable | None:
    found = _line_breaks(data)
    if found is None:
        return None
    breaks, longest, lines = found
    schema = pa.schema([(f, _read_type(k)) for f, (_, k, _) in plan.items()])
    table = _json_table(data, schema, "infer", longest)
    unknown = [f for f in table.schema if f.name not in plan]
    if any(pa.types.is_temporal(f.type) for f in unknown):
        # Arrow infers timestamps from ISO-looking text; the per-row path keeps the text.
        typed = [(f.name, pa.string() if pa.types.is_temporal(f.type) else f.type) for f in unknown]
        table = _json_table(data, pa.schema([*schema, *typed]), "error", longest)
    if table.num_rows != lines:
        return None
    names, chunked = table.column_names, list(table.columns)
    del table  # the chunks now live only in `chunked`, which _contiguous empties
    columns = _contiguous(names, chunked)
    extra = {f.name: columns.pop(f.name) for f in unknown}
    objects = {}
    absent_ok = _absent_keys(data)
    for n, a in extra.items():
        if pa.types.is_struct(a.type) or pa.types.is_list(a.type):
            # Objects and arrays: their RFC 8785 text now; the sanitizer checks keys and
            # leaves later. The row is one level, the field's value the next
            # (``MAX_JSON_DEPTH``).
            got = object_text(a, _unknown_ok, MAX_JSON_DEPTH - 1, absent_ok=absent_ok)
            if got is None:
                return None
            objects[n] = got
    if not again and not all(_unknown_ok(a) for n, a in extra.items() if n not in objects):
        return None
    present = _present(data, extra, breaks) if extra else {}
    if present is None:
        return None
    checked = _checked(columns, plan, lines, again=again)
    if checked is None:
        return None
    cols = tuple(
        UnknownColumn(n, a, present[n])
        if n not in objects
        else UnknownColumn(
            n, objects[n][0], present[n], True, tuple(objects[n][1]), tuple(objects[n][2])
        )
        for n, a in extra.items()
    )
    return ColumnTable(checked, 1, cols)


def _from_csv_text(arr: pa.Array[Any], kinds: list[str]) -> pa.Array[Any] | None:
    """A CSV column (text) as the per-row path coerces it: '' is absent, numbers parsed."""
    text: Any = arr
    arr = pc.if_else(pc.equal(text, pa.scalar("")), pa.scalar(None, pa.string()), text)
    kind = next(k for k in kinds if k != "null")
    if kind == "string":
        return arr
    if is_boolean(kinds):
        return csv_booleans(arr)
    pattern = _INTEGER if kind == "integer" else _NUMBER
    if not all_true(pc.match_substring_regex(arr, pattern)):
        return None  # '+5', ' 5', '1_0', '٣', 'nan': the per-row path decides
    try:
        return arr.cast(_read_type(kinds))
    except (pa.ArrowInvalid, OverflowError):
        return None


def _header_names(line: str) -> list[str] | None:
    """The column names of a CSV header line (its line break left out) as ``csv.DictReader``
    reads them, or None when quoting could make the two readers disagree.

    A quoted name (``"request_id"``, as pandas or ``csv.QUOTE_ALL`` write it) is read
    by strict RFC 4180 rules; an odd number of quotes (a name spanning lines) or a
    quote out of place is left to the per-row path. The caller still compares these
    names with Arrow's.
    """
    if not line:
        return None  # no names at all (DictReader: none; Arrow skips the empty line)
    if '"' not in line:
        return line.split(",")
    if line.count('"') % 2:
        return None
    try:
        rows = list(csv.reader([line], strict=True))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


def _read_csv(
    data: bytes, plan: dict[str, tuple[dict[str, Any], list[str], bool]], *, again: bool = False
) -> ColumnTable | None:
    # Sliced, not split: a split would copy the whole file to drop its first line.
    end = data.find(b"\n")
    names = _header_names((data if end < 0 else data[:end]).decode("utf-8"))
    if names is None or len(set(names)) != len(names):
        return None  # duplicate columns: the per-row path decides which cell wins
    table = pcsv.read_csv(
        cast(Any, pa.BufferReader(data)),
        read_options=pcsv.ReadOptions(use_threads=True, block_size=16 << 20),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    if table.column_names != names:
        return None
    columns: dict[str, pa.Array[Any]] = {}
    unknown: list[UnknownColumn] = []
    for f in names:
        text = table.column(f).combine_chunks()
        if f not in plan:
            # An unknown cell is kept as text; an empty one is absent, as per row.
            text_any: Any = text
            cells: Any = pc.if_else(
                pc.equal(text_any, pa.scalar("")), pa.scalar(None, pa.string()), text
            )
            unknown.append(UnknownColumn(f, cells, pc.is_valid(cells)))
            continue
        arr = _from_csv_text(text, plan[f][1])
        if arr is None:
            return None
        columns[f] = arr
    # DictReader numbers records from 2 (the header is line 1) whatever spans lines.
    checked = _checked(columns, plan, table.num_rows, again=again)
    if checked is None or checked.num_rows == 0:
        return None
    return ColumnTable(checked, 2, tuple(unknown))


def read_columnar(path: Path, name: str, *, data: bytes | None = None) -> ColumnTable | None:
    """Read and check table ``name`` from ``path`` column-wise, or None to go per-row.

    ``data``, when given, is the file's content, already read (``load_campaign``
    reads each campaign file once, through checks a path cannot make); ``path``
    then only gives the format by its suffix. ``None`` says nothing about
    validity: the per-row path then reports each problem by file, line and field.
    """
    if name not in COLUMNAR_TABLES:
        return None
    plan = _plan(name)
    if plan is None:
        return None
    return read_table_file(path, data, lambda d: _read_jsonl(d, plan), lambda d: _read_csv(d, plan))


def read_table_file(
    path: Path,
    data: bytes | None,
    jsonl: Callable[[bytes], ColumnTable | None],
    csv: Callable[[bytes], ColumnTable | None],
) -> ColumnTable | None:
    """A whole table file (``data``, or ``path`` read) through ``jsonl`` or ``csv`` by its
    suffix, after the byte checks both readers rely on; None (go per-row) for any other
    suffix, an unreadable file, text the two paths might read differently, or an Arrow error."""
    if path.suffix not in (".jsonl", ".csv"):
        return None
    if data is None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
    if not _text_ok(data):
        return None
    try:
        return jsonl(data) if path.suffix == ".jsonl" else csv(data)
    except (pa.ArrowException, UnicodeError):  # any Arrow failure: the rows decide
        return None


def read_jsonl_block(
    data: bytes, name: str, first_line: int, *, again: bool = False
) -> ColumnTable | None:
    """One block of a JSON Lines table file (whole lines, starting at line ``first_line``),
    read and checked as :func:`read_columnar` reads a whole file, or None to go per-row.

    Every check of a whole file holds line by line, so a file read block by block is
    accepted exactly when each of its blocks is (a streamed seal,
    ``bundler/campaign/stream.py``). ``again``: the block was accepted before and the
    caller compares the file's digest with that read's before keeping anything, so
    the checks that only decide *whether* the block is accepted (byte scans, column
    constraints) are skipped; what makes the values (parse, nulls, timestamps) is not.
    """
    plan = _plan(name)
    if plan is None or not (again or _text_ok(data)):
        return None
    try:
        ct = _read_jsonl(data, plan, again=again)
    except (pa.ArrowException, UnicodeError):  # any Arrow failure: the rows decide
        return None
    return None if ct is None else dataclasses.replace(ct, first_line=first_line)


def read_csv_block(
    header: bytes, data: bytes | memoryview, name: str, first_line: int, *, again: bool = False
) -> ColumnTable | None:
    """Whole records of a CSV table file (``data``, cut outside any quoted field), read with
    the file's ``header`` line (its line break included) as :func:`read_columnar` reads a
    whole file, numbered from record ``first_line``; or None when not sure (the caller
    then reads the file whole).

    The block is parsed as ``header + data``, a file of its own: every check of a
    whole file then holds block by block, and a byte-order mark is refused only
    where the file starts (the header). A block is read as it would be in the whole
    file only if it starts outside a quoted field, which the caller finds by
    counting quotes (``bundler/campaign/stream_blocks.py``), a count that only RFC 4180
    quoting makes meaningful: a block with a quote out of place
    (:func:`quotes_well_placed`) is not sure. ``again``: as for
    :func:`read_jsonl_block`.
    """
    plan = _plan(name)
    if plan is None:
        return None
    whole = header + data
    if not again and not (_text_ok(whole) and quotes_well_placed(whole)):
        return None
    try:
        ct = _read_csv(whole, plan, again=again)
    except (pa.ArrowException, UnicodeError):  # any Arrow failure: the rows decide
        return None
    return None if ct is None else dataclasses.replace(ct, first_line=first_line)


def quotes_well_placed(data: bytes) -> bool:
    """Whether every ``"`` of ``data`` (CSV text starting outside any quoted field) is where
    RFC 4180 quoting puts one, so that a line break is a record boundary exactly when an
    even number of quotes precede it.

    Numbered in order, an even quote opens a field (at the text's start, after a
    comma or a line break) or is the second of a doubled quote (right after the odd
    one before it); an odd quote closes a field (before a comma, a line break or the
    text's end) or is the first of a doubled quote (before a quote). A stray quote
    (``5"``, ``"a"b``) or an unclosed field breaks one of these; Python's ``csv`` and
    Arrow may then read the text differently, and the caller reads the file whole.
    """
    if b'"' not in data:
        return True
    buf = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(buf == _QUOTE)
    if len(quotes) % 2:
        return False  # a quoted field left open
    opening, closing = quotes[0::2], quotes[1::2]
    before = buf[np.maximum(opening - 1, 0)]
    opens = (opening == 0) | (before == _COMMA) | (before == _LF)
    opens[1:] |= opening[1:] - 1 == closing[:-1]
    after = buf[np.minimum(closing + 1, len(buf) - 1)]
    closes = (closing == len(buf) - 1) | (after == _COMMA) | (after == _LF) | (after == _QUOTE)
    return bool(opens.all() and closes.all())


ArrowScrub = Callable[[str, "pa.Array[Any]"], "pa.Array[Any]"]
"""``scrub(field, column) -> column``: the sanitizer, applied to one string column."""


def to_bundle_table(name: str, ct: ColumnTable, scrub: ArrowScrub | None = None) -> pa.Table:
    """The Parquet member's table for ``ct``: what ``rows_to_table`` builds from the same rows.

    ``scrub`` sees the columns ``rows_to_table`` scrubs, in the same order. Every
    column is one contiguous array (the Parquet writer's pages follow chunking).
    """
    schema = table_schema(name)
    asch = arrow_schema(name)
    arrays: list[pa.Array[Any]] = []
    for f in asch:
        if f.name == EXTRA_COLUMN:
            continue
        arr = ct.column(f.name)
        # A map's keys (metric names) are kept: seal reads the table per row when one
        # would change (``bundler/seal.py`` ``_needs_rows``), as rows scrub keys in row order.
        if (
            scrub is not None
            and scrubbable(schema["properties"][f.name])
            and not pa.types.is_map(arr.type)
        ):
            arr = scrub(f.name, arr)
        arrays.append(arr.cast(f.type))
    # Unknown fields after every schema column, as rows_to_table scrubs them; numbers,
    # booleans and nulls are never touched by the sanitizer.
    unknown = list(ct.unknown)
    if scrub is not None:
        # Object texts are not scrubbed as text: the seal has checked that no rule
        # touches their keys and strings (``untouched``), else it read the rows.
        unknown = [
            UnknownColumn(u.name, scrub(f"{EXTRA_COLUMN}.{u.name}", u.values), u.present)
            if pa.types.is_string(u.values.type) and not u.canonical
            else u
            for u in unknown
        ]
    arrays.append(extra_column(unknown, ct.num_rows))
    return pa.Table.from_arrays(arrays, schema=asch)
