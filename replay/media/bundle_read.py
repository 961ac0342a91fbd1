"""Read what a media re-score needs from a verified bundle: comparisons, gates, artifacts, plan.

The bundle is a :class:`bundler.verified.VerifiedBundle`: its tables are exactly
what the signer sealed, so they are read as they are. Gates are parsed by
:meth:`replay.sections.gates.Gate.from_row`, the one gate type replay uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bundler.content import read_scorer
from bundler.format.plan_model import ScorerDoc
from bundler.verified import VerifiedBundle
from replay.media.identity import ArtifactRef
from replay.sections.gates import Gate

__all__ = ["BundleContent", "ComparisonRow", "read_bundle"]


@dataclass(frozen=True)
class ComparisonRow:
    """One ``comparisons`` row, each arm's digest completed from its receipt."""

    comparison_id: str
    attempt_id: str
    baseline_request_id: str
    candidate_request_id: str
    baseline_sha256: str | None
    candidate_sha256: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class BundleContent:
    """Everything the re-score reads from the bundle."""

    comparisons: list[ComparisonRow]
    gates: list[Gate]
    artifacts: list[ArtifactRef]
    plan: dict[str, Any] | None
    scorer: ScorerDoc | None
    """``scorer.json``: the recorded identity of the model a model-based metric needs."""


_COMPARISON_COLUMNS = (
    "comparison_id",
    "attempt_id",
    "baseline_request_id",
    "candidate_request_id",
    "baseline_sha256",
    "candidate_sha256",
    "metrics",
)
_GATE_COLUMNS = (
    "gate_id",
    "metric",
    "op",
    "threshold",
    "definition",
    "warn_within",
    "requires_scorer",
)


def _rows(bundle: VerifiedBundle, table: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    t = bundle.table(table)
    rows: list[dict[str, Any]] = t.select([c for c in columns if c in t.column_names]).to_pylist()
    return rows


def _plan(bundle: VerifiedBundle) -> dict[str, Any] | None:
    camp = bundle.document("campaign.json") or {}
    name = camp.get("plan")
    if not isinstance(name, str) or name not in bundle.members:
        return None
    return bundle.document(name)


def _comparisons(bundle: VerifiedBundle) -> list[ComparisonRow]:
    receipts = {
        r["request_id"]: r.get("output_sha256")
        for r in _rows(bundle, "receipts", ["request_id", "output_sha256"])
    }
    out: list[ComparisonRow] = []
    for r in _rows(bundle, "comparisons", _COMPARISON_COLUMNS):
        m = r.get("metrics") or []
        metrics = {str(k): float(v) for k, v in (m.items() if isinstance(m, dict) else m)}
        out.append(
            ComparisonRow(
                r["comparison_id"],
                r["attempt_id"],
                r["baseline_request_id"],
                r["candidate_request_id"],
                r.get("baseline_sha256") or receipts.get(r["baseline_request_id"]),
                r.get("candidate_sha256") or receipts.get(r["candidate_request_id"]),
                metrics,
            )
        )
    return out


def read_bundle(bundle: VerifiedBundle) -> BundleContent:
    """The comparisons, gates, external artifacts, plan in force and scorer identity.

    Raises:
        bundler.errors.BundleFormatError: a gate with an operator outside the five
            (possible only in a bundle sealed by another tool, accepted unsigned).
    """
    return BundleContent(
        comparisons=_comparisons(bundle),
        gates=[Gate.from_row(g) for g in _rows(bundle, "gates", _GATE_COLUMNS)],
        artifacts=[
            ArtifactRef(a["path"], a["sha256"], a.get("bytes"))
            for a in _rows(bundle, "artifacts", ["path", "sha256", "bytes", "kind"])
            if a.get("sha256")
        ],
        plan=_plan(bundle),
        scorer=read_scorer(bundle),
    )
