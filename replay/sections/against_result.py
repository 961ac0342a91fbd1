"""What comparing a rerun with the sealed bundle established: each side, each effect, the whole.

Built by :func:`replay.sections.against.compare`; its reasons
(:meth:`RerunComparison.failures`, :meth:`RerunComparison.gaps`) feed the one
replay verdict, its text is :func:`replay.sections.against_text.format_comparison`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from replay.engine.exact import to_double
from replay.sections.latency import ArmLatency, PairLatency
from replay.sections.lifecycle import LifecycleResult
from replay.sections.stats import AttemptStats

__all__ = ["Effect", "RerunComparison", "Side", "double_or_none"]


def double_or_none(x: Fraction | None) -> float | None:
    """An exact engine value as the JSON double it is shown as (None stays None)."""
    return None if x is None else to_double(x)


@dataclass(frozen=True)
class Side:
    """One bundle of the pair, read through the replay engine.

    ``stats`` is the engine's :class:`~replay.sections.stats.AttemptStats` of the accepted
    attempt, or None (with ``problem`` saying why) when the bundle has no single
    accepted attempt.
    """

    label: str  # "sealed" | "rerun"
    campaign_id: str
    trusted: bool
    attempt: str | None
    stats: AttemptStats | None
    problem: str | None
    plan_name: str | None
    plan_bytes: bytes | None
    rerun_of: Mapping[str, Any] | None
    statuses: Mapping[str, int] = field(default_factory=dict)
    timeout_levels: Mapping[str, int] = field(default_factory=dict)
    other_attempts: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """(server, seq) -> output SHA-256 of the accepted attempt's requests that have one."""

    def arm(self, arm_id: str) -> ArmLatency | None:
        """The engine's latency of arm ``arm_id`` (None: no stats, or not an arm here)."""
        return None if self.stats is None else self.stats.latency.arm(arm_id)

    def pair(self, baseline: str, candidate: str) -> PairLatency | None:
        """The engine's comparison of ``baseline`` with ``candidate`` (None: not computable)."""
        return None if self.stats is None else self.stats.latency.pair(baseline, candidate)

    @property
    def lifecycle(self) -> LifecycleResult | None:
        """The engine's worker exits of the accepted attempt."""
        return None if self.stats is None else self.stats.lifecycle

    @property
    def killed(self) -> int:
        """Worker exits that had to be killed, over every arm."""
        lc = self.lifecycle
        return 0 if lc is None else sum(a.killed for a in lc.arms)

    @property
    def hbm_peak_mean_mb(self) -> dict[str, float | None]:
        """The engine's mean sampled peak HBM per arm (None: no sample for that arm)."""
        if self.stats is None:
            return {}
        return {
            a.arm: None if a.mean_peak_mb is None else to_double(a.mean_peak_mb)
            for a in self.stats.telemetry.arms
        }

    def unclean(self) -> list[str]:
        """The engine's unclean exits (at most its first 50), one line each, with why."""
        lc = self.lifecycle
        if lc is None:
            return []
        return [
            f"{u.server}/{u.worker} ({'; '.join(u.reasons)}; exited {u.exit_s:g} s after the TERM)"
            for u in lc.unclean
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``'s ``against.sealed`` / ``against.rerun``)."""
        lc = self.lifecycle
        arms = [] if self.stats is None else self.stats.latency.arms
        return {
            "campaign_id": self.campaign_id,
            "attempt": self.attempt,
            "trusted": self.trusted,
            "problem": self.problem,
            "arms": [
                {
                    "arm": a.arm,
                    "role": a.role,
                    "mean_s": double_or_none(a.mean_s),
                    "servers": [
                        {
                            "server": s.server,
                            "arm": s.arm,
                            "mean_s": double_or_none(s.mean_s),
                            "n": s.n,
                        }
                        for s in a.servers
                    ],
                }
                for a in arms
            ],
            "statuses": dict(self.statuses),
            "timeout_levels": dict(self.timeout_levels),
            "lifecycle": {
                "total": 0 if lc is None else lc.total,
                "clean": 0 if lc is None else lc.clean,
                "killed": self.killed,
                "unclean": self.unclean(),
            },
            "hbm_peak_mean_mb": self.hbm_peak_mean_mb,
            "other_attempts": dict(self.other_attempts),
        }


@dataclass(frozen=True)
class Effect:
    """One baseline/candidate pair in both bundles (floats for the views; judged exactly)."""

    baseline: str
    candidate: str
    sealed_baseline_s: float | None
    sealed_candidate_s: float | None
    rerun_baseline_s: float | None
    rerun_candidate_s: float | None
    sealed_speedup: float | None
    rerun_speedup: float | None
    sealed_percent_lower: float | None
    rerun_percent_lower: float | None
    baseline_ratio: float | None
    candidate_ratio: float | None
    speedup_ratio: float | None
    reproduced: bool | None
    verdict: str
    why: str | None = None
    """Why the effect is not reproduced, or could not be judged (None when reproduced)."""


@dataclass(frozen=True)
class RerunComparison:
    """The whole side-by-side, and its verdict's reasons."""

    sealed: Side
    rerun: Side
    effects: tuple[Effect, ...]
    tolerance: float
    plan_matches: bool
    outputs_compared: int
    outputs_matching: int
    limits: tuple[str, ...]

    def not_comparable(self) -> list[str]:
        """Why the rerun does not stand for a rerun of the sealed bundle (empty when it does)."""
        out = []
        s, r = self.sealed, self.rerun
        if not self.plan_matches:
            out.append(
                f"the rerun's frozen plan ({r.plan_name or 'none'}) is not the sealed one "
                f"({s.plan_name or 'none'}) byte for byte: it is not a rerun of this plan"
            )
        of = r.rerun_of
        if of is not None and of.get("campaign_id") not in (None, s.campaign_id):
            out.append(
                f"the rerun says it reran campaign {of.get('campaign_id')!s}, "
                f"not the sealed {s.campaign_id}"
            )
        return out

    @property
    def reproduced(self) -> bool | None:
        """True if every effect reproduced, False if one did not, None if none could be judged
        (or the rerun is not a rerun of this plan)."""
        if self.not_comparable():
            return None
        judged = [e.reproduced for e in self.effects if e.reproduced is not None]
        if not judged:
            return None
        return all(judged)

    def integrity_failures(self) -> list[str]:
        """Nothing here re-reads sealed content: integrity is each bundle's verification."""
        return []

    def failures(self) -> list[str]:
        """Why the comparison contradicts the sealed effect (exit 4), one line each."""
        if self.not_comparable():
            return []
        return [e.why for e in self.effects if e.reproduced is False and e.why]

    def gaps(self) -> list[str]:
        """Why the comparison could not judge the sealed effect (exit 5), one line each."""
        out = self.not_comparable()
        sides = [s for s in (self.sealed, self.rerun) if s.problem is not None]
        out += [f"the {s.label} bundle cannot be compared: {s.problem}" for s in sides]
        if sides:  # every effect is then unjudged for that one reason
            return out
        if not self.effects:
            out.append("the sealed campaign has no baseline/candidate pair: no effect to reproduce")
        out += [e.why for e in self.effects if e.reproduced is None and e.why]
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "reproduced": self.reproduced,
            "tolerance": self.tolerance,
            "plan_matches": self.plan_matches,
            "failures": self.failures(),
            "gaps": self.gaps(),
            "sealed": self.sealed.to_dict(),
            "rerun": self.rerun.to_dict(),
            "effects": [dataclasses.asdict(e) for e in self.effects],
            "outputs": {"compared": self.outputs_compared, "matching": self.outputs_matching},
            "limits": list(self.limits),
        }
