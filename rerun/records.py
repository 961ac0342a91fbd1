"""The rows a rerun attempt writes: receipts, telemetry, worker exits, and the attempt record.

Pure functions from what happened to the campaign-layout rows
(``specs/campaign-layout.md``); :class:`rerun.writer.RerunWriter`
appends them.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from typing import Any

from bundler import __version__
from bundler._internal.timefmt import format_ns
from rerun.client import RequestOutcome
from rerun.launcher import ProcessExit
from rerun.prepare import PreparedRerun
from rerun.schedule import PlannedRequest, SlotPlan
from rerun.telemetry import DeviceSample, SampleContext

__all__ = ["attempt_record", "receipt_row", "request_id", "telemetry_rows", "worker_exit_rows"]


def request_id(attempt_id: str, sp: SlotPlan, req: PlannedRequest) -> str:
    """The receipt's ``request_id``: attempt, server and seq."""
    return f"{attempt_id}-{sp.server}-{req.seq:02d}"


def receipt_row(
    attempt_id: str,
    prep: PreparedRerun,
    sp: SlotPlan,
    req: PlannedRequest,
    out: RequestOutcome,
    *,
    media: tuple[str, str] | None,
) -> dict[str, Any]:
    """One request's receipt; ``media`` is the stored clip's (path, SHA-256), if any."""
    e2e = round(out.e2e_s, 6)
    row: dict[str, Any] = {
        "request_id": request_id(attempt_id, sp, req),
        "attempt_id": attempt_id,
        "arm": sp.arm,
        "server": sp.server,
        "phase": req.phase,
        "seq": req.seq,
        "start": format_ns(out.start_ns),
        # end = start + e2e keeps the two consistent even if the wall clock steps.
        "end": format_ns(out.start_ns + round(e2e * 1e9)),
        "e2e_s": e2e,
        "status": out.status,
        "timeout_level": out.timeout_level,
        "http_status": out.http_status,
        "output_sha256": None if media is None else media[1],
        "error": out.error,
        "timing_boundary": prep.timing_boundary,
        "job_id": out.job_id,
    }
    if prep.api == "videos-async":
        row["poll_interval_s"] = prep.poll_interval_s
        row["polls"] = out.polls
    if media is not None:
        row["media"] = media[0]
        row["output_bytes"] = len(out.body or b"")
    if req.prompt_id is not None:
        row["prompt_id"] = req.prompt_id
    if out.cleanup is not None:
        row["cleanup"] = out.cleanup
    # What the server measured itself, beside (never instead of) the boundary's e2e_s.
    row.update(out.server)
    extra = req.fields.get("extra_params")
    if isinstance(extra, Mapping) and isinstance(extra.get("task"), str):
        row["task_sent"] = extra["task"]
    return row


def telemetry_rows(
    attempt_id: str,
    ctx: SampleContext,
    t_ns: int,
    samples: Sequence[DeviceSample],
    source: str,
) -> list[dict[str, Any]]:
    """One telemetry row per device sampled at ``t_ns``, attributed to the running server."""
    out = []
    for d in samples:
        row: dict[str, Any] = {
            "attempt_id": attempt_id,
            "arm": ctx.arm,
            "server": ctx.server,
            "device": d.device,
            "time": format_ns(t_ns),
            "hbm_used_mb": d.hbm_used_mb,
            "hbm_total_mb": d.hbm_total_mb,
            "aicore_pct": d.aicore_pct,
            "source": source,
        }
        if d.gpu_util_pct is not None:
            row["gpu_util_pct"] = d.gpu_util_pct
        out.append(row)
    return out


def worker_exit_rows(
    attempt_id: str, sp: SlotPlan, exits: Sequence[ProcessExit], term: float, kill: float
) -> list[dict[str, Any]]:
    """One row per stopped process, with the budgets applied and the plan's."""
    return [
        {
            "attempt_id": attempt_id,
            "arm": sp.arm,
            "server": sp.server,
            "worker": e.name,
            "exit_code": e.exit_code,
            "signal": e.signal,
            "exit_s": e.exit_s,
            "killed": e.killed,
            "role": e.role,
            "comm": e.comm,
            "clean": e.clean,
            "exited_before_term": e.exited_before_term,
            "still_running": e.still_running,
            "term_wait_s": term,
            "kill_wait_s": kill,
            "plan_term_wait_s": sp.term_wait_s,
            "plan_kill_wait_s": sp.kill_wait_s,
        }
        for e in exits
    ]


def attempt_record(
    prep: PreparedRerun,
    attempt: Mapping[str, Any],
    run: Mapping[str, Any],
    slots: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """``rerun/<attempt>.json``: what ran, with which settings, and how each position went.

    Args:
        prep: the prepared run.
        attempt: ``attempt_id``, ``status``, ``reason``, ``mode``.
        run: ``timeouts``, ``reservation_used_s``, ``watchdog`` and ``telemetry`` as recorded.
        slots: each position's ``SlotResult.to_dict()``, in run order.
    """
    origin: dict[str, Any] = (
        {
            "rerun_of": {
                "campaign_id": prep.source.campaign.get("id"),
                "bundle_sha256": prep.source.bundle_sha256,
                "plan": prep.source.plan_name,
                "plan_sha256": prep.source.plan_sha256,
                "sealed_accepted_attempt": prep.sealed_attempt,
            }
        }
        if prep.source.first_run is None
        else {
            "first_run_of": {"plan": prep.source.plan_name, "plan_sha256": prep.source.plan_sha256}
        }
    )
    return {
        **attempt,
        **origin,
        "api": prep.api,
        "timing_boundary": prep.timing_boundary,
        "poll_interval_s": prep.poll_interval_s,
        **run,
        "plan_check": prep.check.to_dict(),
        "slots": list(slots),
        "not_started": [sp.server for sp in prep.schedule[len(slots) :]],
        "tool": {"reprobundle": __version__, "python": platform.python_version()},
    }
