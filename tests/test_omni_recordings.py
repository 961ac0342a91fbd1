"""What the real vLLM-Omni 0.30.0 API server answers, from its recorded transcripts.

The recordings (``tests/fixtures/real_writers/vllm-omni-0.30.0/``) were made
against the real server with only its engine replaced (see the README there).
These tests pin the facts the rerun client depends on; the expected values
come from vLLM-Omni 0.30.0's source (cited per test), not from our code.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from tests.omni_playback import (
    ERROR_FIELDS,
    RECORDINGS,
    VIDEO_RESPONSE_FIELDS,
    Exchange,
    exchanges,
    recording,
)

JOB_ID = re.compile(r"^video_gen_[0-9a-f]{32}$")
SERVED = "MiniMax-H3-Ref2VA"


def _one(xs: list[Exchange], note: str) -> Exchange:
    found = [x for x in xs if x.note == note]
    assert len(found) == 1, f"{note!r}: {len(found)} exchanges"
    return found[0]


def _polls(xs: list[Exchange]) -> list[Exchange]:
    return [x for x in xs if x.note == "poll"]


def _vllm_error(x: Exchange, status: int) -> dict[str, Any]:
    assert x.status == status, (x.note, x.status, x.body)
    doc = x.json
    assert set(doc) == {"error"}, doc
    assert set(doc["error"]) == ERROR_FIELDS, doc
    assert doc["error"]["code"] == status
    err: dict[str, Any] = doc["error"]
    return err


def test_recording_names_the_versions() -> None:
    rec = recording()
    assert rec["versions"]["vllm-omni"] == "0.30.0"
    assert rec["versions"]["vllm"] == "0.30.0"
    assert rec["server_command"][:4] == ["vllm", "serve", "MiniMaxAI/MiniMax-H3", "--omni"]


def test_version_is_vllms_and_names_no_commit() -> None:
    # vLLM-Omni defines no /version; upstream vLLM's route answers {"version": vllm.__version__}.
    x = exchanges("version")[0]
    assert (x.method, x.path, x.status) == ("GET", "/version", 200)
    assert x.json == {"version": recording()["versions"]["vllm"]}
    assert not any("commit" in h for h in x.headers)


def test_models_lists_the_served_name_only() -> None:
    x = next(x for x in exchanges("version") if x.path == "/v1/models")
    assert x.status == 200
    assert [m["id"] for m in x.json["data"]] == [SERVED]


def test_happy_path_create_poll_download_delete() -> None:
    xs = exchanges("happy_path")
    create = _one(xs, "create")
    assert create.status == 200
    job = create.json
    assert set(job) == VIDEO_RESPONSE_FIELDS
    assert JOB_ID.match(job["id"])
    assert (job["object"], job["status"], job["progress"]) == ("video", "queued", 0)
    assert (job["model"], job["seconds"], job["size"]) == (SERVED, "1", "320x192")
    assert job["completed_at"] is None and isinstance(job["created_at"], int)

    polls = _polls(xs)
    assert polls and all(p.status == 200 for p in polls)
    final = polls[-1].json
    assert set(final) == VIDEO_RESPONSE_FIELDS
    assert (final["status"], final["progress"], final["error"]) == ("completed", 100, None)
    assert final["file_name"] == f"{job['id']}.mp4"
    # Timestamps are whole Unix seconds; the server's own timing is a float in seconds.
    assert isinstance(final["completed_at"], int) and final["completed_at"] >= final["created_at"]
    assert isinstance(final["inference_time_s"], float) and final["inference_time_s"] > 0
    assert isinstance(final["stage_durations"], dict) and final["stage_durations"]
    assert all(isinstance(v, float) for v in final["stage_durations"].values())
    assert isinstance(final["peak_memory_mb"], float)

    content = _one(xs, "download")
    assert content.status == 200
    assert content.headers["content-type"] == "video/mp4"
    assert f'filename="{job["id"]}.mp4"' in content.headers["content-disposition"]
    data = (RECORDINGS / content.body["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == content.body["sha256"]
    assert len(data) == content.body["length"] == int(content.headers["content-length"])
    probe = content.body["probe"]
    # vllm_omni/diffusion/utils/media_utils.py: mux_video_audio_bytes writes H.264 + AAC MP4.
    assert (probe["video"]["codec"], probe["audio"]["codec"]) == ("h264", "aac")
    assert probe["video"]["frames"] == final["num_frames"]
    assert probe["video"]["fps"] == final["fps"]

    delete = _one(xs, "delete")
    assert delete.status == 200
    assert delete.json == {"id": job["id"], "object": "video.deleted", "deleted": True}
    gone = _one(xs, "poll after delete")
    assert _vllm_error(gone, 404)["message"] == "Video not found"


@pytest.mark.parametrize("code", [400, 500])
def test_failed_job_polls_with_its_own_status(code: int) -> None:
    # api_server.retrieve_video: a failed job answers with the status
    # _status_code_for_video_failure(job.error) gives.
    xs = exchanges(f"failed_{code}")
    failed = _polls(xs)[-1]
    assert failed.status == code
    doc = failed.json
    assert set(doc) == VIDEO_RESPONSE_FIELDS
    assert doc["status"] == "failed"
    assert set(doc["error"]) == {"code", "message"}
    assert doc["error"]["code"] == code
    assert doc["error"]["message"].startswith("stand-in: ")
    # The body starts with the model and the prompt: the reason comes after them.
    raw = failed.raw()
    assert raw.index(b'"error"') > raw.index(b'"prompt"')
    _vllm_error(_one(xs, "download a failed job"), 422)
    delete = _one(xs, "delete a failed job")
    assert (delete.status, delete.json["deleted"]) == (200, True)
    _vllm_error(_one(xs, "poll after delete"), 404)


def test_in_flight_job_content_is_404_and_delete_cancels_it() -> None:
    xs = exchanges("timeout_delete_in_flight")
    running = _one(xs, "poll while in progress")
    assert running.status == 200 and running.json["status"] == "in_progress"
    early = _vllm_error(_one(xs, "download before completion"), 404)
    assert early["message"] == "Generation is still in-progress"
    delete = _one(xs, "delete in flight (the client's timeout)")
    assert (delete.status, delete.json["deleted"]) == (200, True)
    _vllm_error(_one(xs, "poll after delete"), 404)


# Expected from helpers._parse_video_form's types (SecondStr, SizeStr, UploadFile, int)
# and vLLM's validation handler, which answers 400 (not FastAPI's 422) naming the field.
BAD_REQUESTS = [
    ("model_mismatch", None, "Model mismatch: request specifies 'some-other-model'"),
    ("model_real_id", None, "Model mismatch: request specifies 'MiniMaxAI/MiniMax-H3'"),
    ("seconds_float", "body.seconds", "String should match pattern '^[1-9]\\\\d*$'"),
    ("seconds_none", "body.seconds", "'input': 'None'"),
    ("size_star", "body.size", "String should match pattern '^\\\\d+x\\\\d+$'"),
    ("size_word", "body.size", "'input': 'large'"),
    ("reference_as_text", "body.input_reference", "Expected UploadFile"),
    ("references_as_json_text", "body.input_references.0", "Expected UploadFile"),
    ("steps_none", "body.num_inference_steps", "unable to parse string as an integer"),
    ("extra_params_not_json", None, "Invalid JSON in form field."),
    ("no_prompt", "body.prompt", "Field required"),
    ("json_body", "body.prompt", "Field required"),
]


@pytest.mark.parametrize(("note", "param", "text"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_refused_requests_are_400_with_vllms_error_body(
    note: str, param: str | None, text: str
) -> None:
    err = _vllm_error(_one(exchanges("bad_requests"), note), 400)
    assert err["param"] == param
    assert text in err["message"]


def test_form_accepts_what_a_client_may_not_expect() -> None:
    xs = exchanges("bad_requests")
    # pydantic's lax int parsing takes "7.0" for seed.
    assert _one(xs, "seed_float").status == 200
    # "None" in a text field is the text: a literal negative prompt.
    create = _one(exchanges("none_as_text"), "create")
    sent = (
        {p["name"]: p.get("value") for p in create.request_body["parts"]}
        if create.request_body
        else {}
    )
    assert sent["negative_prompt"] == "None"
    assert create.status == 200


def test_several_references_are_repeated_file_parts() -> None:
    xs = exchanges("several_references")
    create = _one(xs, "create")
    assert create.request_body is not None
    refs = [p for p in create.request_body["parts"] if p["name"] == "input_references"]
    assert [p["kind"] for p in refs] == ["file", "file", "file"]
    assert [p["content_type"] for p in refs] == ["image/png", "image/png", "audio/wav"]
    assert create.status == 200
    assert _polls(xs)[-1].json["status"] == "completed"
    assert _one(xs, "download").status == 200


def test_sync_answers_the_mp4_with_the_servers_figures_in_headers() -> None:
    # api_server.create_video_sync: X-Request-Id, X-Model, X-Inference-Time-S,
    # X-Stage-Durations (compact JSON), X-Peak-Memory-MB.
    x = exchanges("sync")[0]
    assert x.status == 200 and x.headers["content-type"] == "video/mp4"
    assert x.headers["x-request-id"].startswith("video_sync-")
    assert x.headers["x-model"] == SERVED
    assert float(x.headers["x-inference-time-s"]) > 0
    assert isinstance(json.loads(x.headers["x-stage-durations"]), dict)
    assert float(x.headers["x-peak-memory-mb"]) >= 0
    assert x.body["probe"]["video"]["frames"] > 0
