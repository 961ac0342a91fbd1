"""``bundle plan check``: does every deadline of a frozen plan fit the one around it?

A plan nests four deadlines (``specs/plan-check.md``):

- **request**: ``timeouts.request_s``, one HTTP request (POST to DELETE);
- **wave**: ``timeouts.wave_s``, the whole request sequence of one server
  (warmups, measured, quality), counted from the moment the server is ready;
- **arm**: ``timeouts.arm_s``, one position of ``arm_order`` (start-up and its
  wave; the TERM/KILL teardown follows it);
- **reservation**: the device reservation shared by every position in order:
  soft TERM at ``soft_term_s``, KILL ``kill_grace_s`` later, everything gone by
  ``hard_limit_s``.

For a stuck first request in each arm position the checker computes which of
those deadlines fires first, and which later positions would then get no
samples. The seed's two pilot plans (4 h request timeouts inside a 3 h and a
2 h reservation) fail here: the reservation watchdog, not the request timeout,
ends the stuck arm, and every later arm is lost.

The check reads a :class:`~bundler.campaign.plan_input.PlanCheckInput`: from the
typed :class:`~bundler.format.plan_model.Plan` (:func:`check_plan`) or from a plan
document that may not have passed the schema (:func:`check_plan_document`, the
lenient front end of ``bundle plan check FILE`` and of the seal); a malformed
value is a finding, never an exception. Pure functions: no I/O, no printing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bundler.campaign.detectable import DetectableDifference, ServerSpread, detectable_difference
from bundler.campaign.plan_input import MALFORMED, CheckReservation, Number, PlanCheckInput
from bundler.campaign.plan_omni import omni_findings
from bundler.campaign.plan_result import (
    LEVELS,
    Finding,
    PlanCheckResult,
    Reservation,
    SlotBudget,
    StuckScenario,
    level_name,
    seconds_text,
)
from bundler.campaign.plan_slots import (
    MAX_SCHEDULED_REQUESTS,
    SERVING_APIS,
    PlanShapeError,
    PlanSlot,
    document_slots,
    is_serving_plan,
    plan_slots,
)
from bundler.errors import Problem
from bundler.format.plan_model import Plan

# The result types and the plan's schedule live in their own modules; their public
# names stay importable from here, the module ``bundle plan check`` is named after.
__all__ = [
    "LEVELS",
    "SERVING_APIS",
    "Finding",
    "PlanCheckResult",
    "PlanShapeError",
    "PlanSlot",
    "Reservation",
    "SlotBudget",
    "StuckScenario",
    "check_plan",
    "check_plan_document",
    "document_slots",
    "is_serving_plan",
    "plan_slots",
    "seal_plan_findings",
]

_RANK = {name: i for i, name in enumerate(LEVELS)}
_SEAL_BLOCKING_KINDS = ("campaign",)


def _positive(value: Number) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _non_negative(value: Number) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


@dataclass
class _Reader:
    """Reads the plan's numbers, turning each malformed one into an error finding."""

    plan: PlanCheckInput
    findings: list[Finding] = field(default_factory=list)

    def get(
        self, value: Number, path: str, *, required: bool = False, allow_zero: bool = False
    ) -> float | None:
        if value is None:
            if required:
                self.findings.append(Finding("error", "missing", path, "required by the check"))
            return None
        ok = _non_negative(value) if allow_zero else _positive(value)
        if not ok or value is MALFORMED:
            want = "a number >= 0" if allow_zero else "a number > 0"
            self.findings.append(Finding("error", "invalid", path, f"must be {want}"))
            return None
        return float(value)


def _reservation(r: _Reader) -> tuple[Reservation | None, CheckReservation | None]:
    res = r.plan.reservation
    if res is None:
        return None, None
    if res is MALFORMED:
        r.findings.append(Finding("error", "invalid", "reservation", "must be an object"))
        return None, None
    hard = r.get(res.hard_limit_s, "reservation.hard_limit_s", required=True)
    soft = r.get(res.soft_term_s, "reservation.soft_term_s")
    grace = r.get(res.kill_grace_s, "reservation.kill_grace_s", allow_zero=True)
    if hard is None:
        return None, res
    return Reservation(
        hard,
        soft if soft is not None else hard,
        grace or 0.0,
        res.watchdog_is_failure_boundary,
        res.unfinished_arm_evidence,
    ), res


def _reservation_findings(res: Reservation, explicit_soft: bool) -> list[Finding]:
    out = []
    if res.soft_term_s > res.hard_limit_s:
        out.append(
            Finding(
                "error",
                "soft-after-hard",
                "reservation.soft_term_s",
                f"soft TERM at {seconds_text(res.soft_term_s)} comes after the hard limit "
                f"{seconds_text(res.hard_limit_s)}",
            )
        )
    elif res.soft_term_s + res.kill_grace_s > res.hard_limit_s:
        out.append(
            Finding(
                "error",
                "kill-after-hard",
                "reservation.kill_grace_s",
                f"soft TERM at {seconds_text(res.soft_term_s)} + kill grace "
                f"{seconds_text(res.kill_grace_s)} = "
                f"{seconds_text(res.soft_term_s + res.kill_grace_s)} "
                f"passes the hard limit {seconds_text(res.hard_limit_s)}",
            )
        )
    if res.watchdog_is_failure_boundary and res.unfinished_arm_evidence is None:
        out.append(
            Finding(
                "error",
                "boundary-without-evidence",
                "reservation.unfinished_arm_evidence",
                "the plan declares the reservation watchdog as its failure boundary but not "
                "what each unfinished arm records",
            )
        )
    if not explicit_soft:
        out.append(
            Finding(
                "warning",
                "no-soft-term",
                "reservation.soft_term_s",
                "no soft TERM: the checker takes the hard limit as the moment work must end",
            )
        )
    return out


def _expected(plan: PlanCheckInput, arm: str, r: _Reader) -> float:
    exp = plan.expected_request_s
    per_arm = isinstance(exp, Mapping)
    value = exp.get(arm) if isinstance(exp, Mapping) else exp
    if value is None:
        return 0.0
    if value is MALFORMED or not _non_negative(value):
        path = f"expected_request_s.{arm}" if per_arm else "expected_request_s"
        r.findings.append(Finding("error", "invalid", path, "must be a number >= 0"))
        return 0.0
    return float(value)


def _teardown(plan: PlanCheckInput, arm: str, r: _Reader) -> float | None:
    entry = plan.teardown.get(arm)
    if entry is None:
        return None
    path = f"teardown.{arm}"
    term = r.get(entry.term_wait_s, path + ".term_wait_s", required=True, allow_zero=True)
    kill = r.get(entry.kill_wait_s, path + ".kill_wait_s", required=True, allow_zero=True)
    if term is None or kill is None:
        return None
    return term + kill


@dataclass(frozen=True)
class _Timeouts:
    request: float
    wave: float | None
    arm: float | None
    startup: float


def _budgets(
    plan: PlanCheckInput, slots: Sequence[PlanSlot], t: _Timeouts, r: _Reader
) -> tuple[list[SlotBudget], dict[str, float]]:
    budgets = []
    expected: dict[str, float] = {}
    missing: set[str] = set()
    for s in slots:
        td = _teardown(plan, s.arm, r)
        if td is None:
            if s.arm not in missing:
                r.findings.append(
                    Finding(
                        "error",
                        "missing-teardown",
                        f"teardown.{s.arm}",
                        f"no TERM/KILL budget for arm {s.arm!r}: its clean-up cannot be sized",
                    )
                )
                missing.add(s.arm)
            continue
        expected.setdefault(s.arm, _expected(plan, s.arm, r))
        wave_budget = s.requests * t.request
        if t.wave is not None:
            wave_budget = min(wave_budget, t.wave)
        work = t.startup + wave_budget
        if t.arm is not None:
            work = min(work, t.arm)
        nominal = t.startup + s.requests * expected[s.arm] + td
        budgets.append(SlotBudget(s, t.startup, wave_budget, td, work + td, nominal))
    return budgets, expected


def _suffix_nominal(budgets: Sequence[SlotBudget]) -> list[float]:
    """``out[i]``: the nominal seconds of every position after index ``i``."""
    out = [0.0] * len(budgets)
    rest = 0.0
    for i in range(len(budgets) - 1, -1, -1):
        out[i] = rest
        rest += budgets[i].nominal_s
    return out


# Relative and absolute slack on the bound below: summing n non-negative doubles errs by
# at most about n x 2**-53 of the sum (under 2e-12 at MAX_ARM_POSITIONS), plus one
# subnormal step per rounding for values near 0.
_NO_LOSS_REL = 1e-6
_NO_LOSS_ABS = 1e-300


def _later_losses(
    i: int,
    budgets: Sequence[SlotBudget],
    *,
    t: _Timeouts,
    expected: Mapping[str, float],
    end: float,
    soft: float,
    fired_reservation: bool,
    rest_nominal: float,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Servers after position ``i`` with no samples, and those cut short."""
    later = budgets[i + 1 :] if i + 1 < len(budgets) else ()
    if fired_reservation:
        return tuple(b.slot.server for b in later), ()
    # Every later position ends, nominally, by end + rest_nominal. When that sum is
    # clear of the soft TERM by more than its rounding error, no later position can
    # reach it, and the walk below (which costs as much as the positions after this
    # one, for every position: quadratic over the plan) would name no server.
    if (end + rest_nominal) * (1 + _NO_LOSS_REL) + _NO_LOSS_ABS < soft:
        return (), ()
    starved: list[str] = []
    cut: list[str] = []
    # Accumulated one position at a time, as each is reached: the same doubles (and so
    # the same verdicts at a boundary) as the plan check has always computed.
    tt = end
    for b in later:
        s = b.slot
        first_measured = tt + t.startup + (s.warmups + 1) * expected[s.arm]
        if first_measured >= soft:
            starved.append(s.server)
        elif tt + b.nominal_s > soft:
            cut.append(s.server)
        tt += b.nominal_s
    return tuple(starved), tuple(cut)


def _scenario(
    i: int,
    budgets: Sequence[SlotBudget],
    *,
    t: _Timeouts,
    res: Reservation | None,
    expected: Mapping[str, float],
    start: float,
    rest_nominal: float,
) -> StuckScenario:
    """Position ``i`` stuck; ``start`` and ``rest_nominal``: nominal seconds before and after it."""
    b = budgets[i]
    slot = b.slot
    ready = start + t.startup
    dl: dict[str, float] = {"request": ready + t.request}
    if t.wave is not None:
        dl["wave"] = ready + t.wave
    if t.arm is not None:
        dl["arm"] = start + t.arm
    soft = res.soft_term_s if res is not None else math.inf
    if res is not None:
        dl["reservation"] = soft
    fires, at = min(dl.items(), key=lambda kv: (kv[1], _RANK[kv[0]]))
    if fires == "request":
        # The rest of the wave runs at its expected pace, unless an outer deadline stops it.
        rest = at + (slot.requests - 1) * expected[slot.arm]
        work_end = min([rest, *(v for k, v in dl.items() if k != "request")])
        end = work_end + b.teardown_s
    elif fires == "reservation" and res is not None:
        end = at + min(b.teardown_s, res.kill_grace_s)
    else:
        end = at + b.teardown_s
    clean = fires != "reservation" and end <= soft
    starved, cut = _later_losses(
        i,
        budgets,
        t=t,
        expected=expected,
        end=end,
        soft=soft,
        fired_reservation=fires == "reservation",
        rest_nominal=rest_nominal,
    )
    ordered = tuple(sorted(dl.items(), key=lambda kv: (kv[1], _RANK[kv[0]])))
    return StuckScenario(slot, start, ordered, fires, at, end, clean, starved, cut)


def _scenario_findings(sc: StuckScenario, res: Reservation | None) -> list[Finding]:
    boundary = res is not None and res.watchdog_is_failure_boundary
    evidence = ""
    if boundary and res is not None:
        evidence = (
            f" (intended: the reservation watchdog is the declared failure boundary; evidence: "
            f"{res.unfinished_arm_evidence})"
            if res.unfinished_arm_evidence
            else " (declared as the failure boundary, but with no evidence declared)"
        )
    out = []
    pos = f"arm position {sc.slot.position} ({sc.slot.arm} on {sc.slot.server})"
    if sc.fires != "request":
        intended = boundary and sc.fires == "reservation"
        request_at = dict(sc.deadlines)["request"]
        out.append(
            Finding(
                "warning" if intended else "error",
                "stuck-request-outer-level",
                "timeouts.request_s",
                f"{pos}: a stuck first request is ended by the {level_name(sc.fires)} at "
                f"{seconds_text(sc.fires_at_s)}, before its own request timeout at "
                f"{seconds_text(request_at)}" + (evidence if intended else ""),
            )
        )
    elif not sc.clean_up_fits:
        out.append(
            Finding(
                "warning" if boundary else "error",
                "no-room-for-clean-up",
                "teardown",
                f"{pos}: after its request timeout fires, the wave and teardown end at "
                f"{seconds_text(sc.slot_ends_at_s)}, after the soft TERM",
            )
        )
    lost = [*(f"{s} (no samples)" for s in sc.starved), *(f"{s} (cut short)" for s in sc.cut)]
    if lost:
        out.append(
            Finding(
                "warning" if boundary else "error",
                "later-arms-starved",
                "reservation.soft_term_s",
                f"a stuck first request at {pos} leaves too little reservation for: "
                + ", ".join(lost)
                + evidence,
            )
        )
    return out


def _worst_case_finding(
    budgets: Sequence[SlotBudget], res: Reservation, elapsed_s: float
) -> Finding | None:
    end = elapsed_s
    over = []
    for b in budgets:
        end += b.worst_case_s
        if end > res.soft_term_s:
            over.append(b.slot.server)
    if not over:
        return None
    total = elapsed_s + sum(b.worst_case_s for b in budgets)
    # What would make the worst case fit: the wave budget every position may use
    # once start-ups and teardowns are paid, or the soft TERM it would need.
    fixed = elapsed_s + sum(b.startup_s + b.teardown_s for b in budgets)
    wave_fit = (res.soft_term_s - fixed) / len(budgets)
    change = (
        f"timeouts.wave_s to at most {seconds_text(wave_fit)} "
        "(only if every wave really fits in it)"
        if wave_fit > 0
        else "fewer positions or shorter start-up and teardown budgets"
    )
    return Finding(
        "warning",
        "worst-case-exceeds-reservation",
        "reservation.soft_term_s",
        f"if every arm position used its whole budget ({seconds_text(total)} in all), "
        "the soft TERM "
        f"at {seconds_text(res.soft_term_s)} would cut: " + ", ".join(over) + ". A risk, not a "
        "certainty: it happens only if earlier positions run up to their deadlines; the "
        "positions named would then end in timeouts and the attempt would be interrupted, "
        "not accepted. To make the worst case fit, set " + change + ", or "
        f"reservation.soft_term_s to at least {seconds_text(total)}; for a plan already sealed, "
        "start the run early in the reservation (less set-up time before it)",
    )


def _grace_findings(budgets: Sequence[SlotBudget], res: Reservation) -> list[Finding]:
    out = []
    for arm, td in {b.slot.arm: b.teardown_s for b in budgets}.items():
        if td > res.kill_grace_s:
            out.append(
                Finding(
                    "warning",
                    "teardown-exceeds-kill-grace",
                    f"teardown.{arm}",
                    "a teardown started at the soft TERM needs up to "
                    f"{seconds_text(td)} (TERM + KILL "
                    f"waits) but the reservation kills after {seconds_text(res.kill_grace_s)}",
                )
            )
    return out


def _timeouts(r: _Reader) -> _Timeouts | None:
    p = r.plan
    request = r.get(p.request_s, "timeouts.request_s", required=True)
    wave = r.get(p.wave_s, "timeouts.wave_s")
    arm = r.get(p.arm_s, "timeouts.arm_s")
    startup = r.get(p.startup_budget_s, "startup_budget_s", allow_zero=True)
    if startup is None and not p.startup_declared:
        r.findings.append(
            Finding(
                "warning",
                "no-startup-budget",
                "startup_budget_s",
                "no start-up budget: the check assumes servers are ready at once, so it cannot "
                "leave room for start-up",
            )
        )
    if request is None:
        return None
    return _Timeouts(request, wave, arm, startup or 0.0)


def _detectable(
    slots: Sequence[PlanSlot], spread: ServerSpread, level: float
) -> tuple[DetectableDifference, ...]:
    """The first arm of the plan against each other arm, servers per arm from the plan."""
    servers: dict[str, set[str]] = {}
    for s in slots:
        servers.setdefault(s.arm, set()).add(s.server)
    arms = list(servers)
    return tuple(
        detectable_difference(
            spread,
            len(servers[arms[0]]),
            len(servers[other]),
            baseline=arms[0],
            candidate=other,
            level=level,
        )
        for other in arms[1:]
    )


def check_plan(
    plan: Plan,
    *,
    elapsed_s: float = 0.0,
    spread: ServerSpread | None = None,
    level: float = 0.95,
) -> PlanCheckResult:
    """Check the timeout hierarchy of ``plan`` against its device reservation.

    Args:
        plan: the frozen plan, typed (``specs/schemas/plan.schema.json``).
        elapsed_s: seconds of the reservation already used before the first
            arm position starts (set-up, an earlier attempt).
        spread: server-to-server spread from a pilot or baseline bundle; when
            given, the result states the smallest difference of arm means the
            Welch interval at ``level`` could tell apart from zero
            (:mod:`bundler.campaign.detectable`).
        level: that interval's confidence level.

    Returns:
        Every finding (policy in ``specs/plan-check.md``), the per-position
        budgets, one stuck-first-request scenario per arm position, and the
        detectable differences when ``spread`` is given.
    """
    return _check(PlanCheckInput.from_plan(plan), elapsed_s, spread, level)


def check_plan_document(
    doc: Mapping[str, Any],
    *,
    elapsed_s: float = 0.0,
    spread: ServerSpread | None = None,
    level: float = 0.95,
) -> PlanCheckResult:
    """:func:`check_plan` of a plan document that may not have passed the schema.

    Every value the check needs and finds malformed (a string for a number, a
    list for an object, an arm order that is no list) is an error finding
    located by its JSON path, as for a value out of range; nothing raises.
    """
    return _check(PlanCheckInput.from_document(doc), elapsed_s, spread, level)


def _check(
    plan: PlanCheckInput, elapsed_s: float, spread: ServerSpread | None, level: float
) -> PlanCheckResult:
    plan_id = plan.plan_id
    r = _Reader(plan)
    if plan.shape_error is not None:
        return PlanCheckResult(
            plan_id, (Finding("error", "invalid", "arm_order", plan.shape_error),)
        )
    slots = plan.slots
    total = sum(s.requests for s in slots)
    if total > MAX_SCHEDULED_REQUESTS:
        # A plan may declare it (the seal accepts it); its author learns before running it.
        r.findings.append(
            Finding(
                "warning",
                "rerun-bound",
                "arm_order",
                f"bundle run and bundle rerun refuse to schedule more than "
                f"{MAX_SCHEDULED_REQUESTS:,} requests; this plan schedules {total:,}",
            )
        )
    detectable = None if spread is None else _detectable(slots, spread, level)
    t = _timeouts(r)
    res, declared = _reservation(r)
    if res is not None and declared is not None:
        r.findings += _reservation_findings(res, declared.soft_declared)
    elif not plan.reservation_declared:
        r.findings.append(
            Finding(
                "warning",
                "no-reservation",
                "reservation",
                "no device reservation: only the request, wave and arm levels can be checked",
            )
        )
    if t is None:
        r.findings += omni_findings(plan)
        return PlanCheckResult(plan_id, tuple(r.findings), reservation=res, detectable=detectable)
    budgets, expected = _budgets(plan, slots, t, r)
    scenarios: list[StuckScenario] = []
    if len(budgets) == len(slots):
        after = _suffix_nominal(budgets)
        # The nominal seconds of the positions before each one, summed as it goes
        # (a sum over each prefix again was quadratic in the positions), in the order
        # Python 3.11's sum() added them: the same doubles.
        before: float | int = 0
        for i, b in enumerate(budgets):
            sc = _scenario(
                i,
                budgets,
                t=t,
                res=res,
                expected=expected,
                start=elapsed_s + before,
                rest_nominal=after[i],
            )
            scenarios.append(sc)
            r.findings += _scenario_findings(sc, res)
            before += b.nominal_s
        if res is not None:
            worst = _worst_case_finding(budgets, res, elapsed_s)
            if worst is not None:
                r.findings.append(worst)
            if declared is not None and declared.kill_grace_declared:
                r.findings += _grace_findings(budgets, res)
    assumptions = [
        "earlier arm positions run nominally: full start-up budget, "
        + (
            "expected_request_s per request"
            if plan.expected_declared
            else "requests taking no time (no expected_request_s declared; the most favourable "
            "case, so every error found is certain)"
        )
        + ", full TERM + KILL teardown budget",
        "the arm timeout counts from the start of its position (start-up included); "
        "the wave timeout from the moment the server is ready",
    ]
    if elapsed_s:
        assumptions.append(f"{seconds_text(elapsed_s)} of the reservation used before position 1")
    # After every timing finding, so their order is kept: what the server would do with the request.
    r.findings += omni_findings(plan)
    timeouts = {
        "request_s": t.request,
        "wave_s": t.wave,
        "arm_s": t.arm,
        "startup_budget_s": t.startup,
    }
    return PlanCheckResult(
        plan_id,
        tuple(r.findings),
        tuple(budgets),
        tuple(scenarios),
        res,
        timeouts,
        tuple(assumptions),
        detectable,
    )


def seal_plan_findings(
    plan: Mapping[str, Any], *, kind: str, where: str
) -> tuple[list[Problem], list[Problem]]:
    """Plan-check findings as seal problems: ``(blocking, warnings)``.

    Policy (``specs/plan-check.md``): for a campaign of kind ``campaign`` every
    error blocks the seal; for ``pilot`` and ``rerun`` (a plan kept as it was
    frozen and run, or reproduced as it was sealed) errors are reported as
    warnings. Warnings never block.
    """
    blocking: list[Problem] = []
    if is_serving_plan(plan):
        # Serving benchmarks record no schedule, timeouts or teardown: nothing to check.
        return blocking, []
    result = check_plan_document(plan)
    warnings: list[Problem] = []
    for f in result.findings:
        p = Problem(where, None, f.path, f"plan check {f.level} [{f.code}]: {f.message}")
        if f.level == "error" and kind in _SEAL_BLOCKING_KINDS:
            blocking.append(p)
        else:
            warnings.append(p)
    return blocking, warnings
