"""``bundle inspect``: what a bundle holds, without judging it (verify does that)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bundler.errors import IntegrityError
from bundler.verify import open_bundle

__all__ = ["inspect_bundle"]


def _value_counts(opened: Any, table: str, column: str) -> dict[str, int]:
    t = opened.table(table)
    if t.num_rows == 0:
        return {}
    vc = pc.value_counts(t.column(column)).to_pylist()
    return {str(d["values"]): int(d["counts"]) for d in vc}


def inspect_bundle(path: Path, trusted: Sequence[Ed25519PublicKey] = ()) -> dict[str, Any]:
    """Summarize ``path``: campaign, arms and commits, counts, signers, members, externals.

    Raises:
        IntegrityError: if the manifest cannot be read at all (nothing to describe).
    """
    opened = open_bundle(path, trusted=trusted, allow_unsigned=True)
    manifest = opened.manifest
    if manifest is None:
        raise IntegrityError(f"{path}: no readable manifest", opened.report.problems)
    report = opened.report
    # Timestamps are nanosecond; to_pylist() on them would need pandas.
    attempts = opened.table("attempts").select(["attempt_id", "status", "reason"]).to_pylist()
    return {
        "path": str(path),
        "format_version": manifest["format_version"],
        "campaign": manifest["campaign"],
        "tables": manifest["tables"],
        "counts": {
            "receipts_by_phase": _value_counts(opened, "receipts", "phase"),
            "attempts": [
                {"attempt_id": a["attempt_id"], "status": a["status"], "reason": a["reason"]}
                for a in attempts
            ],
            "comparisons": manifest["tables"].get("comparisons", 0),
            "worker_exits": manifest["tables"].get("worker_exits", 0),
            "claims": manifest["tables"].get("claims", 0),
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
        "members": manifest["members"],
        "external": manifest["external"],
        "sanitization": manifest["sanitization"],
        "environment": manifest["environment"],
        "problems": [str(p) for p in report.problems],
    }
