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
import pyarrow.compute as pc

from bundler._internal import jcs
from bundler._internal.schemas import load_schema
from bundler._internal.timefmt import RFC3339, parse_rfc3339_ns

__all__ = [
    "EXTRA_COLUMN",
    "PARQUET_OPTIONS",
    "TABLE_FORMAT_VERSION",
    "TABLE_NAMES",
    "RowError",
    "arrow_schema",
    "check_rows",
    "datetime_problem",
    "rows_to_table",
    "scrubbable",
    "table_schema",
    "timestamps_ns",
    "types_of",
    "value_error",
]

TABLE_FORMAT_VERSION = "1"
# The order tables are reported in; members themselves are written sorted by name.
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


PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 1,
    "use_dictionary": False,
    "write_statistics": True,
    "row_group_size": 1 << 18,
    "data_page_version": "1.0",
}
"""``pyarrow.parquet.write_table`` options of every table member (``specs/bundle-format.md``).
zstd level 1, no dictionary encoding and row groups of 2^18 rows since issue 22 (level 9,
dictionaries and 2^20 before): on a million seed-shaped receipts level 9 took 2.2 s
against 0.5 s for 48.6 against 48.7 MB; row groups small enough to be written while the
rest of a large table is still being read cost 3.5 % more bytes (50.4 MB), and
dictionaries, which help only the few low-cardinality columns and are tried and given up
on ids, digests and times, 0.47 against 0.34 CPU s for 54.5 against 52.1 MB."""


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


def types_of(prop: dict[str, Any]) -> list[str]:
    """The JSON types a field's schema allows (an enum's from its values)."""
    if "type" in prop:
        t = prop["type"]
        return [t] if isinstance(t, str) else list(t)
    if "enum" in prop:
        kinds = {"string" if isinstance(v, str) else "null" for v in prop["enum"]}
        return sorted(kinds)
    return ["string"]


def _arrow_type(prop: dict[str, Any]) -> pa.DataType:
    kinds = [k for k in types_of(prop) if k != "null"]
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
        nullable = field not in required or "null" in types_of(prop)
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


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def datetime_problem(value: str) -> str | None:
    """Why ``value`` is not a storable RFC 3339 date-time, or None."""
    try:
        ns = parse_rfc3339_ns(value)
    except ValueError:
        return f"{value!r} is not an RFC 3339 date-time with an offset"
    if not INT64_MIN <= ns <= INT64_MAX:
        return f"{value!r} is outside the nanosecond range (years 1677 to 2262)"
    return None


def value_error(value: Any, prop: dict[str, Any]) -> str | None:  # noqa: C901, PLR0911, PLR0912
    """Why ``value`` does not satisfy the field schema ``prop``, or None: the one wording of
    every per-value problem, for campaign rows and bundle tables alike."""
    kinds = types_of(prop)
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
            return datetime_problem(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        if "integer" in kinds and not INT64_MIN <= value <= INT64_MAX:
            return f"{_shown_number(value)} does not fit a 64-bit integer"
        if isinstance(value, int) and not _fits_double(value):
            # JSON allows any integer; a 400-digit one would overflow float() later
            return f"{_shown_number(value)} is too large for a 64-bit floating-point number"
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
                msg = value_error(v, addl)
                if msg:
                    return f"entry {k!r}: {msg}"
    return None


@functools.cache
def _pattern(p: str) -> re.Pattern[str]:
    return re.compile(p)


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
}


def _datetimes_ok(strings: set[str]) -> bool:
    if not all(map(RFC3339.match, strings)):
        return False
    try:  # impossible dates (Feb 30) and years beyond 1677..2262 fail Arrow's cast
        timestamps_ns(list(strings))
    except (pa.ArrowInvalid, OverflowError):
        return False
    return True


def _strings_ok(strings: set[str], prop: dict[str, Any]) -> bool:
    if not strings:
        return True
    if min(map(len, strings)) < prop.get("minLength", 0):
        return False
    if "maxLength" in prop and max(map(len, strings)) > prop["maxLength"]:
        return False
    if "pattern" in prop and not all(map(_pattern(prop["pattern"]).search, strings)):
        return False
    return prop.get("format") != "date-time" or _datetimes_ok(strings)


def _fits_double(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _shown_number(value: int | float) -> str:
    """``repr(value)``, shortened: a hostile integer may have thousands of digits."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:16]}...{text[-8:]} ({len(text)} digits)"


def _numbers_ok(numbers: list[Any], prop: dict[str, Any]) -> bool:
    if not numbers:
        return True
    try:
        if not all(map(math.isfinite, numbers)):
            return False
    except OverflowError:  # an integer beyond a double: the per-value pass names it
        return False
    lo, hi = min(numbers), max(numbers)
    if "integer" in types_of(prop) and not (lo >= INT64_MIN and hi <= INT64_MAX):
        return False
    return not (
        ("minimum" in prop and lo < prop["minimum"])
        or ("maximum" in prop and hi > prop["maximum"])
        or ("exclusiveMinimum" in prop and lo <= prop["exclusiveMinimum"])
        or ("exclusiveMaximum" in prop and hi >= prop["exclusiveMaximum"])
    )


def _column_ok(values: list[Any], prop: dict[str, Any], required: bool) -> bool:
    """Decide with whole-column operations that every value is valid (no per-value checks).

    ``False`` means "not sure": the caller then checks value by value for exact messages.
    """
    present = [v for v in values if v is not _MISSING]
    if required and len(present) != len(values):
        return False
    allowed = {t for k in types_of(prop) for t in _PY_TYPES[k]}
    if not {type(v) for v in present} <= allowed:
        return False  # includes bool-for-number and integral floats: the slow path decides
    if "enum" in prop or "const" in prop:
        choices = prop.get("enum", [prop.get("const")])
        return set(present) <= set(choices)
    if any(type(v) is dict for v in present) and "additionalProperties" in prop:
        return False
    return _strings_ok({v for v in present if type(v) is str}, prop) and _numbers_ok(
        [v for v in present if type(v) in (int, float)], prop
    )


def check_rows(name: str, rows: Sequence[dict[str, Any]]) -> list[RowError]:
    """Check every row of table ``name``; return every error, field by field.

    Columnar: each field is first checked over the whole column with set and
    builtin operations; only a column that fails that is walked value by value
    to name each bad row with an exact message.
    """
    schema = table_schema(name)
    required = schema.get("required", [])
    errors: list[RowError] = []
    for field, prop in schema["properties"].items():
        is_required = field in required
        values = [row.get(field, _MISSING) for row in rows]
        if _column_ok(values, prop, is_required):
            continue
        for i, value in enumerate(values):
            if value is _MISSING:
                if is_required:
                    errors.append(RowError(i, field, "is required"))
                continue
            msg = value_error(value, prop)
            if msg:
                errors.append(RowError(i, field, msg))
    errors.sort(key=lambda e: e.index)
    return errors


def timestamps_ns(values: Sequence[str | None] | pa.Array[Any]) -> pa.Array[Any]:
    """RFC 3339 strings (already checked) to a ``timestamp[ns, UTC]`` array, in bulk.

    Arrow's ISO 8601 cast does the parsing in C; it wants upper-case ``T``/``Z``,
    which RFC 3339 lets authors write in lower case. ``tests/test_tables.py``
    checks it against :func:`parse_rfc3339_ns` with Hypothesis.
    """
    text = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
    arr = pc.utf8_upper(text)
    return arr.cast(pa.timestamp("ns", tz="UTC"))


def _converter(prop: dict[str, Any], typ: pa.DataType) -> Callable[[Any], Any]:
    if pa.types.is_map(typ):
        return lambda v: None if v is None else sorted((k, float(x)) for k, x in v.items())
    if pa.types.is_string(typ) and "object" in types_of(prop):
        return lambda v: None if v is None else jcs.dumps(v).decode("utf-8")
    if pa.types.is_floating(typ):
        return lambda v: None if v is None else float(v)
    if pa.types.is_integer(typ):
        return lambda v: None if v is None else int(v)
    return lambda v: v


Scrub = Callable[[str, list[Any]], list[Any]]
"""``scrub(field, values) -> values``: a hook applied to string-like columns (the sanitizer)."""


def rows_to_table(
    name: str, rows: Sequence[dict[str, Any]], scrub: Scrub | None = None
) -> pa.Table:
    """Convert validated rows of table ``name`` into an Arrow table of its schema.

    Unknown fields of each row go, as canonical JSON, into the ``extra`` column.
    Numbers are stored as the IEEE doubles JSON parsing produced: no rounding.
    ``scrub`` sees every string, enum and object column (not timestamps, not
    SHA-256 fields) and every unknown field, before conversion.
    """
    schema = table_schema(name)
    asch = arrow_schema(name)
    props = schema["properties"]
    arrays: list[pa.Array[Any]] = []
    for f in asch:
        if f.name == EXTRA_COLUMN:
            continue
        values = [r.get(f.name) for r in rows]
        if pa.types.is_timestamp(f.type):
            arrays.append(timestamps_ns(values))
            continue
        if scrub is not None and scrubbable(props[f.name]):
            values = scrub(f.name, values)
        conv = _converter(props[f.name], f.type)
        arrays.append(pa.array([conv(v) for v in values], type=f.type))
    known = set(props)
    extras = []
    for r in rows:
        unknown = {k: v for k, v in r.items() if k not in known}
        if unknown and scrub is not None:
            unknown = {k: scrub(f"{EXTRA_COLUMN}.{k}", [v])[0] for k, v in unknown.items()}
        extras.append(jcs.dumps(unknown).decode("utf-8") if unknown else None)
    arrays.append(pa.array(extras, type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=asch)


def scrubbable(prop: dict[str, Any]) -> bool:
    """Whether the sanitizer sees a field (strings and objects, not timestamps or digests)."""
    if prop.get("format") == "date-time" or "0-9a-f]{64}" in prop.get("pattern", ""):
        return False
    kinds = types_of(prop)
    return "string" in kinds or "object" in kinds
