"""Every statistic of one attempt, computed once and shared by the report and the claims."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replay.inputs import ReplayInputs
from replay.sections.latency import LatencyResult, compute_latency
from replay.sections.lifecycle import LifecycleResult, check_lifecycle
from replay.sections.quality import QualityResult, check_quality
from replay.sections.telemetry import TelemetryResult, check_telemetry

__all__ = ["AttemptStats", "RequestCounts", "StatsCache"]


@dataclass(frozen=True)
class RequestCounts:
    """Receipts of one attempt, all phases, and how many have status ok."""

    total: int
    ok: int
    by_phase: dict[str, int]


@dataclass(frozen=True)
class AttemptStats:
    """The sections of one attempt (any attempt a claim names, not only the accepted one)."""

    attempt: str
    latency: LatencyResult
    lifecycle: LifecycleResult
    telemetry: TelemetryResult
    quality: QualityResult
    requests: RequestCounts


def request_counts(inputs: ReplayInputs, attempt: str) -> RequestCounts:
    """Count ``attempt``'s receipts by phase and status."""
    r = inputs.receipts
    att = r.attempt.mask(attempt)
    per_phase = np.bincount(r.phase.codes[att], minlength=len(r.phase.values))
    return RequestCounts(
        total=int(np.count_nonzero(att)),
        ok=int(np.count_nonzero(att & r.ok)),
        by_phase={p: int(c) for p, c in zip(r.phase.values, per_phase, strict=True) if c},
    )


class StatsCache:
    """Computes each attempt's sections on first use."""

    def __init__(self, inputs: ReplayInputs) -> None:
        self.inputs = inputs
        self.attempt_ids = frozenset(
            str(a) for a in inputs.table("attempts").column("attempt_id").to_pylist()
        )
        self._done: dict[str, AttemptStats] = {}

    def get(self, attempt: str) -> AttemptStats:
        """The sections of ``attempt`` (which must be in the attempts table)."""
        if attempt not in self._done:
            self._done[attempt] = AttemptStats(
                attempt=attempt,
                latency=compute_latency(self.inputs, attempt),
                lifecycle=check_lifecycle(self.inputs, attempt),
                telemetry=check_telemetry(self.inputs, attempt),
                quality=check_quality(self.inputs, attempt),
                requests=request_counts(self.inputs, attempt),
            )
        return self._done[attempt]
