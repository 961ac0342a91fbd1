"""Thin typed wrappers over the pyarrow compute calls replay needs.

pyarrow's stubs type ``pyarrow.compute`` by overloads that reject common,
valid calls (a column compared with a Python string); the calls are kept here,
behind signatures in numpy terms, so the statistics modules stay strictly typed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as _pc

__all__ = [
    "BoolArray",
    "IntArray",
    "column_numpy",
    "dictionary_codes",
    "equals",
    "filter_column",
    "filter_table",
    "flatten_map",
    "group_by_max",
    "group_reduce",
    "index_in",
    "is_in",
    "is_valid",
    "rows",
    "timestamps_ns",
    "value_counts",
]

pc: Any = _pc
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def _flat(column: Any) -> Any:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def equals(table: pa.Table, column: str, value: str) -> BoolArray:
    """Rows of ``table`` whose ``column`` equals ``value`` (null counts as not equal)."""
    out = pc.fill_null(pc.equal(table.column(column), value), False)
    return np.asarray(_flat(out).to_numpy(zero_copy_only=False), dtype=bool)


def filter_table(table: pa.Table, mask: BoolArray) -> pa.Table:
    """The rows of ``table`` where ``mask`` holds."""
    return table.filter(pa.array(mask, type=pa.bool_()))


def filter_column(table: pa.Table, column: str, mask: BoolArray) -> Any:
    """One column of ``table`` where ``mask`` holds (cheaper than filtering the table)."""
    return _flat(table.column(column)).filter(pa.array(mask, type=pa.bool_()))


def index_in(values: Any, value_set: Any) -> IntArray:
    """For each of ``values``, its index in ``value_set``, or -1 when absent.

    The hash table is built over ``value_set``: pass the smaller side there.
    """
    out = pc.fill_null(pc.index_in(_flat(values), value_set=_flat(value_set)), -1)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=np.int64)


def is_in(values: Any, value_set: Any) -> BoolArray:
    """For each of ``values``, whether it occurs in ``value_set`` (Arrow arrays or columns)."""
    out = pc.fill_null(pc.is_in(values, value_set=_flat(value_set)), False)
    return np.asarray(_flat(out).to_numpy(zero_copy_only=False), dtype=bool)


def dictionary_codes(column: Any) -> tuple[IntArray, tuple[str, ...]]:
    """A string column as int codes (-1 for null) and its distinct values.

    A column read from Parquet as a dictionary is used as is (no re-encoding).
    """
    if pa.types.is_dictionary(column.type):
        if isinstance(column, pa.ChunkedArray):
            column = column.unify_dictionaries()
        enc = _flat(column)
    else:
        enc = pc.dictionary_encode(_flat(column))
    idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, tuple(str(v) for v in enc.dictionary.to_pylist())


def timestamps_ns(column: Any) -> tuple[IntArray, BoolArray]:
    """A timestamp column as int64 nanoseconds (0 where null) and its validity mask.

    Casting to int64 first: ``to_pylist`` on nanosecond timestamps needs pandas.
    """
    ints = pc.cast(_flat(column), pa.int64())
    valid = np.asarray(pc.is_valid(ints).to_numpy(zero_copy_only=False), dtype=bool)
    vals = pc.fill_null(ints, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return vals, valid


def column_numpy(table: pa.Table, column: str, dtype: Any, fill: Any = 0) -> npt.NDArray[Any]:
    """Column ``column`` as a numpy array of ``dtype``, nulls replaced by ``fill``."""
    col = pc.fill_null(_flat(table.column(column)), fill)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


def value_counts(table: pa.Table, column: str) -> dict[str, int]:
    """How many rows hold each value of ``column``."""
    if table.num_rows == 0:
        return {}
    return {
        str(d["values"]): int(d["counts"])
        for d in pc.value_counts(_flat(table.column(column))).to_pylist()
    }


def rows(table: pa.Table, columns: list[str]) -> list[dict[str, Any]]:
    """Rows of a small table as dicts (never on timestamp columns: see ``timestamps_ns``)."""
    out: list[dict[str, Any]] = table.select(columns).to_pylist()
    return out


def group_reduce(
    ufunc: np.ufunc, codes: IntArray, values: npt.NDArray[Any], groups: int, empty: Any
) -> npt.NDArray[Any]:
    """``ufunc.reduce`` of ``values`` per group code in ``[0, groups)``; ``empty`` where none.

    One stable sort and ``reduceat``, whatever the number of groups.
    """
    out = np.full(groups, empty, dtype=values.dtype)
    if codes.size == 0:
        return out
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sc)) + 1]
    out[sc[starts]] = ufunc.reduceat(values[order], starts)
    return out


def group_by_max(table: pa.Table, keys: list[str], value: str) -> list[dict[str, Any]]:
    """Max and count of ``value`` per distinct ``keys`` (Arrow hash aggregation)."""
    agg = table.group_by(keys).aggregate([(value, "max"), (value, "count")])
    return rows(agg, [*keys, f"{value}_max", f"{value}_count"])


def is_valid(table: pa.Table, column: str) -> BoolArray:
    """Rows of ``table`` where ``column`` is not null."""
    out = pc.is_valid(_flat(table.column(column)))
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)


def flatten_map(column: Any) -> tuple[IntArray, IntArray, tuple[str, ...], npt.NDArray[np.float64]]:
    """Entries of a ``map<string, double>`` column: (row index, key code, keys, value).

    Null maps contribute no entry. Maps have no flatten kernel of their own; the
    cast to a list of structs is free (same layout).
    """
    arr = _flat(column)
    as_list = arr.cast(pa.list_(pa.struct([("key", pa.string()), ("value", pa.float64())])))
    parents = pc.list_parent_indices(as_list).to_numpy(zero_copy_only=False).astype(np.int64)
    entries = pc.list_flatten(as_list)
    key_codes, keys = dictionary_codes(entries.field("key"))
    values = np.asarray(entries.field("value").to_numpy(zero_copy_only=False), dtype=np.float64)
    return parents, key_codes, keys, values
