"""What replay reads: the campaign documents and the Arrow tables, as plain columns.

The pure core of replay takes a :class:`ReplayInputs`; only :mod:`replay.api`
opens bundles. String columns become dictionary codes and timestamps integer
nanoseconds once, here, so every section works on numpy arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from replay.engine.arrow import (
    BoolArray,
    IntArray,
    column_numpy,
    dictionary_codes,
    rows,
    timestamps_ns,
)
from replay.serving.inputs import ServingData

__all__ = ["CODED_COLUMNS", "RECEIPT_COLUMNS", "Arm", "Codes", "Receipts", "ReplayInputs"]


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
"""The receipts columns replay reads (hashes, HTTP codes and error text are never used)."""
CODED_COLUMNS = ("attempt_id", "arm", "server", "phase", "status")
"""Receipts columns used as dictionary codes: read from Parquet already dictionary-encoded."""


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


@dataclass(frozen=True)
class ReplayInputs:
    """Everything the statistics are derived from, already integrity-checked.

    Attributes:
        campaign: ``campaign.json``.
        plan: the frozen plan in force (``campaign.json`` ``plan``), if present.
        plan_path: its member name.
        scorer: ``scorer.json``, or None when the bundle records no scorer identity.
        tables: every table by name (empty tables included).
        serving: the parsed serving sources of a serving campaign (``bundle import``).
    """

    campaign: Mapping[str, Any]
    plan: Mapping[str, Any] | None
    plan_path: str | None
    scorer: Mapping[str, Any] | None
    tables: Mapping[str, pa.Table]
    serving: ServingData | None = None

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
