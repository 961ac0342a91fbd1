"""A stdlib client for the vLLM-Omni video API, timed at the plan's boundary.

``videos-async`` (``post_to_delete``): the clock starts before
``POST /v1/videos`` and stops after ``GET /v1/videos/{id}/content`` and
``DELETE /v1/videos/{id}``; the polling ``GET /v1/videos/{id}`` every
``poll_interval_s`` is inside the number, as in vLLM-Omni's own benchmark.
``videos-sync``: the clock spans ``POST /v1/videos/sync`` and the download
of the MP4 it returns.

Every call is bounded by a :class:`Deadline`: the earliest of the request,
wave, arm and reservation deadlines, or a stop raised by the watchdog. When
one passes, the request ends with status ``timeout`` and the level that
fired; the job is then deleted outside the timing boundary. A job the
server reports failed (the status poll answers with the error's own HTTP
status and ``{"status": "failed", "error": {"code", "message"}}``) is recorded
with that message and deleted inside the boundary, like any finished job.

The form is encoded by the types of vLLM-Omni 0.30.0's form
(``video/generation/helpers.py:852-900``): ``None`` is left out, integer
fields (``seconds``, ``seed``, ...) go as integer text, objects
(``extra_params``) as JSON, and each file of ``input_references`` as its own
part under that name. What the server measured itself (``inference_time_s``,
``stage_durations``, ``peak_memory_mb``, ``created_at``/``completed_at``) is
kept beside the boundary's ``e2e_s`` in :attr:`RequestOutcome.server`.
"""

from __future__ import annotations

import http.client
import json
import math
import mimetypes
import re
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bundler.campaign.plan_result import LEVELS
from rerun.watchdog import StopFlag

__all__ = [
    "Deadline",
    "DeadlineExceeded",
    "FilePart",
    "RequestOutcome",
    "VersionReport",
    "VideoClient",
    "commit_matches",
    "earliest_deadline",
    "encode_multipart",
    "form_text",
]

_RANK = {name: i for i, name in enumerate(LEVELS)}
_HEX = re.compile(r"^[0-9a-f]{7,64}$")
INT_FIELDS = frozenset(
    {
        "seconds",
        "width",
        "height",
        "num_frames",
        "short_edge",
        "num_outputs_per_prompt",
        "num_inference_steps",
        "seed",
        "frame_interpolation_exp",
    }
)
"""Form fields vLLM-Omni types as integers (``seconds`` as the text ``^[1-9]\\d*$``)."""
_STAGES_MAX = 64
_STAGE_NAME_MAX = 64
_SERVER_FIELDS = (
    "inference_time_s",
    "peak_memory_mb",
    "created_at",
    "completed_at",
    "num_frames",
    "fps",
    "duration_s",
)
_CLEANUP_TIMEOUT_S = 5.0
_ERROR_SNIPPET = 300
_TIMEOUT_SLACK_S = 0.25


def earliest_deadline(at: Mapping[str, float | None]) -> tuple[str, float] | None:
    """The level whose deadline comes first (ties go to the innermost level), or None."""
    present = [(t, _RANK.get(level, -1), level) for level, t in at.items() if t is not None]
    if not present:
        return None
    t, _, level = min(present)
    return level, t


class DeadlineExceeded(Exception):
    """A deadline passed (``level`` set) or the run was stopped (``level`` from the stop)."""

    def __init__(self, level: str | None, reason: str) -> None:
        super().__init__(reason)
        self.level = level
        self.reason = reason


@dataclass(frozen=True)
class Deadline:
    """Absolute monotonic deadlines per level, plus the run's stop flag."""

    at: Mapping[str, float | None]
    stop: StopFlag | None = None

    def earliest(self) -> tuple[str, float] | None:
        """The first deadline to come."""
        return earliest_deadline(self.at)

    def remaining(self) -> float:
        """Seconds until the earliest deadline (infinite when none)."""
        first = self.earliest()
        return math.inf if first is None else first[1] - time.monotonic()

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` if the run was stopped or a deadline passed."""
        if self.stop is not None and self.stop.is_set():
            raise DeadlineExceeded(self.stop.level, self.stop.reason or "stopped")
        first = self.earliest()
        if first is not None and time.monotonic() >= first[1]:
            raise DeadlineExceeded(first[0], f"{first[0]} deadline passed")

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` or until a deadline or a stop, then :meth:`check`."""
        wait = max(0.0, min(seconds, self.remaining()))
        if self.stop is not None:
            self.stop.wait(wait)
        else:
            time.sleep(wait)
        self.check()

    def io_timeout(self, cap: float = 600.0) -> float:
        """A socket timeout for one call: what is left, at least a millisecond."""
        return max(0.001, min(cap, self.remaining()))


@dataclass(frozen=True)
class FilePart:
    """A file sent as one multipart part."""

    filename: str
    data: bytes
    content_type: str | None = None


def form_text(name: str, value: Any) -> str | None:
    """The text of form field ``name`` for ``value``, or None to leave the field out.

    ``None`` is left out (the form's default; the text ``None`` would be a
    literal negative prompt, or a 400 on a numeric field); booleans are
    ``true``/``false``; objects and lists are JSON; an integral float of an
    integer field (``seconds`` 5.0) is its integer text.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if name in INT_FIELDS and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def encode_multipart(
    fields: Mapping[str, Any], files: Mapping[str, Sequence[FilePart]] | None = None
) -> tuple[bytes, str]:
    """``multipart/form-data`` body and content type (see :func:`form_text`).

    Each file of ``files[name]`` is one part named ``name``, in order.
    """
    boundary = f"reprobundle-{uuid.uuid4().hex}"
    chunks: list[bytes] = []
    for name, value in fields.items():
        text = form_text(name, value)
        if text is None:
            continue
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + text.encode("utf-8")
            + b"\r\n"
        )
    for name, parts in (files or {}).items():
        for part in parts:
            ctype = part.content_type or mimetypes.guess_type(part.filename)[0]
            head = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{part.filename}"\r\nContent-Type: '
                f"{ctype or 'application/octet-stream'}\r\n\r\n"
            )
            chunks.append(head.encode() + part.data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


@dataclass(frozen=True)
class HttpResponse:
    """One HTTP response, read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        """2xx."""
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    def snippet(self) -> str:
        """The start of the body, for error messages."""
        return self.body[:_ERROR_SNIPPET].decode("utf-8", "replace")

    def doc(self) -> Mapping[str, Any] | None:
        """The body as a JSON object, or None."""
        try:
            doc = json.loads(self.body)
        except ValueError:
            return None
        return doc if isinstance(doc, Mapping) else None

    def reason(self) -> str:
        """Why the server refused: ``error.message`` of its JSON body, else the body's start.

        Both of vLLM-Omni's error bodies carry it there: vLLM's
        ``{"error": {"message", "type", "param", "code"}}`` and a failed job's
        ``{"status": "failed", "error": {"code", "message"}, ...}``.
        """
        doc = self.doc()
        err = None if doc is None else doc.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return f"HTTP {self.status}: {err['message'][:_ERROR_SNIPPET]}"
        return f"HTTP {self.status}: {self.snippet()}"


@dataclass(frozen=True)
class RequestOutcome:
    """One request as the rerun records it."""

    status: str
    e2e_s: float
    start_ns: int
    end_ns: int
    timeout_level: str | None = None
    http_status: int | None = None
    body: bytes | None = None
    job_id: str | None = None
    polls: int = 0
    error: str | None = None
    server: Mapping[str, Any] = field(default_factory=dict)
    cleanup: str | None = None


@dataclass(frozen=True)
class VersionReport:
    """What ``GET /version`` said: vLLM's version (vLLM-Omni defines no version route).

    It never names vLLM-Omni's commit: a vLLM development build's
    ``0.30.1.dev3+gced6857af`` carries *vLLM's* hash. It is recorded, never
    compared with an arm's runtime commit.
    """

    http_status: int | None
    vllm_version: str | None
    error: str | None = None


def commit_matches(reported: str, expected: str) -> bool:
    """True when one commit id is a prefix of the other (at least 7 hex digits each)."""
    a, b = reported.lower(), expected.lower()
    if not (_HEX.match(a) and _HEX.match(b)):
        return False
    return a.startswith(b) or b.startswith(a)


class VideoClient:
    """Talk to one server over HTTP (``http://`` or ``https://``) with the stdlib."""

    def __init__(self, base_url: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One HTTP exchange on a fresh connection.

        Raises:
            OSError: connection or socket failure (``TimeoutError`` on timeout).
            http.client.HTTPException: a malformed response.
        """
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        try:
            conn.request(method, self._prefix + path, body=body, headers=dict(headers or {}))
            resp = conn.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            return HttpResponse(resp.status, hdrs, data)
        finally:
            conn.close()

    def health(self, timeout: float) -> bool:
        """True when ``GET /health`` answers 2xx."""
        try:
            return self.request("GET", "/health", timeout=timeout).ok
        except (OSError, http.client.HTTPException):
            return False

    def version(self, timeout: float = 10.0) -> VersionReport:
        """Ask ``GET /version`` which vLLM answers (recorded only; see :class:`VersionReport`)."""
        try:
            resp = self.request("GET", "/version", timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            return VersionReport(None, None, f"GET /version failed: {exc}")
        doc = resp.doc() if resp.ok else None
        version = None if doc is None else doc.get("version")
        err = None if resp.ok else f"GET /version answered {resp.status}"
        return VersionReport(resp.status, version if isinstance(version, str) else None, err)

    def _cleanup(self, job_id: str | None, stop_level: str | None, why: str) -> str | None:
        if job_id is None:
            return None
        # After a reservation stop there is little time left: try once, briefly.
        timeout = 1.0 if stop_level == "reservation" else _CLEANUP_TIMEOUT_S
        try:
            resp = self.request("DELETE", f"/v1/videos/{job_id}", timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            return f"delete after {why} failed: {exc}"
        return f"deleted after {why}" if resp.ok else f"delete after {why}: {resp.reason()}"

    def video_async(
        self,
        fields: Mapping[str, Any],
        files: Mapping[str, Sequence[FilePart]],
        *,
        poll_interval_s: float,
        deadline: Deadline,
    ) -> RequestOutcome:
        """POST, poll every ``poll_interval_s``, download, DELETE, inside ``deadline``."""
        body, ctype = encode_multipart(fields, files)
        run = _Timing()
        job_id: str | None = None
        polls = 0
        server: dict[str, Any] = {}
        try:
            deadline.check()
            resp = self.request(
                "POST",
                "/v1/videos",
                body=body,
                headers={"Content-Type": ctype},
                timeout=deadline.io_timeout(),
            )
            if not resp.ok:
                return run.failed(resp.status, f"POST /v1/videos: {resp.reason()}")
            job = resp.json()
            job_id = str(job["id"])
            status = job.get("status")
            while status not in ("completed", "failed"):
                deadline.sleep(poll_interval_s)
                resp = self.request("GET", f"/v1/videos/{job_id}", timeout=deadline.io_timeout())
                polls += 1
                doc = resp.doc()
                status = None if doc is None else doc.get("status")
                if not resp.ok and status != "failed":
                    # Not a failed job's record (a 404 says the job is gone): no DELETE then.
                    gone = resp.status == 404
                    out = run.failed(
                        resp.status, f"GET status: {resp.reason()}", job_id, polls, server
                    )
                    return out if gone else _with_cleanup(out, self._cleanup(job_id, None, "error"))
            server = server_figures(doc)
            content: bytes | None = None
            error: str | None = None
            last = resp.status
            if status == "completed":
                resp = self.request(
                    "GET", f"/v1/videos/{job_id}/content", timeout=deadline.io_timeout()
                )
                last = resp.status
                if resp.ok:
                    content = resp.body
                else:
                    error = f"GET content: {resp.reason()}"
            else:
                error = f"job failed: {resp.reason()}"
            # DELETE is inside the timing boundary, whatever the job's fate.
            resp = self.request("DELETE", f"/v1/videos/{job_id}", timeout=deadline.io_timeout())
            if not resp.ok and error is None:
                error, last = f"DELETE: {resp.reason()}", resp.status
            deadline.check()
            if error is not None:
                out = run.failed(last, error, job_id, polls, server)
                return _with_cleanup(out, "deleted" if resp.ok else f"DELETE: {resp.reason()}")
            return run.done(200, content, job_id, polls, server)
        except DeadlineExceeded as exc:
            out = run.stopped(exc, job_id, polls)
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as exc:
            out = run.error_or_timeout(deadline, exc, job_id, polls)
        if out.status in ("timeout", "cancelled"):
            out = _with_cleanup(out, self._cleanup(job_id, out.timeout_level, "timeout"))
        return out

    def video_sync(
        self,
        fields: Mapping[str, Any],
        files: Mapping[str, Sequence[FilePart]],
        *,
        deadline: Deadline,
    ) -> RequestOutcome:
        """``POST /v1/videos/sync`` inside ``deadline``; the MP4 comes back in the response."""
        body, ctype = encode_multipart(fields, files)
        run = _Timing()
        try:
            deadline.check()
            resp = self.request(
                "POST",
                "/v1/videos/sync",
                body=body,
                headers={"Content-Type": ctype},
                timeout=deadline.io_timeout(),
            )
            deadline.check()
            if not resp.ok:
                return run.failed(resp.status, f"POST /v1/videos/sync: {resp.reason()}")
            server = sync_figures(resp.headers)
            return run.done(resp.status, resp.body, resp.headers.get("x-request-id"), 0, server)
        except DeadlineExceeded as exc:
            return run.stopped(exc, None, 0)
        except (OSError, http.client.HTTPException) as exc:
            return run.error_or_timeout(deadline, exc, None, 0)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def server_figures(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the server measured, from a finished job's record (``VideoResponse``).

    Numbers only (``inference_time_s``, ``peak_memory_mb``, ``created_at``,
    ``completed_at``, ``num_frames``, ``fps``, ``duration_s``), each under
    ``server_<name>``; ``stage_durations`` as compact JSON text of its numeric
    entries (the first 64, names cut at 64 characters); a ``task`` the server
    reports (top level or in ``metrics``) as ``server_task``. A value of another
    type is left out, never guessed.
    """
    if doc is None:
        return {}
    out: dict[str, Any] = {}
    for name in _SERVER_FIELDS:
        value = _number(doc.get(name))
        if value is not None:
            out[f"server_{name}"] = value
    stages = doc.get("stage_durations")
    if isinstance(stages, Mapping):
        # The server is not trusted: a bounded number of short names, numbers only.
        clean = {
            str(k)[:_STAGE_NAME_MAX]: v
            for k, v in list(stages.items())[:_STAGES_MAX]
            if _number(v) is not None
        }
        if clean:
            out["server_stage_durations"] = json.dumps(clean, separators=(",", ":"))
    metrics = doc.get("metrics")
    for where in (doc, metrics if isinstance(metrics, Mapping) else {}):
        task = where.get("task")
        if isinstance(task, str) and task:
            out["server_task"] = task[:64]
            break
    return out


def sync_figures(headers: Mapping[str, str]) -> dict[str, Any]:
    """What the server measured, from ``/v1/videos/sync``'s headers (api_server.py:2770-2779)."""
    out: dict[str, Any] = {}
    for header, key in (
        ("x-inference-time-s", "server_inference_time_s"),
        ("x-peak-memory-mb", "server_peak_memory_mb"),
    ):
        try:
            value = float(headers[header])
        except (KeyError, ValueError):
            continue
        if math.isfinite(value):
            out[key] = value
    raw = headers.get("x-stage-durations")
    if raw is not None:
        try:
            stages = json.loads(raw)
        except ValueError:
            stages = None
        figures = server_figures({"stage_durations": stages})
        out.update(figures)
    return out


def _with_cleanup(out: RequestOutcome, cleanup: str | None) -> RequestOutcome:
    return RequestOutcome(
        out.status,
        out.e2e_s,
        out.start_ns,
        out.end_ns,
        out.timeout_level,
        out.http_status,
        out.body,
        out.job_id,
        out.polls,
        out.error,
        out.server,
        cleanup,
    )


class _Timing:
    """The clock of one request: wall time for the receipt, monotonic for ``e2e_s``."""

    def __init__(self) -> None:
        self.start_ns = time.time_ns()
        self.t0 = time.perf_counter()

    def _end(self) -> tuple[float, int]:
        return time.perf_counter() - self.t0, time.time_ns()

    def done(
        self,
        http_status: int,
        body: bytes | None,
        job_id: str | None,
        polls: int,
        server: Mapping[str, Any] | None = None,
    ) -> RequestOutcome:
        e2e, end = self._end()
        return RequestOutcome(
            "ok",
            e2e,
            self.start_ns,
            end,
            None,
            http_status,
            body,
            job_id,
            polls,
            None,
            server or {},
        )

    def failed(
        self,
        http_status: int | None,
        error: str,
        job_id: str | None = None,
        polls: int = 0,
        server: Mapping[str, Any] | None = None,
    ) -> RequestOutcome:
        e2e, end = self._end()
        return RequestOutcome(
            "failed",
            e2e,
            self.start_ns,
            end,
            None,
            http_status,
            None,
            job_id,
            polls,
            error,
            server or {},
        )

    def stopped(self, exc: DeadlineExceeded, job_id: str | None, polls: int) -> RequestOutcome:
        e2e, end = self._end()
        status = "timeout" if exc.level is not None else "cancelled"
        return RequestOutcome(
            status, e2e, self.start_ns, end, exc.level, None, None, job_id, polls, exc.reason
        )

    def error_or_timeout(
        self, deadline: Deadline, exc: Exception, job_id: str | None, polls: int
    ) -> RequestOutcome:
        # A socket timeout at the deadline is the deadline firing, not a server error.
        if isinstance(exc, TimeoutError) and deadline.remaining() < _TIMEOUT_SLACK_S:
            time.sleep(max(0.0, deadline.remaining()))
        try:
            deadline.check()
        except DeadlineExceeded as stop:
            return self.stopped(stop, job_id, polls)
        return self.failed(None, f"{type(exc).__name__}: {exc}", job_id, polls)
