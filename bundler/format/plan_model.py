"""The frozen plan and ``scorer.json`` as typed documents (see :mod:`bundler.format.model`
for the contract: parsed once, unknown fields kept, ``to_dict`` exact)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundler.format.docfields import (
    Document,
    as_list,
    fail,
    int_field,
    number,
    obj,
    optional,
    put,
    str_field,
    unknown_fields,
)

__all__ = [
    "Plan",
    "PlanRequest",
    "PlanReservation",
    "ScorerDoc",
    "ScorerWeight",
    "Teardown",
    "TeardownBudget",
    "Timeouts",
]


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class PlanRequest(Document):
    """``request``: which API, where timing starts and ends, the poll interval, the payload."""

    api: str
    timing_boundary: str
    poll_interval_s: float | None = None
    payload: Mapping[str, Any] | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("api", "timing_boundary", "poll_interval_s", "payload")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> PlanRequest:
        """Parse ``request``."""
        d = obj(doc, where, "request")
        payload = optional(d, "payload", obj, where, "request.")
        return cls(
            api=str_field(d, "api", where, "request."),
            timing_boundary=str_field(d, "timing_boundary", where, "request."),
            poll_interval_s=optional(d, "poll_interval_s", number, where, "request."),
            payload=None if payload is None else copy.deepcopy(dict(payload)),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """``request`` as JSON, unknown fields included."""
        out: dict[str, Any] = {"api": self.api, "timing_boundary": self.timing_boundary}
        put(out, "poll_interval_s", self.poll_interval_s)
        put(out, "payload", None if self.payload is None else dict(self.payload))
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class Timeouts(Document):
    """``timeouts``: per request, per wave, per arm position (seconds)."""

    request_s: float
    wave_s: float | None = None
    arm_s: float | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("request_s", "wave_s", "arm_s")

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Timeouts:
        """Parse ``timeouts``."""
        d = obj(doc, where, "timeouts")
        return cls(
            request_s=number(d.get("request_s"), where, "timeouts.request_s"),
            wave_s=optional(d, "wave_s", number, where, "timeouts."),
            arm_s=optional(d, "arm_s", number, where, "timeouts."),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """``timeouts`` as JSON, unknown fields included."""
        out: dict[str, Any] = {"request_s": self.request_s}
        put(out, "wave_s", self.wave_s)
        put(out, "arm_s", self.arm_s)
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class TeardownBudget(Document):
    """One arm's teardown budget: how long to wait after TERM, then after KILL (seconds)."""

    term_wait_s: float
    kill_wait_s: float
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("term_wait_s", "kill_wait_s")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> TeardownBudget:
        """Parse ``teardown.<arm>``."""
        d = obj(doc, where, path)
        return cls(
            term_wait_s=number(d.get("term_wait_s"), where, path + ".term_wait_s"),
            kill_wait_s=number(d.get("kill_wait_s"), where, path + ".kill_wait_s"),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The budget as JSON, unknown fields included."""
        return self._ordered(
            {
                "term_wait_s": self.term_wait_s,
                "kill_wait_s": self.kill_wait_s,
                **copy.deepcopy(dict(self.unknown)),
            }
        )


@dataclass(frozen=True)
class Teardown:
    """``teardown``: arm id to its :class:`TeardownBudget`."""

    budgets: Mapping[str, TeardownBudget]

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Teardown:
        """Parse ``teardown``."""
        d = obj(doc, where, "teardown")
        return cls(
            {arm: TeardownBudget.from_dict(b, where, f"teardown.{arm}") for arm, b in d.items()}
        )

    def get(self, arm: str) -> TeardownBudget | None:
        """The budget of ``arm``, or None when the plan gives it none."""
        return self.budgets.get(arm)

    def to_dict(self) -> dict[str, Any]:
        """``teardown`` as JSON."""
        return {arm: b.to_dict() for arm, b in self.budgets.items()}


@dataclass(frozen=True)
class PlanReservation(Document):
    """``reservation``: the device reservation (seconds from its start), its declared boundary."""

    hard_limit_s: float
    soft_term_s: float | None = None
    kill_grace_s: float | None = None
    watchdog_is_failure_boundary: bool | None = None
    unfinished_arm_evidence: str | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "hard_limit_s",
        "soft_term_s",
        "kill_grace_s",
        "watchdog_is_failure_boundary",
        "unfinished_arm_evidence",
    )

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> PlanReservation:
        """Parse ``reservation``."""
        d = obj(doc, where, "reservation")
        p = "reservation."
        boundary = d.get("watchdog_is_failure_boundary")
        if "watchdog_is_failure_boundary" in d and not isinstance(boundary, bool):
            raise fail(
                where, p + "watchdog_is_failure_boundary", f"expected a boolean, found {boundary!r}"
            )
        return cls(
            hard_limit_s=number(d.get("hard_limit_s"), where, p + "hard_limit_s"),
            soft_term_s=optional(d, "soft_term_s", number, where, p),
            kill_grace_s=optional(d, "kill_grace_s", number, where, p),
            watchdog_is_failure_boundary=boundary,
            unfinished_arm_evidence=(
                str_field(d, "unfinished_arm_evidence", where, p)
                if "unfinished_arm_evidence" in d
                else None
            ),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """``reservation`` as JSON, unknown fields included."""
        out: dict[str, Any] = {"hard_limit_s": self.hard_limit_s}
        put(out, "soft_term_s", self.soft_term_s)
        put(out, "kill_grace_s", self.kill_grace_s)
        put(out, "watchdog_is_failure_boundary", self.watchdog_is_failure_boundary)
        put(out, "unfinished_arm_evidence", self.unfinished_arm_evidence)
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class Plan(Document):
    """A frozen plan (``plans/<path>.json``; ``specs/schemas/plan.schema.json``).

    The fields the schedule, the rerun, the conformance and lifecycle checks read
    are typed; the plan's other sections (``telemetry``, ``media``,
    ``launch``, ``expected_request_s``, ``quality``,
    ``load_points``) and fields unknown to this version are kept in ``unknown``
    as the JSON they are.
    """

    plan_version: str
    id: str
    request: PlanRequest
    arm_order: tuple[str, ...] | None = None
    servers: tuple[str, ...] | None = None
    warmups_per_server: int | None = None
    measured_per_server: int | None = None
    timeouts: Timeouts | None = None
    startup_budget_s: float | None = None
    teardown: Teardown | None = None
    reservation: PlanReservation | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = (
        "plan_version",
        "id",
        "request",
        "arm_order",
        "servers",
        "warmups_per_server",
        "measured_per_server",
        "timeouts",
        "startup_budget_s",
        "teardown",
        "reservation",
    )

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Plan:
        """Parse a plan that passed ``document_errors("plan", doc)``; ``where`` is its file.

        Raises:
            BundleFormatError: a typed field has another shape (the plan skipped the schema).
        """
        d = obj(doc, where, "(document)")
        order = _strings(d, "arm_order", where)
        servers = _strings(d, "servers", where)
        return cls(
            plan_version=str_field(d, "plan_version", where),
            id=str_field(d, "id", where),
            request=PlanRequest.from_dict(d.get("request"), where),
            arm_order=order,
            servers=servers,
            warmups_per_server=(
                int_field(d, "warmups_per_server", where) if "warmups_per_server" in d else None
            ),
            measured_per_server=(
                int_field(d, "measured_per_server", where) if "measured_per_server" in d else None
            ),
            timeouts=Timeouts.from_dict(d["timeouts"], where) if "timeouts" in d else None,
            startup_budget_s=optional(d, "startup_budget_s", number, where),
            teardown=Teardown.from_dict(d["teardown"], where) if "teardown" in d else None,
            reservation=(
                PlanReservation.from_dict(d["reservation"], where) if "reservation" in d else None
            ),
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON, unknown fields included."""
        out: dict[str, Any] = {
            "plan_version": self.plan_version,
            "id": self.id,
            "request": self.request.to_dict(),
        }
        put(out, "arm_order", None if self.arm_order is None else list(self.arm_order))
        put(out, "servers", None if self.servers is None else list(self.servers))
        put(out, "warmups_per_server", self.warmups_per_server)
        put(out, "measured_per_server", self.measured_per_server)
        put(out, "timeouts", None if self.timeouts is None else self.timeouts.to_dict())
        put(out, "startup_budget_s", self.startup_budget_s)
        put(out, "teardown", None if self.teardown is None else self.teardown.to_dict())
        put(out, "reservation", None if self.reservation is None else self.reservation.to_dict())
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


def _strings(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    """``d[key]`` as a tuple of strings, None when absent."""
    values = optional(d, key, as_list, where)
    if values is None:
        return None
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise fail(where, f"{key}.{i}", f"expected a string, found {v!r}")
    return tuple(values)


# --------------------------------------------------------------------------- scorer


@dataclass(frozen=True)
class ScorerWeight(Document):
    """One weights file of the scorer: its role, file name, SHA-256 and size if given."""

    role: str
    file: str
    sha256: str
    bytes: int | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("role", "file", "sha256", "bytes")

    @classmethod
    def from_dict(cls, doc: Any, where: str, path: str) -> ScorerWeight:
        """Parse ``weights.N``."""
        d = obj(doc, where, path)
        p = path + "."
        return cls(
            role=str_field(d, "role", where, p),
            file=str_field(d, "file", where, p),
            sha256=str_field(d, "sha256", where, p),
            bytes=int_field(d, "bytes", where, p) if "bytes" in d else None,
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON, unknown fields included."""
        out: dict[str, Any] = {"role": self.role, "file": self.file, "sha256": self.sha256}
        put(out, "bytes", self.bytes)
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)


@dataclass(frozen=True)
class ScorerDoc(Document):
    """``scorer.json``: the scorer's identity (name, version, net) and its weights files."""

    name: str
    version: str
    weights: tuple[ScorerWeight, ...]
    net: str | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    _KEYS = ("name", "version", "net", "weights")

    @classmethod
    def from_dict(cls, doc: Any, where: str = "scorer.json") -> ScorerDoc:
        """Parse a scorer document that passed ``document_errors("scorer", doc)``."""
        d = obj(doc, where, "(document)")
        weights = as_list(d.get("weights"), where, "weights")
        return cls(
            name=str_field(d, "name", where),
            version=str_field(d, "version", where),
            weights=tuple(
                ScorerWeight.from_dict(w, where, f"weights.{i}") for i, w in enumerate(weights)
            ),
            net=str_field(d, "net", where) if "net" in d else None,
            unknown=unknown_fields(d, cls._KEYS),
            key_order=tuple(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The scorer document as JSON, unknown fields included."""
        out: dict[str, Any] = {"name": self.name, "version": self.version}
        put(out, "net", self.net)
        out["weights"] = [w.to_dict() for w in self.weights]
        out.update(copy.deepcopy(dict(self.unknown)))
        return self._ordered(out)
