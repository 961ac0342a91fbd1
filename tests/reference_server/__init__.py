"""A reference vLLM-Omni video server for rerun tests (loopback only), and a helper to run one.

See ``server.py`` for the API subset and the faults it can inject.
"""

from __future__ import annotations

import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REPO_ROOT", "RunningServer", "running_server", "server_command", "wait_exit"]

REPO_ROOT = Path(__file__).resolve().parents[2]


def server_command(*args: str) -> list[str]:
    """The command line of a reference server with ``args``."""
    return [sys.executable, "-m", "tests.reference_server", *args]


@dataclass(frozen=True)
class RunningServer:
    """A reference server started by :func:`running_server`."""

    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def running_server(*args: str, start_timeout_s: float = 20.0) -> Iterator[RunningServer]:
    """Start a reference server on an ephemeral loopback port; stop it (TERM, then KILL) after."""
    proc = subprocess.Popen(
        server_command("--port", "0", *args),
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        url = _read_url(proc, start_timeout_s)
        yield RunningServer(url, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        proc.stdout.close()


def _read_url(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    line = b""
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                raise RuntimeError(f"reference server did not start (exit {proc.poll()})")
            if sel.select(left):
                chunk = proc.stdout.read1(256) if hasattr(proc.stdout, "read1") else b""
                if not chunk:
                    continue
                line += chunk
    finally:
        sel.close()
    text = line.decode().strip()
    return text.split()[-1]


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """Wait for ``proc`` at most ``timeout_s``; its exit code, or None."""
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None
