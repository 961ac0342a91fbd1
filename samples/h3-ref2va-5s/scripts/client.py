"""Time one vLLM-Omni video request from POST to DELETE (the plan's post_to_delete boundary).

Carried as evidence of how the receipts were timed; the sample never runs it.
Usage: python client.py BASE_URL PAYLOAD.json OUT.mp4
"""

from __future__ import annotations

import json
import sys
import time
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


def _multipart(fields: dict[str, Any]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        text = json.dumps(value) if isinstance(value, bool | dict | list) else str(value)
        head = f'Content-Disposition: form-data; name="{name}"'
        parts.append(f"--{boundary}\r\n{head}\r\n\r\n{text}\r\n")
    parts.append(f"--{boundary}--\r\n")
    return "".join(parts).encode("utf-8"), f"multipart/form-data; boundary={boundary}"


def run(base: str, payload: dict[str, Any], out: str) -> dict[str, Any]:
    """POST, poll every POLL_INTERVAL_S, download, DELETE; return the receipt fields."""
    body, ctype = _multipart(payload)
    t0 = time.monotonic()
    job = json.loads(_call("POST", f"{base}/v1/videos", body, ctype))
    status = job.get("status", "queued")
    while status not in ("completed", "failed"):
        if time.monotonic() - t0 > TIMEOUT_S:
            status = "timeout"
            break
        time.sleep(POLL_INTERVAL_S)
        status = json.loads(_call("GET", f"{base}/v1/videos/{job['id']}"))["status"]
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
    return receipt


if __name__ == "__main__":
    with Path(sys.argv[2]).open(encoding="utf-8") as fh:
        receipt = run(sys.argv[1].rstrip("/"), json.load(fh), sys.argv[3])
    print(json.dumps(receipt))
