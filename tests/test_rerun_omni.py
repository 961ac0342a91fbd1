"""The rerun against a server that answers as vLLM-Omni 0.30.0 does (issue 21).

The reference server follows the real API server where the client depends on
it (each rule cited in ``tests/reference_server/form.py`` and ``server.py``);
these tests pin those rules over real HTTP on 127.0.0.1, then the client's
handling of them: failed jobs recorded with their reason and deleted, the
form encoded by its real types, several references as repeated file parts,
the server's own figures kept beside ``e2e_s``, and the runtime commit
verified from the launch environment, never from ``GET /version``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from rerun.client import Deadline, FilePart, VideoClient, encode_multipart
from rerun.runner import RerunOptions, run_rerun
from tests.omni_playback import VIDEO_RESPONSE_FIELDS, multipart_body
from tests.reference_server import REPO_ROOT, running_server
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    campaign_plan,
    tiny_png,
    with_runtimes,
    write_campaign,
)
from tests.reference_server.form import parse_video_form
from tests.reference_server.media import make_mp4

PROMPT = "a violinist at dusk"


def soon(seconds: float) -> float:
    return time.monotonic() + seconds


def form(
    parts: list[tuple[str, str]], files: list[tuple[str, str, bytes]] | None = None
) -> tuple[bytes, str]:
    """A multipart body written by hand (not by the client under test)."""
    texts = [(name, None, text.encode()) for name, text in parts]
    pngs = [(name, (filename, "image/png"), data) for name, filename, data in files or []]
    return multipart_body([*texts, *pngs], uuid.uuid4().hex)


def post(client: VideoClient, body: bytes, ctype: str) -> tuple[int, dict[str, Any]]:
    resp = client.request(
        "POST", "/v1/videos", body=body, headers={"Content-Type": ctype}, timeout=10
    )
    return resp.status, json.loads(resp.body)


def assert_error_body(doc: dict[str, Any], code: int, message_part: str) -> None:
    # vLLM's ErrorResponse: {"error": {"message", "type", "param", "code"}}.
    assert set(doc) == {"error"}
    assert set(doc["error"]) == {"message", "type", "param", "code"}
    assert doc["error"]["code"] == code
    assert message_part in doc["error"]["message"], doc


def test_reference_server_answers_as_the_real_server_does() -> None:
    png = tiny_png()
    with running_server("--latency", "0.3", "--fail-requests", "2") as srv:
        c = VideoClient(srv.url)
        # /version is vLLM's route: its version and nothing else.
        assert json.loads(c.request("GET", "/version", timeout=5).body) == {"version": "0.30.0"}
        # Multipart only: a JSON body has no form field "prompt".
        resp = c.request(
            "POST",
            "/v1/videos",
            body=json.dumps({"prompt": PROMPT}).encode(),
            headers={"Content-Type": "application/json"},
            timeout=5,
        )
        assert resp.status == 400
        assert_error_body(json.loads(resp.body), 400, "prompt")
        for parts, files, why in [
            ([("prompt", PROMPT), ("seconds", "5.0")], [], "seconds"),
            ([("prompt", PROMPT), ("size", "1280*720")], [], "size"),
            ([("prompt", PROMPT), ("seed", "None")], [], "seed"),
            ([("prompt", PROMPT), ("input_reference", "ref.png")], [], "Expected UploadFile"),
            ([("prompt", PROMPT), ("model", "MiniMax-H3-Ref2VA")], [], "Model mismatch"),
            (
                [("prompt", PROMPT)],
                [("input_reference", "a.png", png), ("input_references", "b.png", png)],
                "input_references alone",
            ),
        ]:
            status, doc = post(c, *form(parts, files))
            assert status == 400, (why, doc)
            assert_error_body(doc, 400, why)
        # vLLM's validation handler: 400 "Bad Request", the field's location as param.
        _, doc = post(c, *form([("prompt", PROMPT), ("seconds", "5.0")]))
        assert (doc["error"]["type"], doc["error"]["param"]) == ("Bad Request", "body.seconds")
        assert doc["error"]["message"].startswith("1 validation error:")
        # An HTTPException (the model check): its status's phrase, no param.
        _, doc = post(c, *form([("prompt", PROMPT), ("model", "other")]))
        assert (doc["error"]["type"], doc["error"]["param"]) == ("Bad Request", None)
        assert doc["error"]["message"] == (
            "Model mismatch: request specifies 'other' but server is running 'reference-omni'."
        )
        # Generation 1: accepted, then polled to completion.
        status, job = post(
            c, *form([("prompt", PROMPT), ("seconds", "1")], [("input_reference", "r.png", png)])
        )
        assert status == 200 and job["status"] == "queued" and job["id"].startswith("video_gen_")
        assert set(job) == VIDEO_RESPONSE_FIELDS
        early = c.request("GET", f"/v1/videos/{job['id']}/content", timeout=5)
        assert early.status == 404
        assert_error_body(json.loads(early.body), 404, "still in-progress")
        # Generation 2 fails (injected): its poll answers with the error's own status.
        _, failing = post(c, *form([("prompt", PROMPT)]))
        time.sleep(0.45)
        done = json.loads(c.request("GET", f"/v1/videos/{job['id']}", timeout=5).body)
        assert done["status"] == "completed" and set(done) == VIDEO_RESPONSE_FIELDS
        assert done["inference_time_s"] == 0.3 and done["peak_memory_mb"] == 1234.5
        assert done["created_at"] <= done["completed_at"]
        failed = c.request("GET", f"/v1/videos/{failing['id']}", timeout=5)
        assert failed.status == 500
        doc = json.loads(failed.body)
        assert doc["status"] == "failed"
        assert doc["error"] == {"code": 500, "message": "reference server fault"}
        assert c.request("GET", f"/v1/videos/{failing['id']}/content", timeout=5).status == 422


def test_a_failed_job_is_recorded_with_its_reason_and_deleted() -> None:
    with running_server("--latency", "0.05", "--fail-requests", "1") as srv:
        c = VideoClient(srv.url)
        out = c.video_async(
            {"prompt": PROMPT}, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(10)})
        )
        assert (out.status, out.http_status) == ("failed", 500)
        assert out.error == "job failed: HTTP 500: reference server fault"
        assert out.cleanup == "deleted"
        # The server no longer holds the job.
        assert out.job_id is not None
        assert c.request("GET", f"/v1/videos/{out.job_id}", timeout=5).status == 404


def test_a_task_the_server_refuses_is_recorded_with_its_message() -> None:
    # A Ref2VA-only server asked for T2VA: the pipeline's own refusal, recorded, job deleted.
    with running_server("--latency", "0.05", "--task-type", "ref2va") as srv:
        c = VideoClient(srv.url)
        fields = {"prompt": PROMPT, "extra_params": {"task": "t2va"}}
        out = c.video_async(
            fields, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(10)})
        )
        assert out.error == (
            "job failed: HTTP 400: checkpoint partition 'ref2va' supports ['ref2va'], "
            "got task='t2va'"
        )
        assert out.cleanup == "deleted"
        ok = c.video_async(
            {**fields, "extra_params": {"task": "ref2va"}},
            {},
            poll_interval_s=0.02,
            deadline=Deadline({"request": soon(10)}),
        )
        assert ok.status == "ok", ok.error


def test_the_form_is_encoded_by_the_real_types() -> None:
    fields = {
        "prompt": PROMPT,
        "negative_prompt": None,
        "seconds": 5.0,
        "fps": 24,
        "guidance_scale": 4.5,
        "generate_sound": True,
        "extra_params": {"task": "ref2va"},
    }
    body, ctype = encode_multipart(fields)
    parsed = parse_video_form(ctype, body, "reference-omni")  # the reference server's parser
    assert parsed.fields == {
        "prompt": PROMPT,
        "seconds": "5",
        "fps": "24",
        "guidance_scale": "4.5",
        "generate_sound": "true",
        "extra_params": '{"task":"ref2va"}',
    }
    with running_server("--latency", "0.05") as srv:
        out = VideoClient(srv.url).video_async(
            fields, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(10)})
        )
    assert out.status == "ok", out.error


def test_several_references_go_as_repeated_file_parts() -> None:
    png = tiny_png()
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "  # only its bytes matter to the reference server
    refs = (FilePart("face.png", png), FilePart("voice.wav", wav))
    with running_server("--latency", "0.05", "--task-type", "ref2va") as srv:
        out = VideoClient(srv.url).video_async(
            {"prompt": PROMPT, "seed": 7},
            {"input_references": refs},
            poll_interval_s=0.02,
            deadline=Deadline({"request": soon(20)}),
        )
    assert out.status == "ok", out.error
    # The clip depends on every reference's bytes, in the order sent.
    want = make_mp4(7, PROMPT, reference=png + wav)
    assert out.body is not None
    assert hashlib.sha256(out.body).hexdigest() == hashlib.sha256(want).hexdigest()


def test_the_servers_own_figures_are_kept_beside_e2e() -> None:
    with running_server("--latency", "0.2") as srv:
        out = VideoClient(srv.url).video_async(
            {"prompt": PROMPT}, {}, poll_interval_s=0.02, deadline=Deadline({"request": soon(10)})
        )
    assert out.status == "ok" and out.e2e_s >= 0.2
    s = out.server
    assert (s["server_inference_time_s"], s["server_peak_memory_mb"]) == (0.2, 1234.5)
    assert json.loads(s["server_stage_durations"]) == {
        "text_encode": 0.01,
        "denoise": 0.05,
        "vae_decode": 0.02,
    }
    assert s["server_created_at"] <= s["server_completed_at"]
    # 1 s at 8 fps (the reference server's defaults).
    assert (s["server_num_frames"], s["server_fps"]) == (8.0, 8.0)


def _dist(site: Path, version: str, direct_url: dict[str, Any] | None) -> Path:
    info = site / f"vllm_omni-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm-omni\nVersion: {version}\n", encoding="utf-8"
    )
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")
    return site


def test_launch_runtime_reads_the_installed_distribution(tmp_path: Path) -> None:
    from rerun.runtime import launch_runtime, probe_interpreter

    vcs = {"url": "https://github.com/vllm-project/vllm-omni.git"}
    cases = {
        "vcs": (
            _dist(
                tmp_path / "a",
                "0.30.0",
                {**vcs, "vcs_info": {"vcs": "git", "commit_id": BASELINE_COMMIT}},
            ),
            "verified",
        ),
        "other": (
            _dist(
                tmp_path / "b",
                "0.30.0",
                {**vcs, "vcs_info": {"vcs": "git", "commit_id": "ab" * 20}},
            ),
            "mismatch",
        ),
        "scm": (_dist(tmp_path / "c", f"0.30.1.dev3+g{BASELINE_COMMIT[:9]}", None), "verified"),
        "wheel": (_dist(tmp_path / "d", "0.30.0", None), "unverified"),
        "editable": (
            _dist(tmp_path / "e", "0.30.0", {"url": "file:///src", "dir_info": {"editable": True}}),
            "unverified",
        ),
        "none": (tmp_path / "empty", "unverified"),
    }
    (tmp_path / "empty").mkdir()
    got = {}
    for name, (site, _) in cases.items():
        doc = launch_runtime(sys.executable, {"PYTHONPATH": str(site)}, tmp_path, BASELINE_COMMIT)
        got[name] = doc["verdict"]
    assert got == {name: want for name, (_, want) in cases.items()}
    wheel = launch_runtime(
        sys.executable, {"PYTHONPATH": str(cases["wheel"][0])}, tmp_path, BASELINE_COMMIT
    )
    assert wheel["reason"] == "vllm-omni 0.30.0 records no commit (a registry or local wheel)"
    vcs_doc = launch_runtime(
        sys.executable, {"PYTHONPATH": str(cases["vcs"][0])}, tmp_path, BASELINE_COMMIT
    )
    assert (vcs_doc["method"], vcs_doc["runtime_commit"]) == (
        "direct_url.json vcs_info.commit_id",
        BASELINE_COMMIT,
    )
    # A console script (as pip writes `vllm`): the interpreter is its #! line's.
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nprint('x')\n", encoding="utf-8")
    assert probe_interpreter(str(script), {}) == sys.executable
    env_script = tmp_path / "bin" / "serve"
    env_script.write_text("#!/usr/bin/env python3\n", encoding="utf-8")
    found = probe_interpreter(str(env_script), {"PATH": str(Path(sys.executable).parent)})
    assert found is not None and Path(found).name == "python3"


def test_a_launch_command_whose_python_cannot_be_told_is_unverified(tmp_path: Path) -> None:
    from rerun.runtime import launch_runtime, probe_interpreter

    # Our own interpreter has the arm's vllm-omni here, but a shell wrapper may run another:
    # the probe does not guess.
    site = _dist(
        tmp_path / "site",
        "0.30.0",
        {"url": "x", "vcs_info": {"vcs": "git", "commit_id": BASELINE_COMMIT}},
    )
    wrapper = tmp_path / "serve.sh"
    wrapper.write_text("#!/bin/sh\nexec /opt/other/bin/python -m vllm_omni\n", encoding="utf-8")
    doc = launch_runtime(str(wrapper), {"PYTHONPATH": str(site)}, tmp_path, BASELINE_COMMIT)
    assert (doc["verdict"], doc["interpreter"]) == ("unverified", None)
    assert doc["reason"].startswith("cannot tell which Python 'serve.sh' runs")
    # A FIFO named by a template is not opened (reading it would block).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert probe_interpreter(str(fifo), {}) is None


def test_a_vllm_dev_build_is_not_taken_for_the_runtime_commit(tmp_path: Path) -> None:
    """vLLM's development version carries vLLM's hash: the old client read it as the runtime's
    commit and refused the run as a mismatch; now the launch environment decides."""
    plan = with_runtimes(
        campaign_plan(
            arm_order=["baseline"],
            servers=["baseline-1"],
            warmups_per_server=0,
            measured_per_server=1,
            telemetry={"source": "none"},
        )
    )
    plan["launch"]["baseline"]["args"] += ["--vllm-version", "0.30.1.dev3+gced6857af"]
    camp = write_campaign(tmp_path / "camp", plan)
    seal_campaign(camp, tmp_path / "orig.bundle")
    opts = RerunOptions(
        launch=True,
        run_bundle_launch_command=True,
        launch_cwd=REPO_ROOT,
        trust=Trust.allow_unsigned(),
    )
    result = run_rerun(tmp_path / "orig.bundle", tmp_path / "rerun", opts)
    assert result.status == "accepted", result.reason
    (slot,) = result.slots
    assert slot.version is not None
    assert (slot.version["verdict"], slot.version["vllm_version"]) == (
        "verified",
        "0.30.1.dev3+gced6857af",
    )
    (receipt,) = [
        json.loads(x) for x in (tmp_path / "rerun" / "receipts.jsonl").read_text().splitlines()
    ]
    # The explicit task went out with the request; the server's own figures sit beside e2e_s.
    assert receipt["task_sent"] == "ref2va"
    assert receipt["server_inference_time_s"] == 0.6 and receipt["e2e_s"] >= 0.6


def test_the_samples_carried_client_speaks_the_real_form(tmp_path: Path) -> None:
    """samples/h3-ref2va-5s/scripts/client.py sent input_reference as text (HTTP 400)."""
    (tmp_path / "ref.png").write_bytes(tiny_png())
    payload = {
        "model": "reference-omni",
        "prompt": PROMPT,
        "input_reference": "ref.png",
        "seconds": 1.0,
        "negative_prompt": None,
        "seed": 42,
        "extra_params": {"task": "ref2va"},
    }
    (tmp_path / "payload.json").write_text(json.dumps(payload), encoding="utf-8")
    script = REPO_ROOT / "samples" / "h3-ref2va-5s" / "scripts" / "client.py"
    # The carried script polls every 5 s: patch nothing, just let one poll pass.
    with running_server("--latency", "0.05") as srv:
        done = subprocess.run(
            [
                sys.executable,
                str(script),
                srv.url,
                str(tmp_path / "payload.json"),
                str(tmp_path / "out.mp4"),
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["status"] == "ok"
    assert (tmp_path / "out.mp4").read_bytes() == make_mp4(42, PROMPT, reference=tiny_png())


def test_the_servers_figures_are_bounded_and_typed() -> None:
    from rerun.client import server_figures

    doc = {
        "stage_durations": {("x" * 100 if i == 0 else f"s{i}"): 1.0 for i in range(1000)},
        "inference_time_s": "12.5",  # text, not a number: left out
        "peak_memory_mb": float("inf"),  # not finite: left out
        "completed_at": True,  # a boolean is not a number
        "metrics": {"task": "ref2va"},
    }
    got = server_figures(doc)
    stages = json.loads(got.pop("server_stage_durations"))
    assert len(stages) == 64 and "x" * 64 in stages and "x" * 65 not in stages
    assert got == {"server_task": "ref2va"}
