"""Telemetry: sampled peak HBM per (server, device), per arm, and the change between arms.

A device's peak is the largest ``hbm_used_mb`` sampled on it during the
attempt; an arm's figure is the mean of its (server, device) peaks; the change
is ``(candidate / baseline - 1) x 100``. The seed: mean sampled peak HBM +3.10 %.

This is the replay's section, which reads a sealed ``telemetry`` table; the
sampler that records one during a rerun is :mod:`rerun.telemetry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from replay.engine.arrow import equals, filter_table, group_by_max
from replay.engine.exact import fraction_of
from replay.inputs import ReplayInputs

__all__ = ["ArmTelemetry", "DevicePeak", "PairTelemetry", "TelemetryResult", "check_telemetry"]


@dataclass(frozen=True)
class DevicePeak:
    """The sampled peak of one device of one server."""

    arm: str
    server: str
    device: str
    peak_mb: Fraction
    samples: int


@dataclass(frozen=True)
class ArmTelemetry:
    """One arm's device peaks, summarized."""

    arm: str
    servers: int
    devices: int
    samples: int
    mean_peak_mb: Fraction | None
    max_peak_mb: Fraction | None


@dataclass(frozen=True)
class PairTelemetry:
    """Change of the mean sampled peak from a baseline arm to a candidate arm."""

    baseline: str
    candidate: str
    change_pct: Fraction | None


@dataclass(frozen=True)
class TelemetryResult:
    """Peaks of one attempt."""

    attempt: str
    peaks: tuple[DevicePeak, ...]
    arms: tuple[ArmTelemetry, ...]
    pairs: tuple[PairTelemetry, ...]
    interval_s: float | None
    source: str | None
    limits: tuple[str, ...]

    def arm(self, arm_id: str) -> ArmTelemetry | None:
        """The arm named ``arm_id``."""
        return next((a for a in self.arms if a.arm == arm_id), None)

    def pair(self, baseline: str, candidate: str) -> PairTelemetry | None:
        """The change from ``baseline`` to ``candidate``."""
        return next(
            (p for p in self.pairs if p.baseline == baseline and p.candidate == candidate), None
        )


def _limits(interval: float | None) -> tuple[str, ...]:
    every = f"every {interval:g} s" if interval else "at an unrecorded interval"
    return (
        f"HBM is sampled ({every}): a peak between samples is missed, so these are lower "
        "bounds of the true peaks. Author-reported; hardware not re-run.",
    )


def check_telemetry(inputs: ReplayInputs, attempt: str) -> TelemetryResult:
    """Peak HBM per device, mean per arm and change per baseline/candidate pair."""
    t = inputs.table("telemetry")
    t = filter_table(t, equals(t, "attempt_id", attempt))
    groups = group_by_max(t, ["arm", "server", "device"], "hbm_used_mb")
    peaks = tuple(
        sorted(
            (
                DevicePeak(
                    arm=str(g["arm"]),
                    server=str(g["server"]),
                    device=str(g["device"]),
                    peak_mb=fraction_of(float(g["hbm_used_mb_max"])),
                    samples=int(g["hbm_used_mb_count"]),
                )
                for g in groups
            ),
            key=lambda p: (p.arm, p.server, p.device),
        )
    )
    arms = []
    for a in inputs.arms:
        mine = [p for p in peaks if p.arm == a.id]
        arms.append(
            ArmTelemetry(
                arm=a.id,
                servers=len({p.server for p in mine}),
                devices=len(mine),
                samples=sum(p.samples for p in mine),
                mean_peak_mb=sum((p.peak_mb for p in mine), Fraction(0)) / len(mine)
                if mine
                else None,
                max_peak_mb=max((p.peak_mb for p in mine), default=None),
            )
        )
    by_id = {a.arm: a for a in arms}
    pairs = []
    for b in inputs.arms_with_role("baseline"):
        for c in inputs.arms_with_role("candidate"):
            mb, mc = by_id[b].mean_peak_mb, by_id[c].mean_peak_mb
            change = (mc / mb - 1) * 100 if mb and mc is not None else None
            pairs.append(PairTelemetry(b, c, change))
    # ``telemetry`` is one of the plan's sections kept as JSON (Plan.unknown).
    tel = inputs.plan.unknown.get("telemetry", {}) if inputs.plan is not None else {}
    interval = tel.get("interval_s") if isinstance(tel, dict) else None
    source = tel.get("source") if isinstance(tel, dict) else None
    return TelemetryResult(
        attempt=attempt,
        peaks=peaks,
        arms=tuple(arms),
        pairs=tuple(pairs),
        interval_s=float(interval) if isinstance(interval, int | float) else None,
        source=str(source) if source is not None else None,
        limits=_limits(float(interval) if isinstance(interval, int | float) else None),
    )
