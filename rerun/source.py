"""Reading the sealed bundle a rerun reproduces: campaign, frozen plan, gates, pairing, inputs.

The bundle is read only through :class:`bundler.verified.VerifiedBundle`
(:func:`open_sealed` makes one from a path with the caller's trust settings),
so nothing here reads a member that did not verify.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.content import read_content
from bundler.errors import Problem, UsageError
from bundler.format.plan_model import Plan
from bundler.format.tables import EXTRA_COLUMN
from bundler.verified import VerifiedBundle, open_verified
from rerun.client import FilePart
from rerun.confine import InputRefused, input_problem, read_input
from rerun.options import FILE_FIELDS, RerunOptions
from rerun.writer import SealedSource

__all__ = ["SealedRead", "input_files", "open_sealed", "read_sealed", "table_rows"]


@dataclass(frozen=True)
class SealedRead:
    """What the rerun needs of the sealed bundle, read once."""

    bundle: VerifiedBundle
    source: SealedSource
    plan: Plan
    """The plan in force, schema-checked and parsed once (:func:`bundler.content.read_content`)."""
    sealed_attempt: str | None
    receipts: Sequence[Mapping[str, Any]]
    """attempt_id, server and e2e_s of every sealed receipt (for the duration estimate)."""


def open_sealed(bundle: Path | VerifiedBundle, options: RerunOptions) -> VerifiedBundle:
    """``bundle`` itself, or the bundle at that path opened and verified.

    Raises:
        IntegrityError: the bundle does not verify, or no trusted key signed it and
            ``options.trust`` does not accept that.
    """
    if isinstance(bundle, VerifiedBundle):
        return bundle
    return open_verified(bundle, trust=options.trust)


def table_rows(bundle: VerifiedBundle, name: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of table ``name``, the given columns that it has (never timestamp columns:
    their ``to_pylist`` needs pandas at nanosecond precision)."""
    table = bundle.table(name)
    present = [c for c in columns if c in table.column_names]
    rows: list[dict[str, Any]] = table.select(present).to_pylist()
    return rows


def _sealed_gates(bundle: VerifiedBundle) -> list[dict[str, Any]]:
    """The sealed gates as rows again: null fields left out, unknown fields restored."""
    cols = ["gate_id", "metric", "op", "threshold", "definition", "warn_within", "requires_scorer"]
    out = []
    for g in table_rows(bundle, "gates", [*cols, EXTRA_COLUMN]):
        extra = g.pop(EXTRA_COLUMN, None)
        row = {k: v for k, v in g.items() if v is not None}
        if extra:
            row.update(json.loads(extra))
        out.append(row)
    return out


def read_sealed(bundle: VerifiedBundle) -> SealedRead:
    """The campaign, the frozen plan in force and what the rerun copies from the seal.

    Raises:
        UsageError: ``campaign.json`` names a plan the bundle lacks.
        BundleFormatError: a document of a bundle accepted unsigned is malformed, or a
            table breaks the table contract (checked as replay checks it).
    """
    # The rerun copies gates, pairing and receipts from these tables: the same content
    # limits and contract check as replay's (one function), before anything is copied.
    content = read_content(bundle)
    campaign = bundle.document("campaign.json") or {}
    plan_name = str(campaign.get("plan", ""))
    plan_bytes = bundle.member_bytes(plan_name)
    if plan_bytes is None or content.plan is None:
        raise UsageError(f"{bundle.path}: campaign.json names plan {plan_name!r}, which is absent")
    attempts = table_rows(bundle, "attempts", ["attempt_id", "status"])
    accepted = [a["attempt_id"] for a in attempts if a.get("status") == "accepted"]
    sealed_attempt = accepted[0] if len(accepted) == 1 else None
    comparisons = table_rows(
        bundle,
        "comparisons",
        ["comparison_id", "attempt_id", "baseline_request_id", "candidate_request_id"],
    )
    receipts = table_rows(
        bundle, "receipts", ["request_id", "attempt_id", "server", "seq", "phase", "e2e_s"]
    )
    source = SealedSource(
        hashlib.sha256(bundle.path.read_bytes()).hexdigest(),
        campaign,
        plan_name,
        plan_bytes,
        _sealed_gates(bundle),
        bundle.document("scorer.json"),
        [c for c in comparisons if sealed_attempt is None or c["attempt_id"] == sealed_attempt],
        {
            str(r["request_id"]): (str(r["server"]), int(r["seq"]), str(r["phase"]))
            for r in receipts
        },
    )
    return SealedRead(bundle, source, content.plan, sealed_attempt, receipts)


def _refused(plan_name: str, key: str, rel: str, why: str) -> UsageError:
    where = Problem(plan_name, None, f"request.payload.{key}", f"{rel!r} {why}")
    return UsageError(
        f"{plan_name}: payload field {key} names a file outside --inputs and the bundle: "
        "refused, nothing was read or sent",
        [where],
    )


def _paths(payload: Mapping[str, Any], key: str, plan_name: str) -> list[str]:
    value = payload.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise UsageError(
        f"{plan_name}: request.payload.{key}: a file path or a list of file paths, "
        f"not {type(value).__name__}"
    )


def input_files(
    plan: Plan,
    bundle: VerifiedBundle | None,
    options: RerunOptions,
    *,
    plan_name: str = "plan",
) -> dict[str, tuple[FilePart, ...]]:
    """The files the payload names, per file field, in payload order.

    ``input_reference`` names one file; ``input_references`` a list (sent as
    repeated parts under that one name, as vLLM-Omni's form takes several
    references). Each comes from the bundle's ``files/``, else from ``--inputs``
    (only from ``--inputs`` when there is no bundle: ``bundle run``).

    A path is read only from inside an ``--inputs`` folder
    (:func:`rerun.confine.read_input`): an absolute path, a ``..``
    part, or a symlink leading out is refused before anything is read or any
    server is reached.

    Raises:
        UsageError: a path is refused, a file is in neither place, or it differs
            from its sealed artifact's SHA-256 (located at ``plan_name``'s field).
    """
    payload = plan.request.payload or {}
    rows = [] if bundle is None else table_rows(bundle, "artifacts", ["path", "sha256"])
    artifacts = {r["path"]: r.get("sha256") for r in rows if r.get("path")}
    out: dict[str, tuple[FilePart, ...]] = {}
    for key in FILE_FIELDS:
        where = (plan_name, key)
        parts = [
            FilePart(Path(rel).name, _read_one(bundle, options, artifacts, where, rel))
            for rel in _paths(payload, key, plan_name)
        ]
        if parts:
            out[key] = tuple(parts)
    return out


def _read_one(
    bundle: VerifiedBundle | None,
    options: RerunOptions,
    artifacts: Mapping[str, Any],
    where: tuple[str, str],
    rel: str,
) -> bytes:
    plan_name, key = where
    why = input_problem(rel)
    if why is not None:
        raise _refused(plan_name, key, rel, why)
    carried = None if bundle is None else bundle.member_bytes(f"files/{rel}")
    data = carried
    for d in options.inputs if data is None else ():
        try:
            data = read_input(d, rel)
        except InputRefused as exc:
            raise _refused(plan_name, key, rel, f"in {str(d)!r} {exc}") from exc
        if data is not None:
            break
    if data is None:
        raise UsageError(
            f"payload field {key} names {rel!r}, which is not in the bundle: "
            "give --inputs DIR holding it"
        )
    want = artifacts.get(rel)
    if carried is None and want and hashlib.sha256(data).hexdigest() != want:
        raise UsageError(f"{rel}: its SHA-256 differs from the sealed artifact's")
    return data
