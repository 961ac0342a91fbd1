"""The rerun client against the real vLLM-Omni 0.30.0 server's recorded answers.

``tests.omni_playback`` serves the transcripts recorded from the real server
(engine replaced, see ``tests/fixtures/real_writers/vllm-omni-0.30.0/``) on
127.0.0.1; the rerun's own HTTP client talks to it as it would to the real
server. Each issue-21 item the recording showed (a failed job deleted, its
reason recorded) is checked here against the real server's own answers.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from rerun.client import Deadline, VideoClient
from tests.omni_playback import exchanges, playback


def _fields(scenario: str) -> dict[str, Any]:
    """The text fields of the scenario's recorded POST (file parts are not replayed)."""
    create = next(x for x in exchanges(scenario) if x.method == "POST")
    assert create.request_body is not None
    return {p["name"]: p["value"] for p in create.request_body["parts"] if p["kind"] == "text"}


def _job_path(scenario: str) -> str:
    create = next(x for x in exchanges(scenario) if x.method == "POST")
    return f"/v1/videos/{create.json['id']}"


def _run(scenario: str, *, within_s: float = 10.0) -> tuple[Any, list[tuple[str, str]]]:
    with playback([scenario]) as pb:
        out = VideoClient(pb.url).video_async(
            _fields(scenario),
            {},
            poll_interval_s=0.02,
            deadline=Deadline({"request": time.monotonic() + within_s}),
        )
        return out, list(pb.received)


def test_happy_path_downloads_the_recorded_mp4_and_deletes() -> None:
    out, received = _run("happy_path")
    assert out.status == "ok", out.error
    content = next(x for x in exchanges("happy_path") if x.note == "download")
    assert out.body is not None
    assert hashlib.sha256(out.body).hexdigest() == content.body["sha256"]
    job = _job_path("happy_path")
    assert received[0] == ("POST", "/v1/videos")
    assert ("GET", f"{job}/content") in received
    assert received[-1] == ("DELETE", job)


def test_timed_out_job_is_deleted_in_flight() -> None:
    out, received = _run("timeout_delete_in_flight", within_s=0.5)
    assert (out.status, out.timeout_level) == ("timeout", "request")
    assert ("DELETE", _job_path("timeout_delete_in_flight")) in received
    assert out.cleanup == "deleted after timeout"


@pytest.mark.parametrize("code", [400, 500])
def test_failed_job_is_recorded_as_failed_with_its_status(code: int) -> None:
    out, _ = _run(f"failed_{code}")
    assert (out.status, out.http_status) == ("failed", code)


@pytest.mark.parametrize("code", [400, 500])
def test_failed_job_is_deleted(code: int) -> None:
    _, received = _run(f"failed_{code}")
    assert ("DELETE", _job_path(f"failed_{code}")) in received


def test_failed_job_records_the_servers_reason() -> None:
    out, _ = _run("failed_400")
    poll = [x for x in exchanges("failed_400") if x.note == "poll"][-1]
    assert out.error is not None
    assert poll.json["error"]["message"] in out.error
