"""The table contract, checked by seal and by every reader of a bundle: one code path.

A signature says who sealed a bundle, not that its tables are sane: anyone can
write Parquet with pyarrow and sign it. So the checks seal runs on a
campaign's tables beyond the row schema (unique ids, references between
tables, receipts that end before they start, claims whose unit, parameters or
precision do not fit their statistic) live here, taking rows or Arrow columns
rather than a campaign directory, and :func:`check_bundle_tables` runs them,
with the per-field checks of ``specs/schemas/table.*.schema.json`` over the
Arrow columns, on every table a reader takes from a bundle.

The per-field messages are those of the campaign row check
(:func:`bundler.format.tables.value_error`), and the whole-column fast path is the
columnar seal's (:mod:`bundler.campaign.columnar`): a column is walked value by value
only when the column-wise check is not sure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bundler._internal import jcs
from bundler._internal.textsafe import has_unsafe, unsafe_chars
from bundler._internal.timefmt import RFC3339
from bundler.errors import Problem
from bundler.format.columns import column_kinds, numbers_ok, strings_ok
from bundler.format.tables import (
    EXTRA_COLUMN,
    TABLE_NAMES,
    arrow_schema,
    datetime_problem,
    table_schema,
    timestamps_ns,
    types_of,
    value_error,
)
from bundler.format.vocabulary import STATISTICS, Statistic

__all__ = [
    "MAX_PROBLEMS_PER_TABLE",
    "Columns",
    "TableView",
    "check_bundle_tables",
    "cross_checks",
    "name_problem",
    "referenced_requests",
    "table_member",
]

MAX_PROBLEMS_PER_TABLE = 200
"""Field problems reported per table; the rest are counted in one more line."""


def table_member(name: str) -> str:
    """The bundle member holding table ``name``."""
    return f"tables/{name}.parquet"


def name_problem(rel: str) -> str | None:
    """Why an artifact path (or any campaign-relative name) cannot be shown as it is, if so.

    A name that is not UTF-8 cannot be written into the manifest; one with
    control, format or bidi characters could forge output lines wherever it is
    printed.
    """
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "name is not valid UTF-8; rename it"
    if has_unsafe(rel):
        return (
            "name holds control or invisible characters "
            f"({', '.join(unsafe_chars(rel))}); rename it"
        )
    return None


class Columns(Protocol):
    """A table held as Arrow columns (a large one), with a label for each row."""

    def column(self, field: str) -> pa.Array[Any]:
        """The column ``field`` as one array."""
        ...

    def label(self, index: int) -> str:
        """Where row ``index`` came from (``line N`` in a campaign, ``row N`` in a bundle)."""
        ...


def _row_label(index: int) -> str:
    # Rows of a Parquet member count from 0, as pyarrow and pandas index them.
    return f"row {index}"


@dataclass(frozen=True)
class _BundleColumns:
    """A bundle table's Arrow columns, rows labelled by index."""

    table: pa.Table

    def column(self, field: str) -> pa.Array[Any]:
        return _plain(self.table.column(field))

    def label(self, index: int) -> str:
        return _row_label(index)


@dataclass(frozen=True)
class TableView:
    """One table as the cross checks see it: row dicts (small tables) or columns (large ones).

    ``where`` names the file or member; ``labels`` (parallel to ``rows``) say where
    each row came from; ``present`` is False for a table the campaign does not have.
    """

    where: str
    rows: Sequence[dict[str, Any]] = ()
    labels: Sequence[str] = ()
    columns: Columns | None = None
    present: bool = True

    def pairs(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, row) of every row dict."""
        return list(zip(self.labels, self.rows, strict=True))


@dataclass(frozen=True)
class _Views:
    by_name: Mapping[str, TableView]
    empty: dict[str, TableView] = field(default_factory=dict)

    def __getitem__(self, name: str) -> TableView:
        found = self.by_name.get(name)
        if found is not None:
            return found
        return self.empty.setdefault(name, TableView(name, present=False))


# --- cross checks (seal and readers) ---------------------------------------------------


def _arms(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The arm objects of campaign.json (anything else is the schema check's to report)."""
    arms = doc.get("arms", [])
    return [a for a in arms if isinstance(a, dict)] if isinstance(arms, list) else []


def _ids(rows: Sequence[dict[str, Any]], key: str) -> list[str]:
    """The string values of ``key`` (other types were reported by the field check)."""
    return [v for r in rows if isinstance(v := r.get(key), str)]


def _unique(view: TableView, key: str) -> list[Problem]:
    if (ct := view.columns) is not None:
        col = ct.column(key)
        vc: Any = pc.value_counts(col)
        dups = pc.filter(
            vc.field("values"), pc.greater(vc.field("counts"), pa.scalar(1, pa.int64()))
        )
        if len(dups) == 0:
            return []
        hits = np.flatnonzero(pc.is_in(col, value_set=dups).to_numpy(zero_copy_only=False))
        return [
            Problem(view.where, ct.label(i), key, f"duplicate {key} {col[i].as_py()!r}")
            for i in hits.tolist()
        ]
    counts = Counter(_ids(view.rows, key))
    return [
        Problem(view.where, label, key, f"duplicate {key} {v!r}")
        for label, r in view.pairs()
        if isinstance(v := r.get(key), str) and counts[v] > 1
    ]


def _refs(view: TableView, key: str, allowed: set[Any], what: str) -> list[Problem]:
    if (ct := view.columns) is not None:
        col = ct.column(key)
        known = pa.array(sorted(v for v in allowed if isinstance(v, str)), pa.string())
        bad = pc.and_(pc.is_valid(col), pc.invert(pc.is_in(col, value_set=known)))
        hits = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        return [
            Problem(view.where, ct.label(i), key, f"{col[i].as_py()!r} is not a known {what}")
            for i in hits.tolist()
        ]
    return [
        Problem(view.where, label, key, f"{r[key]!r} is not a known {what}")
        for label, r in view.pairs()
        if key in r and isinstance(r[key], str) and r[key] not in allowed
    ]


def referenced_requests(comparisons: TableView) -> set[str]:
    """The request ids comparisons refer to (baseline and candidate), rows or columns."""
    keys = ("baseline_request_id", "candidate_request_id")
    if (ct := comparisons.columns) is not None:
        found: set[str] = set()
        for k in keys:
            found.update(v for v in pc.unique(ct.column(k)).to_pylist() if isinstance(v, str))
        return found
    return {v for c in comparisons.rows for k in keys if isinstance(v := c.get(k), str)}


def _metric_names(comparisons: TableView) -> set[str]:
    """Every metric name comparisons record (the keys of each row's ``metrics``)."""
    if (ct := comparisons.columns) is not None:
        keys: Any = ct.column("metrics").keys  # type: ignore[attr-defined]
        return {v for v in pc.unique(keys).to_pylist() if isinstance(v, str)}
    names: set[str] = set()
    for c in comparisons.rows:
        if isinstance(c.get("metrics"), dict):
            names.update(c["metrics"])
    return names


def _request_ids(receipts: TableView, comparisons: TableView) -> set[str]:
    """The receipts' request ids that comparisons refer to (all of them, per row)."""
    ct = receipts.columns
    if ct is None:
        return set(_ids(receipts.rows, "request_id"))
    # A million ids as a Python set costs more than asking Arrow about the few referenced.
    probe = pa.array(sorted(referenced_requests(comparisons)), pa.string())
    found = pc.is_in(probe, value_set=ct.column("request_id"))
    return {v for v in pc.filter(probe, found).to_pylist() if isinstance(v, str)}


def _valid_ns(values: list[Any]) -> pa.Array[Any]:
    """Timestamps in bulk; values that are not storable RFC 3339 become null."""
    strings = [v if isinstance(v, str) and RFC3339.match(v) else None for v in values]
    try:
        return timestamps_ns(strings)
    except (pa.ArrowInvalid, OverflowError):  # an impossible date somewhere: sort it out
        return timestamps_ns([v if v and datetime_problem(v) is None else None for v in strings])


def _order_checks(view: TableView) -> list[Problem]:
    """Receipts that end before they start (both timestamps valid)."""
    if (ct := view.columns) is not None:
        # A null timestamp (reported by the field check) compares as neither.
        s0: Any = ct.column("start").cast(pa.int64())
        e0: Any = ct.column("end").cast(pa.int64())
        less: Any = pc.fill_null(pc.less(e0, s0), False)
        bad = less.to_numpy(zero_copy_only=False)
        return [
            Problem(view.where, ct.label(i), "end", "ends before it starts")
            for i in np.flatnonzero(bad).tolist()
        ]
    # A missing or malformed timestamp (null here) is reported by the row check already.
    starts = _valid_ns([r.get("start") for r in view.rows]).cast(pa.int64())
    ends = _valid_ns([r.get("end") for r in view.rows]).cast(pa.int64())
    known = np.asarray(pc.and_(pc.is_valid(starts), pc.is_valid(ends)))
    s = np.asarray(starts.fill_null(0))
    e = np.asarray(ends.fill_null(0))
    bad = known & (e < s)
    return [
        Problem(view.where, view.labels[i], "end", "ends before it starts")
        for i in bad.nonzero()[0].tolist()
    ]


def _attempt_checks(view: TableView) -> list[Problem]:
    out = []
    accepted = [r for r in view.rows if r.get("status") == "accepted"]
    if view.present and len(accepted) != 1:
        out.append(
            Problem(
                view.where,
                None,
                "status",
                f"exactly one attempt must be accepted, found {len(accepted)}",
            )
        )
    for label, r in view.pairs():
        if r.get("status") in ("interrupted", "rejected") and not r.get("reason"):
            why = f"a {r['status']} attempt must say why"
            out.append(Problem(view.where, label, "reason", why))
    return out


def _artifact_checks(view: TableView) -> list[Problem]:
    out = []
    for label, a in view.pairs():
        p = a.get("path")
        if isinstance(p, str) and (PurePosixPath(p).is_absolute() or ".." in p.split("/")):
            out.append(Problem(view.where, label, "path", "must be relative, without '..'"))
        elif isinstance(p, str) and (why := name_problem(p)) is not None:
            out.append(Problem(view.where, label, "path", why))
    return out


def _claim_param_checks(
    stat: Statistic, params: dict[str, Any], arms: set[str], metrics: set[Any]
) -> list[tuple[str, str]]:
    """(field, message) pairs for a claim's parameters."""
    out = [(f"params.{p}", f"{stat.name} needs {p!r}") for p in stat.params if p not in params]
    out += [
        (f"params.{p}", f"{stat.name} takes no {p!r}")
        for p in sorted(set(params) - {*stat.params, *stat.optional, "attempt"})
    ]
    out += [
        (f"params.{p}", f"{params[p]!r} is not an arm")
        for p in ("arm", "baseline", "candidate")
        if p in params and (not isinstance(params[p], str) or params[p] not in arms)
    ]
    if "metric" in params and (
        not isinstance(params["metric"], str) or params["metric"] not in metrics
    ):
        out.append(("params.metric", f"{params['metric']!r} is neither gated nor recorded"))
    return out


def _decimals_check(value: Any, decimals: Any) -> str | None:
    if not (isinstance(value, str) and isinstance(decimals, int)):
        return None
    try:
        exp = Decimal(value).as_tuple().exponent
    except ArithmeticError:
        return None  # the schema's pattern check names a malformed value
    if isinstance(exp, int) and -exp != decimals:
        return f"value {value!r} has {-exp} decimals, not {decimals}"
    return None


def _claim_checks(views: _Views, arms: set[str]) -> list[Problem]:
    claims = views["claims"]
    metrics: set[Any] = set(_ids(views["gates"].rows, "metric"))
    metrics.update(_metric_names(views["comparisons"]))
    out = []
    for label, c in claims.pairs():
        stat = STATISTICS.get(str(c.get("statistic")))
        params = c.get("params") or {}
        if stat is None or not isinstance(params, dict):
            continue  # the field check already named it
        found = _claim_param_checks(stat, params, arms, metrics)
        if c.get("unit") is not None and c.get("unit") not in stat.units:
            found.append(("unit", f"{stat.name} is stated in {' or '.join(stat.units)}"))
        bad_decimals = _decimals_check(c.get("value"), c.get("decimals"))
        if bad_decimals:
            found.append(("decimals", bad_decimals))
        out += [Problem(claims.where, label, f, m) for f, m in found]
    return out


def cross_checks(doc: Mapping[str, Any], tables: Mapping[str, TableView]) -> list[Problem]:
    """Every check across rows and tables, for campaign ``doc`` and its ``tables``.

    What the row schemas cannot say: arms listed once with a baseline and a
    candidate; exactly one accepted attempt, and a reason for every other;
    unique ids; every reference to an attempt, arm or request known; receipts
    that end no earlier than they start; artifact paths relative and printable;
    claims whose parameters, unit and precision fit their statistic. Seal runs
    it on a campaign's rows, :func:`check_bundle_tables` on a bundle's tables.
    """
    views = _Views(tables)
    out: list[Problem] = []
    arm_list = [str(a.get("id")) for a in _arms(doc)]
    arms = set(arm_list)
    out += [
        Problem("campaign.json", None, "arms", f"arm {a!r} listed twice")
        for a, c in Counter(arm_list).items()
        if c > 1
    ]
    roles = {r for a in _arms(doc) if isinstance(r := a.get("role"), str)}
    if doc and not {"baseline", "candidate"} <= roles:
        out.append(Problem("campaign.json", None, "arms", "needs a baseline and a candidate arm"))
    attempts = set(_ids(views["attempts"].rows, "attempt_id"))
    out += _attempt_checks(views["attempts"])
    for table, key in (
        ("attempts", "attempt_id"),
        ("receipts", "request_id"),
        ("gates", "gate_id"),
        ("comparisons", "comparison_id"),
        ("sources", "source_id"),
        ("claims", "claim_id"),
        ("artifacts", "path"),
    ):
        out += _unique(views[table], key)
    for t in ("receipts", "worker_exits", "telemetry", "comparisons"):
        out += _refs(views[t], "attempt_id", attempts, "attempt (attempts table)")
    for t in ("receipts", "worker_exits", "telemetry"):
        out += _refs(views[t], "arm", arms, "arm (campaign.json arms)")
    requests = _request_ids(views["receipts"], views["comparisons"])
    for k in ("baseline_request_id", "candidate_request_id"):
        out += _refs(views["comparisons"], k, requests, "request (receipts table)")
    out += _order_checks(views["receipts"])
    out += _artifact_checks(views["artifacts"])
    out += _claim_checks(views, arms)
    return out


def receipt_block_checks(view: TableView, attempts: set[str], arms: set[str]) -> list[Problem]:
    """The row-local cross checks of one block of a streamed receipts table.

    Known attempt and arm, no end before start: what :func:`cross_checks` runs on a
    whole receipts table, less uniqueness (the streamed seal checks ``request_id``
    over all blocks itself).
    """
    out = _refs(view, "attempt_id", attempts, "attempt (attempts table)")
    out += _refs(view, "arm", arms, "arm (campaign.json arms)")
    return out + _order_checks(view)


# --- field checks of a bundle's Arrow tables ---------------------------------------------


def _plain(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> pa.Array[Any]:
    """One contiguous array; dictionary-encoded strings decoded."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        encoded: Any = arr
        return encoded.dictionary_decode()  # type: ignore[no-any-return]
    return arr


def _is_object_text(prop: dict[str, Any], typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) and "object" in types_of(prop)


def _object_value(text: str) -> tuple[Any, str | None]:
    """(parsed object, problem) of a JSON-object column's text as seal writes it (RFC 8785)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None, "is not JSON text"
    if not isinstance(value, dict):
        return None, "is not a JSON object"
    try:
        canonical = jcs.dumps(value).decode("utf-8") == text
    except (TypeError, ValueError, RecursionError):
        canonical = False
    if not canonical:
        return value, "is not canonical JSON (RFC 8785)"
    return value, None


def _column_sure(  # noqa: PLR0911  # one answer per Arrow type
    arr: pa.Array[Any], prop: dict[str, Any], nullable: bool
) -> bool:
    """Whether every value of ``arr`` surely satisfies ``prop`` (whole-column checks only).

    False means "not sure": the caller then checks value by value for exact messages.
    """
    if arr.null_count and not nullable:
        return False
    typ = arr.type
    if pa.types.is_timestamp(typ) or pa.types.is_boolean(typ):
        return True  # any value of the Arrow type is in the contract
    if pa.types.is_map(typ):
        addl = prop.get("additionalProperties", {})
        items: Any = arr.items  # type: ignore[attr-defined]
        return items.null_count == 0 and numbers_ok(items, addl, ["number"])
    if _is_object_text(prop, typ):
        return arr.null_count == len(arr)
    kinds = column_kinds(prop)
    if kinds is None:
        return False
    if pa.types.is_string(typ):
        return strings_ok(arr, prop)
    return numbers_ok(arr, prop, kinds)


def _value_problems(
    arr: pa.Array[Any], prop: dict[str, Any], nullable: bool
) -> list[tuple[int, str]]:
    """(row, message) for every value of ``arr`` outside ``prop``."""
    object_text = _is_object_text(prop, arr.type)
    is_map = pa.types.is_map(arr.type)
    out = []
    for i, stored in enumerate(arr.to_pylist()):
        if stored is None:
            # In Parquet an absent field and a null are one: only a required one is missing.
            if not nullable:
                out.append((i, "is required"))
            continue
        value = stored
        if object_text:
            value, why = _object_value(stored)
            if why is not None:
                out.append((i, why))
                continue
        elif is_map:
            value = dict(stored)
        if (msg := value_error(value, prop)) is not None:
            out.append((i, msg))
    return out


def _extra_problems(arr: pa.Array[Any], known: set[str]) -> list[tuple[int, str]]:
    """The ``extra`` column: unknown input fields, as canonical JSON object text."""
    if arr.null_count == len(arr):
        return []
    out = []
    for i, text in enumerate(arr.to_pylist()):
        if text is None:
            continue
        value, why = _object_value(text)
        if why is None and (clash := sorted(set(value) & known)):
            why = f"holds field(s) {clash} that have their own column"
        if why is not None:
            out.append((i, why))
    return out


def _field_problems(name: str, table: pa.Table) -> list[Problem]:
    """Every value of ``table`` that the row schema of ``name`` refuses, located by row."""
    where = table_member(name)
    props = table_schema(name)["properties"]
    found: list[Problem] = []
    for f in arrow_schema(name):
        if f.name not in table.column_names:
            continue  # a reader may read only the columns it uses (receipts)
        arr = _plain(table.column(f.name))
        if arr.type != f.type:
            why = f"column of type {arr.type}, the contract says {f.type}"
            found.append(Problem(where, None, f.name, why))
            continue
        if f.name == EXTRA_COLUMN:
            bad = _extra_problems(arr, set(props))
        elif _column_sure(arr, props[f.name], f.nullable):
            continue
        else:
            bad = _value_problems(arr, props[f.name], f.nullable)
        found += [Problem(where, _row_label(i), f.name, msg) for i, msg in bad]
    found.sort(key=lambda p: int((p.record or "row -1").split()[1]))
    if len(found) > MAX_PROBLEMS_PER_TABLE:
        more = len(found) - MAX_PROBLEMS_PER_TABLE
        found = found[:MAX_PROBLEMS_PER_TABLE]
        found.append(Problem(where, None, None, f"... and {more} more"))
    return found


def _small_rows(table: pa.Table, props: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A small table's rows as a campaign's rows would be: objects parsed, nulls dropped."""
    cols = [
        c
        for c in table.column_names
        if c in props and not pa.types.is_timestamp(table.schema.field(c).type)
    ]
    rows: list[dict[str, Any]] = table.select(cols).to_pylist()
    objects = [c for c in cols if _is_object_text(props[c], table.schema.field(c).type)]
    maps = [c for c in cols if pa.types.is_map(table.schema.field(c).type)]
    out = []
    for r in rows:
        for c in objects:
            if isinstance(r[c], str):
                # Unparsable text stays text: the field check named it, the cross checks skip it.
                # An empty object is a parsed value too (``{}`` is falsy): keeping its
                # text would let the claim checks skip the row as "already named".
                parsed = _object_value(r[c])[0]
                if parsed is not None:
                    r[c] = parsed
        for c in maps:
            if r[c] is not None:
                r[c] = dict(r[c])
        out.append({k: v for k, v in r.items() if v is not None})
    return out


_COLUMNAR = frozenset({"receipts"})
"""Tables the cross checks read as Arrow columns (large); the rest as row dicts."""


def check_bundle_tables(doc: Mapping[str, Any], tables: Mapping[str, pa.Table]) -> list[Problem]:
    """Check a bundle's tables against the contract seal enforces; every problem, located.

    ``doc`` is the bundle's ``campaign.json``; ``tables`` maps table names to
    their Arrow tables (a table may hold only the columns its reader uses).
    Problems name the member (``tables/<name>.parquet``), the row (``row N``,
    counted from 0) and the field. Columnar and linear: whole-column checks
    first, value-by-value messages only for a column that fails them.
    """
    problems: list[Problem] = []
    views: dict[str, TableView] = {}
    for name in TABLE_NAMES:
        table = tables.get(name)
        if table is None:
            continue
        problems += _field_problems(name, table)
        where = table_member(name)
        if name in _COLUMNAR:
            views[name] = TableView(where, columns=_BundleColumns(table))
        else:
            rows = _small_rows(table, table_schema(name)["properties"])
            views[name] = TableView(where, rows, [_row_label(i) for i in range(len(rows))])
    return problems + cross_checks(doc, views)
