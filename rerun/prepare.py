"""Everything a rerun resolves before touching a device: schedule, targets, inputs, plan check.

``bundle rerun --dry-run`` stops here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.campaign.plan_check import PlanCheckResult, PlanShapeError, check_plan
from bundler.errors import UsageError
from bundler.format.plan_model import Plan
from bundler.verified import VerifiedBundle
from rerun.client import FilePart
from rerun.launcher import expand_command
from rerun.options import RerunOptions
from rerun.schedule import SlotEstimate, SlotPlan, build_schedule, estimate
from rerun.source import input_files, open_sealed, read_sealed
from rerun.targets import Target, placeholders, resolve_targets
from rerun.writer import SealedSource

__all__ = ["PreparedRerun", "prepare_plan", "prepare_rerun"]


@dataclass(frozen=True)
class PreparedRerun:
    """Everything resolved before any server is touched."""

    source: SealedSource
    plan: Plan
    schedule: tuple[SlotPlan, ...]
    targets: tuple[Target, ...]
    files: Mapping[str, tuple[FilePart, ...]]
    check: PlanCheckResult
    estimates: tuple[SlotEstimate, ...]
    sealed_attempt: str | None
    api: str
    timing_boundary: str
    poll_interval_s: float
    telemetry: str
    telemetry_interval_s: float | None

    @property
    def total_requests(self) -> int:
        """Requests in the whole plan."""
        return sum(len(s.requests) for s in self.schedule)

    def launch_commands(self) -> list[list[str]]:
        """The expanded launch command of every slot (``{port}`` shown as ``PORT``)."""
        out = []
        for sp, t in zip(self.schedule, self.targets, strict=True):
            if t.argv_template is not None:
                values = placeholders(sp, "PORT", "127.0.0.1", self.plan)
                out.append(expand_command(t.argv_template, values, t.args))
        return out


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def prepare_rerun(bundle: Path | VerifiedBundle, options: RerunOptions) -> PreparedRerun:
    """Read ``bundle`` (a verified bundle, or its path) and resolve the run, starting nothing.

    Raises:
        IntegrityError: the bundle at the path does not verify, or is not trusted.
        UsageError: the plan cannot be scheduled, a target or an input is missing.
    """
    sealed = read_sealed(open_sealed(bundle, options))
    return prepare_plan(
        sealed.source,
        sealed.plan,
        options,
        bundle=sealed.bundle,
        sealed_receipts=sealed.receipts,
        sealed_attempt=sealed.sealed_attempt,
    )


def prepare_plan(
    source: SealedSource,
    plan: Plan,
    options: RerunOptions,
    *,
    bundle: VerifiedBundle | None = None,
    sealed_receipts: Sequence[Mapping[str, Any]] = (),
    sealed_attempt: str | None = None,
) -> PreparedRerun:
    """Resolve the run of ``plan`` for ``source``'s arms (a rerun's, or ``bundle run``'s).

    Raises:
        UsageError: the plan cannot be scheduled, a target or an input is missing.
    """
    name = source.plan_name
    commits = {str(a["id"]): str(a["runtime_commit"]) for a in source.campaign.get("arms", [])}
    try:
        schedule = build_schedule(plan, commits)
    except PlanShapeError as exc:
        raise UsageError(f"{name}: {exc}") from exc
    api = plan.request.api
    poll = None if plan.request.poll_interval_s is None else float(plan.request.poll_interval_s)
    if api == "videos-async" and poll is None:
        raise UsageError(f"{name}: request.poll_interval_s is needed for videos-async")
    # ``telemetry`` is one of the sections Plan keeps as JSON; the schema made it an object.
    telemetry: Mapping[str, Any] = plan.unknown.get("telemetry") or {}
    return PreparedRerun(
        source=source,
        plan=plan,
        schedule=schedule,
        targets=resolve_targets(plan, schedule, options, plan_name=name),
        files=input_files(plan, bundle, options, plan_name=name),
        check=check_plan(plan, elapsed_s=options.reservation_used_s),
        estimates=estimate(plan, schedule, sealed_receipts, sealed_attempt),
        sealed_attempt=sealed_attempt,
        api=api,
        timing_boundary=plan.request.timing_boundary,
        poll_interval_s=poll or 0.0,
        telemetry=options.telemetry or str(telemetry.get("source", "none")),
        telemetry_interval_s=_number(telemetry.get("interval_s")),
    )
