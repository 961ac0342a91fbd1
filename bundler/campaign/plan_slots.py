"""The schedule a frozen plan sets: its arm positions in run order, and what kind of plan it is.

Read by the plan check (:mod:`bundler.campaign.plan_check`), the seal (serving
plans are not schedule-checked) and the rerun's scheduler (``rerun.schedule``).
Pure functions of the plan dictionary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_PLANNED_REQUESTS",
    "SERVING_APIS",
    "PlanShapeError",
    "PlanSlot",
    "is_serving_plan",
    "plan_slots",
]


MAX_PLANNED_REQUESTS = 100_000
"""Requests one plan may schedule, over every arm position (warmups, measured, quality).
A real campaign sends tens to hundreds; the rerun builds one request object per planned
request before the first is sent (a plan of 10**8 warmups filled 24 GB), and the plan
check multiplies counts by floats (a 400-digit count overflowed a double)."""


class PlanShapeError(ValueError):
    """The plan lacks what the schedule needs (arm order, counts, teardown budgets)."""


@dataclass(frozen=True)
class PlanSlot:
    """One position of ``arm_order``: the arm, its server, and how many requests it sends."""

    position: int
    arm: str
    server: str
    warmups: int
    measured: int
    quality: int

    def __post_init__(self) -> None:
        if self.position < 1:
            raise ValueError("positions count from 1")
        if min(self.warmups, self.measured, self.quality) < 0:
            raise ValueError("request counts cannot be negative")

    @property
    def requests(self) -> int:
        """Every request of the wave: warmups, measured and quality."""
        return self.warmups + self.measured + self.quality


def _count(plan: Mapping[str, Any], key: str, minimum: int) -> int:
    value = plan.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanShapeError(f"{key} must be an integer >= {minimum}")
    return value


def _count_text(n: int) -> str:
    # str() of an integer of over 4300 digits raises; its size is what the reader needs.
    return f"{n:,}" if n < 10**15 else f"about 10^{int(n.bit_length() * 0.30103)}"


def _quality_counts(plan: Mapping[str, Any]) -> tuple[int, set[str]]:
    quality = plan.get("quality")
    if not isinstance(quality, Mapping):
        return 0, set()
    prompts = quality.get("prompts")
    render_on = quality.get("render_on")
    if not isinstance(prompts, list) or not isinstance(render_on, list):
        return 0, set()
    return len(prompts), {str(s) for s in render_on}


def plan_slots(plan: Mapping[str, Any]) -> tuple[PlanSlot, ...]:
    """The arm positions of ``plan`` in run order.

    Servers are named by the plan's ``servers`` list (one per ``arm_order``
    entry) when it has one, else ``<arm>-<k>`` for the k-th position of that
    arm. A server in ``quality.render_on`` also sends one request per
    ``quality.prompts`` entry, after its measured requests.

    Raises:
        PlanShapeError: ``arm_order``, the request counts or ``servers`` are malformed.
    """
    order = plan.get("arm_order")
    if not isinstance(order, list) or not order or not all(isinstance(a, str) for a in order):
        raise PlanShapeError("arm_order must be a non-empty list of arm ids")
    warmups = _count(plan, "warmups_per_server", 0)
    measured = _count(plan, "measured_per_server", 1)
    servers = plan.get("servers")
    if servers is not None:
        if not isinstance(servers, list) or len(servers) != len(order):
            raise PlanShapeError("servers must list one server name per arm_order entry")
        if not all(isinstance(s, str) and s for s in servers) or len(set(servers)) != len(servers):
            raise PlanShapeError("servers must be distinct non-empty names")
    n_quality, render_on = _quality_counts(plan)
    seen: dict[str, int] = {}
    out = []
    total = 0
    for i, arm in enumerate(order):
        seen[arm] = seen.get(arm, 0) + 1
        server = str(servers[i]) if servers is not None else f"{arm}-{seen[arm]}"
        quality = n_quality if server in render_on else 0
        slot = PlanSlot(i + 1, arm, server, warmups, measured, quality)
        total += slot.requests
        if total > MAX_PLANNED_REQUESTS:
            raise PlanShapeError(
                f"the plan schedules more than {MAX_PLANNED_REQUESTS:,} requests (by arm "
                f"position {i + 1}: {_count_text(warmups)} warmup(s) and "
                f"{_count_text(measured)} measured per server, and the quality prompts)"
            )
        out.append(slot)
    return tuple(out)


SERVING_APIS = frozenset({"openai-completions", "openai-chat-completions"})
"""``request.api`` values of LLM-serving plans (no schedule, timeouts or teardown)."""


def is_serving_plan(plan: Mapping[str, Any]) -> bool:
    """True when ``plan`` describes an LLM-serving benchmark (``request.api`` openai-*)."""
    req = plan.get("request")
    api = req.get("api") if isinstance(req, dict) else None
    # A hostile plan may put any JSON here: only a string can name an API (schema reports the rest).
    return isinstance(api, str) and api in SERVING_APIS
