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

import av
import pytest
from click.testing import CliRunner

from bundler.errors import UsageError
from bundler.format.container import read_container, write_container
from bundler.format.plan_model import Plan
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from reprobundle.cli.plan_cmd import plan_group
from reprobundle.cli.rerun_cmd import rerun_command
from rerun.client import (
    Deadline,
    FilePart,
    VideoClient,
    commit_matches,
    earliest_deadline,
    encode_multipart,
)
from rerun.launcher import (
    LaunchError,
    LaunchSpec,
    ServerProcess,
    child_subreaper,
    expand_command,
    free_port,
)
from rerun.runner import RerunOptions, run_rerun
from rerun.schedule import build_schedule
from rerun.watchdog import StopFlag
from tests.conftest import Keys
from tests.reference_server import REPO_ROOT, running_server, server_command
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    CANDIDATE_COMMIT,
    campaign_plan,
    tiny_png,
    write_campaign,
)
from tests.reference_server.form import parse_video_form

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


def test_commit_matching() -> None:
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
    body, ctype = encode_multipart(FIELDS, {"input_reference": (FilePart("ref.png", png),)})
    form = parse_video_form(ctype, body, "m")  # the reference server's email-package parser
    assert form.fields == {"prompt": "a violinist at dusk", "seed": "42", "generate_sound": "true"}
    assert [u.data for u in form.references] == [png]
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
            {"input_reference": (FilePart("ref.png", png),)},
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
        # The server sends X-Inference-Time-S 0.100, X-Peak-Memory-MB 1234.500 and
        # X-Stage-Durations {"text_encode":0.01,"denoise":0.05,"vae_decode":0.02}.
        assert out.server["server_inference_time_s"] == 0.1
        assert out.server["server_peak_memory_mb"] == 1234.5
        assert json.loads(out.server["server_stage_durations"]) == {
            "text_encode": 0.01,
            "denoise": 0.05,
            "vae_decode": 0.02,
        }
        assert out.job_id is not None and out.job_id.startswith("video_sync-")
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
        assert out.error == "job failed: HTTP 500: reference server fault"


def test_version_is_vllms_and_never_a_runtime_commit() -> None:
    # A vLLM development build: the +g hash is vLLM's, so it is recorded as vLLM's version.
    with running_server("--vllm-version", "0.30.1.dev3+gced6857af") as srv:
        rep = VideoClient(srv.url).version()
    assert (rep.http_status, rep.vllm_version, rep.error) == (200, "0.30.1.dev3+gced6857af", None)
    assert not hasattr(rep, "commit")


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
    sched = build_schedule(
        Plan.from_dict(plan, "plans/p.json"),
        {"baseline": BASELINE_COMMIT, "candidate": CANDIDATE_COMMIT},
    )
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
        running_server("--latency", "0.05", "--vllm-version", "0.30.1.dev3+gc7f56f015") as base,
        running_server("--latency", "0.05") as cand,
    ):
        endpoints = {"baseline-1": base.url, "candidate": cand.url}
        # Endpoint mode cannot verify a runtime commit, not even from a vLLM dev build whose
        # version happens to carry the arm's commit prefix: refused without the override.
        refused = RerunOptions(endpoints=endpoints, trust=Trust.allow_unsigned())
        with pytest.raises(UsageError, match="runtime commit unverified: endpoint mode"):
            run_rerun(bundle, tmp_path / "bad", refused)
        assert not (tmp_path / "bad").exists()  # nothing was written
        ok = RerunOptions(
            endpoints=endpoints, trust=Trust.allow_unsigned(), allow_unverified_commit=True
        )
        result = run_rerun(bundle, tmp_path / "rerun", ok)
    assert result.status == "accepted", result.reason
    rows = [
        json.loads(line)
        for line in (tmp_path / "rerun" / "receipts.jsonl").read_text().splitlines()
    ]
    assert [(r["server"], r["status"], r["server_inference_time_s"]) for r in rows] == [
        ("baseline-1", "ok", 0.05),
        ("candidate-1", "ok", 0.05),
    ]
    assert (tmp_path / "rerun" / "worker_exits.jsonl").read_text() == ""
    record = json.loads((tmp_path / "rerun" / "rerun" / "rerun-1.json").read_text())
    runtime = record["slots"][0]["version"]
    assert record["mode"] == "endpoint"
    assert (runtime["verdict"], runtime["runtime_commit"]) == ("unverified", None)
    assert runtime["vllm_version"] == "0.30.1.dev3+gc7f56f015"


def test_rerun_refuses_a_directory_it_did_not_write(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine", encoding="utf-8")
    opts = RerunOptions(
        launch=True,
        run_bundle_launch_command=True,
        launch_cwd=REPO_ROOT,
        trust=Trust.allow_unsigned(),
    )
    with pytest.raises(UsageError, match="not a rerun directory"):
        run_rerun(tmp_path / "orig.bundle", tmp_path / "other", opts)
    with pytest.raises(UsageError, match="either --launch or"):
        run_rerun(
            tmp_path / "orig.bundle", tmp_path / "x", RerunOptions(trust=Trust.allow_unsigned())
        )


def test_a_server_that_cannot_be_launched_rejects_the_attempt(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    opts = RerunOptions(
        launch=True,
        launch_command=str(tmp_path / "no-such-runtime") + " --port {port}",
        trust=Trust.allow_unsigned(),
        telemetry="none",
        allow_unverified_commit=True,
    )
    result = run_rerun(tmp_path / "orig.bundle", tmp_path / "rerun", opts)
    assert result.status == "rejected"
    assert [s.outcome for s in result.slots] == ["launch-failed"] * 4
    assert result.reason is not None and "baseline-1: launch-failed" in result.reason
    assert (tmp_path / "rerun" / "receipts.jsonl").read_text() == ""


def test_dry_run_shows_schedule_commands_and_estimate(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "camp")
    seal_campaign(camp, tmp_path / "orig.bundle")
    args = [
        str(tmp_path / "orig.bundle"),
        "-o",
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


def test_the_rerun_reads_its_bundle_only_once_verified(tmp_path: Path, keys: Keys) -> None:
    """``bundle rerun`` opens the bundle through ``open_verified``: a tampered bundle is
    refused (exit 1) before anything is read, an unsigned one unless --allow-unsigned
    (with the hint); ``plan check`` of the same unsigned bundle is accepted."""
    camp = write_campaign(tmp_path / "camp")
    unsigned = tmp_path / "orig.bundle"
    seal_campaign(camp, unsigned)
    out = tmp_path / "rerun"
    args = ["-o", str(out), "--launch", "--dry-run"]
    res = CliRunner().invoke(rerun_command, [str(unsigned), *args, "--key", str(keys.public_path)])
    assert res.exit_code == 1, res.output
    assert "no trusted key verified it" in res.output
    assert "give a trusted --key or --allow-unsigned" in res.output
    assert (
        CliRunner().invoke(rerun_command, [str(unsigned), *args, "--allow-unsigned"]).exit_code == 0
    )
    assert CliRunner().invoke(plan_group, ["check", str(unsigned)]).exit_code == 0
    # The plan member rewritten in place (a longer request timeout): its digest no longer
    # matches the manifest, so neither command reads it.
    members = [
        (
            m.name,
            m.data.replace(b'"request_s": 2.5', b'"request_s": 25')
            if m.name.startswith("plans/")
            else m.data,
        )
        for m in read_container(unsigned)
    ]
    tampered = tmp_path / "tampered.bundle"
    with tampered.open("wb") as fh:
        write_container(fh, members)
    assert tampered.read_bytes() != unsigned.read_bytes()
    res = CliRunner().invoke(rerun_command, [str(tampered), *args, "--allow-unsigned"])
    assert res.exit_code == 1, res.output
    assert "give a trusted --key" not in res.output
    assert CliRunner().invoke(plan_group, ["check", str(tampered)]).exit_code == 1
    assert not out.exists()
