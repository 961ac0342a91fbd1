"""The bundle's tables: Arrow schemas derived from the JSON Schemas, and row conversion.

Each table of the campaign layout has a row schema in
``specs/schemas/table.<name>.schema.json``. That file is the contract; the
Arrow schema of the Parquet member is derived from it here, so the two cannot
drift apart. Validation of table rows is columnar (one pass per field over the
whole table) because per-row ``jsonschema`` costs ~160 µs a row, 16 s for
100,000 receipts; ``tests/test_tables.py`` checks with Hypothesis that the
columnar checker agrees with ``jsonschema`` on the keywords we use.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from bundler._internal import jcs
from bundler._internal.schemas import load_schema
from bundler._internal.timefmt import parse_rfc3339_ns

__all__ = [
    "EXTRA_COLUMN",
    "TABLE_FORMAT_VERSION",
    "TABLE_NAMES",
    "RowError",
    "arrow_schema",
    "check_rows",
    "rows_to_table",
    "table_schema",
]

TABLE_FORMAT_VERSION = "1"
# Table order is the order members are written and listed.
TABLE_NAMES: tuple[str, ...] = (
    "attempts",
    "receipts",
    "worker_exits",
    "telemetry",
    "gates",
    "comparisons",
    "sources",
    "claims",
    "not_claimed",
    "artifacts",
)
EXTRA_COLUMN = "extra"
"""Unknown input fields are kept, as RFC 8785 canonical JSON, in this column."""

_SUPPORTED = frozenset(
    {
        "type",
        "enum",
        "const",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "format",
        "additionalProperties",
        "description",
    }
)
_MISSING: Any = object()


@dataclass(frozen=True)
class RowError:
    """A field of one row that does not satisfy the table schema."""

    index: int
    field: str
    message: str


def table_schema(name: str) -> dict[str, Any]:
    """Return the JSON Schema (row schema) of table ``name``."""
    if name not in TABLE_NAMES:
        raise KeyError(f"unknown table {name!r}")
    schema = load_schema(f"table.{name}")
    for field, prop in schema["properties"].items():
        unknown = set(prop) - _SUPPORTED
        if unknown:  # the columnar checker would silently ignore them
            raise RuntimeError(f"table {name} field {field}: unsupported keywords {unknown}")
    return schema


def _types(prop: dict[str, Any]) -> list[str]:
    if "type" in prop:
        t = prop["type"]
        return [t] if isinstance(t, str) else list(t)
    if "enum" in prop:
        kinds = {"string" if isinstance(v, str) else "null" for v in prop["enum"]}
        return sorted(kinds)
    return ["string"]


def _arrow_type(prop: dict[str, Any]) -> pa.DataType:
    kinds = [k for k in _types(prop) if k != "null"]
    kind = kinds[0]
    if kind == "string" and prop.get("format") == "date-time":
        return pa.timestamp("ns", tz="UTC")
    if kind == "object":
        addl = prop.get("additionalProperties")
        if isinstance(addl, dict) and addl.get("type") == "number":
            return pa.map_(pa.string(), pa.float64())
        return pa.string()  # canonical JSON text
    simple: dict[str, pa.DataType] = {
        "string": pa.string(),
        "integer": pa.int64(),
        "number": pa.float64(),
        "boolean": pa.bool_(),
    }
    return simple[kind]


@functools.cache
def arrow_schema(name: str) -> pa.Schema:
    """The explicit Arrow schema of table ``name``'s Parquet member.

    Columns follow the JSON Schema's property order, then ``extra``. A column is
    non-nullable when its field is required and ``null`` is not allowed.
    """
    schema = table_schema(name)
    required = set(schema.get("required", []))
    fields = []
    for field, prop in schema["properties"].items():
        nullable = field not in required or "null" in _types(prop)
        fields.append(pa.field(field, _arrow_type(prop), nullable=nullable))
    fields.append(pa.field(EXTRA_COLUMN, pa.string(), nullable=True))
    return pa.schema(
        fields,
        metadata={"reprobundle.table": name, "format_version": TABLE_FORMAT_VERSION},
    )


def _is_type(value: Any, kind: str) -> bool:  # noqa: PLR0911
    if kind == "null":
        return value is None
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if isinstance(value, bool):
        return False
    if kind == "number":
        return isinstance(value, int | float)
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return False


def _value_error(value: Any, prop: dict[str, Any]) -> str | None:  # noqa: C901, PLR0911, PLR0912
    kinds = _types(prop)
    if "const" in prop and value != prop["const"]:
        return f"must be {prop['const']!r}"
    if "enum" in prop:
        if value not in prop["enum"] or isinstance(value, bool):
            return f"{value!r} is not one of {prop['enum']}"
        return None
    if not any(_is_type(value, k) for k in kinds):
        return f"{value!r} is not of type {' or '.join(kinds)}"
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) < prop.get("minLength", 0):
            return "must not be empty" if prop["minLength"] == 1 else "is too short"
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            return f"is longer than {prop['maxLength']} characters"
        if "pattern" in prop and not _pattern(prop["pattern"]).search(value):
            return f"{value!r} does not match {prop['pattern']!r}"
        if prop.get("format") == "date-time":
            try:
                parse_rfc3339_ns(value)
            except ValueError:
                return f"{value!r} is not an RFC 3339 date-time with an offset"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        if "minimum" in prop and value < prop["minimum"]:
            return f"{value!r} is less than the minimum of {prop['minimum']}"
        if "maximum" in prop and value > prop["maximum"]:
            return f"{value!r} is greater than the maximum of {prop['maximum']}"
        if "exclusiveMinimum" in prop and value <= prop["exclusiveMinimum"]:
            return f"{value!r} must be greater than {prop['exclusiveMinimum']}"
        if "exclusiveMaximum" in prop and value >= prop["exclusiveMaximum"]:
            return f"{value!r} must be less than {prop['exclusiveMaximum']}"
    elif isinstance(value, dict):
        addl = prop.get("additionalProperties")
        if isinstance(addl, dict):
            for k, v in value.items():
                msg = _value_error(v, addl)
                if msg:
                    return f"entry {k!r}: {msg}"
    return None


@functools.cache
def _pattern(p: str) -> re.Pattern[str]:
    return re.compile(p)


def check_rows(name: str, rows: Sequence[dict[str, Any]]) -> list[RowError]:
    """Check every row of table ``name``; return every error, field by field.

    Columnar: each field is checked over all rows before the next, so a
    million-row table costs a few passes of cheap ``isinstance`` checks.
    """
    schema = table_schema(name)
    required = schema.get("required", [])
    errors: list[RowError] = []
    for field, prop in schema["properties"].items():
        is_required = field in required
        for i, row in enumerate(rows):
            value = row.get(field, _MISSING)
            if value is _MISSING:
                if is_required:
                    errors.append(RowError(i, field, "is required"))
                continue
            msg = _value_error(value, prop)
            if msg:
                errors.append(RowError(i, field, msg))
    errors.sort(key=lambda e: e.index)
    return errors


def _converter(prop: dict[str, Any], typ: pa.DataType) -> Callable[[Any], Any]:
    if pa.types.is_timestamp(typ):
        return lambda v: None if v is None else parse_rfc3339_ns(v)
    if pa.types.is_map(typ):
        return lambda v: None if v is None else sorted((k, float(x)) for k, x in v.items())
    if pa.types.is_string(typ) and "object" in _types(prop):
        return lambda v: None if v is None else jcs.dumps(v).decode("utf-8")
    if pa.types.is_floating(typ):
        return lambda v: None if v is None else float(v)
    if pa.types.is_integer(typ):
        return lambda v: None if v is None else int(v)
    return lambda v: v


def rows_to_table(name: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Convert validated rows of table ``name`` into an Arrow table of its schema.

    Unknown fields of each row go, as canonical JSON, into the ``extra`` column.
    Numbers are stored as the IEEE doubles JSON parsing produced: no rounding.
    """
    schema = table_schema(name)
    asch = arrow_schema(name)
    props = schema["properties"]
    arrays: list[pa.Array[Any]] = []
    for f in asch:
        if f.name == EXTRA_COLUMN:
            continue
        conv = _converter(props[f.name], f.type)
        values = [conv(r.get(f.name)) for r in rows]
        if pa.types.is_timestamp(f.type):
            arrays.append(pa.array(values, type=pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    known = set(props)
    extras = []
    for r in rows:
        unknown = {k: v for k, v in r.items() if k not in known}
        extras.append(jcs.dumps(unknown).decode("utf-8") if unknown else None)
    arrays.append(pa.array(extras, type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=asch)
