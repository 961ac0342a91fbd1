"""``diff_bundles``: what changed between two verified bundles, at a bounded cost.

Both bundles are hostile input, signed or not: their tables are read only through
:func:`bundler.content.read_content` (content limits, then the table contract), by
replaying each (:func:`replay.api.replay`), and every listing is capped
(:class:`~replay.diff.model.DiffLimits`) with the rest counted. A table whose
Parquet member is byte-identical on both sides is not compared row by row.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from bundler.format.model import ExternalEntry, MemberEntry
from bundler.format.tables import TABLE_NAMES
from bundler.verified import VerifiedBundle
from replay.api import replay
from replay.diff.model import (
    BundleDiff,
    ClaimChange,
    DiffLimits,
    ExternalChange,
    FieldChange,
    GateChange,
    MemberChange,
    PlanChange,
    RowChange,
    Side,
    SignerChange,
    TableDiff,
    TextDiff,
)
from replay.inputs import ReplayInputs
from replay.result import ReplayResult

__all__ = ["TABLE_KEYS", "diff_bundles"]

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "attempts": ("attempt_id",),
    "receipts": ("request_id",),
    "worker_exits": ("attempt_id", "server", "worker"),
    "telemetry": ("attempt_id", "server", "device", "time"),
    "gates": ("gate_id",),
    "comparisons": ("comparison_id",),
    "sources": ("source_id",),
    "claims": ("claim_id",),
    "not_claimed": ("what",),
    "artifacts": ("path",),
}
"""The id column(s) rows are matched by; a key repeated within a table gets ``#2``, ``#3``."""

_GATE_FIELDS = ("metric", "op", "threshold", "definition", "warn_within")
# Raising the threshold of an upper bound, or lowering a lower bound, lets more through.
_LOOSER = {"<=": 1, "<": 1, ">=": -1, ">": -1}


def diff_bundles(
    old: VerifiedBundle, new: VerifiedBundle, limits: DiffLimits | None = None
) -> BundleDiff:
    """Compare two verified bundles: verdict, gates and plan, tables, members, externals, signers.

    Raises:
        BundleFormatError: a document or table of either bundle breaks the content limits
            or the table contract (each problem located).
        CouldNotRunError: either bundle has no single accepted attempt.
    """
    lim = limits or DiffLimits()
    old_r, new_r = replay(old), replay(new)
    old_t, new_t = _inputs(old_r).tables, _inputs(new_r).tables
    changed_tables = [t for t in TABLE_NAMES if _table_member_differs(old, new, t)]
    members = _members(old, new, lim)
    externals = _externals(old.manifest.external, new.manifest.external, lim)
    claims = _claims(old_r, new_r, lim)
    gates = _gates(old_t["gates"], new_t["gates"], lim) if "gates" in changed_tables else ()
    n = lim.max_claims_listed
    return BundleDiff(
        old=_side(old, old_r),
        new=_side(new, new_r),
        claims=claims[:n],
        claims_more=max(0, len(claims) - n),
        gates=gates[:n],
        gates_more=max(0, len(gates) - n),
        plan=_plan(old, new, old_r, new_r, lim),
        tables=tuple(_table(t, old_t[t], new_t[t], lim) for t in changed_tables if t != "gates"),
        members_added=members[0],
        members_removed=members[1],
        members_changed=members[2],
        members_counts=members[3],
        externals=tuple(externals[: lim.max_members_listed]),
        externals_more=max(0, len(externals) - lim.max_members_listed),
        signers=_signers(old, new),
        limits=lim,
    )


# ------------------------------------------------------------------ values


def _inputs(result: ReplayResult) -> ReplayInputs:
    # replay() always keeps the inputs it derived the result from.
    assert result.inputs is not None
    return result.inputs


def show(value: Any) -> str:
    """A table or document value as text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list) and all(isinstance(x, tuple) and len(x) == 2 for x in value):
        value = dict(value)  # an Arrow map column reads as a list of pairs
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def clip(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _changes(
    old: Mapping[str, Any], new: Mapping[str, Any], keys: Iterable[str], lim: DiffLimits
) -> list[FieldChange]:
    def shown(row: Mapping[str, Any], k: str) -> str | None:
        return None if k not in row else clip(show(row[k]), lim.max_value_chars)

    out = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if a != b or type(a) is not type(b) or (k in old) != (k in new):
            out.append(FieldChange(clip(k, lim.max_value_chars), shown(old, k), shown(new, k)))
    return out


# ------------------------------------------------------------------ sides, verdict


def _side(bundle: VerifiedBundle, result: ReplayResult) -> Side:
    return Side(
        path=str(bundle.path),
        campaign_id=bundle.manifest.campaign.id,
        signature_status=str(bundle.signature_status),
        outcome=str(result.outcome),
        exit_code=int(result.exit_code),
    )


def _claims(old: ReplayResult, new: ReplayResult, lim: DiffLimits) -> tuple[ClaimChange, ...]:
    def state(r: ReplayResult) -> dict[str, dict[str, Any]]:
        return {
            c.claim_id: {"status": str(c.status), "claimed": c.claimed, "recomputed": c.recomputed}
            for c in r.claims.checks
        }

    a, b = state(old), state(new)
    out = []
    for cid in sorted(a.keys() | b.keys()):
        if cid not in b:
            out.append(ClaimChange(cid, "removed", a[cid]["status"], None, ()))
        elif cid not in a:
            out.append(ClaimChange(cid, "added", None, b[cid]["status"], ()))
        else:
            fields = _changes(a[cid], b[cid], ("status", "claimed", "recomputed"), lim)
            if fields:
                out.append(
                    ClaimChange(cid, "changed", a[cid]["status"], b[cid]["status"], tuple(fields))
                )
    return tuple(out)


# ------------------------------------------------------------------ gates, plan


def _gates(old: pa.Table, new: pa.Table, lim: DiffLimits) -> tuple[GateChange, ...]:
    a, b = _by_key(old.to_pylist(), ("gate_id",)), _by_key(new.to_pylist(), ("gate_id",))
    out = []
    for gid in sorted(a.keys() | b.keys()):
        if gid not in b:
            out.append(GateChange(gid, "removed", True, ()))
        elif gid not in a:
            out.append(GateChange(gid, "added", False, ()))
        else:
            fields = _changes(a[gid], b[gid], _GATE_FIELDS, lim)
            if fields:
                out.append(GateChange(gid, "changed", _loosened(a[gid], b[gid]), tuple(fields)))
    # Loosened gates first: the first thing a reviewer must see.
    return tuple(sorted(out, key=lambda g: not g.loosened))


def _loosened(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    if old.get("op") != new.get("op") or old.get("metric") != new.get("metric"):
        return True
    direction = _LOOSER.get(str(new.get("op")))
    a, b = old.get("threshold"), new.get("threshold")
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return a != b
    if direction is None:  # "==": any other value admits what the old one refused
        return a != b
    return (b - a) * direction > 0


def _plan(
    old: VerifiedBundle,
    new: VerifiedBundle,
    old_r: ReplayResult,
    new_r: ReplayResult,
    lim: DiffLimits,
) -> PlanChange | None:
    op, np_ = _inputs(old_r).plan_path, _inputs(new_r).plan_path
    # The plan was schema-checked and parsed by read_content; its JSON is bounded.
    a = _flatten(old.document(op) or {}) if op else {}
    b = _flatten(new.document(np_) or {}) if np_ else {}
    fields = _changes(a, b, sorted(a.keys() | b.keys()), lim)
    if op != np_:
        fields.insert(0, FieldChange("(member)", op, np_))
    if not fields:
        return None
    return PlanChange(
        op, np_, tuple(fields[: lim.max_plan_fields]), max(0, len(fields) - lim.max_plan_fields)
    )


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict) and doc:
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(doc, list) and doc:
        out = {}
        for i, v in enumerate(doc):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix or "(plan)": doc}


# ------------------------------------------------------------------ tables


def _table_member_differs(old: VerifiedBundle, new: VerifiedBundle, table: str) -> bool:
    name = f"tables/{table}.parquet"
    a, b = old.members.get(name), new.members.get(name)
    return (a.sha256 if a else None) != (b.sha256 if b else None)


def _key_text(row: Mapping[str, Any], key: Sequence[str]) -> str:
    return " / ".join(show(row.get(k)) for k in key)


def _by_key(rows: Iterable[dict[str, Any]], key: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    # The last number given per key: searching from 1 for each repeat was quadratic
    # (telemetry, worker_exits and not_claimed keys need not be unique).
    last: dict[str, int] = {}
    for row in rows:
        k = base = _key_text(row, key)
        n = last.get(base, 1)
        if base in last:
            n += 1
            k = f"{base} #{n}"
        while k in out:  # a repeated key (only a hostile or keyless table): number it
            n += 1
            k = f"{base} #{n}"
        last[base] = n
        out[k] = row
    return out


def _ns_time(ns: int | None, tz: str | None) -> dt.datetime | str | None:
    if ns is None:
        return None
    zone = dt.UTC if tz else None
    at = dt.datetime(1970, 1, 1, tzinfo=zone) + dt.timedelta(microseconds=ns // 1000)
    if ns % 1000 == 0:
        return at  # what pyarrow gives, so an honest diff reads as before
    text = at.replace(microsecond=0).isoformat()
    cut = 19  # "YYYY-MM-DDTHH:MM:SS", then the offset if any
    return f"{text[:cut]}.{ns % 10**9:09d}{text[cut:]}"


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as Python values. A ``timestamp[ns]`` value that a datetime cannot hold
    (a nanosecond part: RFC 3339 allows it, seal keeps it) is its ISO 8601 text with
    nine decimals; pyarrow refuses to convert it without pandas (ValueError)."""
    columns: list[list[Any]] = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            ints = col.cast(pa.int64()).to_pylist()
            columns.append([_ns_time(v, f.type.tz) for v in ints])
        else:
            columns.append(col.to_pylist())
    names = table.column_names
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _table(name: str, old: pa.Table, new: pa.Table, lim: DiffLimits) -> TableDiff:
    key = TABLE_KEYS[name]
    cap = lim.max_rows_compared
    not_compared = max(0, old.num_rows - cap) + max(0, new.num_rows - cap)
    a = _by_key(_rows(old.slice(0, cap)), key)
    b = _by_key(_rows(new.slice(0, cap)), key)
    added = [k for k in b if k not in a]
    removed = [k for k in a if k not in b]
    changed = []
    for k in a.keys() & b.keys():
        columns = [c for c in b[k] if c in a[k]] + [c for c in a[k] if c not in b[k]]
        fields = _changes(a[k], b[k], columns, lim)
        if fields:
            changed.append(RowChange(k, tuple(fields)))
    changed.sort(key=lambda r: r.key)
    n, width = lim.max_rows_listed, lim.max_value_chars
    return TableDiff(
        table=name,
        key=key,
        added=tuple(clip(k, width) for k in sorted(added)[:n]),
        removed=tuple(clip(k, width) for k in sorted(removed)[:n]),
        changed=tuple(RowChange(clip(r.key, width), r.fields) for r in changed[:n]),
        added_count=len(added),
        removed_count=len(removed),
        changed_count=len(changed),
        not_compared=not_compared,
    )


# ------------------------------------------------------------------ members, externals, signers


def _members(
    old: VerifiedBundle, new: VerifiedBundle, lim: DiffLimits
) -> tuple[
    tuple[MemberChange, ...],
    tuple[MemberChange, ...],
    tuple[MemberChange, ...],
    tuple[int, int, int],
]:
    a = {m.path: m for m in old.manifest.members}
    b = {m.path: m for m in new.manifest.members}
    n = lim.max_members_listed
    added = [_member(None, b[p]) for p in sorted(b.keys() - a.keys())]
    removed = [_member(a[p], None) for p in sorted(a.keys() - b.keys())]
    changed_paths = sorted(
        p for p in a.keys() & b.keys() if (a[p].sha256, a[p].size) != (b[p].sha256, b[p].size)
    )
    budget = [lim.max_total_text_lines]
    changed = [_changed_member(a[p], b[p], (old, new), lim, budget) for p in changed_paths[:n]]
    return (
        tuple(added[:n]),
        tuple(removed[:n]),
        tuple(changed),
        (len(added), len(removed), len(changed_paths)),
    )


def _member(a: MemberEntry | None, b: MemberEntry | None) -> MemberChange:
    e = b if b is not None else a
    assert e is not None
    return MemberChange(
        path=e.path,
        change="added" if a is None else "removed" if b is None else "changed",
        role=e.role,
        old_size=a.size if a else None,
        new_size=b.size if b else None,
        old_sha256=a.sha256 if a else None,
        new_sha256=b.sha256 if b else None,
    )


def _changed_member(
    a: MemberEntry,
    b: MemberEntry,
    sides: tuple[VerifiedBundle, VerifiedBundle],
    lim: DiffLimits,
    budget: list[int],
) -> MemberChange:
    base = _member(a, b)
    text, note = None, None
    if a.path.startswith("tables/") and a.path.endswith(".parquet"):
        note = "a table: its rows are compared under tables"
    elif max(a.size, b.size) > lim.max_text_bytes:
        note = f"over {lim.max_text_bytes:,} bytes: no text diff"
    elif budget[0] <= 0:
        note = "text diff not shown: the diff's text budget is spent"
    else:
        old_text, new_text = (
            _utf8(sides[0].member_bytes(a.path)),
            _utf8(sides[1].member_bytes(b.path)),
        )
        old_lines = None if old_text is None else old_text.splitlines()
        new_lines = None if new_text is None else new_text.splitlines()
        if old_lines is None or new_lines is None:
            note = "not UTF-8 text: no text diff"
        elif max(len(old_lines), len(new_lines)) > lim.max_text_lines_compared:
            most = max(len(old_lines), len(new_lines))
            note = f"{most:,} lines: over {lim.max_text_lines_compared:,} lines, no text diff"
        else:
            lines = list(
                difflib.unified_diff(
                    old_lines,
                    new_lines,
                    f"old/{a.path}",
                    f"new/{b.path}",
                    lineterm="",
                )
            )
            shown = min(len(lines), lim.max_text_lines, budget[0])
            budget[0] -= shown
            text = TextDiff(
                tuple(clip(x, lim.max_value_chars) for x in lines[:shown]), len(lines) - shown
            )
    return MemberChange(**{**base.__dict__, "text": text, "text_note": note})


def _utf8(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _externals(
    old: Sequence[ExternalEntry], new: Sequence[ExternalEntry], lim: DiffLimits
) -> list[ExternalChange]:
    def fields(e: ExternalEntry) -> dict[str, Any]:
        return {
            "sha256": e.sha256,
            "bytes": e.bytes,
            "availability": e.availability,
            "kind": e.kind,
            "uri": e.uri,
        }

    a = {e.path: fields(e) for e in old}
    b = {e.path: fields(e) for e in new}
    out = []
    for p in sorted(a.keys() | b.keys()):
        if p not in b:
            out.append(ExternalChange(p, "removed", ()))
        elif p not in a:
            out.append(ExternalChange(p, "added", ()))
        else:
            ch = _changes(a[p], b[p], ("sha256", "bytes", "availability", "kind", "uri"), lim)
            if ch:
                out.append(ExternalChange(p, "changed", tuple(ch)))
    return out


def _signers(old: VerifiedBundle, new: VerifiedBundle) -> tuple[SignerChange, ...]:
    # The hint is the signer's own claim: matched together with who verified it.
    def signers(b: VerifiedBundle) -> set[tuple[str, str | None]]:
        return {(s.keyid_hint, s.verified_by) for s in b.report.signatures}

    a, b = signers(old), signers(new)
    key = lambda s: (s[0], s[1] or "")  # noqa: E731 - a sort key, used twice
    return tuple(
        [SignerChange(k, "added", v) for k, v in sorted(b - a, key=key)]
        + [SignerChange(k, "removed", v) for k, v in sorted(a - b, key=key)]
    )
