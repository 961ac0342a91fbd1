"""What replay reads: the campaign documents and the Arrow tables, as plain columns.

:meth:`ReplayInputs.from_bundle` is replay's one reader of a verified bundle's
documents and tables (through :func:`bundler.content.read_content`: content limits
and the table contract first); :mod:`replay.api` decodes each bundle once with it
and hands the result to every section and view. String columns become dictionary
codes and timestamps integer nanoseconds once, here, so every section works on
numpy arrays.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from bundler.content import CODED_COLUMNS, RECEIPT_COLUMNS, read_content
from bundler.format.plan_model import Plan, ScorerDoc
from bundler.verified import VerifiedBundle
from replay.engine.arrow import (
    BoolArray,
    IntArray,
    column_numpy,
    dictionary_codes,
    rows,
    timestamps_ns,
)
from replay.serving.inputs import ServingData, load_serving

__all__ = [
    "CODED_COLUMNS",
    "OUTCOME_COLUMNS",
    "RECEIPT_COLUMNS",
    "Arm",
    "Codes",
    "Receipts",
    "ReplayInputs",
]


@dataclass(frozen=True)
class Arm:
    """An arm of the campaign and its role."""

    id: str
    role: str  # baseline | candidate


@dataclass(frozen=True)
class Codes:
    """A string column as integer codes into ``values`` (-1 for null)."""

    codes: IntArray
    values: tuple[str, ...]

    @classmethod
    def of(cls, column: Any) -> Codes:
        """Dictionary-encode ``column`` (vectorized)."""
        return cls(*dictionary_codes(column))

    def code(self, value: str) -> int:
        """The code of ``value``, or -1 if the column never holds it."""
        try:
            return self.values.index(value)
        except ValueError:
            return -1

    def mask(self, value: str) -> BoolArray:
        """Rows equal to ``value``."""
        c = self.code(value)
        if c < 0:
            return np.zeros(self.codes.shape, dtype=bool)
        return np.equal(self.codes, c)


@dataclass(frozen=True)
class Receipts:
    """The receipts table as columns: one row per request."""

    table: pa.Table
    attempt: Codes
    arm: Codes
    server: Codes
    phase: Codes
    ok: BoolArray
    seq: IntArray
    start_ns: IntArray
    end_ns: IntArray
    e2e_s: npt.NDArray[np.float64]

    @classmethod
    def from_table(cls, table: pa.Table) -> Receipts:
        """Encode the receipts table's columns once."""
        start, _ = timestamps_ns(table.column("start"))
        end, _ = timestamps_ns(table.column("end"))
        return cls(
            table=table,
            attempt=Codes.of(table.column("attempt_id")),
            arm=Codes.of(table.column("arm")),
            server=Codes.of(table.column("server")),
            phase=Codes.of(table.column("phase")),
            ok=Codes.of(table.column("status")).mask("ok"),
            seq=column_numpy(table, "seq", np.int64),
            start_ns=start,
            end_ns=end,
            e2e_s=column_numpy(table, "e2e_s", np.float64),
        )

    def __len__(self) -> int:
        return int(self.table.num_rows)


OUTCOME_COLUMNS = ("attempt_id", "server", "seq", "status", "timeout_level", "output_sha256")
"""Receipts columns of request outcomes and output hashes: shown by the rerun comparison."""


def _outcomes(bundle: VerifiedBundle) -> pa.Table:
    """The receipts' outcome columns that the table has (a bundle sealed by another tool
    may lack one: it is then left out); a table of no column without a receipts table."""
    data = bundle.member_bytes("tables/receipts.parquet")
    if data is None:
        return pa.table({})
    names = pq.read_schema(io.BytesIO(data)).names
    columns = [c for c in OUTCOME_COLUMNS if c in names]
    return pq.read_table(io.BytesIO(data), columns=columns, use_threads=False)


@dataclass(frozen=True)
class ReplayInputs:
    """Everything the statistics are derived from, already integrity-checked.

    Attributes:
        campaign: ``campaign.json``.
        plan: the frozen plan in force (``campaign.json`` ``plan``), if present, parsed
            after the plan schema check (:func:`bundler.content.read_content`).
        plan_path: its member name.
        scorer: ``scorer.json`` parsed after the scorer schema check, or None when the
            bundle records no scorer identity.
        tables: every table by name (empty tables included).
        serving: the parsed serving sources of a serving campaign (``bundle import``).
        plan_bytes: the plan member's bytes, as sealed (None when absent).
        outcomes: the receipts' request outcomes and output hashes
            (:data:`OUTCOME_COLUMNS` the table has), which no statistic reads: only
            when :meth:`from_bundle` was asked for them (the rerun comparison).
    """

    campaign: Mapping[str, Any]
    plan: Plan | None
    plan_path: str | None
    scorer: ScorerDoc | None
    tables: Mapping[str, pa.Table]
    serving: ServingData | None = None
    plan_bytes: bytes | None = None
    outcomes: pa.Table | None = None

    @classmethod
    def from_bundle(cls, bundle: VerifiedBundle, *, outcomes: bool = False) -> ReplayInputs:
        """Documents and tables of a verified bundle, decoded once.

        Args:
            bundle: the verified bundle.
            outcomes: also read the receipts' outcome columns (:attr:`outcomes`).

        Raises:
            BundleFormatError: a document is not a JSON object; or the content is over
                the content limits (:func:`bundler.content.check_content_limits`); or a
                table breaks the contract seal enforces
                (:func:`bundler.format.contract.check_bundle_tables`), each problem
                located by member, row and field. A signature vouches for who sealed,
                not for sanity.
        """
        content = read_content(bundle)
        return cls(
            campaign=content.campaign,
            plan=content.plan,
            plan_path=content.plan_path,
            scorer=content.scorer,
            tables=content.tables,
            serving=load_serving(bundle.member_bytes),
            plan_bytes=None
            if content.plan_path is None
            else bundle.member_bytes(content.plan_path),
            outcomes=_outcomes(bundle) if outcomes else None,
        )

    @property
    def arms(self) -> tuple[Arm, ...]:
        """Arms in the order ``campaign.json`` lists them."""
        return tuple(Arm(str(a["id"]), str(a["role"])) for a in self.campaign.get("arms", []))

    def arms_with_role(self, role: str) -> tuple[str, ...]:
        """Ids of the arms with ``role``."""
        return tuple(a.id for a in self.arms if a.role == role)

    @functools.cached_property
    def receipts(self) -> Receipts:
        """The receipts as encoded columns (encoded once, on first use)."""
        return Receipts.from_table(self.tables["receipts"])

    def table(self, name: str) -> pa.Table:
        """Table ``name``."""
        return self.tables[name]

    def rows(self, name: str, columns: list[str]) -> list[dict[str, Any]]:
        """Rows of a small table (attempts, gates, claims) as dicts of the given columns."""
        return rows(self.tables[name], columns)
