"""Executing the arm positions of one attempt: start or reach each server, check its commit,
send its requests at the plan's timing boundary, tear it down with the plan's budgets.

:class:`AttemptRun` holds the attempt in progress (the plan's deadlines, the
servers alive, each position's result); every row it produces goes straight to
the :class:`~rerun.writer.RerunWriter` (rows from
:mod:`rerun.records`), every event to the progress callback.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bundler._internal.textsafe import safe
from bundler.format.plan_model import Plan
from rerun.client import (
    Deadline,
    DeadlineExceeded,
    RequestOutcome,
    VideoClient,
)
from rerun.confine import safe_name
from rerun.launcher import LaunchError, LaunchSpec, ProcessExit, ServerProcess, free_port
from rerun.launcher import expand_command as expand
from rerun.options import FILE_FIELDS, Progress, RerunEvent, RerunOptions
from rerun.prepare import PreparedRerun
from rerun.records import receipt_row, request_id, telemetry_rows, worker_exit_rows
from rerun.runtime import endpoint_runtime, launch_runtime, method_of, refusal
from rerun.schedule import PlannedRequest, SlotPlan
from rerun.targets import VERSION_TIMEOUT_S, Target, placeholders
from rerun.telemetry import DeviceSample, SampleContext, TelemetrySampler
from rerun.watchdog import StopFlag
from rerun.writer import RerunWriter

__all__ = ["AttemptRun", "PlanTimes", "SlotResult"]

_HEALTH_TIMEOUT_S = 2.0
_STOPPING_LEVELS = ("wave", "arm", "reservation")
"""A timeout at one of these levels ends the server's wave: the rest is not sent."""


@dataclass(frozen=True)
class SlotResult:
    """How one arm position went."""

    position: int
    arm: str
    server: str
    outcome: str
    statuses: Mapping[str, int]
    timeout_levels: Mapping[str, int]
    not_sent: int
    version: Mapping[str, Any] | None
    exits: tuple[ProcessExit, ...] = ()
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the attempt record."""
        return {
            "position": self.position,
            "arm": self.arm,
            "server": self.server,
            "outcome": self.outcome,
            "statuses": dict(self.statuses),
            "timeout_levels": dict(self.timeout_levels),
            "not_sent": self.not_sent,
            "version": None if self.version is None else dict(self.version),
            "worker_exits": len(self.exits),
            "unclean_exits": sum(1 for e in self.exits if not e.clean),
            "note": self.note,
        }


def _num(value: float | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class PlanTimes:
    """The plan's deadlines for this attempt, on the monotonic clock from ``t0``."""

    t0: float
    request_s: float
    wave_s: float | None
    arm_s: float | None
    startup_s: float | None
    grace_s: float
    soft_at: float | None  # the reservation's soft TERM, minus what set-up already used

    @classmethod
    def of(cls, plan: Plan, reservation_used_s: float) -> PlanTimes:
        """Read the plan's timeouts and reservation, starting the clock now."""
        t0 = time.monotonic()
        res, to = plan.reservation, plan.timeouts
        hard = None if res is None else _num(res.hard_limit_s)
        soft = (None if res is None else _num(res.soft_term_s)) or hard
        return cls(
            t0=t0,
            request_s=(None if to is None else _num(to.request_s)) or 0.0,
            wave_s=None if to is None else _num(to.wave_s),
            arm_s=None if to is None else _num(to.arm_s),
            startup_s=_num(plan.startup_budget_s),
            grace_s=(None if res is None else _num(res.kill_grace_s)) or 0.0,
            soft_at=None if soft is None else t0 - reservation_used_s + soft,
        )

    def outer(self, wave_at: float | None, arm_at: float | None) -> dict[str, float | None]:
        """The deadlines above one request: wave, arm, reservation."""
        return {"wave": wave_at, "arm": arm_at, "reservation": self.soft_at}

    def to_dict(self) -> dict[str, float | None]:
        """The timeouts as recorded in the attempt record."""
        return {
            "request_s": self.request_s,
            "wave_s": self.wave_s,
            "arm_s": self.arm_s,
            "startup_budget_s": self.startup_s,
        }


class AttemptRun:
    """One attempt in progress."""

    def __init__(
        self,
        prep: PreparedRerun,
        writer: RerunWriter,
        options: RerunOptions,
        stop: StopFlag,
        progress: Progress | None,
    ) -> None:
        self.prep = prep
        self.writer = writer
        self.options = options
        self.stop = stop
        self.progress = progress
        self.times = PlanTimes.of(prep.plan, options.reservation_used_s)
        self.live: list[ServerProcess] = []
        self.slots: list[SlotResult] = []
        self.done = 0
        self.reject_reason: str | None = None

    def emit(self, kind: str, message: str) -> None:
        """Log an event in the attempt's log and report it to the progress callback."""
        self.writer.log(f"[{kind}] {message}", time.time_ns())
        if self.progress:
            self.progress(RerunEvent(kind, message, self.done, self.prep.total_requests))

    def telemetry_sink(
        self, ctx: SampleContext, t_ns: int, samples: tuple[DeviceSample, ...]
    ) -> None:
        """The sampler's callback: one telemetry row per device."""
        for row in telemetry_rows(self.writer.attempt_id, ctx, t_ns, samples, self.prep.telemetry):
            self.writer.append("telemetry", row)

    # -- one request -------------------------------------------------------------------------

    def send(
        self, client: VideoClient, req: PlannedRequest, outer: Mapping[str, float | None]
    ) -> RequestOutcome:
        """Send ``req`` within the earliest of its deadlines."""
        fields = {k: v for k, v in req.fields.items() if k not in FILE_FIELDS}
        # Each file field goes as its own part(s): never as text (the real form refuses that).
        files = {k: v for k, v in self.prep.files.items() if k in req.fields}
        at = {"request": time.monotonic() + self.times.request_s, **outer}
        deadline = Deadline(at, self.stop)
        if self.prep.api == "videos-sync":
            return client.video_sync(fields, files, deadline=deadline)
        return client.video_async(
            fields, files, poll_interval_s=self.prep.poll_interval_s, deadline=deadline
        )

    def record(self, sp: SlotPlan, req: PlannedRequest, out: RequestOutcome) -> None:
        """Store the request's clip (if any) and append its receipt."""
        media = None
        if out.body is not None:
            rid = request_id(self.writer.attempt_id, sp, req)
            media = self.writer.write_media(rid, out.body)
        row = receipt_row(self.writer.attempt_id, self.prep, sp, req, out, media=media)
        self.writer.append("receipts", row)

    # -- one slot ----------------------------------------------------------------------------

    def wave(
        self, sp: SlotPlan, client: VideoClient, arm_at: float | None
    ) -> tuple[Counter[str], Counter[str], int]:
        """Send the slot's requests in order; return statuses, timeout levels, not sent."""
        statuses: Counter[str] = Counter()
        levels: Counter[str] = Counter()
        wave_at = None if self.times.wave_s is None else time.monotonic() + self.times.wave_s
        outer = self.times.outer(wave_at, arm_at)
        for i, req in enumerate(sp.requests):
            try:
                Deadline(outer, self.stop).check()
            except DeadlineExceeded as exc:
                self.emit(
                    "note",
                    f"{sp.server}: {len(sp.requests) - i} request(s) not sent "
                    f"({exc.level or exc.reason})",
                )
                return statuses, levels, len(sp.requests) - i
            out = self.send(client, req, outer)
            self.record(sp, req, out)
            self.done += 1
            statuses[out.status] += 1
            if out.timeout_level:
                levels[out.timeout_level] += 1
            lvl = f" [{out.timeout_level} timeout]" if out.timeout_level else ""
            self.emit(
                "request",
                f"{sp.server} {req.phase} #{req.seq}: {out.status} {out.e2e_s:.3f} s{lvl}"
                + (f" ({out.error})" if out.error and out.status == "failed" else ""),
            )
            if out.status == "cancelled" or out.timeout_level in _STOPPING_LEVELS:
                rest = len(sp.requests) - i - 1
                if rest:
                    self.emit("note", f"{sp.server}: {rest} request(s) not sent")
                return statuses, levels, rest
        return statuses, levels, 0

    def check_runtime(
        self, sp: SlotPlan, target: Target, argv0: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """The arm's runtime commit against what can be known of the server's (``rerun.runtime``).

        Launch mode asks the launch environment before the server starts;
        endpoint mode is unverified. Returns the record and the reason to
        refuse the slot, if any.
        """
        if argv0 is None:
            doc = endpoint_runtime(sp.commit)
        else:
            cwd = self.options.launch_cwd or Path.cwd()
            doc = launch_runtime(argv0, target.env, cwd, sp.commit)
        self.emit(
            "runtime",
            f"{sp.server}: runtime commit {doc['verdict']}: {method_of(doc)}"
            + (f"; {doc['reason']}" if doc.get("reason") else ""),
        )
        return doc, refusal(sp.server, doc, self.options.allow_unverified_commit)

    def record_vllm_version(self, doc: dict[str, Any], client: VideoClient) -> None:
        """Add what ``GET /version`` said (vLLM's version: recorded, never compared)."""
        rep = client.version(timeout=VERSION_TIMEOUT_S)
        doc["vllm_version"] = rep.vllm_version
        doc["vllm_version_error"] = rep.error

    def wait_ready(
        self, client: VideoClient, proc: ServerProcess, deadline: Deadline
    ) -> str | None:
        """Poll ``GET /health`` until 2xx; why the server is not ready, or None."""
        t0 = time.monotonic()
        while True:
            rc = proc.exit_status()
            if rc is not None:
                return f"server exited ({rc}) before it was ready"
            if client.health(timeout=min(_HEALTH_TIMEOUT_S, deadline.io_timeout())):
                return None
            try:
                # Poll often at first, then about every tenth of the time waited, up to 1 s.
                deadline.sleep(min(1.0, max(0.02, (time.monotonic() - t0) / 10)))
            except DeadlineExceeded as exc:
                return f"not ready before the {exc.level or 'stop'} deadline"

    def teardown_budgets(self, sp: SlotPlan) -> tuple[float, float]:
        """The TERM and KILL waits: the plan's, fitted into the kill grace after a soft TERM."""
        term, kill = sp.term_wait_s, sp.kill_wait_s
        if self.stop.is_set() and self.stop.at is not None:
            left = max(0.0, self.stop.at + self.times.grace_s - time.monotonic())
            term = min(term, left)
            kill = min(kill, max(0.5, left - term))
        return term, kill

    def record_exits(
        self, sp: SlotPlan, exits: Sequence[ProcessExit], term: float, kill: float
    ) -> None:
        """Append the worker exits of a torn-down server and report them."""
        for row in worker_exit_rows(self.writer.attempt_id, sp, exits, term, kill):
            self.writer.append("worker_exits", row)
        unclean = [f"{e.name} ({e.signal or e.exit_code})" for e in exits if not e.clean]
        self.emit(
            "teardown",
            f"{sp.server}: {len(exits)} process(es) stopped"
            + (f"; unclean: {', '.join(unclean)}" if unclean else ", all clean"),
        )

    def _start(self, sp: SlotPlan, target: Target) -> tuple[ServerProcess | None, str, str | None]:
        """Launch the slot's server on a free port: (process, port, launch error)."""
        port = str(free_port(self.options.host))
        assert target.argv_template is not None
        values = placeholders(sp, port, self.options.host, self.prep.plan)
        argv = expand(target.argv_template, values, target.args)
        spec = LaunchSpec(
            tuple(argv),
            self.options.launch_cwd or Path.cwd(),
            target.env,
            self.writer.log_path(sp.server),
        )
        self.emit(
            "slot",
            f"position {sp.slot.position}: {sp.arm} on {sp.server}: starting "
            + safe(shlex.join(argv)),
        )
        try:
            return ServerProcess.start(spec), port, None
        except LaunchError as exc:
            self.emit("note", f"{sp.server}: {exc}")
            return None, port, str(exc)

    def _serve(
        self,
        sp: SlotPlan,
        proc: ServerProcess,
        client: VideoClient,
        t_slot: float,
        runtime: dict[str, Any],
    ) -> SlotResult:
        """A launched server: wait until ready, record its vLLM version, run the wave."""
        arm_at = None if self.times.arm_s is None else t_slot + self.times.arm_s
        startup_at = None if self.times.startup_s is None else t_slot + self.times.startup_s
        ready = self.wait_ready(
            client,
            proc,
            Deadline({"startup": startup_at, **self.times.outer(None, arm_at)}, self.stop),
        )
        result = SlotResult(sp.slot.position, sp.arm, sp.server, "completed", {}, {}, 0, runtime)
        if ready is not None:
            return _with(result, outcome="not-ready", not_sent=len(sp.requests), note=ready)
        self.emit("ready", f"{sp.server} ready after {time.monotonic() - t_slot:.2f} s")
        proc.observe_workers()
        self.record_vllm_version(runtime, client)
        statuses, levels, not_sent = self.wave(sp, client, arm_at)
        return _with(
            result,
            outcome="cut" if not_sent else "completed",
            statuses=dict(statuses),
            timeout_levels=dict(levels),
            not_sent=not_sent,
        )

    def run_launched(self, sp: SlotPlan, target: Target, sampler: TelemetrySampler) -> SlotResult:
        """Start the slot's server, run it, and always tear it down with the plan's budgets."""
        position = (sp.slot.position, sp.arm, sp.server)
        assert target.argv_template is not None
        argv0 = expand(
            target.argv_template,
            placeholders(sp, "0", self.options.host, self.prep.plan),
            target.args,
        )[0]
        runtime, reject = self.check_runtime(sp, target, argv0)
        if reject:
            # Refused before the server starts: nothing to tear down.
            self.reject_reason = reject
            return SlotResult(
                *position, "commit-mismatch", {}, {}, len(sp.requests), runtime, (), reject
            )
        t_slot = time.monotonic()
        proc, port, error = self._start(sp, target)
        if proc is None:
            return SlotResult(
                *position, "launch-failed", {}, {}, len(sp.requests), runtime, (), error
            )
        self.live.append(proc)
        sampler.set_context(SampleContext(sp.arm, sp.server))
        client = VideoClient(f"http://{self.options.host}:{port}")
        try:
            result = self._serve(sp, proc, client, t_slot, runtime)
        finally:
            term, kill = self.teardown_budgets(sp)
            exits = proc.teardown(term, kill)
            self.live.remove(proc)
            sampler.set_context(None)
            self.record_exits(sp, exits, term, kill)
        return _with(result, exits=tuple(exits))

    def run_endpoint(self, sp: SlotPlan, target: Target, sampler: TelemetrySampler) -> SlotResult:
        """Run the slot on a server already running (no launch, no teardown)."""
        assert target.url is not None
        t_slot = time.monotonic()
        arm_at = None if self.times.arm_s is None else t_slot + self.times.arm_s
        self.emit("slot", f"position {sp.slot.position}: {sp.arm} on {sp.server} at {target.url}")
        client = VideoClient(target.url)
        runtime, reject = self.check_runtime(sp, target, None)
        result = SlotResult(sp.slot.position, sp.arm, sp.server, "completed", {}, {}, 0, runtime)
        if reject:
            self.reject_reason = reject
            return _with(result, outcome="commit-mismatch", not_sent=len(sp.requests), note=reject)
        self.record_vllm_version(runtime, client)
        sampler.set_context(SampleContext(sp.arm, sp.server))
        try:
            statuses, levels, not_sent = self.wave(sp, client, arm_at)
        finally:
            sampler.set_context(None)
        return _with(
            result,
            outcome="cut" if not_sent else "completed",
            statuses=dict(statuses),
            timeout_levels=dict(levels),
            not_sent=not_sent,
            note="endpoint mode: the server was not launched here, so no teardown was recorded",
        )

    # -- the attempt -------------------------------------------------------------------------

    def run(self, sampler: TelemetrySampler) -> None:
        """Every position in plan order, until a stop or a rejected commit."""
        for sp, target in zip(self.prep.schedule, self.prep.targets, strict=True):
            if self.stop.is_set() or self.reject_reason:
                return
            if safe_name(sp.server) != sp.server:
                # The tables keep the plan's name; say which file name stands for it.
                self.emit(
                    "note",
                    f"server {sp.server!r} is named {safe_name(sp.server)} in file names "
                    "(logs, media); the tables keep its name as planned",
                )
            if target.url is not None:
                result = self.run_endpoint(sp, target, sampler)
            else:
                result = self.run_launched(sp, target, sampler)
            self.slots.append(result)

    def verdict(self) -> tuple[str, str | None]:
        """The attempt's status and reason: interrupted, rejected or accepted."""
        never = [sp.server for sp in self.prep.schedule[len(self.slots) :]]
        if self.stop.is_set():
            reason = self.stop.reason or "stopped"
            if never:
                reason += "; never started: " + ", ".join(never)
            return "interrupted", reason
        if self.reject_reason:
            return "rejected", self.reject_reason + (
                "; not run: " + ", ".join(never) if never else ""
            )
        bad: Counter[str] = Counter()
        for s in self.slots:
            for k, v in s.statuses.items():
                if k != "ok":
                    bad[k] += v
        problems = [f"{v} request(s) {k}" for k, v in sorted(bad.items())]
        problems += [f"{s.server}: {s.outcome}" for s in self.slots if s.outcome != "completed"]
        if problems:
            return (
                "rejected",
                "the plan ran to its end but not every request succeeded: " + "; ".join(problems),
            )
        return "accepted", None

    def kill_all(self) -> None:
        """KILL every process group still alive (the watchdog's last resort)."""
        for proc in list(self.live):
            proc.kill_now()


def _with(result: SlotResult, **changes: Any) -> SlotResult:
    return replace(result, **changes)
