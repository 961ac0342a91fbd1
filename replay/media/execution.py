"""How a media re-score ran: executor, device, threads, LPIPS batches, retries.

Part of the media result (:class:`replay.media.result.MediaReplayResult`), so
a reader can tell how the values were obtained: bit-for-bit equality is
expected between executors on the same device type; across device types
LPIPS values agree with a recorded value within :attr:`Execution.lpips_tolerance`
(the definition's tolerance, ``specs/metrics.md``), not bitwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from replay.media.threads import ThreadPlan

__all__ = ["LOCAL", "RAY", "Execution", "ExecutorName", "Retry"]

LOCAL: Final = "local"
RAY: Final = "ray"
ExecutorName = Literal["local", "ray"]


@dataclass(frozen=True)
class Retry:
    """A comparison whose task ran more than once (its worker died)."""

    comparison_id: str
    attempts: int
    """Attempts started, the last one included."""
    outcome: str
    """``completed`` (a later attempt finished: its result is the one kept) or ``failed``."""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


@dataclass
class Execution:
    """Where and how the comparisons were scored."""

    executor: ExecutorName
    device: str
    """Where LPIPS ran (``cpu``, ``cuda``, ``cuda:1``, …)."""
    threads: ThreadPlan
    """The thread plan of the driver (local executor) or of one task (Ray)."""
    lpips_tolerance: float
    """|recorded − re-derived| within which an LPIPS value agrees with its record."""
    lpips_batch: dict[str, int] = field(default_factory=dict)
    """Frame size (``WxH``) -> frames per LPIPS forward pass."""
    lpips_batch_rule: str = ""
    torch_threads_seen: list[int] = field(default_factory=list)
    """torch intra-op thread counts the CPU LPIPS forward passes ran with."""
    ray_address: str | None = None
    ray_resources: dict[str, float] = field(default_factory=dict)
    """Each task's resource request (Ray)."""
    retries: list[Retry] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        d = asdict(self)
        d["threads"] = self.threads.to_dict()
        d["retries"] = [r.to_dict() for r in self.retries]
        return d
