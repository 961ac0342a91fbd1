"""``bundle inspect``: what a bundle holds, without judging it (verify does that)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bundler.errors import BundleFormatError, IntegrityError
from bundler.format.trust import NO_TRUST, Trust
from bundler.verify import open_bundle

__all__ = ["inspect_bundle"]


# A table that does not match the spec (inspect reads bundles that did not verify): its
# summary is left empty; the reason is already among the report's problems.
_UNREADABLE = (BundleFormatError, KeyError, TypeError, ValueError, pa.ArrowException)


def _value_counts(opened: Any, table: str, column: str) -> dict[str, int]:
    try:
        t = opened.table(table)
        if t.num_rows == 0:
            return {}
        vc = pc.value_counts(t.column(column)).to_pylist()
        return {str(d["values"]): int(d["counts"]) for d in vc}
    except _UNREADABLE:
        return {}


def _attempts(opened: Any) -> list[dict[str, Any]]:
    try:
        # Timestamps are nanosecond; to_pylist() on them would need pandas.
        rows = opened.table("attempts").select(["attempt_id", "status", "reason"]).to_pylist()
        return [
            {
                "attempt_id": str(a["attempt_id"]),
                "status": str(a["status"]),
                "reason": None if a["reason"] is None else str(a["reason"]),
            }
            for a in rows
        ]
    except _UNREADABLE:
        return []


def inspect_bundle(path: Path, trust: Trust = NO_TRUST) -> dict[str, Any]:
    """Summarize ``path``: campaign, arms and commits, counts, signers, members, externals.

    ``trust``'s keys only show which signers verify: inspect accepts every bundle
    it can read whatever the trust (it describes, it does not judge).

    Raises:
        IntegrityError: if the manifest cannot be read at all (nothing to describe).
    """
    opened = open_bundle(path, trust=replace(trust, accept_untrusted=True))
    manifest = opened.manifest
    if manifest is None:
        raise IntegrityError(f"{path}: no readable manifest", opened.report.problems)
    report = opened.report
    attempts = _attempts(opened)
    return {
        "path": str(path),
        "format_version": manifest.format_version,
        "campaign": manifest.campaign.to_dict(),
        "tables": dict(manifest.tables),
        "counts": {
            "receipts_by_phase": _value_counts(opened, "receipts", "phase"),
            "attempts": attempts,
            "comparisons": manifest.tables.get("comparisons", 0),
            "worker_exits": manifest.tables.get("worker_exits", 0),
            "claims": manifest.tables.get("claims", 0),
        },
        "signature_status": report.signature_status,
        "signers": [
            {
                "keyid_hint": s.keyid_hint,
                "verified_by": s.verified_by,
                "principals": list(s.principals),
            }
            for s in report.signatures
        ],
        "members": [m.to_dict() for m in manifest.members],
        "external": [e.to_dict() for e in manifest.external],
        "sanitization": manifest.sanitization.to_dict(),
        "environment": dict(manifest.environment),
        "problems": [str(p) for p in report.problems],
    }
