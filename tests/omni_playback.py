"""Recorded transcripts of the real vLLM-Omni 0.30.0 API server, and a server that plays them back.

The recordings (``tests/fixtures/real_writers/vllm-omni-0.30.0/``, made by
``record_omni.py`` there) are the real server's answers; CI has no
``vllm_omni``, so tests read them here and, where a client must talk HTTP,
:func:`playback` answers as recorded on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "ERROR_FIELDS",
    "RECORDINGS",
    "VIDEO_RESPONSE_FIELDS",
    "Exchange",
    "Playback",
    "encode_request",
    "exchanges",
    "load",
    "multipart_body",
    "part_bytes",
    "playback",
    "recording",
]

RECORDINGS = Path(__file__).resolve().parent / "fixtures" / "real_writers" / "vllm-omni-0.30.0"
_MAX_BODY = 8 << 20

# vllm_omni/entrypoints/openai/protocol/videos.py: class VideoResponse (lines 372-429 in
# 0.30.0), by hand.
VIDEO_RESPONSE_FIELDS = {
    "model",
    "prompt",
    "id",
    "object",
    "status",
    "size",
    "progress",
    "seconds",
    "quality",
    "completed_at",
    "created_at",
    "remixed_from_video_id",
    "error",
    "media_type",
    "expires_at",
    "file_name",
    "inference_time_s",
    "fps",
    "num_frames",
    "duration_s",
    "metrics",
    "stage_durations",
    "peak_memory_mb",
    "action",
}
# vllm/entrypoints/openai/engine/protocol.py: ErrorResponse / ErrorInfo.
ERROR_FIELDS = {"message", "type", "param", "code"}


@dataclass(frozen=True)
class Exchange:
    """One recorded request and the real server's response."""

    note: str
    method: str
    path: str
    request_body: dict[str, Any] | None
    status: int
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def json(self) -> Any:
        """The response's JSON document (the body must be JSON)."""
        assert self.body["kind"] == "json", f"{self.method} {self.path}: not JSON"
        return self.body["json"]

    def raw(self) -> bytes:
        """The response body's bytes as the server sent them (media from its file)."""
        kind = self.body["kind"]
        if kind == "media":
            return (RECORDINGS / str(self.body["file"])).read_bytes()
        if kind == "json":
            # Same compact form as FastAPI's JSONResponse.
            return json.dumps(self.body["json"], ensure_ascii=False, separators=(",", ":")).encode()
        return str(self.body["text"]).encode()


def load(scenario: str) -> dict[str, Any]:
    """The transcript document of ``scenario``."""
    doc: dict[str, Any] = json.loads((RECORDINGS / "transcripts" / f"{scenario}.json").read_text())
    return doc


def recording() -> dict[str, Any]:
    """``recording.json``: versions, command, start-up time."""
    doc: dict[str, Any] = json.loads((RECORDINGS / "recording.json").read_text())
    return doc


def exchanges(scenario: str) -> list[Exchange]:
    """The exchanges of ``scenario`` in the order they happened."""
    out = []
    for x in load(scenario)["exchanges"]:
        req, resp = x["request"], x["response"]
        out.append(
            Exchange(
                x["note"],
                req["method"],
                req["path"],
                req["body"],
                resp["status"],
                resp["headers"],
                resp["body"],
            )
        )
    return out


def part_bytes(part: dict[str, Any]) -> bytes:
    """The bytes of one recorded multipart part (a text field's text, or its input file)."""
    if part["kind"] == "file":
        return (RECORDINGS / str(part["file"])).read_bytes()
    return str(part["value"]).encode()


def multipart_body(
    parts: Iterable[tuple[str, tuple[str, str] | None, bytes]], boundary: str
) -> tuple[bytes, str]:
    """A multipart/form-data body written by hand (not by the client under test), and its
    content type: each part is (name, (filename, content type) of a file or None for a
    text field, its bytes)."""
    out = b""
    for name, file, data in parts:
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
        if file is not None:
            head += f'; filename="{file[0]}"\r\nContent-Type: {file[1]}'
        out += (head + "\r\n\r\n").encode() + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def encode_request(x: Exchange) -> tuple[bytes | None, str]:
    """The recorded request's body rebuilt from its parts and input files, and its content type."""
    shape = x.request_body
    if shape is None:
        return None, ""
    if shape["encoding"] == "application/json":
        return json.dumps(shape["json"]).encode(), "application/json"
    parts = (
        (
            str(p["name"]),
            (str(p["filename"]), str(p["content_type"])) if p["kind"] == "file" else None,
            part_bytes(p),
        )
        for p in shape["parts"]
    )
    return multipart_body(parts, "reprobundle-replayed-request")


@dataclass
class Playback:
    """A running playback server and what it was asked."""

    url: str
    received: list[tuple[str, str]] = field(default_factory=list)


class _Script:
    """Which recorded response answers the next request, in the recording's order.

    A request takes the first exchange with its method and path at or after
    the cursor, and moves the cursor past it, unless that would skip
    exchanges of other requests while an earlier response for the same
    request exists: then that response is repeated (a client polling more
    often than the recording did sees the same status again, not the 404
    recorded after a DELETE it has not sent yet). A request with nothing
    left repeats its last response.
    """

    def __init__(self, xs: list[Exchange]) -> None:
        self.xs = xs
        self.cursor = 0
        self.last: dict[tuple[str, str], Exchange] = {}

    def next(self, key: tuple[str, str]) -> Exchange | None:
        at = next((i for i in range(self.cursor, len(self.xs)) if self._key(i) == key), None)
        if at is None or (at > self.cursor and key in self.last):
            return self.last.get(key)
        self.cursor = at + 1
        self.last[key] = self.xs[at]
        return self.xs[at]

    def _key(self, i: int) -> tuple[str, str]:
        return (self.xs[i].method, self.xs[i].path)


@contextmanager
def playback(
    scenarios: list[str], *, max_requests: int = 200, max_lifetime_s: float = 60.0
) -> Iterator[Playback]:
    """Serve the responses of ``scenarios`` (in turn) on 127.0.0.1 until the block ends.

    Requests are answered as :class:`_Script` says; a request never recorded
    gets 501. The server stops after ``max_requests`` requests or
    ``max_lifetime_s`` seconds.
    """
    script = _Script([x for name in scenarios for x in exchanges(name)])
    lock = threading.Lock()
    state = Playback("")
    deadline = time.monotonic() + max_lifetime_s

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self.send_error(413)
                return
            self.rfile.read(length)
            key = (self.command, self.path)
            with lock:
                state.received.append(key)
                x = script.next(key)
            if x is None:
                self.send_error(501, "no recorded exchange")
                return
            body = x.raw()
            self.send_response(x.status)
            for name, value in x.headers.items():
                if name not in ("content-length", "server", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 0.2
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    stop = threading.Event()

    def loop() -> None:
        while (
            not stop.is_set() and time.monotonic() < deadline and len(state.received) < max_requests
        ):
            server.handle_request()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(5)
        server.server_close()
