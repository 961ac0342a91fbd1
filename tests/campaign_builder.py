"""Write small, valid campaign directories for packager tests.

The values are chosen so that expected figures are easy to derive by hand:
baseline server means 100 and 110 s, candidate 40 and 44 s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASELINE_COMMIT = "c7f56f0155953c7d4a77276a2f4fcbd844ab0da2"
CANDIDATE_COMMIT = "098b51f6b96dd160a0959e74e8822422527ff06d"

SERVER_VALUES: dict[str, tuple[str, list[float]]] = {
    "b1": ("baseline", [99.0, 100.0, 101.0]),
    "c1": ("candidate", [39.0, 40.0, 41.0]),
    "c2": ("candidate", [43.0, 44.0, 45.0]),
    "b2": ("baseline", [109.0, 110.0, 111.0]),
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as JSON Lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def receipts() -> list[dict[str, Any]]:
    """Two warmups (seq 0, 1) and three measured requests per server, A/B/B/A in time."""
    rows = []
    minute = 0
    for server, (arm, values) in SERVER_VALUES.items():
        for seq, e2e in enumerate([values[0] + 30.0, values[0] + 20.0, *values]):
            start = f"2026-03-01T10:{minute:02d}:00Z"
            end = f"2026-03-01T10:{minute:02d}:{int(e2e) % 60:02d}Z"
            rows.append(
                {
                    "request_id": f"{server}-{seq}",
                    "attempt_id": "a2",
                    "arm": arm,
                    "server": server,
                    "phase": "warmup" if seq < 2 else "measured",
                    "seq": seq,
                    "start": start,
                    "end": end,
                    "e2e_s": e2e,
                    "status": "ok",
                    "output_sha256": f"{seq:064x}",
                }
            )
            minute += 1
    return rows


def write_campaign(root: Path, **overrides: Any) -> Path:
    """Write a valid campaign into ``root`` and return it; ``overrides`` replace whole files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "plans").mkdir(exist_ok=True)
    campaign = {
        "layout_version": "1",
        "id": "mini",
        "title": "mini campaign",
        "kind": "campaign",
        "hardware": {"accelerator": "test", "count": 2},
        "arms": [
            {"id": "baseline", "role": "baseline", "runtime_commit": BASELINE_COMMIT},
            {"id": "candidate", "role": "candidate", "runtime_commit": CANDIDATE_COMMIT},
        ],
        "plan": "plans/p.json",
    }
    plan = {
        "plan_version": "1",
        "id": "p",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
        "timeouts": {"request_s": 600},
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
        },
    }
    files: dict[str, Any] = {
        "campaign.json": campaign,
        "plans/p.json": plan,
        "attempts.jsonl": [
            {"attempt_id": "a1", "status": "interrupted", "reason": "reservation ended"},
            {"attempt_id": "a2", "status": "accepted"},
        ],
        "receipts.jsonl": receipts(),
        "claims.json": [
            {
                "claim_id": "lower",
                "statistic": "percent_lower",
                "params": {"baseline": "baseline", "candidate": "candidate"},
                "value": "60.00",
                "unit": "%",
                "decimals": 2,
            }
        ],
    }
    files.update(overrides)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            continue
        if rel.endswith(".jsonl"):
            write_jsonl(path, content)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_text(json.dumps(content, indent=1), encoding="utf-8")
    return root


def mark_rerun_of(campaign: dict[str, Any], sealed: Path) -> dict[str, Any]:
    """Make ``campaign`` (a campaign.json document) a rerun of the bundle file ``sealed``.

    The fields ``bundle rerun`` writes (``rerun/writer.py``): kind ``rerun`` and
    ``rerun_of.bundle_sha256``, the SHA-256 of the sealed bundle file's bytes.
    """
    import hashlib

    campaign["kind"] = "rerun"
    campaign["rerun_of"] = {
        "campaign_id": json.loads(_member_text(sealed, "campaign.json")).get("id"),
        "bundle_sha256": hashlib.sha256(sealed.read_bytes()).hexdigest(),
    }
    return campaign


def _member_text(bundle: Path, name: str) -> str:
    from bundler.format.container import read_container

    return next(m.data for m in read_container(bundle) if m.name == name).decode("utf-8")
