"""Where ``tests/reference_server/`` answers differently from the real vLLM-Omni 0.30.0 server.

The same requests the recording sent to the real server (engine replaced;
``tests/fixtures/real_writers/vllm-omni-0.30.0/``) go to our reference
server on 127.0.0.1; each check compares one fact the rerun client depends
on. Every fact now agrees (the differences found when the recording was made
were fixed in the reference server); a new difference fails here, naming the
fact. A difference that cannot be fixed becomes a strict xfail naming it.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from tests.omni_playback import VIDEO_RESPONSE_FIELDS, Exchange, encode_request, exchanges
from tests.reference_server import REPO_ROOT, running_server, server_command

SERVED = "MiniMax-H3-Ref2VA"
JOB_ID = re.compile(r"^video_gen_[0-9a-f]{32}$")
Answer = tuple[int, dict[str, str], Any]


@cache
def _server_args() -> tuple[str, ...]:
    """The served name and vLLM version, where this reference server takes them."""
    usage = subprocess.run(
        server_command("--help"), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    args: list[str] = ["--workers", "0", "--latency", "0.2"]
    if "--served-model-name" in usage:
        args += ["--served-model-name", SERVED]
    if "--vllm-version" in usage:
        args += ["--vllm-version", "0.30.0"]
    return tuple(args)


def _send(url: str, method: str, path: str, x: Exchange | None = None) -> Answer:
    body, headers = (None, {})
    if x is not None:
        body, ctype = encode_request(x)
        headers = {"Content-Type": ctype} if ctype else {}
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    doc: Any = data
    if hdrs.get("content-type", "").startswith("application/json"):
        doc = json.loads(data)
    return resp.status, hdrs, doc


def _poll(url: str, job: str) -> Answer:
    deadline = time.monotonic() + 15
    while True:
        ans = _send(url, "GET", f"/v1/videos/{job}")
        status = ans[2].get("status") if isinstance(ans[2], dict) else None
        if status in ("completed", "failed") or ans[0] >= 400 or time.monotonic() > deadline:
            return ans
        time.sleep(0.05)


def _error_shape(ans: Answer) -> tuple[int, Any]:
    doc = ans[2]
    err = doc.get("error") if isinstance(doc, dict) else None
    keys = sorted(err) if isinstance(err, dict) and set(doc) == {"error"} else None
    return ans[0], keys


def _rec(scenario: str, note: str) -> Exchange:
    return next(x for x in exchanges(scenario) if x.note == note)


def _facts(url: str, hang_url: str, fail_url: str) -> dict[str, tuple[Any, Any]]:
    """(recorded, reference) per fact."""
    f: dict[str, tuple[Any, Any]] = {}
    ver = exchanges("version")[0]
    f["version_body"] = (ver.json, _send(url, "GET", "/version")[2])

    create = _rec("happy_path", "create")
    st, _, doc = _send(url, "POST", "/v1/videos", create)
    f["create_status"] = (create.status, st)
    f["create_fields"] = (VIDEO_RESPONSE_FIELDS, set(doc) if isinstance(doc, dict) else None)
    job = doc.get("id", "") if isinstance(doc, dict) else ""
    f["job_id_format"] = (True, bool(JOB_ID.match(job)))
    done = _poll(url, job)
    final = done[2] if isinstance(done[2], dict) else {}
    f["completed_fields"] = (VIDEO_RESPONSE_FIELDS, set(final))
    types = {k: type(final.get(k)).__name__ for k in ("inference_time_s", "peak_memory_mb")}
    types |= {k: type(final.get(k)).__name__ for k in ("stage_durations", "completed_at")}
    rec_final = [x for x in exchanges("happy_path") if x.note == "poll"][-1].json
    rec_types = {k: type(rec_final[k]).__name__ for k in types}
    f["server_figures"] = (rec_types, types)
    content = _send(url, "GET", f"/v1/videos/{job}/content")
    f["content"] = ((200, "video/mp4"), (content[0], content[1].get("content-type")))
    delete = _send(url, "DELETE", f"/v1/videos/{job}")
    f["delete_body"] = ({**_rec("happy_path", "delete").json, "id": job}, delete[2])
    rec_gone = _rec("happy_path", "poll after delete")
    f["gone"] = (
        _error_shape((rec_gone.status, {}, rec_gone.json)),
        _error_shape(_send(url, "GET", f"/v1/videos/{job}")),
    )

    # In flight: the reference server's --hang-requests 1 never completes its first job.
    slow = _rec("timeout_delete_in_flight", "create")
    hang_job = _send(hang_url, "POST", "/v1/videos", slow)[2].get("id", "")
    early = _rec("timeout_delete_in_flight", "download before completion")
    f["content_before_completion"] = (
        _error_shape((early.status, {}, early.json)),
        _error_shape(_send(hang_url, "GET", f"/v1/videos/{hang_job}/content")),
    )
    f["delete_in_flight"] = (200, _send(hang_url, "DELETE", f"/v1/videos/{hang_job}")[0])

    # Failed: the reference server's --fail-requests 1 fails its first job (with 500).
    failed = _rec("failed_500", "create")
    fail_job = _send(fail_url, "POST", "/v1/videos", failed)[2].get("id", "")
    rec_poll = [x for x in exchanges("failed_500") if x.note == "poll"][-1]
    poll = _poll(fail_url, fail_job)
    f["failed_poll_status"] = (rec_poll.status, poll[0])
    err = poll[2].get("error") if isinstance(poll[2], dict) else None
    f["failed_error_shape"] = (
        (sorted(rec_poll.json["error"]), rec_poll.status),
        (sorted(err) if isinstance(err, dict) else None, err.get("code") if err else None),
    )
    rec_content = _rec("failed_500", "download a failed job")
    f["failed_content"] = (
        _error_shape((rec_content.status, {}, rec_content.json)),
        _error_shape(_send(fail_url, "GET", f"/v1/videos/{fail_job}/content")),
    )
    f["failed_delete"] = (200, _send(fail_url, "DELETE", f"/v1/videos/{fail_job}")[0])

    for x in exchanges("bad_requests"):
        if x.method != "POST":
            continue
        ans = _send(url, "POST", x.path, x)
        rec_param = x.json["error"]["param"] if x.status >= 400 else None
        doc = ans[2]
        param = (
            doc["error"].get("param")
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict)
            else None
        )
        f[f"form_{x.note}"] = (
            (*_error_shape((x.status, {}, x.json)), rec_param),
            (*_error_shape(ans), param),
        )
        if isinstance(doc, dict) and doc.get("id"):
            _send(url, "DELETE", f"/v1/videos/{doc['id']}")
    several = _rec("several_references", "create")
    f["several_references"] = (several.status, _send(url, "POST", "/v1/videos", several)[0])
    none_text = _rec("none_as_text", "create")
    f["none_as_text"] = (none_text.status, _send(url, "POST", "/v1/videos", none_text)[0])
    sync = exchanges("sync")[0]
    ans = _send(url, "POST", "/v1/videos/sync", sync)
    f["sync_headers"] = (
        sorted(h for h in sync.headers if h.startswith("x-")),
        sorted(h for h in ans[1] if h.startswith("x-")),
    )
    return f


@pytest.fixture(scope="module")
def facts() -> Iterator[dict[str, tuple[Any, Any]]]:
    """Run every recorded request against three reference servers (plain, hang, fail)."""
    args = _server_args()
    with (
        running_server(*args) as plain,
        running_server(*args, "--hang-requests", "1") as hang,
        running_server(*args, "--fail-requests", "1") as fail,
    ):
        yield _facts(plain.url, hang.url, fail.url)


FORMS = (
    "model_mismatch",
    "model_real_id",
    "seconds_float",
    "seconds_none",
    "size_star",
    "size_word",
    "reference_as_text",
    "references_as_json_text",
    "steps_none",
    "extra_params_not_json",
    "no_prompt",
    "json_body",
)
CHECKS: list[Any] = [
    pytest.param("version_body"),
    pytest.param("create_status"),
    pytest.param("create_fields"),
    pytest.param("job_id_format"),
    pytest.param("completed_fields"),
    pytest.param("server_figures"),
    pytest.param("content"),
    pytest.param("delete_body"),
    pytest.param("gone"),
    pytest.param("content_before_completion"),
    pytest.param("delete_in_flight"),
    pytest.param("failed_poll_status"),
    pytest.param("failed_error_shape"),
    pytest.param("failed_content"),
    pytest.param("failed_delete"),
    *[pytest.param(f"form_{note}") for note in FORMS],
    pytest.param("form_seed_float"),
    pytest.param("several_references"),
    pytest.param("none_as_text"),
    pytest.param("sync_headers"),
]


@pytest.mark.parametrize("fact", CHECKS)
def test_reference_server_answers_as_the_real_one(
    facts: dict[str, tuple[Any, Any]], fact: str
) -> None:
    recorded, reference = facts[fact]
    assert reference == recorded
