"""What the plan check reads of a plan, typed: built from a :class:`Plan` or, leniently, a document.

The check (:mod:`bundler.campaign.plan_check`) judges the plan's numbers; it must
also judge a plan file that never passed the schema (``bundle plan check FILE``,
the usual way to find out what is wrong with a plan before sealing it). So the
check reads this input, not the JSON: :meth:`PlanCheckInput.from_plan` builds it
from the typed Plan (schema-checked and parsed once, as every other reader gets
it) and :meth:`PlanCheckInput.from_document` from a plan document of any shape.

A value the check needs is a number, absent (``None``), or :data:`MALFORMED`
(present but not a JSON number). The check turns :data:`MALFORMED` and a number
out of range into the same located finding, at the point it reads the value,
so the findings and their order are the check's alone, whichever way the input
was built. Pure functions; no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bundler.campaign.plan_slots import PlanShapeError, PlanSlot, document_slots, plan_slots
from bundler.format.plan_model import Plan

__all__ = [
    "MALFORMED",
    "CheckReservation",
    "CheckTeardown",
    "Malformed",
    "Number",
    "PlanCheckInput",
]


class Malformed(enum.Enum):
    """A value the plan gives but not as a JSON number (a string, a boolean, an object)."""

    VALUE = "malformed"


MALFORMED: Final = Malformed.VALUE

Number = float | Malformed | None
"""A number the check reads: the plan's value, :data:`MALFORMED`, or None when absent."""


def _number(value: Any) -> Number:
    # bool is an int to Python, never a number to the plan.
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return MALFORMED


def _at(doc: Any, *path: str) -> Any:
    """``doc[path[0]][path[1]]...``, None where a step is absent or not an object."""
    node = doc
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


@dataclass(frozen=True)
class CheckReservation:
    """``reservation`` as the check reads it.

    ``soft_declared`` is whether ``soft_term_s`` is given as a JSON number or
    boolean (what stops the no-soft-term warning); ``kill_grace_declared`` whether
    the key is there at all (what asks for the teardown-versus-grace check).
    """

    hard_limit_s: Number
    soft_term_s: Number
    kill_grace_s: Number
    soft_declared: bool
    kill_grace_declared: bool
    watchdog_is_failure_boundary: bool
    unfinished_arm_evidence: str | None


@dataclass(frozen=True)
class CheckTeardown:
    """One arm's teardown budget: seconds to wait after TERM, then after KILL."""

    term_wait_s: Number
    kill_wait_s: Number


@dataclass(frozen=True)
class PlanCheckInput:
    """Every value of one plan the check reads.

    ``slots`` is empty and ``shape_error`` says why when the plan's schedule
    cannot be built. ``reservation`` is :data:`MALFORMED` when the plan's
    ``reservation`` is not an object, None when absent or null
    (``reservation_declared`` tells which). ``teardown`` holds the arms whose
    entry is an object. ``expected_request_s`` is one number for every arm or a
    number per arm. ``api``, ``payload`` and ``launch`` are the request facts the
    vLLM-Omni findings read (:mod:`bundler.campaign.plan_omni`), as JSON.
    """

    plan_id: str
    slots: tuple[PlanSlot, ...]
    shape_error: str | None
    request_s: Number
    wave_s: Number
    arm_s: Number
    startup_budget_s: Number
    startup_declared: bool
    reservation: CheckReservation | Malformed | None
    reservation_declared: bool
    teardown: Mapping[str, CheckTeardown]
    expected_request_s: Number | Mapping[str, Number]
    expected_declared: bool
    api: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    launch: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_plan(cls, plan: Plan) -> PlanCheckInput:
        """The check's input from a typed plan (its sections kept as JSON read leniently)."""
        try:
            slots, shape_error = plan_slots(plan), None
        except PlanShapeError as exc:
            slots, shape_error = (), str(exc)
        t = plan.timeouts
        res = plan.reservation
        reservation = None
        if res is not None:
            evidence = res.unfinished_arm_evidence
            reservation = CheckReservation(
                res.hard_limit_s,
                res.soft_term_s,
                res.kill_grace_s,
                res.soft_term_s is not None,
                res.kill_grace_s is not None,
                res.watchdog_is_failure_boundary is True,
                evidence.strip() if evidence is not None and evidence.strip() else None,
            )
        teardown = {}
        if plan.teardown is not None:
            teardown = {
                arm: CheckTeardown(b.term_wait_s, b.kill_wait_s)
                for arm, b in plan.teardown.budgets.items()
            }
        request = plan.request
        return cls(
            plan_id=plan.id,
            slots=slots,
            shape_error=shape_error,
            request_s=None if t is None else t.request_s,
            wave_s=None if t is None else t.wave_s,
            arm_s=None if t is None else t.arm_s,
            startup_budget_s=plan.startup_budget_s,
            startup_declared=plan.startup_budget_s is not None,
            reservation=reservation,
            reservation_declared=res is not None,
            teardown=teardown,
            # ``expected_request_s`` and ``launch`` are sections Plan keeps as JSON.
            expected_request_s=_expected(plan.unknown.get("expected_request_s")),
            expected_declared="expected_request_s" in plan.unknown,
            api=request.api,
            payload=dict(request.payload or {}),
            launch=_object(plan.unknown.get("launch")),
        )

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> PlanCheckInput:
        """The check's input from a plan document of any shape (nothing here raises)."""
        try:
            slots, shape_error = document_slots(doc), None
        except PlanShapeError as exc:
            slots, shape_error = (), str(exc)
        raw_res = doc.get("reservation")
        reservation: CheckReservation | Malformed | None = None
        if isinstance(raw_res, Mapping):
            evidence = raw_res.get("unfinished_arm_evidence")
            reservation = CheckReservation(
                _number(raw_res.get("hard_limit_s")),
                _number(raw_res.get("soft_term_s")),
                _number(raw_res.get("kill_grace_s")),
                isinstance(raw_res.get("soft_term_s"), int | float),
                "kill_grace_s" in raw_res,
                raw_res.get("watchdog_is_failure_boundary") is True,
                evidence.strip() if isinstance(evidence, str) and evidence.strip() else None,
            )
        elif raw_res is not None:
            reservation = MALFORMED
        raw_td = doc.get("teardown")
        teardown = {
            str(arm): CheckTeardown(
                _number(entry.get("term_wait_s")), _number(entry.get("kill_wait_s"))
            )
            for arm, entry in (raw_td.items() if isinstance(raw_td, Mapping) else ())
            if isinstance(entry, Mapping)
        }
        request = doc.get("request")
        api = _at(request, "api")
        return cls(
            plan_id=str(doc.get("id", "?")),
            slots=slots,
            shape_error=shape_error,
            request_s=_number(_at(doc, "timeouts", "request_s")),
            wave_s=_number(_at(doc, "timeouts", "wave_s")),
            arm_s=_number(_at(doc, "timeouts", "arm_s")),
            startup_budget_s=_number(doc.get("startup_budget_s")),
            startup_declared="startup_budget_s" in doc,
            reservation=reservation,
            reservation_declared="reservation" in doc,
            teardown=teardown,
            expected_request_s=_expected(doc.get("expected_request_s")),
            expected_declared="expected_request_s" in doc,
            api=api if isinstance(api, str) else None,
            payload=_object(_at(request, "payload")),
            launch=_object(doc.get("launch")),
        )


def _expected(value: Any) -> Number | Mapping[str, Number]:
    if isinstance(value, Mapping):
        return {str(arm): _number(v) for arm, v in value.items()}
    return _number(value)


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
