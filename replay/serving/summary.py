"""The serving result: one point per (arm, load point), and baseline → candidate per load point.

Part of the one result (``ReplayResult.serving`` and ``ReplayResult.serving_changes``)
so that every view draws the same latency-throughput curve and the same headline.
Values are the nearest doubles of the exact statistics; each change is computed
exactly from the exact statistics, then rounded to a double.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from replay.engine.exact import Exact, to_double
from replay.serving.inputs import ServingData
from replay.serving.stats import RunStats, throughput

__all__ = [
    "LIMITS",
    "METRICS",
    "ServingChange",
    "ServingDelta",
    "ServingPoint",
    "compare",
    "summarize",
]

LIMITS = (
    "Re-derived from the benchmark tool's per-request arrays; the load is what the tool "
    "recorded it was asked for. Hardware not re-run.",
)


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
    tpot_p99_ms: float | None = None
    requests_per_s: float | None = None


@dataclass(frozen=True)
class Metric:
    """A headline figure of a serving run: its field, its label, its unit, and its sense."""

    field: str
    label: str
    unit: str
    lower_is_better: bool


METRICS = (
    Metric("ttft_p99_ms", "p99 TTFT", "ms", True),
    Metric("tpot_p99_ms", "p99 TPOT", "ms", True),
    Metric("e2el_p99_ms", "p99 E2E latency", "ms", True),
    Metric("output_tokens_per_s", "output throughput", "tokens/s", False),
)
"""The serving headline's figures, in the order every view shows them."""


@dataclass(frozen=True)
class ServingDelta:
    """One figure at one load point, baseline → candidate (None: not re-derivable)."""

    metric: str
    label: str
    unit: str
    baseline: float | None
    candidate: float | None
    change_pct: float | None  # (candidate − baseline) / baseline × 100
    better: bool | None  # the candidate is better (lower latency, higher throughput)


@dataclass(frozen=True)
class ServingChange:
    """Baseline → candidate at one load point: every headline figure with its change."""

    load_point: str
    baseline: str
    candidate: str
    deltas: tuple[ServingDelta, ...]


def _exact(rs: RunStats) -> dict[str, Fraction | None]:
    """The headline figures of one run, exactly (None: not re-derivable)."""

    def ms(latency: str) -> Fraction | None:
        v: Exact | str = rs.latency(latency, "percentile", Fraction(99))
        return v * 1000 if isinstance(v, Fraction) else None

    out_tp = throughput(rs.run, "output_tokens")
    req_tp = throughput(rs.run, "requests")
    return {
        "ttft_p99_ms": ms("ttft"),
        "tpot_p99_ms": ms("tpot"),
        "e2el_p99_ms": ms("e2el"),
        "output_tokens_per_s": None if isinstance(out_tp, str) else out_tp,
        "requests_per_s": None if isinstance(req_tp, str) else req_tp,
    }


def _double(v: Fraction | None) -> float | None:
    """The nearest double; None when there is none (not re-derivable, or a valid but
    absurd value beyond the range of a double: its claims keep the exact text)."""
    if v is None:
        return None
    try:
        return to_double(v)
    except OverflowError:
        return None


def summarize(data: ServingData | None) -> tuple[ServingPoint, ...]:
    """Every run's point, by arm then output throughput."""
    if data is None:
        return ()
    out = []
    for (arm, lp), rs in data.runs.items():
        x = _exact(rs)
        out.append(
            ServingPoint(
                arm,
                lp,
                rs.run.n if rs.run.detailed else None,
                rs.run.completed if rs.run.detailed else None,
                _double(x["output_tokens_per_s"]),
                _double(x["ttft_p99_ms"]),
                _double(x["e2el_p99_ms"]),
                _double(x["tpot_p99_ms"]),
                _double(x["requests_per_s"]),
            )
        )
    return tuple(sorted(out, key=lambda p: (p.arm, p.output_tokens_per_s or 0.0, p.load_point)))


def _load_order(rs: RunStats, lp: str) -> tuple[float, float, str]:
    """Lighter load first: request rate, then max concurrency (unbounded last)."""
    r = rs.run
    rate = r.request_rate if isinstance(r.request_rate, int | float) else math.inf
    conc = r.max_concurrency if isinstance(r.max_concurrency, int) else math.inf
    return (float(rate), float(conc), lp)


def compare(
    data: ServingData | None, baselines: Sequence[str], candidates: Sequence[str]
) -> tuple[ServingChange, ...]:
    """Baseline → candidate at every load point both arms ran, for every such pair of arms.

    The change is exact, ``(candidate − baseline) / baseline × 100`` over the exact
    statistics, then rounded to a double; None where either side is not re-derivable
    (or the baseline is zero).
    """
    if data is None:
        return ()
    out = []
    for b in baselines:
        for c in candidates:
            points = sorted(
                (lp for a, lp in data.runs if a == b and (c, lp) in data.runs),
                key=lambda lp: _load_order(data.runs[(b, lp)], lp),
            )
            for lp in points:
                xb, xc = _exact(data.runs[(b, lp)]), _exact(data.runs[(c, lp)])
                deltas = []
                for m in METRICS:
                    vb, vc = xb[m.field], xc[m.field]
                    change = None if vb is None or vc is None or vb == 0 else (vc - vb) / vb * 100
                    better = None if change is None else (change < 0) == m.lower_is_better
                    deltas.append(
                        ServingDelta(
                            m.field,
                            m.label,
                            m.unit,
                            _double(vb),
                            _double(vc),
                            _double(change),
                            better if change else None,
                        )
                    )
                out.append(ServingChange(lp, b, c, tuple(deltas)))
    return tuple(out)
