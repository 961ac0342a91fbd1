"""Plan conformance: do the accepted attempt's receipts match the frozen plan in force?

Checked against ``campaign.json``'s ``plan``: the servers per arm and their
A/B/B/A order (``arm_order``, one entry per server slot, compared with the
servers ordered by their first request's start), warmups and measured
requests per server (a dropped or extra measured request is a deviation, as
is a failed one), warmups before measured requests on each server (by
``seq``), unique ``seq`` per server, and every request inside its attempt's
``[start, end]`` window when the attempt records one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from bundler.format.plan_model import Plan
from replay.engine.arrow import BoolArray, group_reduce
from replay.inputs import ReplayInputs
from replay.sections.attempts import Window
from replay.serving.conformance import check_serving

__all__ = ["ConformanceResult", "Deviation", "ServerCheck", "check_conformance"]

LIMITS = (
    "Conformance compares the receipts with the frozen plan: it proves the recorded run is "
    "consistent with what was planned, not that the run happened as recorded.",
)

_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min
_E2E_SLACK_S = 1.0


@dataclass(frozen=True)
class Deviation:
    """One way the receipts depart from the plan."""

    kind: str
    where: str
    message: str


@dataclass(frozen=True)
class ServerCheck:
    """What one server of the accepted attempt ran."""

    server: str
    arm: str
    first_start_ns: int
    warmups: int
    measured: int
    measured_ok: int
    quality: int
    outside_window: int


@dataclass(frozen=True)
class ConformanceResult:
    """The plan in force, what was observed, and every deviation."""

    attempt: str
    plan_path: str | None
    plan_id: str | None
    planned_order: tuple[str, ...]
    observed_order: tuple[str, ...]
    warmups_per_server: int | None
    measured_per_server: int | None
    servers: tuple[ServerCheck, ...]
    deviations: tuple[Deviation, ...]
    warnings: tuple[str, ...]
    limits: tuple[str, ...] = LIMITS
    not_evidenced: tuple[str, ...] = ()
    checked_items: tuple[str, ...] = ()
    serving: bool = False
    empty: bool = False  # a plan, but no warmup or measured receipt to compare with it

    @property
    def checked(self) -> bool:
        """False when the bundle holds no plan to check against."""
        return self.plan_path is not None

    @property
    def ok(self) -> bool:
        """True when a plan was checked and nothing deviates from it."""
        return self.checked and not self.deviations


@dataclass(frozen=True)
class _Counts:
    """Per-server-code counts and extremes over the attempt's receipts."""

    warmups: np.ndarray[Any, Any]
    measured: np.ndarray[Any, Any]
    measured_ok: np.ndarray[Any, Any]
    quality: np.ndarray[Any, Any]
    outside: np.ndarray[Any, Any]
    first_start: np.ndarray[Any, Any]
    last_warmup_seq: np.ndarray[Any, Any]
    first_measured_seq: np.ndarray[Any, Any]


def _counts(inputs: ReplayInputs, att: BoolArray, window: Window) -> _Counts:
    r = inputs.receipts
    n = len(r.server.values)
    sc = r.server.codes

    def count(mask: BoolArray) -> np.ndarray[Any, Any]:
        return np.bincount(sc[att & mask], minlength=n)

    warm, meas = r.phase.mask("warmup"), r.phase.mask("measured")
    timed = att & (warm | meas)
    # A server's slot in the run is the start of its first warmup or measured request.
    first = group_reduce(np.minimum, sc[timed], r.start_ns[timed], n, _I64_MAX)
    return _Counts(
        warmups=count(warm),
        measured=count(meas),
        measured_ok=count(meas & r.ok),
        quality=count(r.phase.mask("quality")),
        outside=count(window.outside(r.start_ns, r.end_ns)),
        first_start=first,
        last_warmup_seq=group_reduce(np.maximum, sc[att & warm], r.seq[att & warm], n, _I64_MIN),
        first_measured_seq=group_reduce(np.minimum, sc[att & meas], r.seq[att & meas], n, _I64_MAX),
    )


def _server_arms(inputs: ReplayInputs, att: BoolArray) -> tuple[dict[int, str], list[Deviation]]:
    r = inputs.receipts
    narm = max(len(r.arm.values), 1)
    # The (server, arm) pairs that occur, sorted: never a servers x arms grid (issue 19).
    pairs = np.unique(r.server.codes[att] * narm + r.arm.codes[att])
    arms: dict[int, str] = {}
    out = []
    for key in pairs.tolist():
        s, a = divmod(key, narm)
        if s in arms:
            out.append(
                Deviation(
                    "server-in-two-arms",
                    r.server.values[s],
                    f"server serves arms {arms[s]!r} and {r.arm.values[a]!r}",
                )
            )
            continue
        arms[s] = r.arm.values[a]
    return arms, out


def _per_server(
    plan: Plan, checks: list[ServerCheck], c: _Counts, codes: dict[str, int]
) -> list[Deviation]:
    out = []
    want_w = plan.warmups_per_server
    want_m = plan.measured_per_server
    for s in checks:
        k = codes[s.server]
        if want_w is not None and s.warmups != want_w:
            out.append(Deviation("warmups", s.server, f"{s.warmups} warmup(s), plan says {want_w}"))
        if want_m is not None and s.measured < want_m:
            out.append(
                Deviation(
                    "measured-dropped",
                    s.server,
                    f"{want_m - s.measured} measured request(s) missing: "
                    f"{s.measured} of the {want_m} planned",
                )
            )
        if want_m is not None and s.measured > want_m:
            out.append(
                Deviation(
                    "measured-extra",
                    s.server,
                    f"{s.measured - want_m} measured request(s) beyond the {want_m} planned",
                )
            )
        if s.measured_ok < s.measured:
            out.append(
                Deviation(
                    "measured-failed",
                    s.server,
                    f"{s.measured - s.measured_ok} measured request(s) without status ok",
                )
            )
        if s.warmups and s.measured and c.last_warmup_seq[k] > c.first_measured_seq[k]:
            out.append(
                Deviation(
                    "warmup-after-measured",
                    s.server,
                    f"a warmup (seq {c.last_warmup_seq[k]}) runs after a measured request "
                    f"(seq {c.first_measured_seq[k]})",
                )
            )
        if s.outside_window:
            out.append(
                Deviation(
                    "outside-window",
                    s.server,
                    f"{s.outside_window} request(s) outside the attempt's [start, end] window",
                )
            )
    return out


def _order(plan: Plan, checks: list[ServerCheck]) -> list[Deviation]:
    planned = list(plan.arm_order or ())
    observed = [s.arm for s in checks]
    out = []
    want, got = Counter(planned), Counter(observed)
    for arm in sorted(set(want) | set(got)):
        if want[arm] != got[arm]:
            out.append(
                Deviation(
                    "servers-per-arm",
                    arm,
                    f"{got[arm]} server(s) ran, the plan's arm_order has {want[arm]}",
                )
            )
    if planned and observed != planned:
        out.append(
            Deviation(
                "order",
                "arm_order",
                f"servers ran as {'/'.join(observed)} (by first start), "
                f"the plan says {'/'.join(planned)}",
            )
        )
    return out


def _named_servers(plan: Plan, checks: list[ServerCheck]) -> list[Deviation]:
    """The plan's optional ``servers`` (one name per ``arm_order`` entry) against the receipts.

    A plan that names its servers promises which server ran which slot: a named
    server with no timed receipt, a timed server the plan does not name, or a name
    in another slot than planned is a deviation.
    """
    if not plan.servers:
        return []
    planned = list(plan.servers)
    observed = [s.server for s in checks]
    out = [
        Deviation("servers-named", n, f"the plan names server {n!r}; no timed receipt has it")
        for n in planned
        if n not in observed
    ]
    out += [
        Deviation("servers-named", n, f"server {n!r} ran timed requests; the plan does not name it")
        for n in observed
        if n not in planned
    ]
    arm_order = list(plan.arm_order or ())
    for slot, name in enumerate(planned):
        check = next((c for c in checks if c.server == name), None)
        if check is not None and slot < len(arm_order) and check.arm != arm_order[slot]:
            out.append(
                Deviation(
                    "servers-named",
                    name,
                    f"server {name!r} ran arm {check.arm}; the plan puts it in slot {slot + 1} "
                    f"({arm_order[slot]})",
                )
            )
    if not out and observed != planned:
        out.append(
            Deviation(
                "servers-named",
                "servers",
                f"servers ran as {'/'.join(observed)} (by first start), the plan names "
                f"{'/'.join(planned)}",
            )
        )
    return out


def _duplicate_seqs(inputs: ReplayInputs, att: BoolArray) -> list[Deviation]:
    r = inputs.receipts
    seq = r.seq[att]
    if seq.size == 0:
        return []
    span = int(seq.max()) + 1
    key = np.sort(r.server.codes[att] * span + seq)
    dup = np.unique(key[1:][key[1:] == key[:-1]])
    return [
        Deviation("duplicate-seq", r.server.values[k // span], f"seq {k % span} used twice or more")
        for k in dup.tolist()
    ]


def _warnings(
    inputs: ReplayInputs, att: BoolArray, plan: Plan, attempt_plan: str | None
) -> list[str]:
    r = inputs.receipts
    out = []
    wall = (r.end_ns[att] - r.start_ns[att]) / 1e9
    longer = int(np.count_nonzero(r.e2e_s[att] > wall + _E2E_SLACK_S))
    if longer:
        out.append(
            f"{longer} request(s) record e2e_s more than {_E2E_SLACK_S:g} s longer than "
            "their own start-to-end timestamps"
        )
    if plan.timeouts is not None:
        over = int(np.count_nonzero(att & r.ok & (r.e2e_s > plan.timeouts.request_s)))
        if over:
            out.append(f"{over} ok request(s) took longer than the plan's request timeout")
    if attempt_plan and attempt_plan not in _plan_names(inputs, plan):
        out.append(
            f"the accepted attempt names plan {attempt_plan!r}, not the plan in force "
            f"{inputs.plan_path!r}"
        )
    return out


def _plan_names(inputs: ReplayInputs, plan: Plan) -> set[str]:
    path = inputs.plan_path or ""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")
    return {path, stem, plan.id}


def check_conformance(
    inputs: ReplayInputs, attempt: str, window: Window, attempt_plan: str | None
) -> ConformanceResult:
    """Compare ``attempt``'s receipts with the plan in force; list every deviation."""
    plan = inputs.plan
    if plan is None:
        return ConformanceResult(
            attempt, None, None, (), (), None, None, (), (), ("no frozen plan in the bundle",)
        )
    if inputs.serving is not None:
        return _serving_conformance(inputs, attempt, plan)
    r = inputs.receipts
    att = r.attempt.mask(attempt)
    c = _counts(inputs, att, window)
    arms, deviations = _server_arms(inputs, att)
    checks = sorted(
        (
            ServerCheck(
                server=r.server.values[k],
                arm=arm,
                first_start_ns=int(c.first_start[k]),
                warmups=int(c.warmups[k]),
                measured=int(c.measured[k]),
                measured_ok=int(c.measured_ok[k]),
                quality=int(c.quality[k]),
                outside_window=int(c.outside[k]),
            )
            for k, arm in arms.items()
        ),
        key=lambda s: (s.first_start_ns, s.server),
    )
    quality_only = [s.server for s in checks if not (s.warmups or s.measured)]
    checks = [s for s in checks if s.warmups or s.measured]
    if not checks and not deviations:
        # Nothing ran under the plan's clock: an order or a count compared with zero
        # receipts says nothing about the run, so the plan is not evidenced, not contradicted.
        return ConformanceResult(
            attempt=attempt,
            plan_path=inputs.plan_path,
            plan_id=plan.id,
            planned_order=plan.arm_order or (),
            observed_order=(),
            warmups_per_server=plan.warmups_per_server,
            measured_per_server=plan.measured_per_server,
            servers=(),
            deviations=(),
            warnings=(),
            not_evidenced=(
                f"plan conformance (attempt {attempt} has no warmup or measured receipt)",
            ),
            empty=True,
        )
    codes = {r.server.values[k]: k for k in arms}
    deviations += _order(plan, checks)
    deviations += _named_servers(plan, checks)
    deviations += _per_server(plan, checks, c, codes)
    deviations += _duplicate_seqs(inputs, att)
    return ConformanceResult(
        attempt=attempt,
        plan_path=inputs.plan_path,
        plan_id=plan.id,
        planned_order=plan.arm_order or (),
        observed_order=tuple(s.arm for s in checks),
        warmups_per_server=plan.warmups_per_server,
        measured_per_server=plan.measured_per_server,
        servers=tuple(checks),
        deviations=tuple(deviations),
        warnings=tuple(
            [f"server {q} ran only quality requests (outside the timed plan)" for q in quality_only]
            + _warnings(inputs, att, plan, attempt_plan)
        ),
    )


SERVING_LIMITS = (
    "Serving conformance compares the benchmark tool's recorded settings (request rate, "
    "max concurrency, prompts) and request counts with the plan's load points; the settings "
    "are what the tool was asked for, as it recorded them, not an observation of the load.",
)


def _serving_conformance(inputs: ReplayInputs, attempt: str, plan: Plan) -> ConformanceResult:
    assert inputs.serving is not None
    s = check_serving(inputs.serving, plan.to_dict(), tuple(a.id for a in inputs.arms))
    return ConformanceResult(
        attempt=attempt,
        plan_path=inputs.plan_path,
        plan_id=plan.id,
        planned_order=(),
        observed_order=(),
        warmups_per_server=None,
        measured_per_server=None,
        servers=(),
        deviations=tuple(Deviation(k, w, m) for k, w, m in s.deviations),
        warnings=(),
        limits=SERVING_LIMITS,
        not_evidenced=s.not_evidenced,
        checked_items=s.checked,
        serving=True,
    )
