"""The human report as data: titled sections of lines and tables, headline first.

The terminal renderer (:mod:`replay.report.text`) draws these sections; the
Markdown and HTML reports (:mod:`replay.report.html`) draw their own richer model of
the same :class:`~replay.result.ReplayResult`, whose verdict neither recomputes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bundler._internal.textsafe import safe
from bundler._internal.timefmt import format_ns
from replay.engine.exact import Exact, display
from replay.report.fmt import exact_text, fixed_text, float_text
from replay.report.serving_fmt import count_text, figure_text, request_totals, serving_headline
from replay.report.words import shout
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE
from replay.sections.quality import PASS, UNATTESTED

__all__ = ["TextSection", "TextTable", "headline", "sections", "with_unit"]


@dataclass(frozen=True)
class TextTable:
    """A table: column headers and rows of cell text."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class TextSection:
    """A titled part of the report: lines and tables in order, then its evidence limits."""

    title: str
    blocks: tuple[str | TextTable, ...]
    limits: tuple[str, ...] = field(default=())


# What a "count" claim counts, by statistic: "26 requests", not "26 count".
_COUNT_NOUNS = {
    "requests_passed": "requests",
    "comparisons_passed": "comparisons",
    "worker_exits_clean": "worker exits",
}


def with_unit(value: str, unit: str, statistic: str = "") -> str:
    """A claimed value as people write it: no "1" unit, "3.77×", "26 requests", "396.30 s"."""
    if unit in ("1", ""):
        return value
    if unit == "count":
        noun = _COUNT_NOUNS.get(statistic, "")
        return f"{value} {noun}" if noun else value
    if unit == "x":
        return f"{value}×"
    return f"{value} {unit}"


def headline(r: ReplayResult) -> tuple[str, ...]:
    """The first lines of every report: outcome and what kind of check it is, then figures."""
    c = r.claims
    status = f"{r.outcome} (exit {r.exit_code}) — {'; '.join(r.checks_done())}"
    counts = (
        f"{c.count(CONFIRMED)} of {len(c.checks)} claims confirmed, "
        f"{c.count(CONTRADICTED)} contradicted, {c.count(UNVERIFIABLE)} unverifiable"
        if c.checks
        else "no claims stated: nothing to confirm"
    )
    lines = [status, f"  {counts}"]
    lines += [f"  ✗ {why}" for why in r.integrity_failures()]
    lines += [f"  ✗ {why}" for why in r.failures()]
    lines += [f"  ? {why}" for why in r.gaps()]
    if r.not_evidenced():
        lines.append(f"  - not evidenced: {', '.join(r.not_evidenced())}")
    trust = (
        f"signature verified by {', '.join(r.integrity.verified_by)}"
        if r.integrity.trusted
        else f"UNSIGNED/UNTRUSTED (signature {r.integrity.signature_status}; no trusted key)"
    )
    lines.append(f"bundle {safe(r.bundle)}: {trust}")
    for p in r.latency.pairs:
        lines.append(
            f"{p.baseline} {exact_text(_arm_mean(r, p.baseline))} s → {p.candidate} "
            f"{exact_text(_arm_mean(r, p.candidate))} s: {exact_text(p.percent_lower)} % lower, "
            f"{exact_text(p.speedup)}× inverse-latency speedup "
            f"(accepted attempt {r.accepted_attempt})"
        )
    lines += serving_headline(r)
    if r.serving_campaign and r.latency.samples_used == 0:
        lines.append(_serving_runs(r))
    else:
        lines.append(f"{r.latency.samples_used} measured samples; {_requests(r)}")
    facts = []
    q, lc = r.quality, r.lifecycle
    if r.evidenced("quality"):
        facts.append(f"comparisons {q.comparisons_passed}/{q.comparisons_total} pass")
    if r.evidenced("lifecycle"):
        facts.append(f"worker exits {lc.clean}/{lc.total} clean")
    facts += [
        f"peak HBM {'+' if (t.change_pct or 0) >= 0 else ''}{exact_text(t.change_pct)} %"
        for t in r.telemetry.pairs
        if t.change_pct is not None
    ]
    if facts:
        lines.append("; ".join(facts))
    return tuple(lines)


def _not_evidenced(title: str, what: str, r: ReplayResult, section: str) -> TextSection:
    return TextSection(title, (f"not evidenced: {what}",), r.limits(section))


def _arm_mean(r: ReplayResult, arm: str) -> Exact | None:
    a = r.latency.arm(arm)
    return a.mean_s if a else None


def _requests(r: ReplayResult) -> str:
    att = next(a for a in r.attempts.attempts if a.attempt_id == r.accepted_attempt)
    phases = ", ".join(f"{k} {v}" for k, v in sorted(att.receipts_by_phase.items()))
    return f"{att.receipts} requests ({phases})" if phases else f"{att.receipts} requests"


def _serving_runs(r: ReplayResult) -> str:
    """A serving campaign's requests: the benchmark tool's, not per-server receipts."""
    arms = sorted({p.arm for p in r.serving})
    points = sorted({p.load_point for p in r.serving})
    requests, completed, left_out = request_totals(r.serving)
    text = (
        f"{len(r.serving)} benchmark run(s): {len(points)} load point(s) × {len(arms)} arm(s), "
        f"{requests} requests recorded by the tool, {completed} completed"
    )
    if left_out:
        text += (
            f" (request counts not re-derivable for {left_out} run(s) without per-request "
            "success records)"
        )
    return text


def _not_applicable(title: str, r: ReplayResult, section: str) -> TextSection | None:
    why = r.not_applicable(section)
    # One line: a section that does not apply has no evidence whose limits need saying.
    return None if why is None else TextSection(title, (why,))


def _claims(r: ReplayResult) -> TextSection:
    if not r.claims.checks:
        blocks: tuple[str | TextTable, ...] = ("not evidenced: the bundle states no claim",)
        return TextSection("Claims", blocks, r.limits("claims"))
    rows = []
    notes: list[str] = []
    for c in r.claims.checks:
        rows.append(
            (
                c.status.upper() if c.status != CONFIRMED else c.status,
                c.claim_id,
                c.statistic,
                with_unit(c.claimed, c.unit, c.statistic),
                "-" if c.recomputed is None else c.recomputed,
                "-" if c.exact is None else c.exact,
            )
        )
        if c.status != CONFIRMED:
            notes.append(f"{c.claim_id} ({c.status}): {c.explanation}")
            if c.derivation:
                notes.append(f"    derivation: {c.derivation}")
    out: list[str | TextTable] = [
        TextTable(("status", "claim", "statistic", "claimed", "recomputed", "exact"), tuple(rows))
    ]
    out += notes
    if r.claims.not_claimed:
        out.append(
            TextTable(
                ("not claimed", "note"),
                tuple((safe(n.what), safe(n.note or "")) for n in r.claims.not_claimed),
            )
        )
    return TextSection("Claims", tuple(out), r.limits("claims"))


def _attempts(r: ReplayResult) -> TextSection:
    a = r.attempts
    rows = tuple(
        (
            x.attempt_id,
            x.status,
            ", ".join(f"{k} {v}" for k, v in sorted(x.receipts_by_phase.items())) or "0",
            str(x.worker_exits),
            str(x.telemetry),
            str(x.comparisons),
            str(x.entered_accepted) if x.attempt_id != a.accepted else "(accepted)",
        )
        for x in a.attempts
    )
    others = [x for x in a.attempts if x.attempt_id != a.accepted]
    proof = (
        f"Proof: {sum(x.entered_accepted for x in others)} request id(s) of the "
        f"{len(others)} other attempt(s) among the {a.accepted_request_ids} accepted ones; "
        f"{len(a.cross_attempt_comparisons)} accepted comparison(s) citing another attempt's "
        f"receipts; {sum(a.timed_in_other_window.values())} accepted receipt(s) timed inside "
        "another attempt's window and outside their own."
    )
    blocks: list[str | TextTable] = [
        TextTable(
            (
                "attempt",
                "status",
                "receipts",
                "exits",
                "telemetry",
                "comparisons",
                "rows in accepted",
            ),
            rows,
        ),
        *(f"{x.attempt_id} ({x.status}): {x.reason}" for x in a.attempts if x.reason),
        proof,
        "isolated: yes" if a.isolated else "isolated: NO",
    ]
    if a.cross_attempt_comparisons:
        blocks.append(
            "comparisons citing other attempts: " + ", ".join(a.cross_attempt_comparisons)
        )
    for other, n in a.timed_in_other_window.items():
        if n:
            blocks.append(f"{n} accepted receipt(s) timed inside attempt {other}'s window")
    return TextSection("Attempts", tuple(blocks), r.limits("attempts"))


def _conformance(r: ReplayResult) -> TextSection:
    c = r.conformance
    if not c.checked:
        return TextSection(
            "Plan conformance", ("not checked: " + "; ".join(c.warnings),), r.limits("conformance")
        )
    if c.empty:
        return _not_evidenced(
            "Plan conformance",
            f"plan {c.plan_path} (id {c.plan_id}) is in force, but attempt {c.attempt} has no "
            "warmup or measured receipt to compare with it",
            r,
            "conformance",
        )
    if r.serving_campaign and not c.servers:
        return _serving_conformance(r)
    rows = tuple(
        (
            str(i),
            s.server,
            s.arm,
            format_ns(s.first_start_ns),
            str(s.warmups),
            f"{s.measured} ({s.measured_ok} ok)",
            str(s.quality),
            str(s.outside_window),
        )
        for i, s in enumerate(c.servers, 1)
    )
    blocks: list[str | TextTable] = [
        f"plan {c.plan_path} (id {c.plan_id}): {c.warmups_per_server} warmups + "
        f"{c.measured_per_server} measured per server; order "
        f"{'/'.join(c.planned_order)}, observed {'/'.join(c.observed_order) or '-'}",
        TextTable(
            (
                "slot",
                "server",
                "arm",
                "first start",
                "warmups",
                "measured",
                "quality",
                "outside window",
            ),
            rows,
        ),
    ]
    if c.deviations:
        blocks.append(
            TextTable(
                ("deviation", "where", "what"),
                tuple((d.kind, d.where, d.message) for d in c.deviations),
            )
        )
    else:
        blocks.append("deviations: none")
    blocks += [f"warning: {w}" for w in c.warnings]
    return TextSection("Plan conformance", tuple(blocks), r.limits("conformance"))


def _serving_conformance(r: ReplayResult) -> TextSection:
    """A serving plan: load points checked against the tool's settings, no servers."""
    c = r.conformance
    points = sorted({p.load_point for p in r.serving})
    blocks: list[str | TextTable] = [
        f"plan {c.plan_path} (id {c.plan_id}): {len(points)} load point(s) per arm, "
        "compared with the benchmark tool's recorded settings",
        *(f"checked: {x}" for x in c.checked_items),
    ]
    if c.deviations:
        blocks.append(
            TextTable(
                ("deviation", "where", "what"),
                tuple((d.kind, d.where, d.message) for d in c.deviations),
            )
        )
    else:
        blocks.append("deviations: none")
    blocks += [f"warning: {w}" for w in c.warnings]
    return TextSection("Plan conformance", tuple(blocks), r.limits("conformance"))


def _latency(r: ReplayResult) -> TextSection:
    if (na := _not_applicable("Latency", r, "latency")) is not None:
        return na
    lat = r.latency
    servers = tuple(
        (
            s.arm,
            s.server,
            str(s.n),
            exact_text(s.mean_s),
            exact_text(s.sd_s),
            fixed_text(s.min_s),
            fixed_text(s.max_s),
        )
        for s in lat.servers()
    )
    arms = tuple(
        (
            a.arm,
            a.role,
            str(len(a.servers)),
            str(a.n_requests),
            exact_text(a.mean_s),
            exact_text(a.sd_server_means_s),
            exact_text(a.cv_server_means, 4),
            exact_text(a.sd_requests_s),
            exact_text(a.pooled_mean_s),
        )
        for a in lat.arms
    )
    blocks: list[str | TextTable] = [
        f"samples: measured requests with status ok of attempt {lat.attempt}: "
        f"{lat.samples_used}; left out: " + ", ".join(f"{k} {v}" for k, v in lat.excluded.items()),
        TextTable(("arm", "server", "n", "mean s", "sd s", "min s", "max s"), servers),
        TextTable(
            (
                "arm",
                "role",
                "servers",
                "requests",
                "mean of server means s",
                "SD across server means s",
                "CV",
                "SD across requests s (labelled apart)",
                "pooled mean s",
            ),
            arms,
        ),
        "The arm's SD is across server means (n − 1), not across individual requests: "
        "requests on one server are not independent trials.",
    ]
    for p in lat.pairs:
        blocks.append(
            f"{p.baseline} − {p.candidate}: {exact_text(p.difference_s)} s; "
            f"{exact_text(p.percent_lower)} % "
            f"lower; speedup {exact_text(p.speedup)}×"
        )
        if p.interval is not None:
            blocks.append(
                f"  {p.interval.level * 100:g} % t-interval: {p.interval.low_s:.2f} … "
                f"{p.interval.high_s:.2f} s"
            )
        blocks.append(f"  {p.interval_note}")
        blocks.append(f"  detectable difference: {p.detectable.statement}")
    return TextSection("Latency", tuple(blocks), r.limits("latency"))


def _lifecycle(r: ReplayResult) -> TextSection:
    lc = r.lifecycle
    if (na := _not_applicable("Lifecycle", r, "lifecycle")) is not None:
        return na
    if not r.evidenced("lifecycle"):
        return _not_evidenced("Lifecycle", "the bundle records no worker exit", r, "lifecycle")
    rows = tuple(
        (
            a.arm,
            str(a.total),
            str(a.clean),
            str(a.nonzero_code),
            str(a.signalled),
            str(a.killed),
            float_text(a.max_exit_s),
            f"{float_text(a.term_wait_s)} / {float_text(a.kill_wait_s)}",
            str(a.over_term_wait),
            str(a.over_kill_budget),
        )
        for a in lc.arms
    )
    blocks: list[str | TextTable] = [
        f"{lc.total} worker exits, {lc.clean} clean (exit code 0, no signal, within the "
        "plan's TERM wait for the arm); per server: "
        + ", ".join(f"{k} {v}" for k, v in lc.per_server.items()),
        TextTable(
            (
                "arm",
                "exits",
                "clean",
                "code≠0",
                "signal",
                "killed",
                "max exit s",
                "budget TERM/KILL s",
                "over TERM",
                "over TERM+KILL",
            ),
            rows,
        ),
    ]
    for u in lc.unclean:
        blocks.append(f"unclean: {u.server} {u.worker}: {'; '.join(u.reasons)}")
    if lc.unclean_total > len(lc.unclean):
        blocks.append(f"... and {lc.unclean_total - len(lc.unclean)} more unclean exits")
    return TextSection("Lifecycle", tuple(blocks), r.limits("lifecycle"))


def _telemetry(r: ReplayResult) -> TextSection:
    t = r.telemetry
    if (na := _not_applicable("Telemetry", r, "telemetry")) is not None:
        return na
    if not r.evidenced("telemetry"):
        return _not_evidenced("Telemetry", "the bundle records no telemetry sample", r, "telemetry")
    rows = tuple(
        (
            a.arm,
            str(a.servers),
            str(a.devices),
            str(a.samples),
            exact_text(a.mean_peak_mb),
            exact_text(a.max_peak_mb),
        )
        for a in t.arms
    )
    blocks: list[str | TextTable] = [
        f"sampled by {t.source or 'an unrecorded source'}; peak = largest hbm_used_mb per "
        "(server, device); arm = mean of its peaks",
        TextTable(("arm", "servers", "devices", "samples", "mean peak MB", "max peak MB"), rows),
    ]
    blocks += [
        f"{p.baseline} → {p.candidate}: mean sampled peak HBM change {exact_text(p.change_pct)} %"
        for p in t.pairs
        if p.change_pct is not None
    ]
    return TextSection("Telemetry", tuple(blocks), r.limits("telemetry"))


def _quality(r: ReplayResult) -> TextSection:
    q = r.quality
    if (na := _not_applicable("Quality", r, "quality")) is not None:
        return na
    if q.comparisons_total == 0 and not q.gates:
        return _not_evidenced(
            "Quality", "the bundle records no quality gate and no comparison", r, "quality"
        )
    rows = []
    for g in q.gates:
        c = g.closest
        rows.append(
            (
                g.gate.gate_id,
                f"{g.gate.metric} {g.gate.op} {g.gate.threshold:g}",
                g.gate.definition,
                f"{g.passed}/{g.checks}"
                + (f" ({g.failed} fail)" if g.failed else "")
                + (f" ({g.unattested} unattested)" if g.unattested else ""),
                "-" if c is None else f"{c.value:g} ({c.comparison_id})",
                "-" if c is None else display(c.margin),
                "CLOSE" if c is not None and c.close else "",
            )
        )
    blocks: list[str | TextTable] = [
        f"{q.comparisons_passed} of {q.comparisons_total} comparisons pass every gate whose "
        f"metric they record; {q.comparisons_failed} fail; {q.comparisons_unattested} "
        f"unattested; scorer identity {'recorded' if q.scorer_attested else 'ABSENT'}",
        TextTable(
            (
                "gate",
                "rule",
                "definition",
                "pass",
                "closest value",
                "margin",
                "flag",
            ),
            tuple(rows),
        ),
    ]
    bad = [c for c in q.checks if c.verdict != PASS]
    for c in bad[:50]:
        verdict = shout(c.verdict)
        blocks.append(
            f"{verdict}: {c.comparison_id} {c.metric} = {c.value:g} ({c.gate_id}, margin "
            f"{display(c.margin)})"
            + (
                " [the recorded value passes]"
                if c.verdict == UNATTESTED and c.passes_recorded
                else ""
            )
        )
    if len(bad) > 50:
        blocks.append(f"... and {len(bad) - 50} more")
    if q.ungated_comparisons:
        blocks.append(f"warning: {q.ungated_comparisons} comparison(s) record no gated metric")
    if q.never_evaluated:
        blocks.append("warning: gates never evaluated: " + ", ".join(q.never_evaluated))
    return TextSection("Quality", tuple(blocks), r.limits("quality"))


def _integrity(r: ReplayResult) -> TextSection:
    i = r.integrity
    blocks: list[str | TextTable] = [
        f"format {i.format_version}; {i.members} members verified against the signed "
        f"manifest; signature {i.signature_status}"
        + (f" by {', '.join(i.verified_by)}" if i.verified_by else ""),
    ]
    diffs = [
        f"{k} {i.environment.get(k)} at seal, {v} now"
        for k, v in i.environment_now.items()
        if i.environment.get(k) not in (None, v)
    ]
    if diffs:
        blocks.append("environment differs: " + "; ".join(diffs))
    return TextSection("Integrity", tuple(blocks), r.limits("integrity"))


def sections(r: ReplayResult) -> tuple[TextSection, ...]:
    """Every section of the human report, headline first."""
    return (
        TextSection("Replay", headline(r)),
        _claims(r),
        _attempts(r),
        _conformance(r),
        _latency(r),
        _lifecycle(r),
        _telemetry(r),
        _quality(r),
        *_serving(r),
        *_extras(r),
        _integrity(r),
    )


def _serving(r: ReplayResult) -> list[TextSection]:
    """Serving campaigns: throughput and p99 latencies per arm and load point, then changes."""
    if not r.serving_campaign:
        return []
    rows = tuple(
        (
            p.arm,
            p.load_point,
            count_text(p.requests),
            count_text(p.completed),
            figure_text(p.requests_per_s),
            figure_text(p.output_tokens_per_s),
            figure_text(p.ttft_p99_ms),
            figure_text(p.tpot_p99_ms),
            figure_text(p.e2el_p99_ms),
        )
        for p in r.serving
    )
    headers = (
        "arm",
        "load point",
        "requests",
        "completed",
        "requests/s",
        "output tok/s",
        "p99 TTFT ms",
        "p99 TPOT ms",
        "p99 E2EL ms",
    )
    blocks: list[str | TextTable] = [TextTable(headers, rows)]
    blocks += [x.strip() for x in serving_headline(r)]
    return [TextSection("Serving (latency against throughput)", tuple(blocks), r.limits("serving"))]


def _extras(r: ReplayResult) -> list[TextSection]:
    """The media re-score and the rerun comparison, in their own words (lines)."""
    out = []
    media = r.media_outcome()
    if r.media is not None and media is not None:
        # Lazy: the media package loads numpy and scipy, the comparison the replay front door.
        from replay.media import format_report

        lines = format_report(r.media, media).splitlines()
        out.append(TextSection("Media re-scored", tuple(lines), r.limits("media")))
    if r.against is not None:
        from replay.sections.against import format_comparison

        lines = format_comparison(r.against)
        out.append(TextSection("Rerun vs sealed", tuple(lines), r.limits("against")))
    return out
