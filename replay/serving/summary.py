"""One point per (arm, load point) of a serving campaign: throughput beside latency.

Part of the one result (``ReplayResult.serving``) so that every view draws the same
latency-throughput curve. Values are the nearest doubles of the exact statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from replay.engine.exact import to_double
from replay.serving.inputs import ServingData
from replay.serving.stats import throughput

__all__ = ["ServingPoint", "summarize"]


@dataclass(frozen=True)
class ServingPoint:
    """Throughput and latency of one arm at one load point (None: not re-derivable).

    ``requests`` and ``completed`` are None for a file without per-request success
    records (vLLM without ``--save-detailed``): its own counts are claims, not evidence.
    """

    arm: str
    load_point: str
    requests: int | None
    completed: int | None
    output_tokens_per_s: float | None
    ttft_p99_ms: float | None
    e2el_p99_ms: float | None


def _ms(v: object) -> float | None:
    return None if isinstance(v, str) else to_double(v) * 1000  # type: ignore[arg-type]


def summarize(data: ServingData | None) -> tuple[ServingPoint, ...]:
    """Every run's point, by arm then output throughput."""
    if data is None:
        return ()
    out = []
    for (arm, lp), rs in data.runs.items():
        tp = throughput(rs.run, "output_tokens")
        out.append(
            ServingPoint(
                arm,
                lp,
                rs.run.n if rs.run.detailed else None,
                rs.run.completed if rs.run.detailed else None,
                None if isinstance(tp, str) else float(tp),
                _ms(rs.latency("ttft", "percentile", Fraction(99))),
                _ms(rs.latency("e2el", "percentile", Fraction(99))),
            )
        )
    return tuple(sorted(out, key=lambda p: (p.arm, p.output_tokens_per_s or 0.0, p.load_point)))
