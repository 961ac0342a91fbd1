"""The rerun's parts against a real reference server on loopback: client, deadlines, launcher.

No mocks: every HTTP exchange goes through a real ThreadingHTTPServer in a child
process, every teardown signals real processes, every MP4 is decoded by PyAV.
"""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import av
import pytest
from click.testing import CliRunner

from bundler.errors import UsageError
from bundler.seal import seal_campaign
from bundler.verify import open_bundle
from replay.rerun.client import (
    Deadline,
    FilePart,
    VideoClient,
    commit_matches,
    earliest_deadline,
    encode_multipart,
    reported_commit,
)
from replay.rerun.compare import compare_bundles
from replay.rerun.launcher import (
    LaunchError,
    LaunchSpec,
    ServerProcess,
    child_subreaper,
    expand_command,
    free_port,
)
from replay.rerun.runner import RerunOptions, run_rerun
from replay.rerun.schedule import build_schedule
from replay.rerun.watchdog import StopFlag
from reprobundle.cli.rerun_cmd import rerun_command
from tests.reference_server import REPO_ROOT, running_server, server_command
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    CANDIDATE_COMMIT,
    campaign_plan,
    tiny_png,
    write_campaign,
)
from tests.reference_server.server import parse_form

FIELDS = {"prompt": "a violinist at dusk", "seed": 42, "generate_sound": True}


def soon(seconds: float) -> float:
    return time.monotonic() + seconds


def test_earliest_deadline_prefers_the_innermost_level_on_a_tie() -> None:
    assert earliest_deadline({"request": 5.0, "wave": 5.0, "reservation": 9.0}) == ("request", 5.0)
    assert earliest_deadline({"request": 7.0, "wave": None, "reservation": 6.0}) == (
        "reservation",
        6.0,
    )
    assert earliest_deadline({"startup": 3.0, "arm": 3.0}) == ("startup", 3.0)
    assert earliest_deadline({"request": None}) is None


def test_reported_commit_sources_and_matching() -> None:
    assert reported_commit({"commit": "ABCDEF1234"}, {}) == ("abcdef1234", "json:commit")
    # vLLM-Omni dev builds print setuptools-scm versions such as 0.26.1.dev55+g81b48e83e.
    assert reported_commit({"version": "0.26.1.dev55+g81b48e83e"}, {}) == (
        "81b48e83e",
        "version-local",
    )
    assert reported_commit({"version": "0.20.0"}, {"x-runtime-commit": "098b51f"}) == (
        "098b51f",
        "header",
    )
    assert reported_commit({"version": "0.20.0"}, {}) == (None, None)
    assert reported_commit({"commit": "not-hex"}, {}) == (None, None)
    assert commit_matches("81b48e83e", "81b48e83e0c1d2")
    assert commit_matches(CANDIDATE_COMMIT, CANDIDATE_COMMIT[:7])
    assert not commit_matches("81b48e8", "81b48e9aaaaaa")
    assert not commit_matches("81b48e", "81b48e83e")  # fewer than 7 digits never match


def test_expand_command_placeholders_and_args() -> None:
    values = {"python": "/usr/bin/python3", "port": "8091", "commit": "abc1234"}
    got = expand_command("{python} -m srv --port={port} {args} --tag c-{commit}", values, ["-x"])
    assert got == ["/usr/bin/python3", "-m", "srv", "--port=8091", "-x", "--tag", "c-abc1234"]
    assert expand_command(["vllm", "serve", "{args}"], {}, ["--a", "b c"]) == [
        "vllm",
        "serve",
        "--a",
        "b c",
    ]
    with pytest.raises(LaunchError, match="unknown placeholder"):
        expand_command("run {nope}", values)
    with pytest.raises(LaunchError, match="empty"):
        expand_command("", values)


def test_multipart_body_is_read_back_by_an_independent_parser() -> None:
    png = tiny_png()
    body, ctype = encode_multipart(FIELDS, {"input_reference": FilePart("ref.png", png)})
    fields, reference = parse_form(ctype, body)  # the reference server's email-package parser
    assert fields == {"prompt": "a violinist at dusk", "seed": "42", "generate_sound": "true"}
    assert reference == png
    assert b"Content-Type: image/png" in body


def _decode(mp4: bytes) -> tuple[int, int, int]:
    """(video frames, audio samples per channel, audio rate) by decoding with PyAV."""
    with av.open(io.BytesIO(mp4), mode="r") as c:
        frames = sum(1 for _ in c.decode(video=0))
    with av.open(io.BytesIO(mp4), mode="r") as c:
        rate = c.streams.audio[0].rate
        samples = sum(f.samples for f in c.decode(audio=0))
    return frames, samples, rate


def test_async_request_is_timed_post_to_delete_with_polling() -> None:
    with running_server("--latency", "0.3") as srv:
        client = VideoClient(srv.url)
        png = tiny_png()
        out = client.video_async(
            FIELDS,
            {"input_reference": FilePart("ref.png", png)},
            poll_interval_s=0.05,
            deadline=Deadline({"request": soon(10)}),
        )
        assert out.status == "ok" and out.http_status == 200 and out.error is None
        # The job completes 0.3 s after the POST; polls every 0.05 s: at least 0.3 / 0.05 - 1
        # = 5 polls, and the e2e time cannot be shorter than the latency.
        assert out.polls >= 5
        assert out.e2e_s >= 0.3
        assert out.body is not None
        frames, samples, rate = _decode(out.body)
        # 1 s at 8 fps; AAC at 32 kHz decodes at least the 32,000 samples encoded.
        assert (frames, rate) == (8, 32000)
        assert 32000 <= samples <= 32000 + 2048
        # DELETE ran inside the boundary: the job is gone.
        gone = client.request("GET", f"/v1/videos/{out.job_id}", timeout=5)
        assert gone.status == 404


def test_sync_request_records_the_server_headers() -> None:
    with running_server("--latency", "0.1") as srv:
        out = VideoClient(srv.url).video_sync(FIELDS, {}, deadline=Deadline({"request": soon(10)}))
        assert out.status == "ok"
        assert out.server_headers["x-inference-time-s"] == "0.100"
        assert out.server_headers["x-peak-memory-mb"] == "1234.5"
        assert out.job_id == out.server_headers["x-request-id"]
        assert out.body is not None and _decode(out.body)[0] == 8


def test_hung_requests_end_at_the_level_whose_deadline_comes_first() -> None:
    with running_server("--latency", "0.05", "--hang-requests", "1,2,3,4") as srv:
        client = VideoClient(srv.url)
        # Async, wave deadline before the request deadline: the wave fires.
        t0 = time.monotonic()
        out = client.video_async(
            FIELDS,
            {},
            poll_interval_s=0.02,
            deadline=Deadline({"request": t0 + 5, "wave": t0 + 0.4, "reservation": t0 + 9}),
        )
        assert (out.status, out.timeout_level) == ("timeout", "wave")
        # The deadline is 0.4 s after t0, taken just before the call starts its own clock.
        assert 0.39 <= out.e2e_s < 1.5
        assert out.cleanup == "deleted after timeout"
        # Sync, request deadline first: the socket timeout is the request deadline firing.
        t0 = time.monotonic()
        out = client.video_sync(FIELDS, {}, deadline=Deadline({"request": t0 + 0.3, "arm": t0 + 4}))
        assert (out.status, out.timeout_level) == ("timeout", "request")
        # Arm deadline first.
        t0 = time.monotonic()
        out = client.video_async(
            FIELDS,
            {},
            poll_interval_s=0.02,
            deadline=Deadline({"request": t0 + 5, "wave": t0 + 4, "arm": t0 + 0.3}),
        )
        assert (out.status, out.timeout_level) == ("timeout", "arm")
        # A stop raised by the watchdog (level reservation) ends a request mid-poll.
        stop = StopFlag()
        threading.Timer(0.3, stop.set, args=("reservation", "soft TERM")).start()
        out = client.video_async(
            FIELDS, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(9)}, stop)
        )
        assert (out.status, out.timeout_level) == ("timeout", "reservation")
        user = StopFlag()
        user.set(None, "interrupted by the user")
        out = client.video_async(
            FIELDS, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(9)}, user)
        )
        assert (out.status, out.timeout_level) == ("cancelled", None)


def test_failed_job_is_a_failed_request() -> None:
    with running_server("--latency", "0.05", "--fail-requests", "1") as srv:
        out = VideoClient(srv.url).video_async(
            FIELDS, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(10)})
        )
        assert out.status == "failed" and out.timeout_level is None
        assert out.error is not None and "injected_failure" in out.error


def test_version_report_of_each_style() -> None:
    with running_server("--commit", BASELINE_COMMIT, "--version-style", "scm") as srv:
        rep = VideoClient(srv.url).version()
        assert (rep.commit, rep.source) == (BASELINE_COMMIT[:9], "version-local")
    with running_server("--commit", BASELINE_COMMIT, "--version-style", "header") as srv:
        assert VideoClient(srv.url).version().source == "header"
    with running_server("--version-style", "none") as srv:
        assert VideoClient(srv.url).version().commit is None


def test_teardown_kills_a_worker_that_ignores_term_after_its_budget(tmp_path: Path) -> None:
    port = free_port()
    argv = server_command("--port", str(port), "--workers", "3", "--ignore-term-workers", "1")
    with child_subreaper():
        proc = ServerProcess.start(LaunchSpec(tuple(argv), REPO_ROOT, {}, tmp_path / "s.log"))
        client = VideoClient(f"http://127.0.0.1:{port}")
        deadline = soon(20)
        while not client.health(1.0):
            assert time.monotonic() < deadline and proc.exit_status() is None
            time.sleep(0.02)
        assert len(proc.observe_workers()) == 3
        exits = proc.teardown(term_wait_s=0.5, kill_wait_s=2.0)
    by_role = {(e.role, e.clean) for e in exits}
    assert ("server", True) in by_role
    server = next(e for e in exits if e.role == "server")
    assert (server.exit_code, server.signal) == (0, None)
    workers = [e for e in exits if e.role == "worker"]
    assert len(workers) == 3
    killed = [w for w in workers if w.killed]
    clean = [w for w in workers if w.clean]
    assert len(killed) == 1 and len(clean) == 2
    # The stubborn one got SIGKILL after the 0.5 s TERM wait, well inside the 2 s KILL wait.
    assert killed[0].signal == "SIGKILL" and killed[0].exit_code is None
    assert 0.5 <= killed[0].exit_s < 2.5
    assert all(w.exit_code == 0 and w.exit_s < 0.5 for w in clean)


def test_schedule_orders_warmups_measured_then_quality() -> None:
    plan = campaign_plan(
        quality={
            "prompts": [{"id": "q1", "prompt": "waves", "seed": 7}],
            "render_on": ["candidate-2"],
        }
    )
    sched = build_schedule(plan, {"baseline": BASELINE_COMMIT, "candidate": CANDIDATE_COMMIT})
    assert [(s.arm, s.server, len(s.requests)) for s in sched] == [
        ("baseline", "baseline-1", 3),
        ("candidate", "candidate-1", 3),
        ("candidate", "candidate-2", 4),
        ("baseline", "baseline-2", 3),
    ]
    q = sched[2].requests
    assert [(r.phase, r.seq) for r in q] == [
        ("warmup", 0),
        ("measured", 1),
        ("measured", 2),
        ("quality", 3),
    ]
    assert (q[3].fields["prompt"], q[3].fields["seed"], q[3].prompt_id) == ("waves", 7, "q1")
    assert sched[0].commit == BASELINE_COMMIT and sched[0].term_wait_s == 0.6


def test_endpoint_mode_sync_api_and_commit_check(tmp_path: Path) -> None:
    plan = campaign_plan(
        arm_order=["baseline", "candidate"],
        servers=["baseline-1", "candidate-1"],
        warmups_per_server=0,
        measured_per_server=1,
        request={
            "api": "videos-sync",
            "timing_boundary": "post_to_response",
            "payload": {"prompt": "a violinist at dusk", "seed": 42},
        },
        telemetry={"source": "none"},
    )
    camp = write_campaign(tmp_path / "camp", plan)
    bundle = tmp_path / "orig.bundle"
    seal_campaign(camp, bundle)
    with (
        running_server("--commit", BASELINE_COMMIT, "--latency", "0.05") as base,
        running_server("--commit", BASELINE_COMMIT, "--latency", "0.05") as wrong,
        running_server("--commit", CANDIDATE_COMMIT, "--latency", "0.05") as cand,
    ):
        mismatch = RerunOptions(
            endpoints={"baseline": base.url, "candidate": wrong.url}, allow_unsigned=True
        )
        with pytest.raises(UsageError, match="reports c7f56f0"):
            run_rerun(bundle, tmp_path / "bad", mismatch)
        assert not (tmp_path / "bad").exists()  # nothing was written
        ok = RerunOptions(
            endpoints={"baseline-1": base.url, "candidate": cand.url}, allow_unsigned=True
        )
        result = run_rerun(bundle, tmp_path / "rerun", ok)
    assert result.status == "accepted", result.reason
    rows = [
        json.loads(line)
        for line in (tmp_path / "rerun" / "receipts.jsonl").read_text().splitlines()
    ]
    assert [(r["server"], r["status"], r["server_inference_s"]) for r in rows] == [
        ("baseline-1", "ok", 0.05),
        ("candidate-1", "ok", 0.05),
    ]
    assert (tmp_path / "rerun" / "worker_exits.jsonl").read_text() == ""
    record = json.loads((tmp_path / "rerun" / "rerun" / "rerun-1.json").read_text())
    assert record["mode"] == "endpoint" and record["slots"][0]["version"]["verdict"] == "verified"


def test_rerun_refuses_a_directory_it_did_not_write(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine", encoding="utf-8")
    opts = RerunOptions(launch=True, launch_cwd=REPO_ROOT, allow_unsigned=True)
    with pytest.raises(UsageError, match="not a rerun directory"):
        run_rerun(tmp_path / "orig.bundle", tmp_path / "other", opts)
    with pytest.raises(UsageError, match="either --launch or"):
        run_rerun(tmp_path / "orig.bundle", tmp_path / "x", RerunOptions(allow_unsigned=True))


def test_a_server_that_cannot_be_launched_rejects_the_attempt(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    opts = RerunOptions(
        launch=True,
        launch_command=str(tmp_path / "no-such-runtime") + " --port {port}",
        allow_unsigned=True,
        telemetry="none",
    )
    result = run_rerun(tmp_path / "orig.bundle", tmp_path / "rerun", opts)
    assert result.status == "rejected"
    assert [s.outcome for s in result.slots] == ["launch-failed"] * 4
    assert result.reason is not None and "baseline-1: launch-failed" in result.reason
    assert (tmp_path / "rerun" / "receipts.jsonl").read_text() == ""


def _hand_rerun(root: Path, sealed_dir: Path, cand: tuple[list[float], list[float]]) -> Path:
    """A rerun campaign written by hand (no server), with the sealed plan's exact bytes."""
    root.mkdir()
    (root / "plans").mkdir()
    plan = sealed_dir / "plans" / "reference-ab.json"
    (root / "plans" / "reference-ab.json").write_bytes(plan.read_bytes())
    doc = json.loads((sealed_dir / "campaign.json").read_text())
    doc.update({"id": "reference-ab-rerun", "kind": "rerun"})
    (root / "campaign.json").write_text(json.dumps(doc))
    (root / "attempts.jsonl").write_text(json.dumps({"attempt_id": "r-1", "status": "accepted"}))
    (root / "claims.json").write_text("[]")
    values = {
        "baseline-1": ("baseline", [0.70, 0.72]),
        "baseline-2": ("baseline", [0.74, 0.76]),
        "candidate-1": ("candidate", cand[0]),
        "candidate-2": ("candidate", cand[1]),
    }
    receipts = []
    for server, (arm, xs) in values.items():
        for seq, e2e in enumerate(xs, start=1):
            receipts.append(
                {
                    "request_id": f"r-{server}-{seq}",
                    "attempt_id": "r-1",
                    "arm": arm,
                    "server": server,
                    "phase": "measured",
                    "seq": seq,
                    "start": "2026-05-01T00:00:00Z",
                    "end": "2026-05-01T00:00:01Z",
                    "e2e_s": e2e,
                    "status": "ok",
                }
            )
    (root / "receipts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in receipts))
    exits = [
        ("w0", 0, None, 0.5, False),  # clean: code 0 within the 0.6 s TERM wait
        ("w1", None, "SIGKILL", 0.7, True),
    ]
    (root / "worker_exits.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "attempt_id": "r-1",
                    "arm": "baseline",
                    "server": "baseline-1",
                    "worker": w,
                    "exit_code": code,
                    "signal": sig,
                    "exit_s": s,
                    "killed": k,
                }
            )
            + "\n"
            for w, code, sig, s, k in exits
        )
    )
    samples = [
        ("baseline", "baseline-1", "npu:0", 100),
        ("baseline", "baseline-1", "npu:0", 300),
        ("baseline", "baseline-1", "npu:1", 200),
        ("candidate", "candidate-1", "npu:0", 150),
    ]
    (root / "telemetry.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "attempt_id": "r-1",
                    "arm": arm,
                    "server": server,
                    "device": dev,
                    "time": "2026-05-01T00:00:00Z",
                    "hbm_used_mb": mb,
                }
            )
            + "\n"
            for arm, server, dev, mb in samples
        )
    )
    return root


def test_comparison_arithmetic_and_tolerance_rule(tmp_path: Path) -> None:
    sealed_dir = write_campaign(tmp_path / "sealed")
    seal_campaign(sealed_dir, tmp_path / "sealed.bundle")
    sealed = open_bundle(tmp_path / "sealed.bundle", allow_unsigned=True)

    def compare(cand: tuple[list[float], list[float]], name: str, tol: float) -> Any:
        d = _hand_rerun(tmp_path / name, sealed_dir, cand)
        seal_campaign(d, tmp_path / f"{name}.bundle")
        rerun = open_bundle(tmp_path / f"{name}.bundle", allow_unsigned=True)
        return compare_bundles(rerun, sealed, tolerance=tol)

    c = compare(([0.25, 0.27], [0.23, 0.25]), "near", 0.10)
    (e,) = c.effects
    # Sealed: arm means 0.6175 and 0.2175 (tests/reference_server/campaign.py).
    # Rerun: baseline servers 0.71 and 0.75 -> 0.73; candidate 0.26 and 0.24 -> 0.25.
    assert (e.sealed_baseline_s, e.sealed_candidate_s) == pytest.approx((0.6175, 0.2175))
    assert (e.rerun_baseline_s, e.rerun_candidate_s) == pytest.approx((0.73, 0.25))
    assert e.sealed_speedup == pytest.approx(0.6175 / 0.2175)  # 2.839080...
    assert e.rerun_speedup == pytest.approx(2.92)  # 0.73 / 0.25
    assert e.rerun_percent_lower == pytest.approx((1 - 0.25 / 0.73) * 100)  # 65.753...
    assert e.sealed_percent_lower == pytest.approx((1 - 0.2175 / 0.6175) * 100)  # 64.777...
    assert (e.baseline_ratio, e.candidate_ratio) == pytest.approx((0.73 / 0.6175, 0.25 / 0.2175))
    assert e.speedup_ratio == pytest.approx(2.92 / (0.6175 / 0.2175))  # 1.0285: +2.9 %
    assert e.reproduced is True and c.reproduced is True and c.plan_matches
    assert (c.rerun.lifecycle.total, c.rerun.lifecycle.clean, c.rerun.lifecycle.killed) == (2, 1, 1)
    # Peaks per (server, device): baseline 300 and 200 -> 250; candidate 150.
    assert c.rerun.hbm_peak_mean_mb == {"baseline": 250.0, "candidate": 150.0}
    assert c.sealed.hbm_peak_mean_mb == {"baseline": None, "candidate": None}
    # Candidate 0.28 and 0.30 -> 0.29: speedup 0.73 / 0.29 = 2.5172, -11.3 % from 2.8391.
    slow = compare(([0.28, 0.28], [0.30, 0.30]), "slow", 0.10)
    assert slow.effects[0].speedup_ratio == pytest.approx((0.73 / 0.29) / (0.6175 / 0.2175))
    assert slow.reproduced is False
    assert compare(([0.28, 0.28], [0.30, 0.30]), "slow-wide", 0.12).reproduced is True
    # No effect at all: candidate as slow as baseline (speedup 1) never reproduces 2.84x.
    none = compare(([0.70, 0.72], [0.74, 0.76]), "none", 0.9)
    assert none.effects[0].rerun_speedup == pytest.approx(1.0)
    assert none.reproduced is False
    assert "the effect vanished or changed direction" in none.effects[0].verdict


def test_dry_run_shows_schedule_commands_and_estimate(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    args = [
        str(tmp_path / "orig.bundle"),
        "--out",
        str(tmp_path / "rerun"),
        "--launch",
        "--allow-unsigned",
        "--dry-run",
    ]
    res = CliRunner().invoke(rerun_command, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    # Sealed e2e per server (campaign.py): 1.25 + 0.615 + 0.62 = 2.485, 0.85 + 0.215 + 0.22 =
    # 1.285, 0.84 + 0.22 + 0.215 = 1.275, 1.26 + 0.62 + 0.615 = 2.495.
    sums = [e["sealed_requests_s"] for e in doc["estimates"]]
    assert sums == pytest.approx([2.485, 1.285, 1.275, 2.495])
    assert [e["teardown_budget_s"] for e in doc["estimates"]] == [2.6] * 4  # 0.6 + 2
    assert [c[-2:] for c in doc["launch"]] == [
        ["--latency", "0.6"],
        ["--latency", "0.2"],
        ["--latency", "0.2"],
        ["--latency", "0.6"],
    ]
    text = CliRunner().invoke(rerun_command, args)
    assert text.exit_code == 0
    # 7.54 s of requests; at most 7.54 + 4 x 20 s start-up + 4 x 2.6 s teardown = 97.94 s.
    assert "expected duration: 8 s of requests as sealed" in text.output
    assert "at most 98 s" in text.output
    assert not (tmp_path / "rerun").exists()
