"""Time one vLLM-Omni video request from POST to DELETE (the plan's post_to_delete boundary).

Carried as evidence of how the receipts were timed; the sample never runs it.
Usage: python client.py BASE_URL PAYLOAD.json OUT.mp4
(reference paths in PAYLOAD.json are relative to the folder holding it)
"""

from __future__ import annotations

import json
import mimetypes
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

POLL_INTERVAL_S = 5.0
TIMEOUT_S = 1200.0


def _call(method: str, url: str, body: bytes | None = None, ctype: str | None = None) -> bytes:
    # The URL comes from the operator's command line (http to the local server).
    req = urllib.request.Request(url, data=body, method=method)  # noqa: S310
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310
        data: bytes = resp.read()
    return data


FILE_FIELDS = ("input_reference", "input_references")
# Integer fields of vLLM-Omni's form (seconds must match ^[1-9]\d*$: "5.0" is HTTP 400).
INT_FIELDS = ("seconds", "width", "height", "num_frames", "num_inference_steps", "seed")


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool | dict | list):
        return json.dumps(value)
    if name in INT_FIELDS and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _status(url: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(_call("GET", url))
    except urllib.error.HTTPError as exc:
        # A failed job is polled with its error's own status (400/500) and its record.
        doc = json.loads(exc.read())
        if doc.get("status") != "failed":
            raise
    return doc


def _multipart(fields: dict[str, Any], base: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue  # the form's default; str(None) would send the text "None"
        if name in FILE_FIELDS:
            # The server takes references as file uploads only (a text part is HTTP 400);
            # several references are repeated parts under one name.
            for rel in [value] if isinstance(value, str) else value:
                path = base / rel
                ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                head = (
                    f'Content-Disposition: form-data; name="{name}"; filename="{path.name}"'
                    f"\r\nContent-Type: {ctype}"
                )
                parts.append(
                    f"--{boundary}\r\n{head}\r\n\r\n".encode() + path.read_bytes() + b"\r\n"
                )
            continue
        head = f'Content-Disposition: form-data; name="{name}"'
        text = _text(name, value)
        parts.append(f"--{boundary}\r\n{head}\r\n\r\n{text}\r\n".encode())
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def run(base: str, payload: dict[str, Any], out: str, files: Path) -> dict[str, Any]:
    """POST, poll every POLL_INTERVAL_S, download, DELETE; return the receipt fields.

    Reference paths in ``payload`` are relative to ``files``.
    """
    body, ctype = _multipart(payload, files)
    t0 = time.monotonic()
    job = json.loads(_call("POST", f"{base}/v1/videos", body, ctype))
    doc: dict[str, Any] = job
    status = job.get("status", "queued")
    while status not in ("completed", "failed"):
        if time.monotonic() - t0 > TIMEOUT_S:
            status = "timeout"
            break
        time.sleep(POLL_INTERVAL_S)
        doc = _status(f"{base}/v1/videos/{job['id']}")
        status = doc["status"]
    if status == "completed":
        with Path(out).open("wb") as fh:
            fh.write(_call("GET", f"{base}/v1/videos/{job['id']}/content"))
    # DELETE is inside the timing boundary, and a timed-out job is cleaned up too.
    _call("DELETE", f"{base}/v1/videos/{job['id']}")
    receipt: dict[str, Any] = {
        "status": "ok" if status == "completed" else status,
        "e2e_s": round(time.monotonic() - t0, 2),
    }
    if status == "timeout":
        receipt["timeout_level"] = "request"
    if status == "failed":
        receipt["error"] = (doc.get("error") or {}).get("message")
    return receipt


if __name__ == "__main__":
    with Path(sys.argv[2]).open(encoding="utf-8") as fh:
        payload = json.load(fh)
    receipt = run(sys.argv[1].rstrip("/"), payload, sys.argv[3], Path(sys.argv[2]).parent)
    print(json.dumps(receipt))
