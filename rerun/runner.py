"""``bundle rerun``: execute a sealed bundle's frozen plan against real servers.

:func:`prepare_rerun` (:mod:`rerun.prepare`) reads the verified bundle
and resolves everything that can be checked before touching a device;
:func:`run_rerun` then runs one attempt: the telemetry sampler and the
reservation watchdog beside it, each arm position in plan order
(:class:`rerun.slots.AttemptRun`), and the attempt's status and record
written at the end whatever happened (:mod:`rerun.writer`). Progress
goes to a callback; nothing here prints.

The modules, one job each:

- :mod:`rerun.options`: what the caller gives (options, events, stop handle)
- :mod:`rerun.source`: reading the sealed bundle (plan, gates, pairing, inputs)
- :mod:`rerun.targets`: where each server is (launch templates, endpoints)
- :mod:`rerun.prepare`: everything resolved before a device is touched
- :mod:`rerun.slots`: executing the arm positions of one attempt
- :mod:`rerun.records`: the rows and the attempt record it writes
- :mod:`rerun.writer`: the campaign directory
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler import __version__
from bundler.campaign.plan_check import PlanCheckResult
from bundler.errors import UsageError
from bundler.verified import VerifiedBundle
from rerun.launcher import child_subreaper
from rerun.options import (
    FILE_FIELDS,
    Progress,
    RerunControl,
    RerunEvent,
    RerunOptions,
)
from rerun.prepare import PreparedRerun, prepare_rerun
from rerun.records import attempt_record
from rerun.slots import AttemptRun, SlotResult
from rerun.targets import check_endpoints, check_launch_consent
from rerun.telemetry import TelemetrySampler, TelemetrySource, source_for
from rerun.watchdog import ReservationWatchdog
from rerun.writer import RerunWriter

__all__ = [
    "FILE_FIELDS",
    "PreparedRerun",
    "Progress",
    "RerunControl",
    "RerunEvent",
    "RerunOptions",
    "RerunResult",
    "SlotResult",
    "prepare_rerun",
    "run_rerun",
]


@dataclass(frozen=True)
class RerunResult:
    """What :func:`run_rerun` did and wrote."""

    out_dir: Path
    attempt_id: str
    status: str
    reason: str | None
    slots: tuple[SlotResult, ...]
    counts: Mapping[str, int]
    check: PlanCheckResult

    @property
    def statuses(self) -> dict[str, int]:
        """Receipts by status, over every slot."""
        total: Counter[str] = Counter()
        for s in self.slots:
            total.update(s.statuses)
        return dict(total)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``bundle rerun --json``)."""
        return {
            "out_dir": str(self.out_dir),
            "attempt_id": self.attempt_id,
            "status": self.status,
            "reason": self.reason,
            "rows": dict(self.counts),
            "statuses": self.statuses,
            "slots": [s.to_dict() for s in self.slots],
            "plan_check_ok": self.check.ok,
        }


def _telemetry_source(prep: PreparedRerun, options: RerunOptions) -> TelemetrySource:
    if options.telemetry_source is not None:
        return options.telemetry_source
    try:
        return source_for(prep.telemetry, options.telemetry_command)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _record(
    run: AttemptRun,
    status: str,
    reason: str | None,
    watchdog: ReservationWatchdog,
    sampler: TelemetrySampler,
) -> dict[str, Any]:
    soft = run.times.soft_at
    return attempt_record(
        run.prep,
        {
            "attempt_id": run.writer.attempt_id,
            "status": status,
            "reason": reason,
            "mode": "launch" if run.options.launch else "endpoint",
        },
        {
            "timeouts": run.times.to_dict(),
            "reservation_used_s": run.options.reservation_used_s,
            "watchdog": {
                "soft_term_after_s": None if soft is None else soft - run.times.t0,
                "fired": watchdog.fired,
                "grace_expired": watchdog.grace_expired,
                "stop_level": run.stop.level,
                "stop_reason": run.stop.reason,
            },
            "telemetry": {
                "source": run.prep.telemetry,
                "interval_s": run.prep.telemetry_interval_s,
                "samples": sampler.samples,
                "errors": sampler.errors,
            },
        },
        [s.to_dict() for s in run.slots],
    )


def run_rerun(
    bundle: Path | VerifiedBundle,
    out_dir: Path,
    options: RerunOptions,
    *,
    progress: Progress | None = None,
    control: RerunControl | None = None,
    prepared: PreparedRerun | None = None,
) -> RerunResult:
    """Execute ``bundle``'s frozen plan and write the rerun campaign into ``out_dir``.

    ``bundle`` is a verified bundle, or its path (opened with ``options.trust``);
    ``prepared`` is its :func:`prepare_rerun` with the same options, when the
    caller already has it. Returns the attempt's result; an interrupted or
    rejected attempt is a result too (``status``), never an exception.

    Raises:
        IntegrityError: the bundle at the path does not verify, or is not trusted.
        UsageError: the plan cannot be run as given (see :func:`prepare_rerun`),
            the plan's own launch command without ``run_bundle_launch_command``
            (:func:`~rerun.targets.check_launch_consent`), or an endpoint
            reports another runtime commit. Nothing is started or written then.
    """
    check_launch_consent(options)
    prep = prepared or prepare_rerun(bundle, options)
    if not options.launch:
        check_endpoints(prep.schedule, prep.targets, options)
    source = _telemetry_source(prep, options)
    control = control or RerunControl()
    writer = RerunWriter.open(
        out_dir, prep.source, accelerator=options.accelerator or "unspecified"
    )
    run = AttemptRun(prep, writer, options, control.stop, progress)
    mode = "launch" if options.launch else "endpoint"
    command = f"bundle {prep.source.attempt_prefix}"
    writer.begin(time.time_ns(), prep.source.plan_name, f"{command} {__version__}; {mode} mode")
    for f in prep.check.findings:
        run.emit("plan", str(f))
    sampler = TelemetrySampler(
        source,
        prep.telemetry_interval_s or 5.0,
        run.telemetry_sink,
        on_error=lambda m: run.emit("note", m),
    )
    watchdog = ReservationWatchdog(
        control.stop,
        soft_at=run.times.soft_at,
        grace_s=run.times.grace_s,
        on_grace_expired=run.kill_all,
        on_fire=lambda m: run.emit("watchdog", m),
    )
    watchdog.start()
    sampler.start()
    status: str = "interrupted"
    reason: str | None = "the runner stopped on an error"
    try:
        with child_subreaper():
            run.run(sampler)
        status, reason = run.verdict()
    except BaseException as exc:
        run.kill_all()
        reason = f"the runner stopped: {type(exc).__name__}: {exc}"
        raise
    finally:
        sampler.stop()
        watchdog.finish()
        end_ns = time.time_ns()
        writer.write_record(_record(run, status, reason, watchdog, sampler))
        positions = f"{len(run.slots)} of {len(prep.schedule)} arm positions run"
        writer.finish(status, reason, end_ns, positions)
        run.emit(
            "done", f"attempt {writer.attempt_id}: {status}" + (f" ({reason})" if reason else "")
        )
    return RerunResult(
        out_dir,
        writer.attempt_id,
        status,
        reason,
        tuple(run.slots),
        dict(writer.counts),
        prep.check,
    )
