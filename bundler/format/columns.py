"""Whole-column checks of Arrow arrays against a table field's JSON-Schema property.

Used by the columnar seal (``bundler/campaign/columnar.py``) and by the table contract
(``bundler/format/contract.py``) that every bundle reader runs: one implementation, so
the two cannot drift. Each returns False when it is not sure; callers then check value
by value for exact messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bundler._internal.timefmt import RFC3339
from bundler.format.tables import INT64_MAX, INT64_MIN

__all__ = ["all_true", "column_kinds", "numbers_ok", "strings_ok"]

_DATETIME = RFC3339.pattern
_SIMPLE = {"string", "integer", "number", "null"}
_KEYWORDS = {
    "type",
    "enum",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "format",
    "description",
}


def column_kinds(prop: dict[str, Any]) -> list[str] | None:
    """The JSON types of a field, or None when the column checks do not cover it."""
    if set(prop) - _KEYWORDS:
        return None
    if "enum" in prop:
        if any(v is not None and not isinstance(v, str) for v in prop["enum"]):
            return None
        return ["string", "null"] if None in prop["enum"] else ["string"]
    t = prop.get("type", "string")
    kinds = [t] if isinstance(t, str) else list(t)
    if not set(kinds) <= _SIMPLE or len([k for k in kinds if k != "null"]) != 1:
        return None
    if prop.get("format", "date-time") != "date-time":
        return None
    return kinds


def all_true(mask: pa.Array[Any]) -> bool:
    """True when every non-null entry of a boolean array is true."""
    return bool(pc.all(mask).as_py() is not False)


def strings_ok(arr: pa.Array[Any], prop: dict[str, Any]) -> bool:  # noqa: PLR0911
    """Whether every non-null string of ``arr`` surely satisfies ``prop`` (False: not sure)."""
    valid: Any = arr.drop_null()
    if len(valid) == 0:
        return True
    if "enum" in prop:
        choices = pa.array([v for v in prop["enum"] if v is not None], pa.string())
        return all_true(pc.is_in(valid, value_set=choices))
    lengths: Any = pc.min_max(pc.utf8_length(valid)).as_py()
    if lengths["min"] < prop.get("minLength", 0):
        return False
    if "maxLength" in prop and lengths["max"] > prop["maxLength"]:
        return False
    try:
        if "pattern" in prop and not all_true(pc.match_substring_regex(valid, prop["pattern"])):
            return False
        if prop.get("format") == "date-time":
            fixed = _millisecond_utc(valid)
            if fixed is not None:
                return fixed
            return all_true(pc.match_substring_regex(valid, _DATETIME))
    except pa.ArrowInvalid:  # a pattern RE2 cannot compile: let the per-row path decide
        return False
    return True


def numbers_ok(arr: pa.Array[Any], prop: dict[str, Any], kinds: list[str]) -> bool:
    """Whether every non-null number of ``arr`` is finite and within ``prop``'s bounds."""
    valid: Any = arr.drop_null()
    if len(valid) == 0:
        return True
    if "number" in kinds and not all_true(pc.is_finite(valid)):
        return False
    mm: Any = pc.min_max(valid).as_py()
    lo, hi = mm["min"], mm["max"]
    if "integer" in kinds and not (lo >= INT64_MIN and hi <= INT64_MAX):
        return False
    return not (
        ("minimum" in prop and lo < prop["minimum"])
        or ("maximum" in prop and hi > prop["maximum"])
        or ("exclusiveMinimum" in prop and lo <= prop["exclusiveMinimum"])
        or ("exclusiveMaximum" in prop and hi >= prop["exclusiveMaximum"])
    )


# "YYYY-MM-DDTHH:MM:SS.fffZ": what the RFC 3339 pattern accepts at 24 characters (19 for
# the date and time, then 5: ".fff" and "Z"; an offset takes 6). Per position: the bytes
# allowed there, as an inclusive range or a few choices.
_LAYOUT: tuple[tuple[int, int] | bytes, ...] = (
    *[(0x30, 0x39)] * 4, b"-", *[(0x30, 0x39)] * 2, b"-", *[(0x30, 0x39)] * 2, b"Tt ",
    *[(0x30, 0x39)] * 2, b":", *[(0x30, 0x39)] * 2, b":", (0x30, 0x35), (0x30, 0x39), b".",
    *[(0x30, 0x39)] * 3, b"Zz",
)  # fmt: skip


def _millisecond_utc(valid: Any) -> bool | None:
    """Whether every string of ``valid`` (no nulls) matches the RFC 3339 pattern, when they
    all have its 24-character millisecond UTC form's length; None otherwise (the regular
    expression decides). Position by position over the characters: no per-string call."""
    arr = valid.cast(pa.string())
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=arr.offset * 4)
    if n == 0 or offsets[-1] - offsets[0] != 24 * n or not bool((np.diff(offsets) == 24).all()):
        return None
    chars = np.frombuffer(bufs[2], np.uint8)[offsets[0] : offsets[-1]].reshape(n, 24)
    for i, allowed in enumerate(_LAYOUT):
        col = chars[:, i]
        if isinstance(allowed, tuple):
            ok = (col - np.uint8(allowed[0])) <= np.uint8(allowed[1] - allowed[0])
        else:
            ok = np.logical_or.reduce([col == c for c in allowed])
        if not bool(ok.all()):
            return False
    return True
