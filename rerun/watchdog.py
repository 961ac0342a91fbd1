"""The rerun's own reservation watchdog, and the stop flag every wait in the rerun honours.

At the reservation's soft TERM (or when the rerun receives SIGTERM, which is
how a batch scheduler says the same thing) the watchdog raises the stop flag
with level ``reservation``: the request in flight ends with that level, the
running server is torn down within the kill grace, and no later arm position
starts. If the run is still not done when the kill grace has passed, the
watchdog kills every server process group the rerun launched, so that nothing
the rerun started outlives the reservation's hard limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["ReservationWatchdog", "StopFlag"]

_STEP_S = 0.05


class StopFlag:
    """A one-shot stop with the level that caused it (``reservation``, or None for a user stop)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.level: str | None = None
        self.reason: str | None = None
        self.at: float | None = None

    def set(self, level: str | None, reason: str) -> bool:
        """Raise the flag (the first caller's level and reason stick); True if this call did."""
        with self._lock:
            if self._event.is_set():
                return False
            self.level, self.reason, self.at = level, reason, time.monotonic()
            self._event.set()
            return True

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        return self._event.is_set()

    def wait(self, timeout: float | None) -> bool:
        """Wait until raised or ``timeout``; True if raised."""
        return self._event.wait(timeout)


class ReservationWatchdog:
    """Raise ``stop`` at ``soft_at`` (monotonic); ``on_grace_expired`` runs ``grace_s`` later."""

    def __init__(
        self,
        stop: StopFlag,
        *,
        soft_at: float | None,
        grace_s: float,
        on_grace_expired: Callable[[], None],
        on_fire: Callable[[str], None] | None = None,
    ) -> None:
        self.stop = stop
        self.soft_at = soft_at
        self.grace_s = grace_s
        self.on_grace_expired = on_grace_expired
        self.on_fire = on_fire
        self.fired = False
        self.grace_expired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reservation-watchdog", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def finish(self, timeout_s: float = 5.0) -> None:
        """The run is over: stop watching (the stop flag is left as it is)."""
        self._done.set()
        self._thread.join(timeout_s)

    def _wait_stop(self) -> bool:
        """Wait for the soft TERM or an external stop; False if the run finished first."""
        while not self._done.is_set():
            now = time.monotonic()
            if self.soft_at is not None and now >= self.soft_at:
                return True
            step = _STEP_S if self.soft_at is None else min(_STEP_S, self.soft_at - now)
            if self.stop.wait(max(0.0, step)):
                return True
        return False

    def _run(self) -> None:
        if not self._wait_stop():
            return
        if self.stop.set("reservation", "reservation soft TERM: the rerun watchdog fired"):
            self.fired = True
            if self.on_fire:
                self.on_fire("reservation soft TERM reached: stopping the run")
        if self._done.wait(self.grace_s):
            return
        self.grace_expired = True
        self.on_grace_expired()
