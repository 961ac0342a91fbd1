"""The schedule a frozen plan sets: its arm positions in run order, and what kind of plan it is.

Read by the plan check (:mod:`bundler.campaign.plan_check`), the seal (serving
plans are not schedule-checked) and the rerun's scheduler (``rerun.schedule``).
:func:`plan_slots` reads the typed :class:`~bundler.format.plan_model.Plan`;
:func:`document_slots` and :func:`is_serving_plan` read a plan document that may
not have passed the schema (``bundle plan check FILE``, the campaign loader), so
they check every shape they rely on. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundler.format.plan_model import Plan

__all__ = [
    "MAX_ARM_POSITIONS",
    "MAX_PLANNED_REQUESTS",
    "MAX_SCHEDULED_REQUESTS",
    "SERVING_APIS",
    "PlanShapeError",
    "PlanSlot",
    "document_slots",
    "is_serving_plan",
    "plan_slots",
]


MAX_PLANNED_REQUESTS = 10**9
"""Requests one plan may declare, over every arm position (warmups, measured, quality).
The plan check multiplies counts by floats (a 400-digit count overflowed a double): up to
10**9 every count converts to a double exactly, and the check's cost
does not grow with the counts (one slot per arm position, no loop over requests). Far
above honest campaigns: issue 22 seals campaigns of 10 million receipts."""

MAX_ARM_POSITIONS = 1_000
"""Positions one plan's ``arm_order`` may have. The plan check's report names, for a stuck
first request in each position, every later server that would lose samples: a plan whose
reservation cannot hold a stuck request reports about n**2 / 2 servers for n positions
(1,000: half a million names, a 32 MB ``--json`` report and 0.9 s; 4,000 positions took
2.3 GB before this bound, measured 2026-12-03). A real campaign has a handful to a few
hundred positions, each a server start-up. The bound is checked before any slot is
built, so a plan file of millions of entries costs one pass over its list."""

MAX_SCHEDULED_REQUESTS = 1_000_000
"""Requests ``bundle run`` and ``bundle rerun`` may schedule, over every arm position.
They build one request object per planned request before the first is sent (a plan of
10**8 warmups filled 24 GB); a million with the reference campaign's 8-field payload
take about 400 MiB (measured 2026-12-03). A larger plan still seals and passes the plan
check, with a ``rerun-bound`` warning."""


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


def _count(value: Any, key: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanShapeError(f"{key} must be an integer >= {minimum}")
    return value


def _count_text(n: int) -> str:
    # str() of an integer of over 4300 digits raises; its size is what the reader needs.
    return f"{n:,}" if n < 10**15 else f"about 10^{int(n.bit_length() * 0.30103)}"


def _quality_counts(quality: Any) -> tuple[int, set[str]]:
    if not isinstance(quality, Mapping):
        return 0, set()
    prompts = quality.get("prompts")
    render_on = quality.get("render_on")
    if not isinstance(prompts, list) or not isinstance(render_on, list):
        return 0, set()
    return len(prompts), {str(s) for s in render_on}


def _slots(
    order: Any, warmups_value: Any, measured_value: Any, servers: Any, quality_section: Any
) -> tuple[PlanSlot, ...]:
    # Values as the plan gives them: a typed Plan keeps an integral float as written
    # (3.0), which is no count here either way.
    if not isinstance(order, list) or not order or not all(isinstance(a, str) for a in order):
        raise PlanShapeError("arm_order must be a non-empty list of arm ids")
    if len(order) > MAX_ARM_POSITIONS:
        raise PlanShapeError(
            f"arm_order has {len(order):,} positions; a plan may have at most "
            f"{MAX_ARM_POSITIONS:,} (the plan check's report grows with their square)"
        )
    warmups = _count(warmups_value, "warmups_per_server", 0)
    measured = _count(measured_value, "measured_per_server", 1)
    if servers is not None:
        if not isinstance(servers, list) or len(servers) != len(order):
            raise PlanShapeError("servers must list one server name per arm_order entry")
        if not all(isinstance(s, str) and s for s in servers) or len(set(servers)) != len(servers):
            raise PlanShapeError("servers must be distinct non-empty names")
    n_quality, render_on = _quality_counts(quality_section)
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


def plan_slots(plan: Plan) -> tuple[PlanSlot, ...]:
    """The arm positions of ``plan`` in run order.

    Servers are named by the plan's ``servers`` list (one per ``arm_order``
    entry) when it has one, else ``<arm>-<k>`` for the k-th position of that
    arm. A server in ``quality.render_on`` also sends one request per
    ``quality.prompts`` entry, after its measured requests.

    Raises:
        PlanShapeError: ``arm_order``, the request counts or ``servers`` are malformed.
    """
    return _slots(
        None if plan.arm_order is None else list(plan.arm_order),
        plan.warmups_per_server,
        plan.measured_per_server,
        None if plan.servers is None else list(plan.servers),
        # ``quality`` is one of the sections Plan keeps as the JSON it is.
        plan.unknown.get("quality"),
    )


def document_slots(plan: Mapping[str, Any]) -> tuple[PlanSlot, ...]:
    """:func:`plan_slots` of a plan document that may not have passed the schema.

    Raises:
        PlanShapeError: ``arm_order``, the request counts or ``servers`` are malformed.
    """
    return _slots(
        plan.get("arm_order"),
        plan.get("warmups_per_server"),
        plan.get("measured_per_server"),
        plan.get("servers"),
        plan.get("quality"),
    )


SERVING_APIS = frozenset({"openai-completions", "openai-chat-completions"})
"""``request.api`` values of LLM-serving plans (no schedule, timeouts or teardown)."""


def is_serving_plan(plan: Mapping[str, Any]) -> bool:
    """True when ``plan`` describes an LLM-serving benchmark (``request.api`` openai-*)."""
    req = plan.get("request")
    api = req.get("api") if isinstance(req, dict) else None
    # A hostile plan may put any JSON here: only a string can name an API (schema reports the rest).
    return isinstance(api, str) and api in SERVING_APIS
