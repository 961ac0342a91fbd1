"""The rerun client against the REAL vLLM-Omni 0.30.0 API server, engine replaced.

Runs only where ``vllm_omni`` can be imported: by this interpreter, or by the
one ``REPROBUNDLE_VLLM_OMNI_PYTHON`` names (``setup_env.sh`` in
``tests/fixtures/real_writers/vllm-omni-0.30.0/`` builds one at
``/tmp/omnireal-venv``, which is tried when the variable is unset). It starts
``serve_stub.py`` there: vLLM-Omni's own ``vllm serve MODEL --omni`` command
line and FastAPI app with only ``build_async_omni`` replaced by an in-process
stand-in engine. What that exercises and what it does not (no stage workers,
no weights, no NPU/GPU, no task selection) is in the README beside it.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from rerun.client import Deadline, VideoClient
from tests.omni_playback import RECORDINGS, encode_request, exchanges

SERVED = "MiniMax-H3-Ref2VA"
_DEFAULT_VENV_PYTHON = Path("/tmp/omnireal-venv/bin/python")
_READY_S = 300.0  # start-up takes 12-50 s on 2 cores; a minute more without HF_HUB_OFFLINE


def _omni_python() -> str | None:
    """An interpreter that can import vllm_omni, or None."""
    named = os.environ.get("REPROBUNDLE_VLLM_OMNI_PYTHON")
    candidates = [named] if named else [sys.executable, str(_DEFAULT_VENV_PYTHON)]
    for python in candidates:
        if not python or not Path(python).exists():
            continue
        probe = subprocess.run(
            [python, "-c", "import importlib.util as u; assert u.find_spec('vllm_omni')"],
            capture_output=True,
            timeout=60,
        )
        if probe.returncode == 0:
            return python
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def real_server() -> Iterator[str]:
    """The real server's URL, started with the stand-in engine; stopped after the module."""
    python = _omni_python()
    if python is None:
        pytest.skip(
            "vllm_omni is not importable (set REPROBUNDLE_VLLM_OMNI_PYTHON; see setup_env.sh)"
        )
    port = _free_port()
    cmd = [python, str(RECORDINGS / "serve_stub.py"), "--port", str(port)]
    cmd += ["--", "--served-model-name", SERVED]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        client = VideoClient(url)
        deadline = time.monotonic() + _READY_S
        while not client.health(timeout=2.0):
            assert proc.poll() is None, f"the real server exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"the real server was not ready in {_READY_S} s"
            time.sleep(1.0)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.mark.slow
def test_happy_path_against_the_real_server(real_server: str) -> None:
    client = VideoClient(real_server)
    fields = {"prompt": "a red fox", "model": SERVED, "seconds": "1", "size": "320x192"}
    fields["extra_params"] = '{"task": "ref2va"}'
    out = client.video_async(
        fields, {}, poll_interval_s=0.2, deadline=Deadline({"request": time.monotonic() + 120})
    )
    assert out.status == "ok", out.error
    assert out.body is not None and out.job_id is not None
    with av.open(io.BytesIO(out.body), mode="r") as c:
        video, audio = c.streams.video[0], c.streams.audio[0]
        assert (video.codec_context.name, audio.codec_context.name) == ("h264", "aac")
        assert (video.codec_context.width, video.codec_context.height) == (320, 192)
        assert video.average_rate == 24
        assert (audio.codec_context.sample_rate, audio.codec_context.channels) == (32000, 2)
    # The client deleted the job: the real store no longer has it.
    gone = client.request("GET", f"/v1/videos/{out.job_id}", timeout=10)
    assert gone.status == 404
    assert gone.json()["error"]["message"] == "Video not found"
    version = client.request("GET", "/version", timeout=10).json()
    assert version == {"version": "0.30.0"}


@pytest.mark.slow
def test_the_recordings_still_hold_on_the_real_server(real_server: str) -> None:
    """A few recorded answers, asked again live: the transcripts describe this server."""
    client = VideoClient(real_server)
    for x in exchanges("bad_requests"):
        if x.note not in ("seconds_float", "model_mismatch", "reference_as_text"):
            continue
        body, ctype = encode_request(x)
        live = client.request(
            "POST", x.path, body=body, headers={"Content-Type": ctype}, timeout=30
        )
        assert (live.status, live.json()) == (x.status, x.json), x.note
    failing = next(x for x in exchanges("failed_400") if x.note == "create")
    body, ctype = encode_request(failing)
    job = client.request(
        "POST", "/v1/videos", body=body, headers={"Content-Type": ctype}, timeout=30
    )
    job_id = job.json()["id"]
    deadline = time.monotonic() + 60
    while (poll := client.request("GET", f"/v1/videos/{job_id}", timeout=10)).status == 200:
        assert time.monotonic() < deadline, "the failing job did not fail"
        time.sleep(0.2)
    recorded = [x for x in exchanges("failed_400") if x.note == "poll"][-1]
    assert poll.status == recorded.status
    assert poll.json()["error"] == recorded.json["error"]
    assert client.request("DELETE", f"/v1/videos/{job_id}", timeout=10).status == 200
