"""``--json``: the replay result as one JSON document (schema: ``specs/replay-report.md``).

Statistics are JSON numbers (the nearest double to the exact value); claims
carry their claimed, recomputed and exact values as decimal text, since those
are what was compared.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bundler._internal.timefmt import format_ns
from replay.engine.exact import Exact
from replay.engine.verdicts import MediaVerdict
from replay.report.model import headline
from replay.result import SECTIONS, ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE
from replay.sections.quality import FAIL, PASS, UNATTESTED, GateCheck

__all__ = ["REPORT_VERSION", "result_to_dict"]

REPORT_VERSION = "2"
"""2: ``outcome`` may be INTEGRITY FAILED or NOT EVIDENCED; ``integrity_failures``,
``checks_done``, ``not_evidenced``, per-section ``evidenced``; ``media`` and ``against``
are part of the one result (null when not done)."""


def _json_float(value: Exact | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except OverflowError:
        # Valid but absurd inputs (latencies near 1e308 s) can leave the range of a double;
        # JSON has no number for that. The claims keep the exact text (``exact``).
        return None


def _check(c: GateCheck | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "comparison_id": c.comparison_id,
        "gate_id": c.gate_id,
        "metric": c.metric,
        "value": c.value,
        "verdict": c.verdict,
        "passes_recorded": c.passes_recorded,
        "margin": float(c.margin),
        "close": c.close,
    }


def _attempts(r: ReplayResult) -> dict[str, Any]:
    a = r.attempts
    return {
        "accepted": a.accepted,
        "isolated": a.isolated,
        "accepted_request_ids": a.accepted_request_ids,
        "cross_attempt_comparisons": list(a.cross_attempt_comparisons),
        "timed_in_other_window": dict(a.timed_in_other_window),
        "attempts": [
            {
                "attempt_id": x.attempt_id,
                "status": x.status,
                "reason": x.reason,
                "plan": x.plan,
                "start": None if x.window.start_ns is None else format_ns(x.window.start_ns),
                "end": None if x.window.end_ns is None else format_ns(x.window.end_ns),
                "receipts": x.receipts,
                "receipts_by_phase": dict(x.receipts_by_phase),
                "worker_exits": x.worker_exits,
                "telemetry": x.telemetry,
                "comparisons": x.comparisons,
                "outside_window": x.outside_window,
                "entered_accepted": x.entered_accepted,
            }
            for x in a.attempts
        ],
        "limits": list(r.limits("attempts")),
    }


def _conformance(r: ReplayResult) -> dict[str, Any]:
    c = r.conformance
    return {
        "checked": c.checked,
        "ok": c.ok,
        "plan_path": c.plan_path,
        "plan_id": c.plan_id,
        "planned_order": list(c.planned_order),
        "observed_order": list(c.observed_order),
        "warmups_per_server": c.warmups_per_server,
        "measured_per_server": c.measured_per_server,
        "servers": [{**asdict(s), "first_start": format_ns(s.first_start_ns)} for s in c.servers],
        "deviations": [asdict(d) for d in c.deviations],
        "warnings": list(c.warnings),
        "checked_items": list(c.checked_items),
        "limits": list(r.limits("conformance")),
    }


def _latency(r: ReplayResult) -> dict[str, Any]:
    lat = r.latency
    return {
        "attempt": lat.attempt,
        "samples_used": lat.samples_used,
        "excluded": dict(lat.excluded),
        "servers": [
            {
                "arm": s.arm,
                "server": s.server,
                "n": s.n,
                "mean_s": _json_float(s.mean_s),
                "sd_s": _json_float(s.sd_s),
                "min_s": s.min_s,
                "max_s": s.max_s,
            }
            for s in lat.servers()
        ],
        "arms": [
            {
                "arm": a.arm,
                "role": a.role,
                "servers": len(a.servers),
                "n_requests": a.n_requests,
                "mean_s": _json_float(a.mean_s),
                "sd_server_means_s": _json_float(a.sd_server_means_s),
                "sd_requests_s": _json_float(a.sd_requests_s),
                "pooled_mean_s": _json_float(a.pooled_mean_s),
                "cv_server_means": _json_float(a.cv_server_means),
            }
            for a in lat.arms
        ],
        "pairs": [
            {
                "baseline": p.baseline,
                "candidate": p.candidate,
                "difference_s": _json_float(p.difference_s),
                "percent_lower": _json_float(p.percent_lower),
                "speedup": _json_float(p.speedup),
                "interval": None if p.interval is None else asdict(p.interval),
                "interval_note": p.interval_note,
                "detectable": asdict(p.detectable),
            }
            for p in lat.pairs
        ],
        "limits": list(r.limits("latency")),
    }


def _lifecycle(r: ReplayResult) -> dict[str, Any]:
    lc = r.lifecycle
    return {
        "attempt": lc.attempt,
        "total": lc.total,
        "clean": lc.clean,
        "unclean": lc.unclean_total,
        "arms": [asdict(a) for a in lc.arms],
        "per_server": dict(lc.per_server),
        "unclean_listed": [asdict(u) for u in lc.unclean],
        "missing_budgets": list(lc.missing_budgets),
        "limits": list(r.limits("lifecycle")),
    }


def _telemetry(r: ReplayResult) -> dict[str, Any]:
    t = r.telemetry
    return {
        "attempt": t.attempt,
        "interval_s": t.interval_s,
        "source": t.source,
        "peaks": [
            {
                "arm": p.arm,
                "server": p.server,
                "device": p.device,
                "peak_mb": float(p.peak_mb),
                "samples": p.samples,
            }
            for p in t.peaks
        ],
        "arms": [
            {
                "arm": a.arm,
                "servers": a.servers,
                "devices": a.devices,
                "samples": a.samples,
                "mean_peak_mb": _json_float(a.mean_peak_mb),
                "max_peak_mb": _json_float(a.max_peak_mb),
            }
            for a in t.arms
        ],
        "pairs": [
            {
                "baseline": p.baseline,
                "candidate": p.candidate,
                "change_pct": _json_float(p.change_pct),
            }
            for p in t.pairs
        ],
        "limits": list(r.limits("telemetry")),
    }


def _quality(r: ReplayResult) -> dict[str, Any]:
    q = r.quality
    return {
        "attempt": q.attempt,
        "scorer_attested": q.scorer_attested,
        "scorer": None if q.scorer is None else q.scorer.to_dict(),
        "comparisons": {
            "total": q.comparisons_total,
            "passed": q.comparisons_passed,
            "failed": q.comparisons_failed,
            "unattested": q.comparisons_unattested,
            "passed_if_attested": q.comparisons_passed_if_attested,
            "ungated": q.ungated_comparisons,
        },
        "checks_count": {v: q.count(v) for v in (PASS, FAIL, UNATTESTED)},
        "gates": [
            {
                **asdict(g.gate),
                "needs_scorer": g.gate.needs_scorer,
                "checks": g.checks,
                "passed": g.passed,
                "failed": g.failed,
                "unattested": g.unattested,
                "closest": _check(g.closest),
            }
            for g in q.gates
        ],
        "metrics": [
            {
                "metric": m.metric,
                "recorded": m.recorded,
                "min": float(m.min_value),
                "max": float(m.max_value),
                "gated": m.gated,
                "needs_scorer": m.needs_scorer,
                "closest": _check(m.closest),
            }
            for m in q.metrics
        ],
        "checks": [_check(c) for c in q.checks],
        "never_evaluated": list(q.never_evaluated),
        "limits": list(r.limits("quality")),
    }


def _claims(r: ReplayResult) -> dict[str, Any]:
    c = r.claims
    return {
        "counts": {s: c.count(s) for s in (CONFIRMED, CONTRADICTED, UNVERIFIABLE)},
        "checks": [{**asdict(x), "params": dict(x.params)} for x in c.checks],
        "not_claimed": [asdict(n) for n in c.not_claimed],
        "limits": list(r.limits("claims")),
    }


def result_to_dict(r: ReplayResult) -> dict[str, Any]:
    """The JSON form of ``r`` (``specs/schemas/replay-report.schema.json``)."""
    i = r.integrity
    return {
        "report_version": REPORT_VERSION,
        "bundle": r.bundle,
        "campaign": dict(r.campaign),
        "outcome": str(r.outcome),
        "exit_code": r.exit_code,
        "integrity_failures": r.integrity_failures(),
        "failures": r.failures(),
        "gaps": r.gaps(),
        "checks_done": list(r.checks_done()),
        "not_evidenced": list(r.not_evidenced()),
        "evidenced": {s: r.evidenced(s) for s in (*SECTIONS, "media", "against")},
        "headline": list(headline(r)),
        "integrity": {
            "signature_status": i.signature_status,
            "trusted": i.trusted,
            "verified_by": list(i.verified_by),
            "format_version": i.format_version,
            "members": i.members,
            "external": i.external,
            "environment": dict(i.environment),
            "environment_now": dict(i.environment_now),
            "limits": list(r.limits("integrity")),
        },
        "attempts": _attempts(r),
        "conformance": _conformance(r),
        "latency": _latency(r),
        "lifecycle": _lifecycle(r),
        "telemetry": _telemetry(r),
        "quality": _quality(r),
        "claims": _claims(r),
        "media": _media(r),
        "against": _against(r),
        "serving": [asdict(p) for p in r.serving],
        "serving_changes": [asdict(c) for c in r.serving_changes],
        "not_applicable": {
            s: why
            for s in ("latency", "lifecycle", "telemetry", "quality", "scorer")
            if (why := r.not_applicable(s)) is not None
        },
    }


def _media(r: ReplayResult) -> dict[str, Any] | None:
    media, outcome = r.media, r.media_outcome()
    if media is None or outcome is None:
        return None
    # The section's word and exit code lead its JSON form (the schema requires them);
    # both come from the one result, by the one precedence.
    doc: dict[str, Any] = {
        "verdict": MediaVerdict.of(outcome),
        "exit_code": outcome.exit_code,
        **media.to_dict(),
    }
    doc["limits"] = list(r.limits("media"))
    return doc


def _against(r: ReplayResult) -> dict[str, Any] | None:
    if r.against is None:
        return None
    doc = r.against.to_dict()
    doc["limits"] = list(r.limits("against"))
    return doc
