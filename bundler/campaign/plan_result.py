"""What ``bundle plan check`` establishes about a plan: findings, budgets and scenarios.

The result types of :mod:`bundler.campaign.plan_check` and the way they print
seconds (``9,900 s (2 h 45 min)``). Plain frozen data; the check itself lives in
:mod:`bundler.campaign.plan_check`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bundler.campaign.detectable import DetectableDifference
from bundler.campaign.plan_slots import PlanSlot

__all__ = [
    "LEVELS",
    "Finding",
    "PlanCheckResult",
    "Reservation",
    "SlotBudget",
    "StuckScenario",
    "level_name",
    "seconds_text",
]

LEVELS = ("request", "wave", "arm", "reservation")
"""Deadline levels from the innermost out; on a tie the innermost is said to fire."""
_FINDING_LEVELS = ("error", "warning")


@dataclass(frozen=True)
class Finding:
    """One result of the check: ``level`` error or warning, a stable ``code``, the field path."""

    level: str
    code: str
    path: str
    message: str

    def __post_init__(self) -> None:
        if self.level not in _FINDING_LEVELS:
            raise ValueError(f"finding level must be one of {_FINDING_LEVELS}, not {self.level!r}")
        if not self.code:
            raise ValueError("a finding needs a code")

    def __str__(self) -> str:
        return f"{self.level}: {self.path}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class Reservation:
    """The device reservation, in seconds from its start."""

    hard_limit_s: float
    soft_term_s: float
    kill_grace_s: float
    watchdog_is_failure_boundary: bool
    unfinished_arm_evidence: str | None


@dataclass(frozen=True)
class SlotBudget:
    """What one arm position may take under the plan's own deadlines.

    ``worst_case_s`` = min(arm_s, start-up + min(wave_s, requests x request_s))
    + TERM wait + KILL wait. ``nominal_s`` uses ``expected_request_s`` per
    request instead (0 when the plan does not declare it).
    """

    slot: PlanSlot
    startup_s: float
    wave_budget_s: float
    teardown_s: float
    worst_case_s: float
    nominal_s: float


@dataclass(frozen=True)
class StuckScenario:
    """A stuck first request in one arm position, earlier positions having run nominally.

    Times are seconds from the start of the reservation. ``deadlines`` lists
    every level the plan sets for that request, ``fires`` the first of them.
    ``starved`` names later servers that would get no sample at all, ``cut``
    later servers that would start but not finish before the soft TERM.
    """

    slot: PlanSlot
    starts_at_s: float
    deadlines: tuple[tuple[str, float], ...]
    fires: str
    fires_at_s: float
    slot_ends_at_s: float
    clean_up_fits: bool
    starved: tuple[str, ...]
    cut: tuple[str, ...]

    def describe(self) -> str:
        """One sentence: which level fires first and who loses samples."""
        s = self.slot
        others = ", ".join(
            f"{lvl} at {seconds_text(t)}" for lvl, t in self.deadlines if lvl != self.fires
        )
        text = (
            f"arm position {s.position} ({s.arm} on {s.server}): a stuck first request is "
            f"ended by the {level_name(self.fires)} at {seconds_text(self.fires_at_s)}"
        )
        if others:
            text += f" (then: {others})"
        if not self.clean_up_fits and self.fires != "reservation":
            text += "; its teardown does not finish before the soft TERM"
        if self.starved:
            text += "; no samples for " + ", ".join(self.starved)
        if self.cut:
            text += "; cut short: " + ", ".join(self.cut)
        if not self.starved and not self.cut:
            text += "; every later position still runs"
        return text


@dataclass(frozen=True)
class PlanCheckResult:
    """Everything ``check_plan`` established about one plan."""

    plan_id: str
    findings: tuple[Finding, ...]
    slots: tuple[SlotBudget, ...] = ()
    scenarios: tuple[StuckScenario, ...] = ()
    reservation: Reservation | None = None
    timeouts: Mapping[str, float | None] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    detectable: tuple[DetectableDifference, ...] | None = None
    """Per pair of arms (the first arm against each other one), with a spread given."""

    @property
    def errors(self) -> tuple[Finding, ...]:
        """Findings of level error."""
        return tuple(f for f in self.findings if f.level == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        """Findings of level warning."""
        return tuple(f for f in self.findings if f.level == "warning")

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    @property
    def worst_case_total_s(self) -> float:
        """Every position at its full budget, one after the other."""
        return sum(b.worst_case_s for b in self.slots)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``bundle plan check --json``)."""
        res = self.reservation
        return {
            "plan_id": self.plan_id,
            "ok": self.ok,
            "timeouts": dict(self.timeouts),
            "reservation": None if res is None else res.__dict__,
            "findings": [f.__dict__ for f in self.findings],
            "slots": [
                {
                    "position": b.slot.position,
                    "arm": b.slot.arm,
                    "server": b.slot.server,
                    "requests": b.slot.requests,
                    "startup_s": b.startup_s,
                    "wave_budget_s": b.wave_budget_s,
                    "teardown_s": b.teardown_s,
                    "worst_case_s": b.worst_case_s,
                    "nominal_s": b.nominal_s,
                }
                for b in self.slots
            ],
            "worst_case_total_s": self.worst_case_total_s,
            "scenarios": [
                {
                    "position": s.slot.position,
                    "arm": s.slot.arm,
                    "server": s.slot.server,
                    "starts_at_s": s.starts_at_s,
                    "deadlines": dict(s.deadlines),
                    "fires": s.fires,
                    "fires_at_s": s.fires_at_s,
                    "slot_ends_at_s": s.slot_ends_at_s,
                    "clean_up_fits": s.clean_up_fits,
                    "starved": list(s.starved),
                    "cut": list(s.cut),
                    "text": s.describe(),
                }
                for s in self.scenarios
            ],
            "assumptions": list(self.assumptions),
            "detectable": None if self.detectable is None else [asdict(d) for d in self.detectable],
        }


def seconds_text(x: float) -> str:
    """``9,900 s (2 h 45 min)``: seconds as the plan writes them, and the clock reading."""
    if not math.isfinite(x):
        return "never"
    text = f"{x:,.0f} s" if x == round(x) else f"{x:,.2f} s"
    whole = round(abs(x))
    h, rem = divmod(whole, 3600)
    m, sec = divmod(rem, 60)
    parts = [f"{h} h"] if h else []
    parts += [f"{m} min"] if m else []
    parts += [f"{sec} s"] if sec and not h else []
    if whole >= 60:
        text += f" ({' '.join(parts)})"
    return text


def level_name(level: str) -> str:
    """What the plan calls a deadline level: ``reservation`` is its soft TERM."""
    return {
        "request": "request timeout",
        "wave": "wave timeout",
        "arm": "arm timeout",
        "reservation": "reservation soft TERM",
    }[level]
