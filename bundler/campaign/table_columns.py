"""What the column-wise reader needs beyond the receipts' field kinds: booleans.

``bundler/format/columns.py`` covers the receipts' fields (strings, enums, integers,
numbers, date-times). Worker exits add a ``boolean`` field (``killed``, true, false
or null); this module says how such a field is read and checked column-wise, so that
:mod:`bundler.campaign.columnar` reads telemetry and worker exits as it reads receipts.
Objects (``comparisons.metrics``) are not covered here:
:mod:`bundler.campaign.comparison_columns` reads that table column-wise.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bundler.format.columns import all_true, column_kinds

__all__ = ["csv_booleans", "field_kinds", "is_boolean"]

_BOOLEAN_KEYWORDS = {"type", "description"}


def is_boolean(kinds: list[str]) -> bool:
    """Whether a field of these JSON types holds booleans (true, false, maybe null)."""
    return "boolean" in kinds


def field_kinds(prop: dict[str, Any]) -> list[str] | None:
    """The JSON types of a field the column-wise reader can check whole, or None.

    :func:`column_kinds`' fields, and a plain boolean (``"boolean"`` or
    ``["boolean", "null"]``, no other keyword): Arrow's JSON reader with a ``bool``
    column accepts only ``true``, ``false`` and ``null`` (anything else is a reader
    error, hence per-row), which is exactly what the row check accepts.
    """
    kinds = column_kinds(prop)
    if kinds is not None:
        return kinds
    if set(prop) - _BOOLEAN_KEYWORDS:
        return None
    t = prop.get("type")
    found = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []
    if "boolean" in found and set(found) <= {"boolean", "null"}:
        return found
    return None


def csv_booleans(cells: pa.Array[Any]) -> pa.Array[Any] | None:
    """A boolean CSV column (text, ``""`` already null) as the per-row path coerces it.

    Per row a cell becomes a boolean when ``value.lower()`` is ``true`` or ``false``;
    any other text stays text and is refused. Here only ASCII cells can match (no other
    character lower-cases into those letters), so any other cell means "not sure": None.
    """
    text: Any = cells
    lowered = pc.ascii_lower(text)
    choices = pa.array(["true", "false"], pa.string())
    if not all_true(pc.is_in(lowered.drop_null(), value_set=choices)):
        return None
    out: pa.Array[Any] = pc.equal(lowered, pa.scalar("true"))
    return out
