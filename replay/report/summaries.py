"""One line per section of a replay, (title, what it found): the default terminal output.

Counts only, read off the one :class:`~replay.result.ReplayResult`; the verbose sections
are :mod:`replay.report.model`.
"""

from __future__ import annotations

from replay.engine.exact import Exact
from replay.engine.verdicts import MediaVerdict
from replay.report.fmt import exact_text
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE

__all__ = ["section_summaries"]


def section_summaries(r: ReplayResult) -> tuple[tuple[str, str], ...]:
    """One line per section, (title, what it found), for the default terminal output.

    Counts only, read off the one result: no verdict is decided here.
    """
    c, a, cf, lc, t, q, i = (
        r.claims,
        r.attempts,
        r.conformance,
        r.lifecycle,
        r.telemetry,
        r.quality,
        r.integrity,
    )
    ne = "not evidenced"
    out = [
        (
            "claims",
            f"{c.count(CONFIRMED)} confirmed, {c.count(CONTRADICTED)} contradicted, "
            f"{c.count(UNVERIFIABLE)} unverifiable, {len(c.not_claimed)} stated not claimed"
            if c.checks
            else f"{ne}: the bundle states no claim",
        ),
        (
            "attempts",
            f"{len(a.attempts)} attempt(s), accepted {a.accepted}; "
            + ("isolated" if a.isolated else "NOT isolated"),
        ),
        (
            "plan conformance",
            (
                f"{len(cf.deviations)} deviation(s) from plan {cf.plan_id}"
                if cf.deviations
                else f"no deviation from plan {cf.plan_id} ({_planned(r)})"
            )
            if r.evidenced("conformance")
            else f"{ne}: no receipt to compare with plan {cf.plan_id}"
            if cf.checked
            else f"{ne}: no frozen plan",
        ),
        (
            "latency",
            na
            if (na := r.not_applicable("latency"))
            else f"{r.latency.samples_used} samples on {len(list(r.latency.servers()))} servers "
            f"in {len(r.latency.arms)} arm(s)"
            if r.evidenced("latency")
            else f"{ne}: no measured request with status ok",
        ),
        (
            "quality",
            f"{q.comparisons_passed}/{q.comparisons_total} comparisons pass, "
            f"{q.comparisons_failed} fail, {q.comparisons_unattested} unattested"
            # Comparisons with no value for any gated metric (a rerun's, before its
            # media are scored) are neither: say how many, or the counts do not add up.
            + (f", {q.ungated_comparisons} not scored" if q.ungated_comparisons else "")
            + f" ({len(q.gates)} gates)"
            if r.evidenced("quality")
            else r.not_applicable("quality") or ne,
        ),
        (
            "lifecycle",
            f"{lc.clean}/{lc.total} worker exits clean"
            if r.evidenced("lifecycle")
            else r.not_applicable("lifecycle") or ne,
        ),
        (
            "telemetry",
            f"{sum(x.samples for x in t.arms)} samples; "
            + "; ".join(
                f"peak HBM {p.baseline} → {p.candidate} {_signed(p.change_pct)} %"
                for p in t.pairs
                if p.change_pct is not None
            )
            if r.evidenced("telemetry")
            else r.not_applicable("telemetry") or ne,
        ),
    ]
    if r.serving_campaign:
        arms = sorted({p.arm for p in r.serving})
        points = sorted({p.load_point for p in r.serving})
        out.append(
            (
                "serving",
                f"{len(points)} load point(s) in {len(arms)} arm(s); "
                "throughput and p99 latency per point with -v",
            )
        )
    media = r.media_outcome()
    if r.media is not None and media is not None:
        m = r.media
        out.append(
            (
                "media",
                f"re-scored: {MediaVerdict.of(media)}; "
                f"{len(m.integrity_failures())} integrity failure(s), "
                f"{len(m.failures())} failure(s), {len(m.gaps())} gap(s)",
            )
        )
    if r.against is not None:
        rep = r.against.reproduced
        word = "could not be judged" if rep is None else "reproduced" if rep else "not reproduced"
        out.append(("rerun", f"effect {word} against the sealed bundle"))
    out.append(
        (
            "integrity",
            f"{i.members} members verified; signature {i.signature_status}",
        )
    )
    return tuple(out)


def _planned(r: ReplayResult) -> str:
    """What the plan was checked over: servers, or a serving campaign's load points."""
    if r.serving_campaign and not r.conformance.servers:
        return f"{len({p.load_point for p in r.serving})} load point(s) per arm"
    return f"{len(r.conformance.servers)} servers"


def _signed(value: Exact | None) -> str:
    if value is None:
        return "-"
    text = exact_text(value)
    return text if text.startswith("-") else f"+{text}"
