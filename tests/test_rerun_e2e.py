"""End to end: seal a campaign, rerun its frozen plan with ``--launch`` on the reference server,
seal the rerun, compare.

The sealed campaign (tests/reference_server/campaign.py) says baseline server
means 0.6175 and 0.6175 s, candidate 0.2175 and 0.2175 s, so arm means 0.6175
and 0.2175 s and a speedup of 0.6175 / 0.2175 = 2.8391. The reference server
really takes 0.60 and 0.20 s per job (the plan's launch arguments), plus
polling every 0.01 s and HTTP on loopback.

Tolerance: here the effect reproduces when the rerun's speedup is within 30 %
of the sealed one (``TOLERANCE``). Each request carries the overhead of POST,
polls, download and DELETE on loopback, which grows with the machine's load
and weighs most on the 0.20 s candidate job. Measured on this 2-core machine,
rerun speedup vs the sealed 2.839x: about -2 % idle; -4.2 % and -5.6 % with two
CPU-bound processes running beside the test; -13.7 % and -25.0 % with four
(candidate requests then took 0.26 and 0.30 s). 30 % keeps the test stable on
a shared machine and still separates the sealed effect from none (1x) or a
reversed one. On hardware the default 10 % (``compare.DEFAULT_TOLERANCE``)
applies: there this overhead is seconds against jobs of ~110 and ~400 s; the
tolerance rule itself is checked exactly in tests/test_rerun_units.py. Arm means
are also checked against bounds derived by hand: never below the server's
latency (a job completes only after it), and at most 0.25 s above it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from bundler.campaign.load import load_campaign
from bundler.campaign.plan_check import check_plan
from bundler.format.plan_model import Plan
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import VerifiedBundle, open_verified
from replay.api import compare_bundles, replay, replay_bundle
from replay.sections.against import format_comparison
from reprobundle.cli.replay_cmd import replay_command
from reprobundle.cli.rerun_cmd import rerun_command
from rerun.runner import RerunControl, RerunEvent, RerunOptions, run_rerun
from tests.conftest import Keys
from tests.reference_server import REPO_ROOT
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    LATENCY_S,
    campaign_plan,
    tiny_png,
    with_runtimes,
    write_campaign,
)
from tests.reference_server.media import make_mp4
from tests.reference_server.server import Config, shared_cache_file

pytestmark = pytest.mark.slow

TOLERANCE = 0.30
OVERHEAD_BOUND_S = 0.25
NPU_SMI = REPO_ROOT / "tests" / "fixtures" / "npu-smi" / "info-910b1-serving.txt"
RECEIPT_COLUMNS = [
    "request_id",
    "attempt_id",
    "arm",
    "server",
    "phase",
    "seq",
    "status",
    "timeout_level",
    "e2e_s",
    "output_sha256",
]
EXIT_COLUMNS = ["attempt_id", "arm", "server", "worker", "exit_code", "signal", "exit_s", "killed"]


def rows(opened: VerifiedBundle, table: str, columns: list[str]) -> list[dict[str, Any]]:
    t = opened.table(table)
    out: list[dict[str, Any]] = t.select(columns).to_pylist()
    return out


# Frozen with the sealed campaign. The reference server makes the same clip for the same
# seed, prompt and input, so every rerun pair is two identical clips: SSIM and spectral
# cosine exactly 1.0 (PASS against 0.97 and 0.8), and 8 frames (fps 8 x 1 s, make_mp4's
# defaults), so a gate frozen at the seed's 124 frames FAILS.
GATES: list[dict[str, Any]] = [
    {
        "gate_id": "ssim-min",
        "metric": "ssim",
        "op": ">=",
        "threshold": 0.97,
        "definition": "ssim/ffmpeg-y-frame-mean",
        "warn_within": 0.01,
    },
    {
        "gate_id": "audio-cosine-min",
        "metric": "audio_spectral_cosine",
        "op": ">=",
        "threshold": 0.8,
        "definition": "audio/stft-cosine-512-1024-2048",
    },
    {
        "gate_id": "frame-count",
        "metric": "frame_count",
        "op": "==",
        "threshold": 124,
        "definition": "video/decoded-frame-count",
        "note": "an unknown field, kept",
    },
]
SCORER = {
    "name": "lpips",
    "version": "0.1.4",
    "net": "alex",
    "weights": [{"role": "lpips-linear", "file": "alex.pth", "sha256": "c" * 64}],
}
# Sealed pairs: (baseline server, candidate server, seq).
SEALED_PAIRS = [
    ("baseline-1", "candidate-1", 1),
    ("baseline-1", "candidate-1", 2),
    ("baseline-2", "candidate-2", 1),
    ("baseline-2", "candidate-2", 0),
]


def add_quality(camp: Path, clip: str) -> None:
    """Gates, scorer identity and four comparisons, as the sealed campaign recorded them."""
    (camp / "gates.json").write_text(json.dumps(GATES), encoding="utf-8")
    (camp / "scorer.json").write_text(json.dumps(SCORER), encoding="utf-8")
    rows = [
        {
            "comparison_id": f"orig-cmp-{i}",
            "attempt_id": "orig-1",
            "baseline_request_id": f"orig-{b}-{seq:02d}",
            "candidate_request_id": f"orig-{c}-{seq:02d}",
            "baseline_sha256": clip,
            "candidate_sha256": clip,
            "metrics": {"ssim": 0.99, "audio_spectral_cosine": 0.97},
        }
        for i, (b, c, seq) in enumerate(SEALED_PAIRS, start=1)
    ]
    (camp / "comparisons.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )


def expected_clip_sha256() -> str:
    """The reference server's clip for the plan's payload, made here without any HTTP."""
    clip = make_mp4(42, "a violinist at dusk", reference=tiny_png())
    return hashlib.sha256(clip).hexdigest()


def test_rerun_reproduces_the_effect_and_records_a_hang_and_a_stubborn_worker(
    tmp_path: Path, keys: Keys
) -> None:
    clip = expected_clip_sha256()
    camp = write_campaign(tmp_path / "camp", with_runtimes(campaign_plan()), output_sha256=clip)
    add_quality(camp, clip)
    sealed_path = tmp_path / "orig.bundle"
    seal_campaign(camp, sealed_path, keys=[keys.private])
    out = tmp_path / "rerun"
    cache = tmp_path / "media-cache"
    cache.mkdir()
    # Pre-seed the servers' shared clip cache: no server spends its warmup encoding (on a
    # loaded machine that alone could pass the 2.5 s request timeout).
    clip_file = shared_cache_file(cache, "42", "a violinist at dusk", tiny_png(), Config())
    clip_file.write_bytes(make_mp4(42, "a violinist at dusk", reference=tiny_png()))
    args = [
        str(sealed_path),
        "-o",
        str(out),
        "--launch",
        # The sealed plan's own launch template (the reference server): an explicit opt-in.
        "--run-bundle-launch-command",
        "--launch-cwd",
        str(REPO_ROOT),
        "--key",
        str(keys.public_path),
        "--telemetry-command",
        f"cat {NPU_SMI}",
        "--accelerator",
        "reference server (loopback)",
        # Servers share one rendered clip instead of each encoding it on its first request.
        "--env",
        f"REFSERVER_MEDIA_CACHE={cache}",
    ]
    # Attempt 1 (library API): the second request on candidate-1 hangs, worker 1 of
    # baseline-1 ignores TERM, and the operator stops the run once candidate-1 is torn down.
    faults = {"candidate-1": {"hang_requests": [2]}, "baseline-1": {"ignore_term_workers": [1]}}
    control = RerunControl()

    def stop_after_candidate_1(event: RerunEvent) -> None:
        if event.kind == "teardown" and event.message.startswith("candidate-1:"):
            control.interrupt(None, "stopped by the operator after candidate-1")

    opts = RerunOptions(
        launch=True,
        run_bundle_launch_command=True,
        launch_cwd=REPO_ROOT,
        trust=Trust.keys([keys.public]),
        telemetry_command=["cat", str(NPU_SMI)],
        env={"REFSERVER_FAULTS": json.dumps(faults), "REFSERVER_MEDIA_CACHE": str(cache)},
    )
    first = run_rerun(sealed_path, out, opts, progress=stop_after_candidate_1, control=control)
    assert first.status == "interrupted"
    assert first.reason == (
        "stopped by the operator after candidate-1; never started: candidate-2, baseline-2"
    )
    # Attempt 2 (CLI) into the same directory: clean, accepted.
    second = CliRunner().invoke(rerun_command, args)
    assert second.exit_code == 0, second.output
    assert "ACCEPTED" in second.output
    # Each arm's runtime commit, verified from its launch environment (the vllm-omni
    # distribution's direct_url.json), not from GET /version (vLLM's version only).
    record = json.loads((out / "rerun" / "rerun-2.json").read_text())
    runtime = {s["server"]: s["version"] for s in record["slots"]}
    assert {k: v["verdict"] for k, v in runtime.items()} == dict.fromkeys(runtime, "verified")
    assert runtime["baseline-1"]["runtime_commit"] == BASELINE_COMMIT
    assert runtime["baseline-1"]["method"] == "direct_url.json vcs_info.commit_id"
    assert runtime["baseline-1"]["vllm_version"] == "0.30.0"
    campaign, problems = load_campaign(out)
    assert problems == []
    assert campaign.doc["kind"] == "rerun"
    assert (
        campaign.doc["rerun_of"]["bundle_sha256"]
        == hashlib.sha256(sealed_path.read_bytes()).hexdigest()
    )
    rerun_path = tmp_path / "rerun.bundle"
    seal_campaign(out, rerun_path, keys=[keys.private])
    rb = open_verified(rerun_path, trust=Trust.keys([keys.public]))
    sb = open_verified(sealed_path, trust=Trust.keys([keys.public]))
    assert rb.trusted and sb.trusted

    attempts = {
        r["attempt_id"]: r for r in rows(rb, "attempts", ["attempt_id", "status", "reason"])
    }
    assert attempts["rerun-1"]["status"] == "interrupted"
    assert attempts["rerun-2"]["status"] == "accepted"

    receipts = rows(rb, "receipts", RECEIPT_COLUMNS)
    # (2 + 4 servers) x (1 warmup + 2 measured): both attempts kept, each under its own id.
    assert len(receipts) == (2 + 4) * 3
    # The hung request: the second on candidate-1 (seq 1), ended by its 2.5 s request timeout.
    hung = [r for r in receipts if r["status"] != "ok"]
    assert [
        (r["attempt_id"], r["server"], r["seq"], r["phase"], r["status"], r["timeout_level"])
        for r in hung
    ] == [("rerun-1", "candidate-1", 1, "measured", "timeout", "request")]
    # Ended by the 2.5 s request timeout, well before the 20 s wave timeout; the slack
    # above 2.5 s is polling and clean-up, which a loaded 2-core machine stretches.
    assert 2.49 <= hung[0]["e2e_s"] < 8.0
    assert hung[0]["output_sha256"] is None
    # Every delivered clip is the one the plan's payload asks for (the input reference arrived).
    assert {r["output_sha256"] for r in receipts if r["status"] == "ok"} == {clip}

    exits = rows(rb, "worker_exits", EXIT_COLUMNS)
    # Per server: the server process + 2 workers; 2 servers ran in attempt 1, 4 in attempt 2.
    assert len([e for e in exits if e["attempt_id"] == "rerun-1"]) == 6
    assert len([e for e in exits if e["attempt_id"] == "rerun-2"]) == 12
    killed = [e for e in exits if e["killed"]]
    assert [(e["attempt_id"], e["server"], e["signal"], e["exit_code"]) for e in killed] == [
        ("rerun-1", "baseline-1", "SIGKILL", None)
    ]
    # KILL only after the plan's 0.6 s TERM wait; gone well inside its 2 s KILL wait.
    assert 0.6 <= killed[0]["exit_s"] < 0.6 + 2.0
    others = [e for e in exits if not e["killed"]]
    assert all(e["exit_code"] == 0 and e["signal"] is None for e in others)
    assert all(e["exit_s"] < 0.6 for e in others)

    # The effect, by hand with numpy over the accepted attempt's measured requests.
    def arm_mean(opened: VerifiedBundle, attempt: str, arm: str) -> float:
        servers: dict[str, list[float]] = {}
        for r in rows(opened, "receipts", RECEIPT_COLUMNS):
            if (r["attempt_id"], r["arm"], r["phase"], r["status"]) == (
                attempt,
                arm,
                "measured",
                "ok",
            ):
                servers.setdefault(r["server"], []).append(r["e2e_s"])
        assert len(servers) == 2 and all(len(v) == 2 for v in servers.values())
        return float(np.mean([np.mean(v) for v in servers.values()]))

    sealed_base, sealed_cand = (
        arm_mean(sb, "orig-1", "baseline"),
        arm_mean(sb, "orig-1", "candidate"),
    )
    assert (sealed_base, sealed_cand) == pytest.approx((0.6175, 0.2175), abs=1e-12)
    base, cand = arm_mean(rb, "rerun-2", "baseline"), arm_mean(rb, "rerun-2", "candidate")
    assert LATENCY_S["baseline"] <= base <= LATENCY_S["baseline"] + OVERHEAD_BOUND_S
    assert LATENCY_S["candidate"] <= cand <= LATENCY_S["candidate"] + OVERHEAD_BOUND_S
    sealed_speedup = 0.6175 / 0.2175  # 2.8391
    assert abs((base / cand) / sealed_speedup - 1) <= TOLERANCE

    cmp = compare_bundles(rb, sb, tolerance=TOLERANCE)
    assert cmp.reproduced is True and cmp.plan_matches
    (effect,) = cmp.effects
    assert (effect.rerun_baseline_s, effect.rerun_candidate_s) == pytest.approx((base, cand))
    assert effect.sealed_speedup == pytest.approx(sealed_speedup)
    assert effect.rerun_percent_lower == pytest.approx((1 - cand / base) * 100)
    assert effect.speedup_ratio == pytest.approx((base / cand) / sealed_speedup)
    assert cmp.rerun.attempt == "rerun-2"
    assert cmp.rerun.other_attempts == {"rerun-1": "interrupted"}
    lifecycle = cmp.rerun.lifecycle
    assert lifecycle is not None and (lifecycle.total, lifecycle.clean) == (12, 12)
    assert cmp.rerun.statuses == {"ok": 12}
    # Same payload, seed and input: all 12 rerun clips carry the sealed hash.
    assert (cmp.outputs_compared, cmp.outputs_matching) == (12, 12)
    # npu-smi fixture, sampled on every server: HBM per device 59356, 59351, 59351, 59346,
    # 59351, 59345, 59351, 9876 -> mean of the per-device peaks 425,327 / 8 = 53,165.875 MB.
    assert cmp.rerun.hbm_peak_mean_mb == {"baseline": 53165.875, "candidate": 53165.875}
    text = "\n".join(format_comparison(cmp))
    assert "reproduced: rerun speedup" in text and "rerun-1 interrupted" in text
    check_rerun_quality(out, rerun_path, rb, keys)


def check_rerun_quality(out: Path, rerun_path: Path, rb: VerifiedBundle, keys: Keys) -> None:
    """The rerun carries the frozen gates and the sealed pairing; media replay scores it."""
    assert json.loads((out / "scorer.json").read_text()) == SCORER
    gates = [json.loads(x) for x in (out / "gates.jsonl").read_text().splitlines()]
    assert gates == GATES
    rid = {
        (r["server"], r["seq"]): r["request_id"]
        for r in rows(rb, "receipts", RECEIPT_COLUMNS)
        if r["attempt_id"] == "rerun-2"
    }
    cmps = rows(
        rb,
        "comparisons",
        ["comparison_id", "attempt_id", "baseline_request_id", "candidate_request_id"],
    )
    assert [
        (c["attempt_id"], c["baseline_request_id"], c["candidate_request_id"]) for c in cmps
    ] == [("rerun-2", rid[(b, seq)], rid[(c, seq)]) for b, c, seq in SEALED_PAIRS]
    extra = [json.loads(str(e)) for e in rb.table("comparisons").column("extra").to_pylist()]
    assert [e["sealed_comparison_id"] for e in extra] == [f"orig-cmp-{i}" for i in range(1, 5)]
    # The statistical level has no recorded value: nothing passes, nothing fails there.
    stats = replay_bundle(rerun_path, trust=Trust.keys([keys.public]))
    q = stats.quality
    assert (q.comparisons_total, q.comparisons_passed, q.comparisons_failed) == (4, 0, 0)
    assert q.ungated_comparisons == 4 and q.checks == ()
    # Unrecorded is neither a failure nor a gap (a rerun states no claims: the outcome is the
    # result model's "not evidenced", tests/test_replay_*.py).
    assert (stats.failures(), stats.gaps()) == ([], [])
    # Against the sealed bundle, through the one replay entry point: the effect reproduces.
    sealed = open_verified(rerun_path.parent / "orig.bundle", trust=Trust.keys([keys.public]))
    both = replay(rb, against=sealed, tolerance=TOLERANCE)
    assert both.against is not None and (both.failures(), both.gaps()) == ([], [])
    # Media replay over the rerun's clips: every comparison re-scored from the media.
    res = CliRunner().invoke(
        replay_command,
        [
            str(rerun_path),
            "--key",
            str(keys.public_path),
            "--media",
            str(out / "media"),
            "--json",
            "--no-progress",
        ],
    )
    assert res.exit_code == 4, res.output  # the frame-count gate fails
    media = json.loads(res.output)["media"]
    assert media["verdict"] == "FAIL" and media["problems"] == []
    assert len(media["comparisons"]) == 4
    for c in media["comparisons"]:
        # Verdict words compared case-blind: the gate evaluator's vocabulary is not ours.
        got = {
            g["gate_id"]: (
                g["recorded_verdict"],
                g["recomputed_value"],
                str(g["recomputed_verdict"]).upper(),
            )
            for g in c["gates"]
        }
        assert got == {
            "ssim-min": ("not-recorded", 1.0, "PASS"),
            "audio-cosine-min": ("not-recorded", 1.0, "PASS"),
            "frame-count": ("not-recorded", 8.0, "FAIL"),
        }
    counts = {g["gate_id"]: {k.upper(): v for k, v in g["counts"].items()} for g in media["gates"]}
    assert counts == {
        "ssim-min": {"PASS": 4},
        "audio-cosine-min": {"PASS": 4},
        "frame-count": {"FAIL": 4},
    }


def _stuck_plan() -> dict[str, Any]:
    plan = campaign_plan(
        arm_order=["baseline", "candidate"],
        servers=["baseline-1", "candidate-1"],
        warmups_per_server=0,
        measured_per_server=1,
        timeouts={"request_s": 30, "wave_s": 30},
        startup_budget_s=10,
        reservation={"hard_limit_s": 10, "soft_term_s": 4, "kill_grace_s": 3},
        telemetry={"source": "none"},
    )
    return with_runtimes(plan)


def test_reservation_watchdog_ends_a_stuck_arm_as_the_plan_check_predicts(tmp_path: Path) -> None:
    plan = _stuck_plan()
    # By hand: position 1 is ready by 10 s at worst, its request times out at 10 + 30 = 40 s,
    # the wave at 40 s, the soft TERM at 4 s: the reservation fires first; candidate-1 starves.
    predicted = check_plan(Plan.from_dict(plan, "stuck.json")).scenarios[0]
    assert (predicted.fires, predicted.fires_at_s, predicted.starved) == (
        "reservation",
        4.0,
        ("candidate-1",),
    )
    # A deliberately broken plan: sealable only as a pilot (plan-check errors warn there).
    camp = write_campaign(tmp_path / "camp", plan, kind="pilot")
    seal_campaign(camp, tmp_path / "orig.bundle")
    opts = RerunOptions(
        launch=True,
        run_bundle_launch_command=True,
        launch_cwd=REPO_ROOT,
        trust=Trust.allow_unsigned(),
        env={"REFSERVER_FAULTS": json.dumps({"baseline-1": {"hang_requests": [1]}})},
    )
    result = run_rerun(tmp_path / "orig.bundle", tmp_path / "rerun", opts)
    assert result.status == "interrupted"
    assert result.reason is not None and "never started: candidate-1" in result.reason
    lines = (tmp_path / "rerun" / "receipts.jsonl").read_text().splitlines()
    (receipt,) = [json.loads(x) for x in lines]
    assert (receipt["server"], receipt["status"], receipt["timeout_level"]) == (
        "baseline-1",
        "timeout",
        "reservation",
    )
    assert receipt["e2e_s"] < 4.0  # the request started after the server's start-up
    record = json.loads((tmp_path / "rerun" / "rerun" / "rerun-1.json").read_text())
    assert record["watchdog"]["fired"] is True and record["not_started"] == ["candidate-1"]
    exits = [
        json.loads(x) for x in (tmp_path / "rerun" / "worker_exits.jsonl").read_text().splitlines()
    ]
    assert len(exits) == 3 and all(e["exit_code"] == 0 for e in exits)
    # An interrupted attempt alone is not sealable: nothing is accepted, nothing is mixed.
    _, problems = load_campaign(tmp_path / "rerun")
    assert [p.message for p in problems] == ["exactly one attempt must be accepted, found 0"]


def test_sigterm_to_the_rerun_is_a_reservation_stop(tmp_path: Path) -> None:
    plan = _stuck_plan()
    plan["reservation"] = {"hard_limit_s": 600, "soft_term_s": 500, "kill_grace_s": 5}
    camp = write_campaign(tmp_path / "camp", plan)
    seal_campaign(camp, tmp_path / "orig.bundle")
    faults = json.dumps({"baseline-1": {"hang_requests": [1]}})
    log = tmp_path / "rerun" / "logs" / "rerun-1" / "rerun.log"
    done = threading.Event()

    def term_once_ready() -> None:
        # Only once the rerun logged its server ready (its handlers are installed by then):
        # a SIGTERM any earlier would end the test process itself.
        while not done.wait(0.05):
            if log.is_file() and "[ready]" in log.read_text(encoding="utf-8"):
                time.sleep(0.5)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    timer = threading.Thread(target=term_once_ready, daemon=True)
    timer.start()
    try:
        res = CliRunner().invoke(
            rerun_command,
            [
                str(tmp_path / "orig.bundle"),
                "-o",
                str(tmp_path / "rerun"),
                "--launch",
                "--run-bundle-launch-command",
                "--launch-cwd",
                str(REPO_ROOT),
                "--allow-unsigned",
                "--env",
                f"REFSERVER_FAULTS={faults}",
            ],
        )
    finally:
        done.set()
        timer.join(5)
    assert res.exit_code == 3, res.output  # interrupted
    attempt = json.loads((tmp_path / "rerun" / "attempts.jsonl").read_text())
    assert attempt["status"] == "interrupted"
    assert attempt["reason"].startswith("SIGTERM received")
    receipt = json.loads((tmp_path / "rerun" / "receipts.jsonl").read_text())
    assert (receipt["status"], receipt["timeout_level"]) == ("timeout", "reservation")
