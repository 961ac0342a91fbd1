"""The ``extra`` column built column-wise: RFC 8785 text of each row's unknown fields.

The per-row path (``rows_to_table``) writes, for each row, ``jcs.dumps`` of the
row's unknown fields. Here the same text is assembled over whole columns: each
field contributes ``"<key>":<value>`` where present, keys in RFC 8785 order
(UTF-16 code units), joined by commas. Values are encoded in bulk where the
encoding is simple and exact (strings without control characters, integers,
booleans, integral doubles below 2**53); every other distinct value goes through
the canonical JSON code itself (``bundler._internal.jcs``), once per distinct value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as _compute

from bundler._internal import jcs

# pyarrow's stubs know few of the kernels' broadcasting forms (a Python string or
# scalar beside an array), which every step here uses.
pc: Any = _compute

__all__ = [
    "JCS_MAX_INT",
    "MAX_OBJECT_KEYS",
    "UnknownColumn",
    "extra_column",
    "jcs_key_order",
    "object_keys",
    "object_text",
]

JCS_MAX_INT = 2**53 - 1
"""RFC 8785 (ECMAScript numbers) carries integers exactly up to this magnitude."""

_CONTROL = "[\\x00-\\x1f]"


@dataclass(frozen=True)
class UnknownColumn:
    """One field beyond the table schema, read column-wise.

    ``values`` is a string, int64, float64, bool or null array; ``present`` says
    which rows carry the field (an explicit JSON ``null`` is present, an absent
    field is not), with no nulls of its own.

    ``canonical``: the field holds objects or arrays, and ``values`` is each one's
    RFC 8785 text already (null where the value is ``null``); ``keys`` and ``leaves``
    are their keys and string values, which the sanitizer must leave untouched for
    the column to be sealed column-wise (:func:`object_text`).
    """

    name: str
    values: pa.Array[Any]
    present: pa.Array[Any]
    canonical: bool = False
    keys: tuple[str, ...] = ()
    leaves: tuple[pa.Array[Any], ...] = ()


def jcs_key_order(names: Sequence[str]) -> list[str]:
    """``names`` sorted as RFC 8785 sorts object keys (by UTF-16 code units)."""
    return sorted(names, key=lambda k: k.encode("utf-16-be"))


def _per_distinct(values: Any) -> Any:
    """``jcs.dumps`` of each value, computed once per distinct value (nulls stay null)."""
    enc: Any = pc.dictionary_encode(values)
    texts = [jcs.dumps(v).decode("utf-8") for v in enc.dictionary.to_pylist()]
    return pc.take(pa.array(texts, pa.string()), enc.indices)


def _string_text(values: Any) -> Any:
    # JCS escapes only '"', '\\' and U+0000..U+001F; everything else is written as is.
    if pc.any(pc.match_substring_regex(values, _CONTROL)).as_py():
        return _per_distinct(values)
    text = pc.replace_substring(values, "\\", "\\\\")
    text = pc.replace_substring(text, '"', '\\"')
    return pc.binary_join_element_wise('"', text, '"', "")


def _double_text(values: Any) -> Any:
    # An integral double below 2**53 is written by ECMAScript as its integer digits.
    # Others: Arrow's cast writes the shortest round-trip digits, as ECMAScript does;
    # where it also writes them in plain decimal notation and ECMAScript would too
    # (1e-6 <= |x| < 1e21), the texts are one and the same (the decimal form of given
    # digits is unique; checked on 250,000 doubles across magnitudes against the
    # canonical code). Arrow's exponent form differs from ECMAScript's, so any value
    # left (exponents, tiny or huge magnitudes) takes the canonical code, per distinct value.
    integral = pc.and_(
        pc.equal(pc.trunc(values), values),
        pc.less_equal(pc.abs(values), float(JCS_MAX_INT)),
    )
    if pc.all(integral).as_py() is not False:
        return pc.cast(pc.cast(values, pa.int64()), pa.string())
    whole = pc.if_else(integral, values, None)
    fraction = pc.if_else(integral, None, values)
    magnitude = pc.abs(fraction)
    plain = pc.cast(
        pc.if_else(
            pc.and_(pc.greater_equal(magnitude, 1e-6), pc.less(magnitude, 1e21)), fraction, None
        ),
        pa.string(),
    )
    plain = pc.if_else(pc.match_substring(plain, "e"), None, plain)
    rest = pc.if_else(pc.is_valid(plain), None, fraction)
    return pc.coalesce(pc.cast(pc.cast(whole, pa.int64()), pa.string()), plain, _per_distinct(rest))


def _value_text(values: Any) -> Any:
    """Each non-null value's RFC 8785 text; nulls stay null (the caller writes ``null``)."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _string_text(values)
    if pa.types.is_integer(t):
        return pc.cast(values, pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(values, "true", "false")
    if pa.types.is_floating(t):
        return _double_text(values)
    if pa.types.is_null(t):
        return pa.nulls(len(values), pa.string())
    raise TypeError(f"unknown field of type {t} cannot be written column-wise")


MAX_OBJECT_KEYS = 1_000
"""Keys of an object-valued field (all levels) beyond which it is left to the per-row
path: the column-wise text costs a few Arrow calls per key and block, the per-row
path a fixed cost per key and row, so very wide objects are cheaper row by row."""


def object_keys(t: pa.DataType, levels: int) -> int | None:
    """The number of keys at every level of struct or list type ``t``, or None when it
    nests deeper than ``levels`` (an object and an array are a level each) or holds more
    than :data:`MAX_OBJECT_KEYS` (no recursion: a hostile type may nest thousands deep)."""
    todo = [(t, 1)]
    keys = 0
    while todo:
        s, depth = todo.pop()
        if depth > levels:
            return None
        if pa.types.is_list(s):
            if _nested(s.value_type):
                todo.append((s.value_type, depth + 1))
            continue
        keys += s.num_fields
        if keys > MAX_OBJECT_KEYS:
            return None
        todo += [
            (s.field(i).type, depth + 1) for i in range(s.num_fields) if _nested(s.field(i).type)
        ]
    return keys


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_list(t)


class _Checks(NamedTuple):
    scalar_ok: Callable[[pa.Array[Any]], bool]
    absent_ok: Callable[[str], bool] | None


def object_text(
    arr: pa.Array[Any],
    scalar_ok: Callable[[pa.Array[Any]], bool],
    levels: int,
    *,
    absent_ok: Callable[[str], bool] | None = None,
) -> tuple[pa.Array[Any], list[str], list[pa.Array[Any]]] | None:
    """(each object's or array's RFC 8785 text, null where the value is null; every key;
    every string value) of a struct or list column Arrow read from JSON, or None when
    the text cannot be written exactly column-wise.

    Arrow reads an absent key and a ``null`` value alike (a null child); the per-row
    path tells them apart. So a key null in some object is accepted only when
    ``absent_ok(key)`` vouches that the text never gives that key the value ``null``
    (then each null is an absent key, left out of the text); without it, every object
    must have every key with a non-null value. Every value must be a scalar
    ``scalar_ok`` accepts, or such an object or array in turn; in an array, a null
    element is JSON ``null`` (arrays have no absent elements). Arrow refuses a key
    given twice in one object, and an array mixing numbers with strings. Keys in
    RFC 8785 order, values written as :func:`extra_column` writes them. ``levels``:
    how deep objects and arrays may nest here (the per-row loader refuses a line
    nested deeper than its bound, and says where).
    """
    if not _nested(arr.type) or object_keys(arr.type, levels) is None:
        return None
    return _json_text(arr, _Checks(scalar_ok, absent_ok))


def _json_text(
    arr: pa.Array[Any], ok: _Checks
) -> tuple[pa.Array[Any], list[str], list[pa.Array[Any]]] | None:
    """:func:`object_text` once its type's depth and width are known to be in bounds."""
    if pa.types.is_list(arr.type):
        return _array_text(arr, ok)
    return _object_text(arr, ok)


def _scalar_text(values: pa.Array[Any], ok: _Checks, leaves: list[pa.Array[Any]]) -> Any:
    """The RFC 8785 text of scalar values (null stays null), or None when not exact."""
    t = values.type
    plain = pa.types.is_string(t) or pa.types.is_boolean(t) or pa.types.is_int64(t)
    if not (plain or pa.types.is_float64(t) or pa.types.is_null(t)) or not ok.scalar_ok(values):
        return None
    if pa.types.is_string(t):
        leaves.append(values)
    return _value_text(values)


def _array_text(
    arr: pa.Array[Any], ok: _Checks
) -> tuple[pa.Array[Any], list[str], list[pa.Array[Any]]] | None:
    """Each array's text: its elements' texts (null elements ``null``) joined by commas."""
    lists: Any = arr
    offsets = lists.offsets  # this slice's: absolute into ``values``
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    if last > len(lists.values) or (pa.types.is_null(arr.type.value_type) and last > first):
        # pyarrow 26's JSON reader makes list<null> columns whose offsets span more
        # values than they hold: the rows decide (arrays all empty are list<null> too).
        return None
    values = lists.values.slice(first, last - first)
    keys: list[str] = []
    leaves: list[pa.Array[Any]] = []
    if _nested(values.type):
        inner = _json_text(values, ok)
        if inner is None:
            return None
        text, keys, leaves = inner
    else:
        text = _scalar_text(values, ok, leaves)
        if text is None:
            return None
    elements = pa.ListArray.from_arrays(
        pc.subtract(offsets, pa.scalar(first, offsets.type)),
        pc.coalesce(text, "null"),
        mask=pc.is_null(arr),
    )
    joined = pc.binary_join(elements, ",")  # null where the array itself is null
    return pc.binary_join_element_wise("[", joined, "]", ""), keys, leaves


def _object_text(
    arr: pa.Array[Any], ok: _Checks
) -> tuple[pa.Array[Any], list[str], list[pa.Array[Any]]] | None:
    """Each object's text: its keys in RFC 8785 order, each with its value's text (a key
    absent from an object left out of it)."""
    struct: Any = arr
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    children = dict(zip(names, struct.flatten(), strict=True))  # the parent's nulls merged
    keys: list[str] = list(names)
    leaves: list[pa.Array[Any]] = []
    pieces: list[Any] = []
    optional = False
    for name in jcs_key_order(names):
        child = children[name]
        if pa.types.is_null(child.type):
            return None
        absent = child.null_count != arr.null_count  # null in some present object
        if absent and (ok.absent_ok is None or not ok.absent_ok(name)):
            return None  # a null or an absent key: the rows tell them apart
        if _nested(child.type):
            inner = _json_text(child, ok)
            if inner is None:
                return None
            text, more_keys, more_leaves = inner
            keys += more_keys
            leaves += more_leaves
        else:
            text = _scalar_text(child, ok, leaves)
            if text is None:
                return None
        piece = pc.binary_join_element_wise("," + jcs.dumps(name).decode("utf-8") + ":", text, "")
        if absent:
            optional = True
            piece = pc.coalesce(piece, "")  # absent here: nothing (null objects: below)
        pieces.append(piece)
    if not pieces:
        out: Any = pc.if_else(pc.is_valid(arr), "{}", pa.scalar(None, pa.string()))
        return out, keys, leaves
    # Every piece starts with a comma: the first present one's becomes the brace.
    joined = pc.binary_join_element_wise(*pieces, "")
    body = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(joined, 1), "}", "")
    if optional:
        body = pc.if_else(pc.is_valid(arr), body, pa.scalar(None, pa.string()))
    # Without optional keys a null piece (the object itself null) makes the row null.
    return body, keys, leaves


def extra_column(columns: Sequence[UnknownColumn], num_rows: int) -> pa.Array[Any]:
    """The ``extra`` column: canonical JSON of each row's present unknown fields, else null.

    The same text ``jcs.dumps({k: v for present k})`` gives for every row.
    """
    if not columns:
        return pa.nulls(num_rows, pa.string())
    by_name = {c.name: c for c in columns}
    pieces: list[Any] = []
    any_present: Any = None
    for name in jcs_key_order(list(by_name)):
        col = by_name[name]
        key = "," + jcs.dumps(name).decode("utf-8") + ":"
        text = pc.coalesce(col.values if col.canonical else _value_text(col.values), "null")
        piece = pc.binary_join_element_wise(key, text, "")
        if pc.all(col.present).as_py() is False:  # absent somewhere: "" there
            piece = pc.if_else(col.present, piece, "")
        pieces.append(piece)
        any_present = col.present if any_present is None else pc.or_(any_present, col.present)
    # Every piece is a string (never null): pyarrow 26's null_handling="skip" drops rows
    # whose inputs are all null, so absent fields are "" and the leading comma is cut.
    joined = pc.binary_join_element_wise(*pieces, "")
    body = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(joined, 1), "}", "")
    out: pa.Array[Any] = pc.if_else(any_present, body, pa.scalar(None, pa.string()))
    return out
