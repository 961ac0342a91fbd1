"""The frozen plan as a list of server slots and requests, and how long it should take.

One :class:`SlotPlan` per ``arm_order`` position, in run order; its requests
are the warmups, then the measured requests, then (for servers in
``quality.render_on``) one request per ``quality.prompts`` entry with that
prompt and seed. ``seq`` counts from 0 on each server, as in the receipts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.campaign.plan_slots import (
    MAX_SCHEDULED_REQUESTS,
    PlanShapeError,
    PlanSlot,
    plan_slots,
)
from bundler.format.plan_model import Plan

__all__ = [
    "PlannedRequest",
    "SlotEstimate",
    "SlotPlan",
    "build_schedule",
    "estimate",
]


@dataclass(frozen=True)
class PlannedRequest:
    """One request to send: its phase, its order on the server, and its form fields."""

    phase: str
    seq: int
    fields: Mapping[str, Any]
    prompt_id: str | None = None


@dataclass(frozen=True)
class SlotPlan:
    """One arm position: which arm and server, its runtime commit, requests, teardown budgets."""

    slot: PlanSlot
    commit: str
    requests: tuple[PlannedRequest, ...]
    term_wait_s: float
    kill_wait_s: float

    @property
    def arm(self) -> str:
        """The arm id."""
        return self.slot.arm

    @property
    def server(self) -> str:
        """The server name."""
        return self.slot.server


def _quality_requests(plan: Plan, payload: Mapping[str, Any], start: int) -> list[PlannedRequest]:
    # ``quality`` is one of the plan's sections kept as JSON (Plan.unknown).
    quality = plan.unknown.get("quality")
    prompts = quality.get("prompts") if isinstance(quality, Mapping) else None
    out = []
    for i, q in enumerate(prompts or []):
        if not isinstance(q, Mapping):
            raise PlanShapeError(f"quality.prompts.{i} must be an object")
        fields = dict(payload)
        for key in ("prompt", "seed"):
            if key in q:
                fields[key] = q[key]
        out.append(PlannedRequest("quality", start + i, fields, str(q.get("id", f"q{i + 1}"))))
    return out


def build_schedule(plan: Plan, commits: Mapping[str, str]) -> tuple[SlotPlan, ...]:
    """The slots of ``plan`` (parsed after the plan schema check, so its request,
    payload and budgets have their types); ``commits`` maps each arm id to its
    runtime commit.

    Raises:
        PlanShapeError: the plan's order or counts are malformed, it schedules more
            than ``MAX_SCHEDULED_REQUESTS`` requests, an arm has no teardown budget,
            or an arm has no commit.
    """
    slots = plan_slots(plan)
    # Before the first request object: each holds its own copy of the payload.
    total = sum(s.requests for s in slots)
    if total > MAX_SCHEDULED_REQUESTS:
        raise PlanShapeError(
            f"the plan schedules {total:,} requests; bundle run and bundle rerun schedule "
            f"at most {MAX_SCHEDULED_REQUESTS:,}, because they build every request before "
            "sending the first"
        )
    payload = plan.request.payload or {}
    out = []
    for slot in slots:
        if slot.arm not in commits:
            raise PlanShapeError(
                f"arm_order names {slot.arm!r}, which is not an arm of the campaign"
            )
        budget = None if plan.teardown is None else plan.teardown.get(slot.arm)
        if budget is None:
            raise PlanShapeError(f"teardown has no budget for arm {slot.arm!r}")
        reqs = [PlannedRequest("warmup", i, dict(payload)) for i in range(slot.warmups)]
        reqs += [
            PlannedRequest("measured", slot.warmups + i, dict(payload))
            for i in range(slot.measured)
        ]
        if slot.quality:
            reqs += _quality_requests(plan, payload, len(reqs))
        out.append(
            SlotPlan(
                slot,
                commits[slot.arm],
                tuple(reqs),
                float(budget.term_wait_s),
                float(budget.kill_wait_s),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class SlotEstimate:
    """How long one slot should take: the sealed requests' time plus the plan's budgets."""

    server: str
    arm: str
    requests: int
    sealed_requests_s: float | None
    startup_budget_s: float
    teardown_budget_s: float


def estimate(
    plan: Plan,
    schedule: Sequence[SlotPlan],
    sealed_receipts: Sequence[Mapping[str, Any]],
    attempt: str | None,
) -> tuple[SlotEstimate, ...]:
    """Per slot: the sum of the sealed ``e2e_s`` of that server in ``attempt`` (None if absent).

    The real duration lies between the sum of the sealed request times and
    that sum plus the start-up and teardown budgets.
    """
    startup_s = 0.0 if plan.startup_budget_s is None else float(plan.startup_budget_s)
    out = []
    for sp in schedule:
        rows = [
            r
            for r in sealed_receipts
            if r.get("server") == sp.server and (attempt is None or r.get("attempt_id") == attempt)
        ]
        total = sum(float(r["e2e_s"]) for r in rows) if rows else None
        out.append(
            SlotEstimate(
                sp.server,
                sp.arm,
                len(sp.requests),
                total,
                startup_s,
                sp.term_wait_s + sp.kill_wait_s,
            )
        )
    return tuple(out)
