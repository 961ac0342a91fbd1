"""Judge one re-scored comparison: recorded vs re-derived metrics, and every gate on both.

Gates are evaluated by the one gate evaluator (:meth:`replay.sections.gates.Gate.evaluate`):
the recorded value with the bundle's scorer identity as attestation
(``scorer.json`` present), the re-derived value with the identity actually
verified here (weights matched by SHA-256). A re-derived value reproduces the
recorded one within the definition's tolerance (:func:`replay.sections.gates.reproduces`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replay.engine.verdicts import Agreement, FileStatus
from replay.media.bundle_read import ComparisonRow
from replay.media.coverage import FAIL as COVERAGE_FAIL
from replay.media.definitions import DEFAULT_DEFINITION, DEFINITIONS, canonical
from replay.media.lpips_identity import LPIPS_DEFINITION
from replay.media.result import (
    NOT_COMPUTED,
    NOT_RECORDED,
    UNSUPPORTED,
    ComparisonReplay,
    Disagreement,
    GateResult,
    MediaGateSummary,
    MetricCheck,
    MetricStatus,
    RecomputedVerdict,
    RecordedVerdict,
    fmt,
)
from replay.media.scoring import PSNR, SSIM_FFMPEG, Computed
from replay.sections.gates import FAIL, PASS, UNATTESTED, Gate, count_verdicts, reproduces, worst

__all__ = [
    "Attestation",
    "disagreements",
    "gate_problems",
    "gate_results",
    "metric_checks",
    "summaries",
]


@dataclass(frozen=True)
class Attestation:
    """What attests a model-based metric, for recorded and for re-derived values."""

    recorded: bool
    """The bundle records a scorer identity (``scorer.json``)."""
    rederived: bool
    """The identity was verified here: its weights matched by SHA-256 and loaded."""
    reason: str = ""
    """Why the re-derived values are not attested (empty when they are)."""


def _metric_defs(cmp: ComparisonRow, gates: Sequence[Gate]) -> dict[str, str]:
    """metric name -> definition id its recorded value is compared under."""
    out: dict[str, str] = {}
    for g in gates:
        out.setdefault(g.metric, g.definition)
    for name in cmp.metrics:
        if name not in out and name in DEFAULT_DEFINITION:
            out[name] = DEFAULT_DEFINITION[name]
    return out


def _lookup(comp: Computed, def_id: str, att: Attestation) -> tuple[float | None, str]:
    """The re-derived value under ``def_id``, or None and why not."""
    c = canonical(def_id)
    if c is None:
        return None, UNSUPPORTED
    if c == LPIPS_DEFINITION and not att.rederived:
        return None, UNATTESTED
    if c in comp.values:
        return comp.values[c], ""
    return None, comp.why.get(c, NOT_COMPUTED)


def gate_results(
    cmp: ComparisonRow, gates: Sequence[Gate], comp: Computed, att: Attestation
) -> list[GateResult]:
    """Every gate on the recorded and on the re-derived value of its metric."""
    out: list[GateResult] = []
    for g in gates:
        rec = cmp.metrics.get(g.metric)
        rec_verdict: RecordedVerdict = (
            NOT_RECORDED if rec is None else g.evaluate(rec, attested=att.recorded).verdict
        )
        value, why = _lookup(comp, g.definition, att)
        verdict: RecomputedVerdict
        close = False
        if value is None:
            verdict = UNSUPPORTED if why == UNSUPPORTED else NOT_COMPUTED
            if why == UNSUPPORTED:
                why = f"definition {g.definition!r} is not implemented"
            elif why == UNATTESTED:
                verdict, why = UNATTESTED, att.reason or g.scorer.reason
        else:
            ev = g.evaluate(value, attested=att.rederived)
            verdict, close = ev.verdict, ev.close
            why = f"{ev.note}; {att.reason}" if ev.note and att.reason else ev.note
        out.append(
            GateResult(
                g.gate_id,
                cmp.comparison_id,
                g.metric,
                g.definition,
                g.op,
                g.threshold,
                rec,
                rec_verdict,
                value,
                verdict,
                close,
                why,
            )
        )
    return out


def _status(
    c: str | None, value: float | None, why: str, rec: float | None, tol: float | None
) -> MetricStatus:
    if c is None:
        return UNSUPPORTED
    if value is None:
        return UNATTESTED if why == UNATTESTED else NOT_COMPUTED
    if rec is None:
        return NOT_RECORDED
    if tol is not None and reproduces(rec, value, tol):
        return Agreement.AGREE
    return Agreement.DISAGREE


def metric_checks(
    cmp: ComparisonRow,
    gates: Sequence[Gate],
    comp: Computed,
    att: Attestation,
    results: Sequence[GateResult],
) -> list[MetricCheck]:
    """Each recorded (or gated) metric next to its re-derivation and its gates' verdicts."""
    out: list[MetricCheck] = []
    for name, def_id in sorted(_metric_defs(cmp, gates).items()):
        c = canonical(def_id)
        value, why = _lookup(comp, def_id, att)
        rec = cmp.metrics.get(name)
        tol = DEFINITIONS[c].tolerance if c else None
        on_it = tuple(
            (r.gate_id, r.recomputed_verdict)
            for r in results
            if r.metric == name and r.definition == def_id
        )
        status = _status(c, value, why, rec, tol)
        detail = (att.reason or "no attested scorer") if why == UNATTESTED else why
        out.append(MetricCheck(name, def_id, rec, value, tol, status, detail, on_it))
    # FFmpeg SSIM and PSNR are always recomputed; show them even when not recorded.
    shown = {m.definition for m in out} | {m.metric for m in out}
    for def_id in (SSIM_FFMPEG, PSNR):
        d = DEFINITIONS[def_id]
        if def_id not in shown and d.metric not in shown and def_id in comp.values:
            out.append(
                MetricCheck(d.metric, def_id, None, comp.values[def_id], d.tolerance, NOT_RECORDED)
            )
    return out


_RECOMPUTED_ORDER = (FAIL, UNSUPPORTED, UNATTESTED, NOT_COMPUTED, PASS)
_RECORDED_ORDER = (FAIL, UNATTESTED, NOT_RECORDED, PASS)


def summaries(gates: Sequence[Gate], reps: Sequence[ComparisonReplay]) -> list[MediaGateSummary]:
    """Each gate over every comparison: the worst verdict each way, and the counts."""
    out: list[MediaGateSummary] = []
    for g in gates:
        results = [r for c in reps for r in c.gates if r.gate_id == g.gate_id]
        recomputed = worst((r.recomputed_verdict for r in results), _RECOMPUTED_ORDER)
        recorded = worst((r.recorded_verdict for r in results), _RECORDED_ORDER)
        out.append(
            MediaGateSummary(
                g.gate_id,
                g.metric,
                g.definition,
                g.op,
                g.threshold,
                recorded or NOT_RECORDED,
                recomputed or NOT_COMPUTED,
                count_verdicts(r.recomputed_verdict for r in results),
                g.needs_scorer,
                g.scorer.reason,
            )
        )
    return out


def _arm_disagreements(c: ComparisonReplay) -> list[Disagreement]:
    out: list[Disagreement] = []
    for arm in c.arms:
        if arm.mismatched and arm.location is not None:
            out.append(
                Disagreement(
                    c.comparison_id,
                    "identity",
                    f"{arm.role} media",
                    arm.sha256 or "—",
                    FileStatus.MISMATCH,
                    arm.location.detail,
                )
            )
        if arm.undecodable:
            out.append(
                Disagreement(
                    c.comparison_id,
                    "decode",
                    f"{arm.role} media",
                    f"sealed output (request {arm.request_id})",
                    "does not decode",
                    f"{arm.file}: {arm.decode_error}",
                )
            )
    return out


def _metric_disagreement(cid: str, m: MetricCheck) -> Disagreement:
    d = m.delta
    gates = ", ".join(f"gate {gid} {v} on the re-derived value" for gid, v in m.gates)
    return Disagreement(
        cid,
        "not-reproduced-but-passes" if m.passes_anyway else "not-reproduced",
        f"{m.metric} ({m.definition})",
        fmt(m.recorded),
        fmt(m.recomputed),
        f"|Δ| {fmt(abs(d)) if d is not None else '—'} > tolerance {m.tolerance}"
        + (f"; {gates}" if gates else "; no gate on it"),
    )


def disagreements(reps: Sequence[ComparisonReplay]) -> list[Disagreement]:
    """Where the record and the re-score differ, side by side, per comparison."""
    out: list[Disagreement] = []
    for c in reps:
        out += _arm_disagreements(c)
        out += [
            _metric_disagreement(c.comparison_id, m)
            for m in c.metrics
            if m.status == Agreement.DISAGREE
        ]
        out += [
            Disagreement(
                c.comparison_id,
                "gate",
                g.gate_id,
                f"{g.recorded_verdict} ({fmt(g.recorded_value)})",
                f"{g.recomputed_verdict} ({fmt(g.recomputed_value)})",
                f"{g.metric} {g.op} {fmt(g.threshold)}",
            )
            for g in c.gates
            if {g.recorded_verdict, g.recomputed_verdict} <= {PASS, FAIL}
            and g.recorded_verdict != g.recomputed_verdict
        ]
        out += [
            Disagreement(
                c.comparison_id,
                "coverage",
                f"{cov.check} [{cov.arm}]",
                "not checked by the record",
                f"FAIL ({cov.observed})",
                f"expected {cov.expected}. {cov.detail}".strip(),
            )
            for cov in c.coverage
            if cov.status == COVERAGE_FAIL
        ]
    return out


def gate_problems(gates: Sequence[Gate]) -> list[str]:
    """Gates the re-score cannot follow: two definitions for one metric, unknown ids."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for g in gates:
        if seen.setdefault(g.metric, g.definition) != g.definition:
            problems.append(
                f"gates freeze two definitions for metric {g.metric!r}: "
                f"{seen[g.metric]} and {g.definition}; recorded values are compared with the first"
            )
        if canonical(g.definition) is None:
            problems.append(f"gate {g.gate_id}: definition {g.definition!r} is not implemented")
    return problems
