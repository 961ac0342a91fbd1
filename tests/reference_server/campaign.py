"""A small sealed-campaign stand-in whose plan the reference server can execute.

Two arms, A/B/B/A, one warmup and two measured requests per server, with the
reference server's latency set to 0.60 s (baseline) and 0.20 s (candidate) by
the plan's launch arguments. The "sealed" receipts below are written by hand,
as if recorded on hardware at the plan's boundary (POST to DELETE, polled
every 0.01 s): each measured request is the server latency plus 0.015 to
0.020 s, the polling and HTTP overhead measured on this 2-core machine (a
mean of 0.0135 s, SD 0.004 s, over 11 requests at 0.10 s latency; 0.0206 s,
SD 0.0036 s, at 0.20 s).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from bundler._internal.timefmt import format_ns, parse_rfc3339_ns

__all__ = [
    "BASELINE_COMMIT",
    "CANDIDATE_COMMIT",
    "LATENCY_S",
    "RUNTIMES",
    "SEALED_E2E",
    "campaign_plan",
    "tiny_png",
    "with_runtimes",
    "write_campaign",
]

BASELINE_COMMIT = "c7f56f0155953c7d4a77276a2f4fcbd844ab0da2"
CANDIDATE_COMMIT = "098b51f6b96dd160a0959e74e8822422527ff06d"

RUNTIMES = {arm: f"tests/reference_server/runtimes/{arm}" for arm in ("baseline", "candidate")}
"""Per arm, a folder (relative to the repository root, the launch's working directory)
holding a vllm-omni distribution's metadata at the arm's commit."""

LATENCY_S = {"baseline": 0.60, "candidate": 0.20}
"""The reference server's latency per arm: the "true" effect is 0.60 / 0.20 = 3x."""

# server -> (arm, [warmup, measured, measured]) in seconds, as "recorded".
SEALED_E2E: dict[str, tuple[str, list[float]]] = {
    "baseline-1": ("baseline", [1.25, 0.615, 0.62]),
    "candidate-1": ("candidate", [0.85, 0.215, 0.22]),
    "candidate-2": ("candidate", [0.84, 0.22, 0.215]),
    "baseline-2": ("baseline", [1.26, 0.62, 0.615]),
}


def tiny_png() -> bytes:
    """A valid 2x2 RGB PNG (the request's input reference), built with zlib."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes([200, 30, 30] * 2) for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def campaign_plan(**overrides: Any) -> dict[str, Any]:
    """The frozen plan; ``overrides`` replace top-level keys."""
    plan: dict[str, Any] = {
        "plan_version": "1",
        "id": "reference-ab",
        "description": "A/B/B/A against the reference server: 1 warmup + 2 measured per server.",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "servers": ["baseline-1", "candidate-1", "candidate-2", "baseline-2"],
        "warmups_per_server": 1,
        "measured_per_server": 2,
        "request": {
            "api": "videos-async",
            "timing_boundary": "post_to_delete",
            "poll_interval_s": 0.01,
            "payload": {
                "model": "reference-omni",
                "prompt": "a violinist at dusk",
                "input_reference": "inputs/reference.png",
                "seconds": 1,
                "size": "64x64",
                "seed": 42,
                "generate_sound": True,
                # Explicit: an image-only reference on a combined H3 server would run FL2VA.
                "extra_params": {"task": "ref2va"},
            },
        },
        "timeouts": {"request_s": 2.5, "wave_s": 20},
        "startup_budget_s": 20,
        "reservation": {"hard_limit_s": 180, "soft_term_s": 150, "kill_grace_s": 10},
        "teardown": {
            "baseline": {"term_wait_s": 0.6, "kill_wait_s": 2},
            "candidate": {"term_wait_s": 0.6, "kill_wait_s": 2},
        },
        "telemetry": {"interval_s": 0.5, "source": "npu-smi"},
        "launch": {
            "command": [
                "{python}",
                "-m",
                "tests.reference_server",
                "--port",
                "{port}",
                "--server",
                "{server}",
                "--served-model-name",
                "{model}",
                "--workers",
                "2",
                "--max-lifetime",
                "90",
                "{args}",
            ],
            "baseline": {"args": ["--latency", str(LATENCY_S["baseline"])]},
            "candidate": {"args": ["--latency", str(LATENCY_S["candidate"])]},
        },
    }
    plan.update(overrides)
    return plan


def with_runtimes(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` with each arm's launch environment holding its vllm-omni at the arm's commit.

    Metadata only (``runtimes/README.md``), put on ``PYTHONPATH`` by
    ``launch.<arm>.env``, which launch mode verifies; a plan that sets
    ``PYTHONPATH`` runs only with ``--run-bundle-launch-command``.
    """
    for arm, folder in RUNTIMES.items():
        plan["launch"][arm]["env"] = {"PYTHONPATH": folder}
    return plan


def _receipts(output_sha256: str | None) -> list[dict[str, Any]]:
    rows = []
    t_ns = parse_rfc3339_ns("2026-03-01T10:00:00Z")
    for server, (arm, values) in SEALED_E2E.items():
        for seq, e2e in enumerate(values):
            rows.append(
                {
                    "request_id": f"orig-{server}-{seq:02d}",
                    "attempt_id": "orig-1",
                    "arm": arm,
                    "server": server,
                    "phase": "warmup" if seq == 0 else "measured",
                    "seq": seq,
                    "start": format_ns(t_ns),
                    "end": format_ns(t_ns + round(e2e * 1e9)),
                    "e2e_s": e2e,
                    "status": "ok",
                    "output_sha256": output_sha256,
                }
            )
            t_ns += 2_000_000_000
    return rows


def write_campaign(
    root: Path,
    plan: dict[str, Any] | None = None,
    *,
    output_sha256: str | None = None,
    kind: str = "campaign",
) -> Path:
    """Write the original campaign directory (ready for ``seal_campaign``).

    ``output_sha256`` is recorded as every receipt's output hash (the plan fixes
    prompt, seed and input, so every request should return the same clip).
    ``kind="pilot"`` lets a plan that fails the plan check be sealed (with warnings).
    """
    root.mkdir(parents=True)
    (root / "plans").mkdir()
    (root / "inputs").mkdir()
    (root / "inputs" / "reference.png").write_bytes(tiny_png())
    campaign = {
        "layout_version": "1",
        "id": "reference-ab",
        "title": "A/B/B/A on the reference server",
        "kind": kind,
        "hardware": {"accelerator": "reference server (loopback)", "count": 8},
        "runtime": {"name": "reference-omni"},
        "arms": [
            {"id": "baseline", "role": "baseline", "runtime_commit": BASELINE_COMMIT},
            {"id": "candidate", "role": "candidate", "runtime_commit": CANDIDATE_COMMIT},
        ],
        "plan": "plans/reference-ab.json",
    }
    (root / "campaign.json").write_text(json.dumps(campaign, indent=1), encoding="utf-8")
    doc = plan or campaign_plan()
    (root / "plans" / "reference-ab.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    (root / "attempts.jsonl").write_text(
        json.dumps({"attempt_id": "orig-1", "status": "accepted"}) + "\n", encoding="utf-8"
    )
    (root / "receipts.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _receipts(output_sha256)), encoding="utf-8"
    )
    # Server means 0.6175 (both baseline servers) and 0.2175 (both candidate servers), so arm
    # means 0.6175 and 0.2175: (1 - 0.2175 / 0.6175) x 100 = 64.777... -> 64.78 % lower.
    claims = [
        {
            "claim_id": "lower",
            "statistic": "percent_lower",
            "params": {"baseline": "baseline", "candidate": "candidate"},
            "value": "64.78",
            "unit": "%",
            "decimals": 2,
        }
    ]
    (root / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    return root
