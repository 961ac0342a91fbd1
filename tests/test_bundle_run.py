"""``bundle run``: the author's first run of a frozen plan, with the runner rerun uses (issue 21).

Against the reference server on 127.0.0.1, launched from the plan's own template:
the campaign directory it writes seals (kind campaign) and replay judges it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

from bundler.seal import seal_campaign
from reprobundle.cli.replay_cmd import replay_command
from reprobundle.cli.run_cmd import run_command
from tests.reference_server import REPO_ROOT
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    CANDIDATE_COMMIT,
    LATENCY_S,
    campaign_plan,
    tiny_png,
    with_runtimes,
)


def _setup(tmp_path: Path, plan: dict[str, Any]) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    inputs = tmp_path / "inputs-dir"
    (inputs / "inputs").mkdir(parents=True)
    (inputs / "inputs" / "reference.png").write_bytes(tiny_png())
    return plan_file, inputs


def _args(plan_file: Path, out: Path, inputs: Path, *extra: str) -> list[str]:
    return [
        str(plan_file),
        "-o",
        str(out),
        "--arm",
        f"baseline={BASELINE_COMMIT}",
        "--arm",
        f"candidate={CANDIDATE_COMMIT}",
        "--campaign-id",
        "reference-first-run",
        "--inputs",
        str(inputs),
        *extra,
    ]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_bundle_run_writes_a_campaign_that_seals_and_replays(tmp_path: Path) -> None:
    plan_file, inputs = _setup(tmp_path, with_runtimes(campaign_plan()))
    out = tmp_path / "campaign"
    res = CliRunner().invoke(
        run_command,
        _args(
            plan_file,
            out,
            inputs,
            "--launch",
            "--launch-cwd",
            str(REPO_ROOT),
            "--telemetry",
            "none",
        ),
    )
    assert res.exit_code == 0, res.output
    assert "run run-1" in res.output and "ACCEPTED" in res.output
    campaign = json.loads((out / "campaign.json").read_text())
    assert (campaign["kind"], campaign["id"], campaign["plan"]) == (
        "campaign",
        "reference-first-run",
        "plans/reference-ab.json",
    )
    assert "rerun_of" not in campaign
    assert [(a["id"], a["role"], a["runtime_commit"]) for a in campaign["arms"]] == [
        ("baseline", "baseline", BASELINE_COMMIT),
        ("candidate", "candidate", CANDIDATE_COMMIT),
    ]
    # The plan is carried byte for byte.
    assert (out / "plans" / "reference-ab.json").read_bytes() == plan_file.read_bytes()
    receipts = _jsonl(out / "receipts.jsonl")
    # 4 servers x (1 warmup + 2 measured), all at the plan's boundary, with the server's figures.
    assert len(receipts) == 12 and {r["status"] for r in receipts} == {"ok"}
    assert {r["timing_boundary"] for r in receipts} == {"post_to_delete"}
    assert {r["attempt_id"] for r in receipts} == {"run-1"}
    for arm, latency in LATENCY_S.items():
        mine = [r for r in receipts if r["arm"] == arm]
        assert {r["server_inference_time_s"] for r in mine} == {latency}
        assert float(np.min([r["e2e_s"] for r in mine])) >= latency
    record = json.loads((out / "rerun" / "run-1.json").read_text())
    assert record["first_run_of"]["plan"] == "plans/reference-ab.json"
    assert {s["version"]["verdict"] for s in record["slots"]} == {"verified"}
    # bundle seal accepts it as a campaign; bundle replay judges it.
    bundle = tmp_path / "first.bundle"
    seal_campaign(out, bundle)
    replay = CliRunner().invoke(replay_command, [str(bundle), "--allow-unsigned", "--json"])
    doc = json.loads(replay.output)
    # No claims yet (the author writes them): nothing confirmed, nothing contradicted (exit 5),
    # and the receipts conform to the frozen plan, in its A/B/B/A order.
    assert replay.exit_code == 5 and doc["outcome"] == "NOT EVIDENCED"
    assert doc["failures"] == [] and doc["conformance"]["ok"] is True
    assert doc["conformance"]["observed_order"] == [
        "baseline",
        "candidate",
        "candidate",
        "baseline",
    ]
    assert doc["attempts"]["accepted"] == "run-1"
    # A second run into a directory holding an accepted attempt is refused.
    again = CliRunner().invoke(run_command, _args(plan_file, out, inputs, "--launch"))
    assert again.exit_code == 2 and "already holds an accepted attempt" in again.output


def test_bundle_run_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    plan_file, inputs = _setup(tmp_path, campaign_plan())
    out = tmp_path / "campaign"
    runner = CliRunner()
    # Every arm of the plan needs its runtime commit.
    res = runner.invoke(
        run_command,
        [
            str(plan_file),
            "-o",
            str(out),
            "--arm",
            f"baseline={BASELINE_COMMIT}",
            "--campaign-id",
            "c",
            "--launch",
            "--dry-run",
        ],
    )
    assert res.exit_code == 2 and "no --arm ARM=COMMIT for candidate" in res.output
    # Endpoint mode cannot verify a runtime commit: refused without the override.
    res = runner.invoke(
        run_command,
        _args(
            plan_file,
            out,
            inputs,
            "--endpoint",
            "baseline=http://127.0.0.1:9",
            "--endpoint",
            "candidate=http://127.0.0.1:9",
        ),
    )
    assert res.exit_code == 2 and "runtime commit unverified: endpoint mode" in res.output
    assert not out.exists()
    # A plan whose stuck request the reservation would end: not a campaign, a pilot at most.
    stuck = campaign_plan(reservation={"hard_limit_s": 10, "soft_term_s": 4, "kill_grace_s": 3})
    stuck_file, _ = _setup(tmp_path / "stuck", stuck)
    res = runner.invoke(run_command, _args(stuck_file, out, inputs, "--launch", "--dry-run"))
    assert res.exit_code == 2 and "block sealing a campaign" in res.output
    res = runner.invoke(
        run_command, _args(stuck_file, out, inputs, "--launch", "--dry-run", "--kind", "pilot")
    )
    assert res.exit_code == 0, res.output
    # A plan that breaks the plan schema is refused, located.
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**campaign_plan(), "warmups_per_server": -1}), encoding="utf-8")
    res = runner.invoke(run_command, _args(broken, out, inputs, "--launch", "--dry-run"))
    assert res.exit_code == 2 and "breaks the plan schema" in res.output
    assert "warmups_per_server" in res.output
