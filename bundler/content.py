"""A verified bundle's content, read once and checked before any reader derives anything.

A verified bundle is hostile input: a signature says who sealed it, not that its
content is sane. A few hundred KiB of Parquet can hold 50,000 arms (625 million
baseline x candidate pairs), a million claims or a million gates, and replay's
cost grows with each. :func:`check_content_limits` refuses such a bundle up front,
against :class:`bundler.format.container.ContentLimits`, with every limit exceeded
named by member and field (``BundleFormatError``: malformed, exit 1). It reads
row counts from the Parquet footers and, only once those are within bounds, the
few columns that the other counts need; never a whole table.

:func:`read_content` is what every reader of a bundle's tables starts from (replay
through :meth:`replay.inputs.ReplayInputs.from_bundle`, rerun before it copies
anything): the documents, the content limits, the tables, then the table contract
seal enforces (:func:`bundler.format.contract.check_bundle_tables`). It lives here,
below replay, so that rerun (which never imports replay) runs the same checks.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bundler._internal.schemas import document_errors
from bundler.errors import BundleFormatError, Problem
from bundler.format.container import ContentLimits, Member
from bundler.format.contract import check_bundle_tables
from bundler.format.plan_model import Plan, ScorerDoc
from bundler.format.tables import TABLE_NAMES, arrow_schema
from bundler.verified import VerifiedBundle

__all__ = [
    "CODED_COLUMNS",
    "RECEIPT_COLUMNS",
    "BundleContent",
    "check_content_limits",
    "read_content",
    "read_scorer",
]

RECEIPT_COLUMNS = (
    "request_id",
    "attempt_id",
    "arm",
    "server",
    "phase",
    "seq",
    "start",
    "end",
    "e2e_s",
    "status",
)
"""The receipts columns read (and checked): those replay uses; rerun copies a subset of them.
Hashes, HTTP codes and error text are never read here."""
CODED_COLUMNS = ("attempt_id", "arm", "server", "phase", "status")
"""Receipts columns used as dictionary codes: read from Parquet already dictionary-encoded."""

_CAMPAIGN = "campaign.json"


def _over(count: int, limit: int, what: str, attr: str) -> str:
    return (
        f"{count:,} {what}, over replay's limit of {limit:,} "
        f"(ContentLimits.{attr}; specs/bundle-format.md)"
    )


def _member(members: Mapping[str, Member], table: str) -> Member | None:
    return members.get(f"tables/{table}.parquet")


def _footer(member: Member) -> pq.FileMetaData:
    with member.open() as fh:
        return pq.read_metadata(fh)


def _column(member: Member, column: str, dictionary: bool = False) -> Any:
    with member.open() as fh:
        table = pq.read_table(
            fh,
            columns=[column],
            read_dictionary=[column] if dictionary else None,
            use_threads=False,
        )
    return table.column(column)


def _distinct(member: Member, column: str) -> int:
    """Distinct values of a string column, counted on its dictionary codes."""
    col = _column(member, column, dictionary=True).unify_dictionaries()
    codes = [np.asarray(c.indices.to_numpy(zero_copy_only=False)) for c in col.chunks]
    if not codes:
        return 0
    return int(np.unique(np.concatenate(codes)).size)


def _metric_entries(meta: pq.FileMetaData) -> int:
    """Entries of every ``metrics`` map together, from the footer (the key leaf's values)."""
    total = 0
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for i in range(group.num_columns):
            col = group.column(i)
            if col.path_in_schema.startswith("metrics.") and col.path_in_schema.endswith(".key"):
                total += int(col.num_values)
    return total


def _value_counts(values: Any) -> dict[str, int]:
    if len(values) == 0:
        return {}
    counts = pc.value_counts(values)
    return {
        str(k): int(n)
        for k, n in zip(
            counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
        )
        if k is not None
    }


def _map_keys(column: Any) -> Any:
    """The keys of every entry of a ``map<string, double>`` column (null maps: none).

    Maps have no flatten kernel of their own; the cast to a list of structs is free
    (same layout).
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    as_list: Any = arr.cast(pa.list_(pa.struct([("key", pa.string()), ("value", pa.float64())])))
    return pc.list_flatten(as_list).field("key")


def _gate_checks(gates: Member, comparisons: Member) -> int:
    """Gate evaluations replay would make: per gate, the recorded values of its metric."""
    recorded = _value_counts(_map_keys(_column(comparisons, "metrics")))
    gated = _value_counts(_column(gates, "metric").combine_chunks())
    return sum(n * recorded.get(metric, 0) for metric, n in gated.items())


def _campaign_problems(campaign: Mapping[str, Any], lim: ContentLimits) -> list[Problem]:
    arms = campaign.get("arms")
    arms = arms if isinstance(arms, list) else []
    out = []
    if len(arms) > lim.max_arms:
        out.append(
            Problem(_CAMPAIGN, None, "arms", _over(len(arms), lim.max_arms, "arms", "max_arms"))
        )
    roles = [a.get("role") for a in arms if isinstance(a, Mapping)]
    pairs = roles.count("baseline") * roles.count("candidate")
    if pairs > lim.max_arm_pairs:
        msg = _over(pairs, lim.max_arm_pairs, "baseline x candidate pairs", "max_arm_pairs")
        out.append(Problem(_CAMPAIGN, None, "arms", msg))
    return out


def check_content_limits(
    members: Mapping[str, Member],
    campaign: Mapping[str, Any],
    limits: ContentLimits | None = None,
    bundle: str = "bundle",
) -> None:
    """Refuse content whose replay would cost more than ``limits`` allow.

    Args:
        members: the verified bundle's members by name.
        campaign: its ``campaign.json``.
        limits: the bounds (defaults: ``ContentLimits()``).
        bundle: the bundle's name for the error message.

    Raises:
        BundleFormatError: one Problem per limit exceeded, naming the member and field.
    """
    lim = limits or ContentLimits()
    problems = _campaign_problems(campaign, lim)
    footers = {t: _footer(m) for t in TABLE_NAMES if (m := _member(members, t)) is not None}
    per_table = {"claims": ("max_claims", "claims"), "gates": ("max_gates", "gates")}
    for table, meta in footers.items():
        attr, what = per_table.get(table, ("max_table_rows", "rows"))
        limit = getattr(lim, attr)
        if meta.num_rows > limit:
            where = f"tables/{table}.parquet"
            problems.append(Problem(where, None, None, _over(meta.num_rows, limit, what, attr)))
    comparisons = footers.get("comparisons")
    entries = 0 if comparisons is None else _metric_entries(comparisons)
    if entries > lim.max_metric_entries:
        msg = _over(entries, lim.max_metric_entries, "metric entries", "max_metric_entries")
        problems.append(Problem("tables/comparisons.parquet", None, "metrics", msg))
    if not problems:  # the columns read below are now bounded
        problems += _column_problems(members, lim)
    if problems:
        raise BundleFormatError(f"{bundle}: content over replay's limits", problems)


def _column_problems(members: Mapping[str, Member], lim: ContentLimits) -> list[Problem]:
    out = []
    receipts = _member(members, "receipts")
    if receipts is not None:
        for column, attr, what in (
            ("arm", "max_arms", "arms"),
            ("server", "max_servers", "servers"),
        ):
            n = _distinct(receipts, column)
            limit = getattr(lim, attr)
            if n > limit:
                msg = _over(n, limit, f"distinct {what}", attr)
                out.append(Problem("tables/receipts.parquet", None, column, msg))
    gates, comparisons = _member(members, "gates"), _member(members, "comparisons")
    if gates is not None and comparisons is not None:
        checks = _gate_checks(gates, comparisons)
        if checks > lim.max_gate_checks:
            msg = _over(checks, lim.max_gate_checks, "gate evaluations", "max_gate_checks")
            out.append(Problem("tables/gates.parquet", None, "metric", msg))
    return out


@dataclass(frozen=True)
class BundleContent:
    """A verified bundle's documents and tables, within the content limits and the contract.

    Attributes:
        campaign: ``campaign.json`` (empty when absent).
        plan: the frozen plan ``campaign.json`` names, if the bundle has it: checked
            against the plan schema (as seal checks it) and parsed, once.
        plan_path: its member name (None when the plan is absent).
        scorer: ``scorer.json`` checked against the scorer schema and parsed, or None.
        tables: every table by name (an absent one as an empty table of its schema;
            receipts only :data:`RECEIPT_COLUMNS`, :data:`CODED_COLUMNS` as dictionaries).
    """

    campaign: dict[str, Any]
    plan: Plan | None
    plan_path: str | None
    scorer: ScorerDoc | None
    tables: dict[str, pa.Table]


def read_content(bundle: VerifiedBundle) -> BundleContent:
    """Read and check the documents and tables of ``bundle``, once.

    Raises:
        BundleFormatError: a document is not a JSON object; or the frozen plan breaks
            the plan schema (each problem named by the plan's member and JSON path); or
            the content is over the
            content limits (:func:`check_content_limits`); or a table is not readable
            Parquet or breaks the contract seal enforces
            (:func:`bundler.format.contract.check_bundle_tables`), each problem located
            by member, row and field. A signature vouches for who sealed, not for sanity.
    """
    name = str(bundle.report.path)
    campaign = bundle.document("campaign.json") or {}
    plan_path = campaign.get("plan")
    plan = _plan(bundle, plan_path, name) if isinstance(plan_path, str) else None
    check_content_limits(bundle.members, campaign, bundle=name)
    tables = {t: _table(bundle, t) for t in TABLE_NAMES}
    problems = check_bundle_tables(campaign, tables)
    if problems:
        raise BundleFormatError(
            f"{name}: {len(problems)} table problem(s): the tables break the "
            "contract seal enforces; refused",
            problems,
        )
    return BundleContent(
        campaign=campaign,
        plan=plan,
        plan_path=plan_path if plan is not None else None,
        scorer=read_scorer(bundle),
        tables=tables,
    )


def _plan(bundle: VerifiedBundle, path: str, name: str) -> Plan | None:
    """The frozen plan at ``path``, schema-checked as seal checks a plan, then parsed.

    Every reader of the plan then reads typed fields instead of re-checking them: a
    plan that breaks the schema is refused here, located, not guessed at later.
    """
    doc = bundle.document(path)
    if doc is None:
        return None
    problems = [Problem(path, None, f, m) for f, m in document_errors("plan", doc)]
    if problems:
        raise BundleFormatError(
            f"{name}: the frozen plan {path} breaks the plan schema seal enforces; refused",
            problems,
        )
    return Plan.from_dict(doc, path)


def read_scorer(bundle: VerifiedBundle) -> ScorerDoc | None:
    """``scorer.json`` schema-checked as seal checks it, then parsed; None when absent.

    Every reader of the scorer identity (replay's quality section, the media
    re-score, the report) reads typed fields instead of guessing at a hostile shape.

    Raises:
        BundleFormatError: the document breaks the scorer schema, each problem located.
    """
    doc = bundle.document("scorer.json")
    if doc is None:
        return None
    problems = [Problem("scorer.json", None, f, m) for f, m in document_errors("scorer", doc)]
    if problems:
        raise BundleFormatError(
            f"{bundle.report.path}: scorer.json breaks the scorer schema seal enforces; refused",
            problems,
        )
    return ScorerDoc.from_dict(doc)


def _table(bundle: VerifiedBundle, name: str) -> pa.Table:
    path = f"tables/{name}.parquet"
    member = bundle.members.get(path)
    if member is None:
        return arrow_schema(name).empty_table()
    if name == "receipts":
        # Receipts are the big table: read only the columns readers use, and the
        # repeated strings straight as dictionaries (Parquet stores them so).
        return pq.read_table(
            io.BytesIO(member.data),
            columns=list(RECEIPT_COLUMNS),
            read_dictionary=list(CODED_COLUMNS),
        )
    # use_threads=False: tables are small, and pyarrow's thread pool was seen to
    # abort ("terminate called without an active exception") at interpreter exit.
    try:
        with member.open() as fh:
            return pq.read_table(fh, use_threads=False)
    except (pa.ArrowException, ValueError) as exc:
        # ValueError: pyarrow decodes names as UTF-8 (UnicodeDecodeError) and
        # raises ArrowInvalid, both ValueErrors; ArrowIOError is an OSError.
        raise BundleFormatError(
            f"{bundle.report.path}: table {name!r} is not readable Parquet",
            [Problem(path, None, None, f"{type(exc).__name__}: {exc}")],
        ) from exc
