"""Campaign loading: CSV and JSON forms, every problem located by file, record and field."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from bundler.campaign.load import load_campaign
from tests.campaign_builder import receipts, write_campaign


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    cols = sorted({k for r in rows for k in r})
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def test_valid_campaign_has_no_problems(campaign: Path) -> None:
    camp, problems = load_campaign(campaign)
    assert problems == []
    assert len(camp.tables["receipts"]) == 20
    assert camp.plan is not None and camp.plan["id"] == "p"


def test_csv_receipts_load_like_jsonl(tmp_path: Path) -> None:
    a = write_campaign(tmp_path / "a")
    b = write_campaign(tmp_path / "b", **{"receipts.jsonl": None, "receipts.csv": _csv(receipts())})
    ca, pa_ = load_campaign(a)
    cb, pb = load_campaign(b)
    assert pa_ == pb == []
    assert cb.tables["receipts"] == ca.tables["receipts"]


def test_csv_comparison_metrics_columns(tmp_path: Path) -> None:
    rows = [
        {
            "comparison_id": "q1",
            "attempt_id": "a2",
            "baseline_request_id": "b1-2",
            "candidate_request_id": "c1-2",
            "metrics.ssim": "0.976",
            "metrics.lpips": "0.026",
        }
    ]
    camp_dir = write_campaign(tmp_path / "c", **{"comparisons.csv": _csv(rows)})
    camp, problems = load_campaign(camp_dir)
    assert problems == []
    assert camp.tables["comparisons"][0]["metrics"] == {"ssim": 0.976, "lpips": 0.026}


def test_every_problem_is_reported_with_location(tmp_path: Path) -> None:
    rows = receipts()
    rows[1]["attempt_id"] = "a9"
    rows[2]["request_id"] = rows[3]["request_id"]
    rows[4]["end"] = "2026-03-01T09:00:00Z"
    camp_dir = write_campaign(
        tmp_path / "c",
        **{
            "receipts.jsonl": rows,
            "attempts.jsonl": [
                {"attempt_id": "a2", "status": "accepted"},
                {"attempt_id": "a1", "status": "rejected"},
            ],
            "claims.json": [
                {
                    "claim_id": "x",
                    "statistic": "arm_mean_s",
                    "params": {"arm": "nope"},
                    "value": "1.5",
                    "unit": "s",
                    "decimals": 2,
                }
            ],
            "gates.json": "{not json",
        },
    )
    (camp_dir / "worker_exits.jsonl").write_text('{"attempt_id": "a2"}\n[1,2]\n')
    _, problems = load_campaign(camp_dir)
    got = {(p.where, p.record, p.field) for p in problems}
    assert ("receipts.jsonl", "line 2", "attempt_id") in got
    assert ("receipts.jsonl", "line 3", "request_id") in got
    assert ("receipts.jsonl", "line 4", "request_id") in got
    assert ("receipts.jsonl", "line 5", "end") in got
    assert ("attempts.jsonl", "line 2", "reason") in got
    assert ("claims.json", "#0", "params.arm") in got
    assert ("claims.json", "#0", "decimals") in got
    assert ("gates.json", None, None) in got
    assert ("worker_exits.jsonl", "line 1", "worker") in got
    assert ("worker_exits.jsonl", "line 2", None) in got
    text = "\n".join(map(str, problems))
    assert "receipts.jsonl, record line 2, field 'attempt_id'" in text


def test_missing_files_and_plan_reference(tmp_path: Path) -> None:
    camp_dir = write_campaign(tmp_path / "c")
    (camp_dir / "attempts.jsonl").unlink()
    (camp_dir / "plans" / "p.json").unlink()
    _, problems = load_campaign(camp_dir)
    got = {(p.where, p.field) for p in problems}
    assert ("attempts.jsonl", None) in got
    assert ("campaign.json", "plan") in got


def test_document_schema_errors_are_named(tmp_path: Path) -> None:
    camp_dir = write_campaign(tmp_path / "c")
    doc = json.loads((camp_dir / "campaign.json").read_text())
    doc["arms"][0]["runtime_commit"] = "not-a-commit"
    doc["kind"] = "benchmark"
    (camp_dir / "campaign.json").write_text(json.dumps(doc))
    _, problems = load_campaign(camp_dir)
    got = {(p.where, p.field) for p in problems}
    assert ("campaign.json", "arms.0.runtime_commit") in got
    assert ("campaign.json", "kind") in got


def test_nan_and_non_object_rows_are_rejected(tmp_path: Path) -> None:
    camp_dir = write_campaign(tmp_path / "c")
    with (camp_dir / "receipts.jsonl").open("a") as fh:
        fh.write('{"e2e_s": NaN}\n')
    _, problems = load_campaign(camp_dir)
    assert any(p.record == "line 21" and "NaN" in p.message for p in problems)


def test_unknown_fields_are_kept(tmp_path: Path) -> None:
    rows = receipts()
    rows[0]["npu_clock"] = 1800
    camp, problems = load_campaign(write_campaign(tmp_path / "c", **{"receipts.jsonl": rows}))
    assert problems == []
    assert camp.tables["receipts"][0]["npu_clock"] == 1800


def test_odd_types_and_ranges_are_problems_not_crashes(tmp_path: Path) -> None:
    rows = receipts()
    rows[0]["start"] = "2025-02-30T10:00:00Z"
    rows[1]["start"] = "2026-03-01T10:00:60Z"
    rows[2]["end"] = "2300-01-01T00:00:00Z"
    rows[3]["seq"] = 2**64
    rows[4]["attempt_id"] = {"nested": 1}
    rows[5]["vendor_counter"] = 2**60
    camp_dir = write_campaign(
        tmp_path / "c",
        **{
            "receipts.jsonl": rows,
            "claims.json": [
                {
                    "claim_id": "x",
                    "statistic": "arm_mean_s",
                    "params": {"arm": ["baseline"]},
                    "value": "1",
                    "unit": "s",
                }
            ],
        },
    )
    doc = json.loads((camp_dir / "campaign.json").read_text())
    doc["hardware"]["serial"] = 2**55
    (camp_dir / "campaign.json").write_text(json.dumps(doc))
    (camp_dir / "plans" / "a\\b.json").write_text("{}")
    _, problems = load_campaign(camp_dir)
    got = {(p.where, p.record, p.field) for p in problems}
    assert ("receipts.jsonl", "line 1", "start") in got
    assert ("receipts.jsonl", "line 2", "start") in got
    assert ("receipts.jsonl", "line 3", "end") in got
    assert ("receipts.jsonl", "line 4", "seq") in got
    assert ("receipts.jsonl", "line 5", "attempt_id") in got
    assert ("receipts.jsonl", "line 6", "vendor_counter") in got
    assert ("claims.json", "#0", "params.arm") in got
    assert ("campaign.json", None, "hardware.serial") in got
    assert ("plans/a\\b.json", None, None) in got
