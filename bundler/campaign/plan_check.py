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

Everything here is a pure function of the plan dictionary: no I/O, no printing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bundler.errors import Problem

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
    "is_serving_plan",
    "plan_slots",
    "seal_plan_findings",
]

LEVELS = ("request", "wave", "arm", "reservation")
"""Deadline levels from the innermost out; on a tie the innermost is said to fire."""
_RANK = {name: i for i, name in enumerate(LEVELS)}
_FINDING_LEVELS = ("error", "warning")
_SEAL_BLOCKING_KINDS = ("campaign",)


class PlanShapeError(ValueError):
    """The plan lacks what the schedule needs (arm order, counts, teardown budgets)."""


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
            f"{lvl} at {_fmt_s(t)}" for lvl, t in self.deadlines if lvl != self.fires
        )
        text = (
            f"arm position {s.position} ({s.arm} on {s.server}): a stuck first request is "
            f"ended by the {_level_name(self.fires)} at {_fmt_s(self.fires_at_s)}"
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
        }


def _fmt_s(x: float) -> str:
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


def _level_name(level: str) -> str:
    return {
        "request": "request timeout",
        "wave": "wave timeout",
        "arm": "arm timeout",
        "reservation": "reservation soft TERM",
    }[level]


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _non_negative(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _count(plan: Mapping[str, Any], key: str, minimum: int) -> int:
    value = plan.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanShapeError(f"{key} must be an integer >= {minimum}")
    return value


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
    for i, arm in enumerate(order):
        seen[arm] = seen.get(arm, 0) + 1
        server = str(servers[i]) if servers is not None else f"{arm}-{seen[arm]}"
        quality = n_quality if server in render_on else 0
        out.append(PlanSlot(i + 1, arm, server, warmups, measured, quality))
    return tuple(out)


@dataclass
class _Reader:
    """Reads numbers from the plan, turning each malformed one into an error finding."""

    plan: Mapping[str, Any]
    findings: list[Finding] = field(default_factory=list)

    def get(self, path: str, *, required: bool = False, allow_zero: bool = False) -> float | None:
        node: Any = self.plan
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            if required:
                self.findings.append(Finding("error", "missing", path, "required by the check"))
            return None
        ok = _non_negative(node) if allow_zero else _positive(node)
        if not ok:
            want = "a number >= 0" if allow_zero else "a number > 0"
            self.findings.append(Finding("error", "invalid", path, f"must be {want}"))
            return None
        return float(node)


def _reservation(r: _Reader) -> Reservation | None:
    res = r.plan.get("reservation")
    if res is None:
        return None
    if not isinstance(res, Mapping):
        r.findings.append(Finding("error", "invalid", "reservation", "must be an object"))
        return None
    hard = r.get("reservation.hard_limit_s", required=True)
    soft = r.get("reservation.soft_term_s")
    grace = r.get("reservation.kill_grace_s", allow_zero=True)
    boundary = res.get("watchdog_is_failure_boundary") is True
    evidence = res.get("unfinished_arm_evidence")
    evidence_text = evidence.strip() if isinstance(evidence, str) and evidence.strip() else None
    if hard is None:
        return None
    return Reservation(
        hard, soft if soft is not None else hard, grace or 0.0, boundary, evidence_text
    )


def _reservation_findings(res: Reservation, explicit_soft: bool) -> list[Finding]:
    out = []
    if res.soft_term_s > res.hard_limit_s:
        out.append(
            Finding(
                "error",
                "soft-after-hard",
                "reservation.soft_term_s",
                f"soft TERM at {_fmt_s(res.soft_term_s)} comes after the hard limit "
                f"{_fmt_s(res.hard_limit_s)}",
            )
        )
    elif res.soft_term_s + res.kill_grace_s > res.hard_limit_s:
        out.append(
            Finding(
                "error",
                "kill-after-hard",
                "reservation.kill_grace_s",
                f"soft TERM at {_fmt_s(res.soft_term_s)} + kill grace "
                f"{_fmt_s(res.kill_grace_s)} = {_fmt_s(res.soft_term_s + res.kill_grace_s)} "
                f"passes the hard limit {_fmt_s(res.hard_limit_s)}",
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


def _expected(plan: Mapping[str, Any], arm: str, r: _Reader) -> float:
    exp = plan.get("expected_request_s")
    if exp is None:
        return 0.0
    value = exp.get(arm) if isinstance(exp, Mapping) else exp
    if value is None:
        return 0.0
    if not _non_negative(value):
        path = f"expected_request_s.{arm}" if isinstance(exp, Mapping) else "expected_request_s"
        r.findings.append(Finding("error", "invalid", path, "must be a number >= 0"))
        return 0.0
    return float(value)


def _teardown(plan: Mapping[str, Any], arm: str, r: _Reader) -> float | None:
    td = plan.get("teardown")
    entry = td.get(arm) if isinstance(td, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    term = r.get(f"teardown.{arm}.term_wait_s", required=True, allow_zero=True)
    kill = r.get(f"teardown.{arm}.kill_wait_s", required=True, allow_zero=True)
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
    plan: Mapping[str, Any], slots: Sequence[PlanSlot], t: _Timeouts, r: _Reader
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


def _scenario(
    i: int,
    budgets: Sequence[SlotBudget],
    *,
    t: _Timeouts,
    res: Reservation | None,
    expected: Mapping[str, float],
    elapsed_s: float,
) -> StuckScenario:
    b = budgets[i]
    slot = b.slot
    start = elapsed_s + sum(x.nominal_s for x in budgets[:i])
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
    starved: list[str] = []
    cut: list[str] = []
    tt = end
    for later in budgets[i + 1 :]:
        s = later.slot
        first_measured = tt + t.startup + (s.warmups + 1) * expected[s.arm]
        if fires == "reservation" or first_measured >= soft:
            starved.append(s.server)
        elif tt + later.nominal_s > soft:
            cut.append(s.server)
        tt += later.nominal_s
    ordered = tuple(sorted(dl.items(), key=lambda kv: (kv[1], _RANK[kv[0]])))
    return StuckScenario(slot, start, ordered, fires, at, end, clean, tuple(starved), tuple(cut))


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
                f"{pos}: a stuck first request is ended by the {_level_name(sc.fires)} at "
                f"{_fmt_s(sc.fires_at_s)}, before its own request timeout at "
                f"{_fmt_s(request_at)}" + (evidence if intended else ""),
            )
        )
    elif not sc.clean_up_fits:
        out.append(
            Finding(
                "warning" if boundary else "error",
                "no-room-for-clean-up",
                "teardown",
                f"{pos}: after its request timeout fires, the wave and teardown end at "
                f"{_fmt_s(sc.slot_ends_at_s)}, after the soft TERM",
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
        f"timeouts.wave_s to at most {_fmt_s(wave_fit)} (only if every wave really fits in it)"
        if wave_fit > 0
        else "fewer positions or shorter start-up and teardown budgets"
    )
    return Finding(
        "warning",
        "worst-case-exceeds-reservation",
        "reservation.soft_term_s",
        f"if every arm position used its whole budget ({_fmt_s(total)} in all), the soft TERM "
        f"at {_fmt_s(res.soft_term_s)} would cut: " + ", ".join(over) + ". A risk, not a "
        "certainty: it happens only if earlier positions run up to their deadlines; the "
        "positions named would then end in timeouts and the attempt would be interrupted, "
        "not accepted. To make the worst case fit, set " + change + ", or "
        f"reservation.soft_term_s to at least {_fmt_s(total)}; for a plan already sealed, "
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
                    f"a teardown started at the soft TERM needs up to {_fmt_s(td)} (TERM + KILL "
                    f"waits) but the reservation kills after {_fmt_s(res.kill_grace_s)}",
                )
            )
    return out


def _timeouts(r: _Reader) -> _Timeouts | None:
    request = r.get("timeouts.request_s", required=True)
    wave = r.get("timeouts.wave_s")
    arm = r.get("timeouts.arm_s")
    startup = r.get("startup_budget_s", allow_zero=True)
    if startup is None and "startup_budget_s" not in r.plan:
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


def check_plan(plan: Mapping[str, Any], *, elapsed_s: float = 0.0) -> PlanCheckResult:
    """Check the timeout hierarchy of ``plan`` against its device reservation.

    Args:
        plan: the plan document (``specs/schemas/plan.schema.json``).
        elapsed_s: seconds of the reservation already used before the first
            arm position starts (set-up, an earlier attempt).

    Returns:
        Every finding (policy in ``specs/plan-check.md``), the per-position
        budgets and one stuck-first-request scenario per arm position.
    """
    plan_id = str(plan.get("id", "?"))
    r = _Reader(plan)
    try:
        slots = plan_slots(plan)
    except PlanShapeError as exc:
        return PlanCheckResult(plan_id, (Finding("error", "invalid", "arm_order", str(exc)),))
    t = _timeouts(r)
    res = _reservation(r)
    if res is not None:
        explicit_soft = isinstance(plan["reservation"].get("soft_term_s"), int | float)
        r.findings += _reservation_findings(res, explicit_soft)
    elif "reservation" not in plan:
        r.findings.append(
            Finding(
                "warning",
                "no-reservation",
                "reservation",
                "no device reservation: only the request, wave and arm levels can be checked",
            )
        )
    if t is None:
        return PlanCheckResult(plan_id, tuple(r.findings), reservation=res)
    budgets, expected = _budgets(plan, slots, t, r)
    scenarios: list[StuckScenario] = []
    if len(budgets) == len(slots):
        for i in range(len(budgets)):
            sc = _scenario(i, budgets, t=t, res=res, expected=expected, elapsed_s=elapsed_s)
            scenarios.append(sc)
            r.findings += _scenario_findings(sc, res)
        if res is not None:
            worst = _worst_case_finding(budgets, res, elapsed_s)
            if worst is not None:
                r.findings.append(worst)
            if "kill_grace_s" in plan["reservation"]:
                r.findings += _grace_findings(budgets, res)
    assumptions = [
        "earlier arm positions run nominally: full start-up budget, "
        + (
            "expected_request_s per request"
            if "expected_request_s" in plan
            else "requests taking no time (no expected_request_s declared; the most favourable "
            "case, so every error found is certain)"
        )
        + ", full TERM + KILL teardown budget",
        "the arm timeout counts from the start of its position (start-up included); "
        "the wave timeout from the moment the server is ready",
    ]
    if elapsed_s:
        assumptions.append(f"{_fmt_s(elapsed_s)} of the reservation used before position 1")
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
    result = check_plan(plan)
    warnings: list[Problem] = []
    for f in result.findings:
        p = Problem(where, None, f.path, f"plan check {f.level} [{f.code}]: {f.message}")
        if f.level == "error" and kind in _SEAL_BLOCKING_KINDS:
            blocking.append(p)
        else:
            warnings.append(p)
    return blocking, warnings


SERVING_APIS = frozenset({"openai-completions", "openai-chat-completions"})
"""``request.api`` values of LLM-serving plans (no schedule, timeouts or teardown)."""


def is_serving_plan(plan: Mapping[str, Any]) -> bool:
    """True when ``plan`` describes an LLM-serving benchmark (``request.api`` openai-*)."""
    req = plan.get("request")
    api = req.get("api") if isinstance(req, dict) else None
    # A hostile plan may put any JSON here: only a string can name an API (schema reports the rest).
    return isinstance(api, str) and api in SERVING_APIS
