"""The reference server: the vLLM-Omni video API subset on loopback, for rerun tests.

It answers as vLLM-Omni 0.30.0's API server does wherever the rerun client
depends on it (facts from the ``vllm-omni==0.30.0`` wheel, cited beside each
rule here and in ``form.py``; ``docs/rerun.md`` lists them):

- ``GET /health``: 200 once ready.
- ``GET /version``: vLLM's route, ``{"version": <vLLM's version>}`` only
  (``--vllm-version``): no runtime commit of vLLM-Omni is reported over HTTP.
- ``POST /v1/videos`` (multipart only, validated as ``form.py`` says, model
  name checked against ``--served-model-name``): creates a ``video_gen_...``
  job that completes ``--latency`` seconds later; ``GET /v1/videos/{id}``
  polls it with the full ``VideoResponse`` (a failed job with its error's own
  HTTP status); ``GET /v1/videos/{id}/content`` downloads a real MP4 (video +
  AAC audio), 404 before completion, 422 for a failed job;
  ``DELETE /v1/videos/{id}`` removes a job in any state.
- ``POST /v1/videos/sync``: waits ``--latency``, returns the MP4 with
  ``X-Request-Id``, ``X-Model``, ``X-Inference-Time-S``, ``X-Stage-Durations``
  and ``X-Peak-Memory-MB``.
- Errors: vLLM's body ``{"error": {"message", "type", "param", "code"}}``.
- The task each request runs is resolved as the H3 pipeline does
  (``form.resolve_task``); ``--task-type ref2va`` makes a Ref2VA-only server,
  which fails any other task (HTTP 400 at the status poll).

It spawns ``--workers`` child processes (stand-ins for per-NPU workers) and on
SIGTERM forwards TERM to them and exits 0 at once, without waiting for them
(so a supervising rerun, as child subreaper, reaps them and sees their
status). Faults: ``--hang-requests 2`` never completes the second generation
request; ``--fail-requests`` makes one fail (HTTP 500); ``--ignore-term-workers 1``
makes worker 1 ignore TERM. The same faults can come from the environment
variable ``REFSERVER_FAULTS``: JSON ``{server name: {"hang_requests": [...],
"fail_requests": [...], "ignore_term_workers": [...]}}``.

Everything is bounded: the server stops by itself after ``--max-lifetime``
seconds or ``--max-requests`` HTTP requests (exit 3), workers after their own
lifetime; a hung request waits at most until the server stops.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from tests.reference_server.form import FormError, error_body, parse_video_form, resolve_task

__all__ = ["Config", "main", "shared_cache_file"]

EXIT_STOPPED_BY_ITSELF = 3
_MAX_BODY = 16 << 20
_WORKER_START_S = 30.0
_JOB_PATH = re.compile(r"^/v1/videos/([A-Za-z0-9_-]{1,100})(/content)?$")
_STAGES = {"text_encode": 0.01, "denoise": 0.05, "vae_decode": 0.02}
"""The stage durations the server reports (the real pipeline's profiler names differ)."""
_PEAK_MB = 1234.5
_TASKS_OF = {"combined": frozenset({"t2va", "fl2va", "ref2va"}), "ref2va": frozenset({"ref2va"})}


@dataclass
class Config:
    """Command-line settings of one reference server."""

    host: str = "127.0.0.1"
    port: int = 0
    server: str = "reference"
    vllm_version: str = "0.30.0"
    served_model_name: str = "reference-omni"
    task_type: str = "combined"
    latency_s: float = 0.1
    workers: int = 2
    max_lifetime_s: float = 120.0
    max_requests: int = 2000
    startup_delay_s: float = 0.0
    hang_requests: set[int] = field(default_factory=set)
    fail_requests: set[int] = field(default_factory=set)
    ignore_term_workers: set[int] = field(default_factory=set)
    worker_lifetime_s: float | None = None
    width: int = 64
    height: int = 64
    seconds: float = 1.0
    fps: int = 8
    port_file: Path | None = None


@dataclass
class Job:
    """One generation job."""

    id: str
    created: float
    created_unix: int
    fields: dict[str, str]
    reference: bytes
    hang: bool
    failure: tuple[int, str] | None
    task: str


class State:
    """Everything the handlers share, behind one lock."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.lock = threading.Lock()
        self.jobs: dict[str, Job] = {}
        self.generations = 0
        self.requests = 0
        self.stop = threading.Event()
        self.media: dict[tuple[str, str, bytes], bytes] = {}
        self.deleted: list[str] = []
        self.supported_tasks = _TASKS_OF[cfg.task_type]

    def job_doc(self, job: Job) -> dict[str, Any]:
        """The job as ``VideoResponse`` (``protocol/videos.py:372-429``) at this moment."""
        elapsed = time.monotonic() - job.created
        latency = self.cfg.latency_s
        done = not job.hang and elapsed >= latency
        status = ("failed" if job.failure else "completed") if done else "in_progress"
        progress = min(99, int(100 * elapsed / latency)) if latency else 0
        doc: dict[str, Any] = {
            "model": self.cfg.served_model_name,
            "prompt": job.fields.get("prompt", ""),
            "id": job.id,
            "object": "video",
            "status": status,
            "size": job.fields.get("size"),
            "progress": 100 if status == "completed" else progress,
            "seconds": job.fields.get("seconds", "4"),
            "quality": job.fields.get("quality", "default"),
            "completed_at": None,
            "created_at": job.created_unix,
            "remixed_from_video_id": None,
            "error": None,
            "media_type": "video/mp4",
            "expires_at": None,
            "file_name": None,
            "inference_time_s": None,
            "fps": float(self.cfg.fps),
            "num_frames": None,
            "duration_s": None,
            "metrics": None,
            "stage_durations": {},
            "peak_memory_mb": 0.0,
            "action": None,
        }
        if status == "in_progress":
            return doc
        # helpers.py:434-481: what a finished job's record gains.
        doc["completed_at"] = job.created_unix + max(1, round(latency))
        doc["inference_time_s"] = latency
        if job.failure is not None:
            doc["error"] = {"code": job.failure[0], "message": job.failure[1]}
            return doc
        frames = round(self.cfg.seconds * self.cfg.fps)
        doc.update(
            file_name=f"{job.id}.mp4",
            num_frames=frames,
            duration_s=frames / self.cfg.fps,
            stage_durations=dict(_STAGES),
            peak_memory_mb=_PEAK_MB,
        )
        return doc

    def count_request(self) -> bool:
        """Count one HTTP request; False once the request budget is spent."""
        with self.lock:
            self.requests += 1
            if self.requests > self.cfg.max_requests:
                self.stop.set()
                return False
        return True

    def next_generation(self) -> tuple[int, bool, bool]:
        """(1-based index, hang?, fail?) of a new generation request."""
        with self.lock:
            self.generations += 1
            n = self.generations
        return n, n in self.cfg.hang_requests, n in self.cfg.fail_requests

    def mp4(self, fields: dict[str, str], reference: bytes) -> bytes:
        """The clip for these request fields (cached: the first request pays the encoding).

        With ``REFSERVER_MEDIA_CACHE`` set to a folder, clips are also shared there
        between servers (tests use it to skip re-encoding the same clip per server).
        """
        key = (fields.get("seed", "0"), fields.get("prompt", ""), reference)
        with self.lock:
            cached = self.media.get(key)
        if cached is not None:
            return cached
        shared = _shared_cache_path(key, self.cfg)
        if shared is not None and shared.is_file():
            data = shared.read_bytes()
        else:
            data = self._render(key)
            if shared is not None:
                tmp = shared.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                tmp.replace(shared)
        with self.lock:
            self.media[key] = data
        return data

    def _render(self, key: tuple[str, str, bytes]) -> bytes:
        from tests.reference_server.media import make_mp4

        seed_text, prompt, reference = key
        try:
            seed = int(float(seed_text))
        except ValueError:
            seed = 0
        return make_mp4(
            seed,
            prompt,
            reference=reference,
            width=self.cfg.width,
            height=self.cfg.height,
            seconds=self.cfg.seconds,
            fps=self.cfg.fps,
        )


def shared_cache_file(folder: Path, seed: str, prompt: str, reference: bytes, cfg: Config) -> Path:
    """Where a server with ``cfg`` keeps (or finds) the clip for these form values in ``folder``."""
    params = f"{seed}\0{prompt}\0{cfg.width}x{cfg.height}\0{cfg.seconds}\0{cfg.fps}\0"
    return folder / f"{hashlib.sha256(params.encode() + reference).hexdigest()}.mp4"


def _shared_cache_path(key: tuple[str, str, bytes], cfg: Config) -> Path | None:
    folder = os.environ.get("REFSERVER_MEDIA_CACHE")
    return None if not folder else shared_cache_file(Path(folder), *key, cfg)


class Handler(BaseHTTPRequestHandler):
    """The API subset, answering as vLLM-Omni 0.30.0 does where the rerun client depends on it."""

    server_version = "reference-omni/1"
    state: State  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.state.cfg.server}: {format % args}\n")

    def _send(
        self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json", headers)

    def _error(self, status: int, message: str, param: str | None = None) -> None:
        self._json(status, error_body(status, message, param))

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n > _MAX_BODY:
            raise FormError(413, "body too large")
        return self.rfile.read(n)

    def _guard(self) -> bool:
        if not self.state.count_request():
            self._error(503, "request budget spent; stopping")
            return False
        return True

    def do_GET(self) -> None:
        """Health, version, job status and content."""
        if not self._guard():
            return
        if self.path == "/health":
            self._send(200, b"", "application/json")
            return
        if self.path == "/version":
            # vLLM's route (vLLM-Omni defines none): vLLM's own version, nothing else
            # (vllm 0.30.0, vllm/entrypoints/serve/instrumentator/basic.py:53-56).
            self._json(200, {"version": self.state.cfg.vllm_version})
            return
        m = _JOB_PATH.match(self.path)
        job = self.state.jobs.get(m.group(1)) if m else None
        if m is None or job is None:
            self._error(404, "Video not found")
            return
        doc = self.state.job_doc(job)
        if not m.group(2):
            if doc["status"] == "failed":
                # api_server.py:2832-2840: a failed job is polled with its error's own status.
                self._json(int(doc["error"]["code"]), doc)
            else:
                self._json(200, doc)
        elif doc["status"] == "failed":
            self._error(422, "Video generation failed. Check job status for error details.")
        elif doc["status"] != "completed":
            self._error(404, "Generation is still in-progress")
        else:
            self._send(200, self.state.mp4(job.fields, job.reference), "video/mp4")

    def do_DELETE(self) -> None:
        """Remove a job, whatever its state (api_server.py:2848-2915)."""
        if not self._guard():
            return
        m = _JOB_PATH.match(self.path)
        with self.state.lock:
            job = self.state.jobs.pop(m.group(1), None) if m and not m.group(2) else None
            if job is not None:
                self.state.deleted.append(job.id)
        if job is None:
            self._error(404, "Video not found")
            return
        self._json(200, {"id": job.id, "object": "video.deleted", "deleted": True})

    def do_POST(self) -> None:
        """Create a job, or generate synchronously."""
        if not self._guard():
            return
        if self.path not in ("/v1/videos", "/v1/videos/sync"):
            self._error(404, "Not Found")
            return
        cfg = self.state.cfg
        try:
            form = parse_video_form(
                self.headers.get("Content-Type", ""), self._body(), cfg.served_model_name
            )
        except FormError as exc:
            self._error(exc.status, exc.message, exc.param)
            return
        _, hang, fail = self.state.next_generation()
        task = resolve_task(form, cfg.task_type)
        failure = None
        if fail:
            failure = (500, "reference server fault")
        elif task not in self.state.supported_tasks:
            failure = (
                400,
                f"checkpoint partition {cfg.task_type!r} supports "
                f"{sorted(self.state.supported_tasks)}, got task={task!r}",
            )
        prefix = "video_gen_" if self.path == "/v1/videos" else "video_sync-"
        job = Job(
            f"{prefix}{uuid.uuid4().hex}",  # vLLM-Omni's: video_gen_<32 hex> (recorded)
            time.monotonic(),
            int(time.time()),
            form.fields,
            b"".join(u.data for u in form.references),
            hang,
            failure,
            task,
        )
        sys.stderr.write(f"{cfg.server}: {job.id} task={task}\n")
        if self.path == "/v1/videos":
            with self.state.lock:
                self.state.jobs[job.id] = job
            self._json(200, {**self.state.job_doc(job), "status": "queued", "progress": 0})
            return
        self._sync(job)

    def _sync(self, job: Job) -> None:
        # A hung request waits until the server stops; a normal one, its latency.
        cfg = self.state.cfg
        wait = cfg.max_lifetime_s if job.hang else cfg.latency_s
        if self.state.stop.wait(wait):
            self._error(503, "server stopping")
            return
        if job.failure is not None:
            self._error(*job.failure)
            return
        data = self.state.mp4(job.fields, job.reference)
        # api_server.py:2770-2779: the sync route's metadata headers.
        headers = {
            "X-Request-Id": job.id,
            "X-Model": cfg.served_model_name,
            "X-Inference-Time-S": f"{cfg.latency_s:.3f}",
            "X-Stage-Durations": json.dumps(_STAGES, separators=(",", ":")),
            "X-Peak-Memory-MB": f"{_PEAK_MB:.3f}",
        }
        self._send(200, data, "video/mp4", headers)


def _faults_from_env(cfg: Config) -> None:
    raw = os.environ.get("REFSERVER_FAULTS")
    if not raw:
        return
    mine = json.loads(raw).get(cfg.server, {})
    cfg.hang_requests |= {int(x) for x in mine.get("hang_requests", [])}
    cfg.fail_requests |= {int(x) for x in mine.get("fail_requests", [])}
    cfg.ignore_term_workers |= {int(x) for x in mine.get("ignore_term_workers", [])}


def _spawn_workers(cfg: Config) -> list[subprocess.Popen[bytes]]:
    lifetime = cfg.worker_lifetime_s or cfg.max_lifetime_s + 30
    procs = []
    for i in range(cfg.workers):
        argv = [
            sys.executable,
            "-m",
            "tests.reference_server.worker",
            "--name",
            f"npu{i}",
            "--max-lifetime",
            str(lifetime),
        ]
        if i in cfg.ignore_term_workers:
            argv.append("--ignore-term")
        procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE))
    deadline = time.monotonic() + _WORKER_START_S
    for w in procs:
        assert w.stdout is not None
        ready, _, _ = select.select([w.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = w.stdout.readline() if ready else b""
        w.stdout.close()
        if line.strip() != b"ready":
            raise RuntimeError(f"worker {w.pid} did not report ready")
    return procs


def serve(cfg: Config) -> int:
    """Run the server until SIGTERM (exit 0) or its own limits (exit 3)."""
    _faults_from_env(cfg)
    state = State(cfg)
    termed: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        termed.append(signum)
        state.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    workers = _spawn_workers(cfg)
    if state.stop.wait(cfg.startup_delay_s):
        return _finish(workers, termed)
    handler = type("BoundHandler", (Handler,), {"state": state})
    httpd = ThreadingHTTPServer((cfg.host, cfg.port), handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    if cfg.port_file is not None:
        cfg.port_file.write_text(str(port), encoding="utf-8")
    print(f"listening on http://{cfg.host}:{port}", flush=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    state.stop.wait(cfg.max_lifetime_s)
    state.stop.set()
    httpd.shutdown()
    httpd.server_close()
    return _finish(workers, termed)


def _finish(workers: list[subprocess.Popen[bytes]], termed: list[int]) -> int:
    for w in workers:
        # Forward TERM without reaping (no poll/wait): whoever supervises us reads their status.
        with contextlib.suppress(ProcessLookupError):
            os.kill(w.pid, signal.SIGTERM)
    sys.stdout.flush()
    sys.stderr.flush()
    # Exit at once, leaving the workers to whoever supervises us (they are not waited for).
    os._exit(0 if termed else EXIT_STOPPED_BY_ITSELF)


def _ints(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()}


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Parse the command line into a :class:`Config`."""
    ap = argparse.ArgumentParser(prog="reference-server", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--server", default="reference")
    ap.add_argument("--vllm-version", default="0.30.0", help="what GET /version reports")
    ap.add_argument("--served-model-name", default="reference-omni")
    ap.add_argument("--task-type", choices=sorted(_TASKS_OF), default="combined")
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-lifetime", type=float, default=120.0)
    ap.add_argument("--max-requests", type=int, default=2000)
    ap.add_argument("--startup-delay", type=float, default=0.0)
    ap.add_argument("--hang-requests", type=_ints, default=set())
    ap.add_argument("--fail-requests", type=_ints, default=set())
    ap.add_argument("--ignore-term-workers", type=_ints, default=set())
    ap.add_argument("--worker-lifetime", type=float, default=None)
    ap.add_argument("--size", default="64x64")
    ap.add_argument("--media-seconds", type=float, default=1.0)
    ap.add_argument("--fps", type=int, default=8)
    ap.add_argument("--port-file", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("the reference server only listens on loopback")
    w, h = (int(x) for x in a.size.lower().split("x"))
    return Config(
        host=a.host,
        port=a.port,
        server=a.server,
        vllm_version=a.vllm_version,
        served_model_name=a.served_model_name,
        task_type=a.task_type,
        latency_s=a.latency,
        workers=a.workers,
        max_lifetime_s=a.max_lifetime,
        max_requests=a.max_requests,
        startup_delay_s=a.startup_delay,
        hang_requests=set(a.hang_requests),
        fail_requests=set(a.fail_requests),
        ignore_term_workers=set(a.ignore_term_workers),
        worker_lifetime_s=a.worker_lifetime,
        width=w,
        height=h,
        seconds=a.media_seconds,
        fps=a.fps,
        port_file=a.port_file,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m tests.reference_server``."""
    return serve(parse_args(argv))
