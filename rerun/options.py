"""What a caller gives ``bundle rerun``: options, progress events, and a stop handle."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from bundler.format.trust import NO_TRUST, Trust
from rerun.telemetry import TelemetrySource
from rerun.watchdog import StopFlag

__all__ = ["FILE_FIELDS", "Progress", "RerunControl", "RerunEvent", "RerunOptions"]

FILE_FIELDS = ("input_reference", "input_references")
"""Payload fields whose value names a file (or, for ``input_references``, a list of
files), sent as multipart file parts: vLLM-Omni's form takes them as ``UploadFile``
only (``video/generation/helpers.py:852-859`` of vllm-omni 0.30.0)."""


@dataclass(frozen=True)
class RerunEvent:
    """One progress event: ``kind`` (plan, slot, ready, request, teardown, watchdog, note, done)."""

    kind: str
    message: str
    done: int = 0
    total: int = 0


Progress = Callable[[RerunEvent], None]


@dataclass(frozen=True)
class RerunOptions:
    """How to run: targets, inputs, telemetry, trust, and reservation bookkeeping.

    Exactly one of ``endpoints`` (server name or arm id -> base URL) and
    ``launch`` must be given. ``launch`` starts each server from
    ``launch_command`` (the caller's own template), or, only when
    ``run_bundle_launch_command`` says so, from the plan's ``launch``
    templates: a command written by the bundle's author never runs without
    that opt-in (a dry run may still show it). ``trust`` is used when the
    sealed bundle is given as a path (it is then opened with
    :func:`bundler.verified.open_verified`).
    """

    endpoints: Mapping[str, str] = field(default_factory=dict)
    launch: bool = False
    launch_command: str | None = None
    run_bundle_launch_command: bool = False
    launch_cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    inputs: Sequence[Path] = ()
    telemetry: str | None = None
    telemetry_command: Sequence[str] | None = None
    telemetry_source: TelemetrySource | None = None
    allow_unverified_commit: bool = False
    reservation_used_s: float = 0.0
    accelerator: str | None = None
    trust: Trust = NO_TRUST
    host: str = "127.0.0.1"


class RerunControl:
    """A handle to stop a running rerun from outside (signals, another thread)."""

    def __init__(self) -> None:
        self.stop = StopFlag()

    def interrupt(self, level: str | None, reason: str) -> None:
        """Stop the run: ``level`` ``reservation`` (a soft TERM) or None (a user stop)."""
        self.stop.set(level, reason)

    def install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM -> reservation stop, SIGINT -> user stop; returns a function restoring them.

        Call from the main thread only (CLI use).
        """

        def on_term(signum: int, frame: FrameType | None) -> None:
            self.interrupt("reservation", "SIGTERM received (the reservation's soft TERM)")

        def on_int(signum: int, frame: FrameType | None) -> None:
            self.interrupt(None, "interrupted by the user (SIGINT)")

        old_term = signal.signal(signal.SIGTERM, on_term)
        old_int = signal.signal(signal.SIGINT, on_int)

        def restore() -> None:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)

        return restore
