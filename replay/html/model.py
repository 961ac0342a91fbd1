"""Turn a replay (plus what the bundle says beyond it) into the report's view model.

Input: a :class:`~replay.result.ReplayResult`, the :class:`BundleFacts` read
from the same opened bundle (signatures, manifest, the sources table, the
accepted attempt's individual requests), and optionally a media replay and a
rerun comparison in their JSON forms (``to_dict()``). Output: a
:class:`~replay.html.view.Report` both renderers draw.

Every figure shown is the replay's (never recomputed here): the headline's
derivation prints the server means, arm means, percent lower and speedup that
:mod:`replay.latency` derived exactly, next to the status of the claim that
states each one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from replay.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE, ClaimCheck
from replay.exact import Exact, display, round_half_even, to_double
from replay.html.charts import ArmPanel, ServerPoints, latency_chart
from replay.html.extras import media_section, rerun_section
from replay.html.view import (
    Block,
    Cell,
    Chart,
    KeyFigure,
    KeyFigures,
    Para,
    Report,
    Rich,
    Section,
    Span,
    Steps,
    Table,
    cell,
    rich,
)
from replay.quality import FAIL, PASS, UNATTESTED, GateCheck, GateSummary
from replay.result import ReplayResult

__all__ = [
    "MAX_ROWS",
    "BundleFacts",
    "ServerTrials",
    "SignatureRow",
    "build_model",
]

MAX_ROWS = 200
"""Longest table the report prints in full; longer ones show the rows that matter."""

_STATUS_STYLE = {CONFIRMED: "good", CONTRADICTED: "bad", UNVERIFIABLE: "warn"}


@dataclass(frozen=True)
class ServerTrials:
    """One server's warmup and measured requests of the accepted attempt, in ``seq`` order."""

    arm: str
    server: str
    warmups: tuple[float, ...]
    measured_ok: tuple[float, ...]
    measured_failed: tuple[float, ...]  # measured, status not ok, with a time
    untimed: int  # requests without an end-to-end time (not drawn)


@dataclass(frozen=True)
class SignatureRow:
    """One signature of the envelope and what checking it found."""

    index: int
    keyid_hint: str | None
    valid: bool
    verified_by: str | None


@dataclass(frozen=True)
class BundleFacts:
    """What the report shows beyond the replay result, read from the same opened bundle."""

    file_name: str
    sha256: str
    size: int
    signature_status: str
    signatures: tuple[SignatureRow, ...]
    environment: Mapping[str, str]
    scrubbed: tuple[Mapping[str, Any], ...]
    unscrubbed: tuple[Mapping[str, Any], ...]
    members: int
    external: tuple[Mapping[str, Any], ...]  # the manifest's external entries
    sources: tuple[Mapping[str, Any], ...]
    trials: tuple[ServerTrials, ...]  # accepted attempt, per (arm, server)
    status_by_attempt: Mapping[str, Mapping[str, int]]  # attempt -> status -> receipts
    samples_by_attempt: Mapping[str, int]  # attempt -> measured receipts with status ok


# ----------------------------------------------------------------------------- numbers


def _n(value: Exact | int | None, decimals: int = 2) -> str:
    return "-" if value is None else str(round_half_even(value, decimals))


def _f(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    return f"{value:g}"


def _margin(m: Fraction) -> str:
    """A margin as a signed decimal of at most 6 places (the exact value is a binary one)."""
    text = f"{float(m):+.6f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "-0", "+0") else text


def _bytes(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def _pct(value: Exact | None) -> str:
    if value is None:
        return "-"
    sign = "+" if to_double(value) >= 0 else ""
    return f"{sign}{_n(value)} %"


def _status_span(status: str) -> Span:
    return Span(status, _STATUS_STYLE.get(status, ""))


# ----------------------------------------------------------------------------- claims


def _claim(
    r: ReplayResult, statistic: str, params: Mapping[str, Any] | None = None
) -> ClaimCheck | None:
    """The claim of ``statistic`` on the accepted attempt whose params include ``params``."""
    for c in r.claims.checks:
        if c.statistic != statistic or c.attempt != r.accepted_attempt:
            continue
        if all(str(c.params.get(k)) == str(v) for k, v in (params or {}).items()):
            return c
    return None


def _claim_note(c: ClaimCheck | None) -> Rich:
    if c is None:
        return rich(" (no claim states this figure)")
    if c.status == CONFIRMED:
        return rich(" — claim ", Span(c.claim_id, "code"), " ", _status_span(c.status))
    out = rich(
        " — claim ",
        Span(c.claim_id, "code"),
        " ",
        _status_span(c.status),
        f": claimed {_with_unit(c.claimed, c.unit)}",
    )
    if c.recomputed is not None:
        out += rich(f", recomputed {c.recomputed}")
    return out


# ----------------------------------------------------------------------------- headline


def _requests_line(r: ReplayResult, facts: BundleFacts) -> str:
    row = next(a for a in r.attempts.attempts if a.attempt_id == r.accepted_attempt)
    phases = ", ".join(f"{k} {v}" for k, v in sorted(row.receipts_by_phase.items()))
    ok = facts.status_by_attempt.get(r.accepted_attempt, {}).get("ok", 0)
    return f"{row.receipts} requests ({phases}), {ok} with status ok"


def _key_figures(r: ReplayResult, facts: BundleFacts) -> KeyFigures:
    items: list[KeyFigure] = []
    for p in r.latency.pairs:
        b, c = r.latency.arm(p.baseline), r.latency.arm(p.candidate)
        items.append(
            KeyFigure(
                f"{p.baseline} → {p.candidate}, mean of server means",
                f"{_n(b.mean_s if b else None)} → {_n(c.mean_s if c else None)} s",
            )
        )
        items.append(KeyFigure("lower latency", f"{_n(p.percent_lower)} %"))
        items.append(KeyFigure("inverse-latency speedup", f"{_n(p.speedup)}×"))
    ok = facts.status_by_attempt.get(r.accepted_attempt, {}).get("ok", 0)
    row = next(a for a in r.attempts.attempts if a.attempt_id == r.accepted_attempt)
    items.append(
        KeyFigure(
            "requests with status ok",
            f"{ok} / {row.receipts}",
            style="good" if ok == row.receipts else "bad",
        )
    )
    q = r.quality
    items.append(
        KeyFigure(
            "quality comparisons passing",
            f"{q.comparisons_passed} / {q.comparisons_total}",
            style="good" if q.comparisons_passed == q.comparisons_total else "bad",
        )
    )
    lc = r.lifecycle
    items.append(
        KeyFigure(
            "worker exits clean",
            f"{lc.clean} / {lc.total}",
            style="good" if lc.clean == lc.total else "bad",
        )
    )
    items += [
        KeyFigure(f"mean sampled peak HBM, {t.baseline} → {t.candidate}", _pct(t.change_pct))
        for t in r.telemetry.pairs
        if t.change_pct is not None
    ]
    return KeyFigures(tuple(items))


def _derivation(r: ReplayResult) -> list[Block]:
    blocks: list[Block] = []
    for p in r.latency.pairs:
        b, c = r.latency.arm(p.baseline), r.latency.arm(p.candidate)
        if b is None or c is None or b.mean_s is None or c.mean_s is None:
            continue
        steps: list[Rich] = []
        for arm in (b, c):
            for s in arm.servers:
                steps.append(
                    rich(
                        f"Server mean of {s.server} (arm {arm.arm}): mean of its {s.n} measured "
                        f"requests with status ok = ",
                        Span(f"{_n(s.mean_s)} s", "strong"),
                    )
                    + _claim_note(_claim(r, "server_mean_s", {"server": s.server, "arm": arm.arm}))
                )
        for arm in (b, c):
            means = " + ".join(_n(m) for m in arm.server_means)
            steps.append(
                rich(
                    f"Arm mean of {arm.arm}: mean of its {len(arm.servers)} server means, "
                    f"({means}) / {len(arm.servers)} = ",
                    Span(f"{_n(arm.mean_s)} s", "strong"),
                    " (not the mean of pooled requests: requests on one server are not "
                    "independent trials)",
                )
                + _claim_note(_claim(r, "arm_mean_s", {"arm": arm.arm}))
            )
        pair = {"baseline": p.baseline, "candidate": p.candidate}
        steps.append(
            rich(
                f"Percent lower: (1 − {_n(c.mean_s)} / {_n(b.mean_s)}) × 100 = ",
                Span(f"{_n(p.percent_lower)} %", "strong"),
                f" (exact {display(p.percent_lower) if p.percent_lower is not None else '-'})",
            )
            + _claim_note(_claim(r, "percent_lower", pair))
        )
        steps.append(
            rich(
                f"Inverse-latency speedup: {_n(b.mean_s)} / {_n(c.mean_s)} = ",
                Span(f"{_n(p.speedup)}×", "strong"),
                f" (exact {display(p.speedup) if p.speedup is not None else '-'})",
            )
            + _claim_note(_claim(r, "speedup", pair))
        )
        blocks.append(
            Para(
                rich(
                    Span("Derivation", "strong"),
                    f" of {p.baseline} → {p.candidate}, from the measured requests with status "
                    f"ok of the accepted attempt {r.accepted_attempt} (exact arithmetic; each "
                    "figure rounded half to even only for display):",
                )
            )
        )
        blocks.append(Steps(tuple(steps)))
    return blocks


def _headline(r: ReplayResult, facts: BundleFacts) -> Section:
    c = r.claims
    style = {"CONFIRMED": "good", "CONTRADICTED": "bad"}.get(r.outcome, "warn")
    blocks: list[Block] = [
        Para(
            rich(
                Span(f"{r.outcome} (exit {r.exit_code})", style),
                f": {c.count(CONFIRMED)} of {len(c.checks)} claims confirmed, "
                f"{c.count(CONTRADICTED)} contradicted, {c.count(UNVERIFIABLE)} unverifiable.",
            ),
            style,
        ),
        *(Para(rich("✗ ", why), "bad") for why in r.failures()),
        *(Para(rich("? ", why), "warn") for why in r.gaps()),
        _key_figures(r, facts),
        *_derivation(r),
        Para(
            rich(
                f"Accepted attempt {r.accepted_attempt}: {_requests_line(r, facts)}; "
                f"{r.latency.samples_used} latency samples (measured, status ok)."
            )
        ),
    ]
    if r.integrity.trusted:
        blocks.append(
            Para(
                rich(
                    "Signature verified by ",
                    *_join_code(r.integrity.verified_by),
                    f"; bundle {facts.file_name}, SHA-256 ",
                    Span(facts.sha256, "code"),
                    ".",
                )
            )
        )
    else:
        blocks.append(
            Para(
                rich(
                    f"UNSIGNED/UNTRUSTED: signature {r.integrity.signature_status}; no trusted "
                    f"key verified this bundle (--allow-unsigned). Bundle {facts.file_name}, "
                    "SHA-256 ",
                    Span(facts.sha256, "code"),
                    ".",
                ),
                "bad",
            )
        )
    return Section(
        "headline",
        "Headline",
        tuple(blocks),
        # The headline is as strong as the receipts under it and the claims it restates.
        tuple(dict.fromkeys((*r.limits("latency"), *r.claims.limits[:1]))),
        r.outcome,
        style,
    )


def _join_code(items: Iterable[str]) -> list[str | Span]:
    out: list[str | Span] = []
    for i, x in enumerate(items):
        if i:
            out.append(", ")
        out.append(Span(x, "code"))
    return out


# ----------------------------------------------------------------------------- claims


def _claims(r: ReplayResult) -> Section:
    rows = []
    styles = []
    for c in r.claims.checks:
        params = ", ".join(f"{k}={v}" for k, v in sorted(c.params.items()))
        rows.append(
            (
                cell(_status_span(c.status)),
                cell(Span(c.claim_id, "code")),
                cell(c.statistic + (f" ({params})" if params else "")),
                cell(_with_unit(c.claimed, c.unit), num=True),
                cell("-" if c.recomputed is None else c.recomputed, num=True),
                cell("-" if c.exact is None else c.exact, num=True),
                cell(_claim_detail(c)),
            )
        )
        styles.append(_STATUS_STYLE.get(c.status, ""))
    cr = r.claims
    n_ok, n_bad, n_unk = cr.count(CONFIRMED), cr.count(CONTRADICTED), cr.count(UNVERIFIABLE)
    all_ok = n_ok == len(cr.checks) > 0
    return Section(
        "claims",
        "Claims",
        (
            Para(
                rich(
                    f"{n_ok} confirmed, {n_bad} contradicted (claimed and recomputed shown side "
                    f"by side), {n_unk} unverifiable (the reason says what is missing). Each value "
                    "is recomputed exactly and rounded half to even at the claim's precision."
                )
            ),
            Table(
                (
                    "status",
                    "claim",
                    "statistic",
                    "claimed",
                    "recomputed",
                    "exact",
                    "derivation and explanation",
                ),
                tuple(rows),
                row_styles=tuple(styles),
                table_id="claims-table",
            ),
        ),
        r.limits("claims"),
        "confirmed"
        if all_ok
        else "no claims"
        if not cr.checks
        else f"{n_bad} contradicted, {n_unk} unverifiable",
        "good" if all_ok else "bad" if n_bad else "warn",
    )


def _with_unit(value: str, unit: str) -> str:
    """A claimed value with its unit, as people write it (no "1" or "count" unit)."""
    if unit in ("1", "count", ""):
        return value
    if unit == "x":
        return f"{value}×"
    return f"{value} {unit}"


def _claim_detail(c: ClaimCheck) -> Rich:
    out: list[str | Span] = []
    if c.derivation:
        out.append(c.derivation)
    if c.explanation:
        out += ["; " if out else "", Span(c.explanation, _STATUS_STYLE.get(c.status, ""))]
    if c.text:
        out += [" — author's text: “", c.text, "”"]
    return rich(*out)


# ----------------------------------------------------------------------------- trials


def _server_order(r: ReplayResult, facts: BundleFacts) -> list[str]:
    """Servers in run order (the conformance slots), then any other, by name."""
    order = [s.server for s in r.conformance.servers]
    rest = sorted({t.server for t in facts.trials} - set(order))
    return order + rest


def _panels(r: ReplayResult, facts: BundleFacts) -> list[ArmPanel]:
    order = {s: i for i, s in enumerate(_server_order(r, facts))}
    means = {(s.arm, s.server): s.mean_s for s in r.latency.servers()}
    panels = []
    for arm in r.latency.arms:
        mine = sorted((t for t in facts.trials if t.arm == arm.arm), key=lambda t: order[t.server])
        points = []
        for t in mine:
            mean = means.get((arm.arm, t.server))
            points.append(
                ServerPoints(
                    server=t.server,
                    warmups=t.warmups,
                    measured_ok=t.measured_ok,
                    measured_failed=t.measured_failed,
                    mean_s=None if mean is None else to_double(mean),
                )
            )
        panels.append(
            ArmPanel(
                arm=arm.arm,
                role=arm.role,
                mean_s=None if arm.mean_s is None else to_double(arm.mean_s),
                servers=tuple(points),
            )
        )
    return panels


def _values(xs: Sequence[float], limit: int = 12) -> str:
    shown = ", ".join(_f(x) for x in xs[:limit])
    return shown + (f", … ({len(xs) - limit} more)" if len(xs) > limit else "") if xs else "-"


def _trials_table(panels: Sequence[ArmPanel]) -> Table:
    every = [(p, s) for p in panels for s in p.servers]
    rows = tuple(
        (
            cell(p.arm),
            cell(s.server),
            cell(_values(s.warmups), "muted", num=True),
            cell(_values(s.measured_ok), num=True),
            cell(_values(s.measured_failed), "bad" if s.measured_failed else "", num=True),
            cell(Span("-" if s.mean_s is None else f"{s.mean_s:.2f}", "strong"), num=True),
        )
        for p, s in every[:MAX_ROWS]
    )
    return Table(
        (
            "arm",
            "server",
            "warmups s (not samples)",
            "measured s (samples)",
            "measured, failed s",
            "server mean s",
        ),
        rows,
        caption="Every request of the accepted attempt, in seq order",
        omitted=f"{len(every) - MAX_ROWS} more servers not listed."
        if len(every) > MAX_ROWS
        else "",
        table_id="trials-table",
    )


def _trials(r: ReplayResult, facts: BundleFacts, charts: bool) -> Section:
    panels = _panels(r, facts)
    untimed = sum(t.untimed for t in facts.trials)
    blocks: list[Block] = []
    n_measured = sum(len(s.measured_ok) for p in panels for s in p.servers)
    n_warm = sum(len(s.warmups) for p in panels for s in p.servers)
    caption = rich(
        f"Each dot is one measured request with status ok ({n_measured}), each hollow "
        f"triangle a warmup ({n_warm}, never a sample), each cross a measured request that "
        "failed; the black bar is the server mean, the dashed line the arm mean (the mean of "
        "its server means). Servers in run order."
    )
    if not any(s.warmups or s.measured_ok or s.measured_failed for p in panels for s in p.servers):
        blocks.append(
            Para(
                rich(
                    f"The accepted attempt {r.accepted_attempt} has no timed warmup or measured "
                    "request: there is nothing to chart."
                ),
                "warn",
            )
        )
    elif charts:
        chart = latency_chart(panels)
        if not chart.individual:
            caption += rich(
                " With this many requests the marks are drawn as one embedded image (too many "
                "for one SVG element each); every request is still one dot."
            )
        blocks.append(
            Chart("latency", chart.svg, caption, "Repeated-trial chart", dict(chart.marks))
        )
    else:
        blocks.append(Chart("latency", None, caption, "Repeated-trial chart"))
    blocks.append(_trials_table(panels))
    if untimed:
        blocks.append(
            Para(rich(f"{untimed} request(s) without an end-to-end time not drawn."), "warn")
        )
    lat = r.latency
    arms = tuple(
        (
            cell(a.arm),
            cell(a.role),
            cell(str(len(a.servers)), num=True),
            cell(str(a.n_requests), num=True),
            cell(Span(_n(a.mean_s), "strong"), num=True),
            cell(_n(a.sd_server_means_s), num=True),
            cell(_n(a.cv_server_means, 4), num=True),
            cell(_n(a.sd_requests_s), "muted", num=True),
            cell(_n(a.pooled_mean_s), "muted", num=True),
        )
        for a in lat.arms
    )
    blocks.append(
        Table(
            (
                "arm",
                "role",
                "servers",
                "samples",
                "mean of server means s",
                "SD across server means s",
                "CV",
                "SD across requests s (for contrast)",
                "pooled mean s (for contrast)",
            ),
            arms,
            caption="Arm statistics",
            table_id="arms-table",
        )
    )
    blocks.append(
        Para(
            rich(
                f"Samples: measured requests with status ok of attempt {lat.attempt}: "
                f"{lat.samples_used}; left out: "
                + ", ".join(f"{k} {v}" for k, v in lat.excluded.items())
                + ". The arm's SD is across server means (n − 1), not across individual requests."
            )
        )
    )
    for p in lat.pairs:
        blocks.append(Para(rich(f"{p.baseline} − {p.candidate}: {p.interval_note}"), "note"))
    return Section("trials", "Repeated trials and latency", tuple(blocks), r.limits("latency"))


# ----------------------------------------------------------------------------- quality


def _check_cell(c: GateCheck, closest: bool, equality: bool) -> Cell:
    if equality:
        text = f"{_f(c.value)} ({'exact' if c.margin == 0 else 'off by ' + _margin(-c.margin)[1:]})"
    else:
        text = f"{_f(c.value)} ({_margin(c.margin)})"
    if c.verdict == FAIL:
        style = "bad"
    elif c.verdict == UNATTESTED:
        style = "warn"
    elif closest:
        style = "closest"
    elif c.close:
        style = "close"
    else:
        style = ""
    return cell(text, style, num=True)


def _gate_rule(g: GateSummary) -> str:
    return f"{g.gate.metric} {g.gate.op} {_f(g.gate.threshold)}"


def _quality_matrix(r: ReplayResult) -> Table:
    q = r.quality
    gates = [g for g in q.gates if g.checks]
    # An equality gate has no side to be close to: its "closest" is any exact match.
    closest = {
        (g.gate.gate_id, g.closest.comparison_id)
        for g in gates
        if g.closest is not None and g.gate.op != "=="
    }
    by: dict[str, dict[str, GateCheck]] = {}
    for c in q.checks:
        by.setdefault(c.comparison_id, {})[c.gate_id] = c
    ids = list(by)

    def interesting(cid: str) -> bool:
        return any(
            c.verdict != PASS or c.close or (c.gate_id, cid) in closest for c in by[cid].values()
        )

    shown = ids if len(ids) <= MAX_ROWS else [i for i in ids if interesting(i)][:MAX_ROWS]
    rows = []
    styles = []
    for cid in shown:
        cells = [cell(Span(cid, "code"))]
        for g in gates:
            check = by[cid].get(g.gate.gate_id)
            if check is None:
                cells.append(cell("-", "muted"))
            else:
                eq = g.gate.op == "=="
                cells.append(_check_cell(check, (g.gate.gate_id, cid) in closest, eq))
        rows.append(tuple(cells))
        verdicts = {x.verdict for x in by[cid].values()}
        styles.append("bad" if FAIL in verdicts else "warn" if UNATTESTED in verdicts else "")
    omitted = ""
    if len(shown) < len(ids):
        omitted = (
            f"{len(ids) - len(shown)} of {len(ids)} comparisons not shown: every check of each "
            "passes, none is within its gate's warning band, and none is a gate's closest."
        )
    return Table(
        ("comparison", *(f"{g.gate.gate_id}: {_gate_rule(g)}" for g in gates)),
        tuple(rows),
        caption="Each comparison's recorded value and its margin to each gate "
        "(value (margin); highlighted: each gate's closest; amber: within the warning band)",
        row_styles=tuple(styles),
        omitted=omitted,
        table_id="quality-matrix",
    )


def _quality(r: ReplayResult) -> Section:
    q = r.quality
    gate_rows = []
    gate_styles = []
    for g in q.gates:
        c = g.closest
        eq = g.gate.op == "=="
        flag = ""
        if g.failed:
            flag = "FAIL"
        elif g.unattested:
            flag = "unattested"
        elif c is not None and c.close:
            flag = "CLOSE"
        gate_rows.append(
            (
                cell(Span(g.gate.gate_id, "code")),
                cell(_gate_rule(g)),
                cell(g.gate.definition),
                cell(
                    f"{g.passed}/{g.checks}"
                    + (f", {g.failed} fail" if g.failed else "")
                    + (f", {g.unattested} unattested" if g.unattested else ""),
                    num=True,
                ),
                cell("-" if c is None else f"{_f(c.value)} ({c.comparison_id})", num=True),
                cell(
                    "-"
                    if c is None
                    else ("exact" if c.margin == 0 else "off")
                    if eq
                    else _margin(c.margin),
                    num=True,
                ),
                cell("-" if g.gate.warn_within is None else _f(g.gate.warn_within), num=True),
                cell(flag, "bad" if g.failed else "warn" if flag else ""),
            )
        )
        gate_styles.append(
            "bad" if g.failed else "warn" if g.unattested else "close" if flag else ""
        )
    close = sorted(
        (g for g in q.gates if g.closest is not None and g.closest.close and not g.failed),
        key=lambda g: (
            float(g.closest.margin) / (g.gate.warn_within or 1) if g.closest else 0,
            g.gate.gate_id,
        ),
    )
    blocks: list[Block] = [
        Para(
            rich(
                f"{q.comparisons_passed} of {q.comparisons_total} comparisons pass every gate "
                f"whose metric they record; {q.comparisons_failed} fail; "
                f"{q.comparisons_unattested} unattested. Scorer identity "
                + (
                    "recorded."
                    if q.scorer_attested
                    else "ABSENT: every LPIPS verdict is unattested."
                )
            ),
            "good" if q.comparisons_passed == q.comparisons_total else "bad",
        )
    ]
    if close:
        items = tuple(
            rich(
                Span(g.gate.metric, "strong"),
                f" {_f(g.closest.value)} against the gate {g.gate.op} {_f(g.gate.threshold)}: "
                f"margin {_margin(g.closest.margin)}, within the warning band of "
                f"{_f(g.gate.warn_within)} (comparison {g.closest.comparison_id})",
            )
            for g in close
            if g.closest is not None
        )
        blocks += [Para(rich(Span("Closest margins", "strong"), ":")), Steps(items, ordered=False)]
    blocks.append(
        Table(
            (
                "gate",
                "rule",
                "definition",
                "pass",
                "closest value (comparison)",
                "margin",
                "warn within",
                "flag",
            ),
            tuple(gate_rows),
            caption="Frozen gates, each with its closest check",
            row_styles=tuple(gate_styles),
            table_id="gates-table",
        )
    )
    blocks.append(_quality_matrix(r))
    if q.ungated_comparisons:
        blocks.append(
            Para(rich(f"{q.ungated_comparisons} comparison(s) record no gated metric."), "warn")
        )
    if q.never_evaluated:
        blocks.append(Para(rich("Gates never evaluated: ", *_join_code(q.never_evaluated)), "warn"))
    ok = not q.comparisons_failed and not q.comparisons_unattested
    return Section(
        "quality",
        "Quality gates",
        tuple(blocks),
        r.limits("quality"),
        f"{q.comparisons_passed}/{q.comparisons_total} pass",
        "good" if ok else "bad" if q.comparisons_failed else "warn",
    )


# ----------------------------------------------------------------------------- sources


_SOURCE_LIMITS = (
    "Sources are the author's attribution: origin, adoption and evidence are as sealed, not "
    "checked against the upstream projects. Only the adopted profile's effect is re-derived "
    "here (the claims); an effect_pct of a source not adopted (a pilot) comes from other "
    "evidence, which this bundle does not hold.",
)


def _sources(r: ReplayResult, facts: BundleFacts) -> Section:
    rows = []
    styles = []
    for s in facts.sources:
        adopted = s.get("adopted")
        effect = s.get("effect_pct")
        rows.append(
            (
                cell(Span(str(s.get("source_id", "")), "code")),
                cell(str(s.get("optimization", ""))),
                cell(str(s.get("origin", ""))),
                cell("adopted" if adopted else "not adopted", "good" if adopted else "muted"),
                cell(str(s.get("evidence", ""))),
                cell(str(s.get("evidence_limit", ""))),
                cell(
                    "-" if not isinstance(effect, int | float) else f"{_f(float(effect))} % lower",
                    num=True,
                ),
            )
        )
        styles.append("" if adopted else "muted")
    adopted_n = sum(1 for s in facts.sources if s.get("adopted"))
    blocks: list[Block] = [
        Para(
            rich(
                f"{len(facts.sources)} source(s): {adopted_n} adopted in the measured profile, "
                f"{len(facts.sources) - adopted_n} not adopted (cited, or piloted without being "
                "enabled)."
            )
        ),
        Table(
            (
                "source",
                "optimization",
                "origin",
                "adopted",
                "evidence",
                "evidence limit",
                "effect",
            ),
            tuple(rows),
            caption="Source and benefit",
            row_styles=tuple(styles),
            table_id="sources-table",
        ),
    ]
    if not facts.sources:
        blocks = [Para(rich("The bundle has no sources table rows."), "warn")]
    return Section("sources", "Sources and benefit", tuple(blocks), _SOURCE_LIMITS)


# ----------------------------------------------------------------------------- attempts


def _attempts(r: ReplayResult, facts: BundleFacts) -> Section:
    a = r.attempts
    rows = []
    styles = []
    for x in a.attempts:
        statuses = facts.status_by_attempt.get(x.attempt_id, {})
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "0"
        rows.append(
            (
                cell(Span(x.attempt_id, "code")),
                cell(
                    x.status,
                    {"accepted": "good", "interrupted": "warn", "rejected": "bad"}.get(
                        x.status, ""
                    ),
                ),
                cell(x.reason or "-"),
                cell(", ".join(f"{k} {v}" for k, v in sorted(x.receipts_by_phase.items())) or "0"),
                cell(by_status),
                cell(str(facts.samples_by_attempt.get(x.attempt_id, 0)), num=True),
                cell(str(x.worker_exits), num=True),
                cell(str(x.comparisons), num=True),
                cell(
                    "(accepted)" if x.attempt_id == a.accepted else str(x.entered_accepted),
                    "" if x.attempt_id == a.accepted or not x.entered_accepted else "bad",
                    num=True,
                ),
            )
        )
        styles.append("" if x.attempt_id == a.accepted else "muted")
    others = [x for x in a.attempts if x.attempt_id != a.accepted]
    proof = (
        f"{sum(x.entered_accepted for x in others)} request id(s) of the {len(others)} other "
        f"attempt(s) among the {a.accepted_request_ids} accepted ones; "
        f"{len(a.cross_attempt_comparisons)} accepted comparison(s) citing another attempt's "
        f"receipts; {sum(a.timed_in_other_window.values())} accepted receipt(s) timed inside "
        "another attempt's window and outside their own."
    )
    counts = Counter(x.status for x in a.attempts)
    blocks: list[Block] = [
        Para(
            rich(
                f"{len(a.attempts)} attempt(s): "
                + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                + f". Only {a.accepted}'s rows enter the statistics; the others are retained "
                "and listed, never mixed."
            )
        ),
        Table(
            (
                "attempt",
                "status",
                "reason",
                "receipts by phase",
                "receipts by status",
                "latency samples",
                "worker exits",
                "comparisons",
                "rows in accepted",
            ),
            tuple(rows),
            caption="Every attempt, accepted or not",
            row_styles=tuple(styles),
            table_id="attempts-table",
        ),
        Para(
            rich(("Isolated: " if a.isolated else "NOT isolated: ") + proof),
            "good" if a.isolated else "bad",
        ),
    ]
    if a.cross_attempt_comparisons:
        blocks.append(
            Para(
                rich(
                    "Comparisons citing other attempts: ", *_join_code(a.cross_attempt_comparisons)
                ),
                "bad",
            )
        )
    return Section(
        "attempts",
        "Attempts",
        tuple(blocks),
        r.limits("attempts"),
        "isolated" if a.isolated else "MIXED",
        "good" if a.isolated else "bad",
    )


# ----------------------------------------------------------------------------- conformance


def _conformance(r: ReplayResult) -> Section:
    c = r.conformance
    if not c.checked:
        return Section(
            "conformance",
            "Plan conformance",
            (Para(rich("Not checked: " + "; ".join(c.warnings)), "warn"),),
            r.limits("conformance"),
            "not checked",
            "warn",
        )
    rows = tuple(
        (
            cell(str(i), num=True),
            cell(s.server),
            cell(s.arm),
            cell(str(s.warmups), num=True),
            cell(f"{s.measured} ({s.measured_ok} ok)", num=True),
            cell(str(s.quality), num=True),
            cell(str(s.outside_window), "bad" if s.outside_window else "", num=True),
        )
        for i, s in enumerate(c.servers, 1)
    )
    blocks: list[Block] = [
        Para(
            rich(
                "Plan ",
                Span(str(c.plan_path), "code"),
                f" (id {c.plan_id}): {c.warmups_per_server} warmups and {c.measured_per_server} "
                f"measured requests per server; planned order {'/'.join(c.planned_order)}, "
                f"observed {'/'.join(c.observed_order) or '-'}.",
            )
        ),
        Table(
            ("slot", "server", "arm", "warmups", "measured", "quality", "outside window"),
            rows,
            caption="Servers in run order",
            table_id="conformance-table",
        ),
    ]
    if c.deviations:
        blocks.append(
            Table(
                ("deviation", "where", "what"),
                tuple((cell(d.kind), cell(d.where), cell(d.message)) for d in c.deviations),
                caption="Deviations from the frozen plan",
                row_styles=tuple("bad" for _ in c.deviations),
            )
        )
    else:
        blocks.append(Para(rich("No deviation from the frozen plan."), "good"))
    blocks += [Para(rich("Warning: " + w), "warn") for w in c.warnings]
    return Section(
        "conformance",
        "Plan conformance",
        tuple(blocks),
        r.limits("conformance"),
        "conforms" if c.ok else f"{len(c.deviations)} deviation(s)",
        "good" if c.ok else "bad",
    )


# ----------------------------------------------------------------------------- lifecycle


def _lifecycle(r: ReplayResult) -> Section:
    lc = r.lifecycle
    rows = tuple(
        (
            cell(a.arm),
            cell(str(a.total), num=True),
            cell(str(a.clean), "good" if a.clean == a.total else "bad", num=True),
            cell(str(a.nonzero_code), num=True),
            cell(str(a.signalled), num=True),
            cell(str(a.killed), num=True),
            cell(_f(a.max_exit_s), num=True),
            cell(f"{_f(a.term_wait_s)} / {_f(a.kill_wait_s)}", num=True),
            cell(str(a.over_term_wait), "bad" if a.over_term_wait else "", num=True),
        )
        for a in lc.arms
    )
    blocks: list[Block] = [
        Para(
            rich(
                f"{lc.total} worker exits, {lc.clean} clean (exit code 0, no signal, within the "
                "plan's TERM wait for the arm). Per server: "
                + ", ".join(f"{k} {v}" for k, v in lc.per_server.items())
                + "."
            ),
            "good" if lc.clean == lc.total else "bad",
        ),
        Table(
            (
                "arm",
                "exits",
                "clean",
                "exit code ≠ 0",
                "signalled",
                "killed",
                "slowest exit s",
                "budget TERM / KILL s",
                "over TERM wait",
            ),
            rows,
            caption="Worker exits at teardown, per arm, against the plan's budgets",
            table_id="lifecycle-table",
        ),
    ]
    if lc.unclean:
        blocks.append(
            Table(
                ("arm", "server", "worker", "exit code", "signal", "exit s", "why"),
                tuple(
                    (
                        cell(u.arm),
                        cell(u.server),
                        cell(u.worker),
                        cell("-" if u.exit_code is None else str(u.exit_code), num=True),
                        cell(u.signal or "-"),
                        cell(_f(u.exit_s), num=True),
                        cell("; ".join(u.reasons)),
                    )
                    for u in lc.unclean
                ),
                caption="Unclean exits",
                row_styles=tuple("bad" for _ in lc.unclean),
                omitted=f"{lc.unclean_total - len(lc.unclean)} more unclean exits not listed."
                if lc.unclean_total > len(lc.unclean)
                else "",
            )
        )
    if lc.missing_budgets:
        blocks.append(
            Para(
                rich("No teardown budget in the plan for arm(s): " + ", ".join(lc.missing_budgets)),
                "warn",
            )
        )
    return Section(
        "lifecycle",
        "Lifecycle: worker exits",
        tuple(blocks),
        r.limits("lifecycle"),
        f"{lc.clean}/{lc.total} clean",
        "good" if lc.clean == lc.total else "bad",
    )


# ----------------------------------------------------------------------------- telemetry


def _telemetry(r: ReplayResult) -> Section:
    t = r.telemetry
    rows = tuple(
        (
            cell(a.arm),
            cell(str(a.servers), num=True),
            cell(str(a.devices), num=True),
            cell(str(a.samples), num=True),
            cell(Span(_n(a.mean_peak_mb), "strong"), num=True),
            cell(_n(a.max_peak_mb), num=True),
        )
        for a in t.arms
    )
    blocks: list[Block] = [
        Para(
            rich(
                f"Sampled by {t.source or 'an unrecorded source'}"
                + (f" every {_f(t.interval_s)} s" if t.interval_s else "")
                + "; a device's peak is the largest sampled HBM use; an arm's figure is the mean "
                "of its (server, device) peaks."
            )
        ),
        Table(
            ("arm", "servers", "devices", "samples", "mean peak MB", "max peak MB"),
            rows,
            caption="Sampled peak HBM per arm",
            table_id="telemetry-table",
        ),
    ]
    for p in t.pairs:
        blocks.append(
            Para(
                rich(
                    f"{p.baseline} → {p.candidate}: mean sampled peak HBM ",
                    Span(_pct(p.change_pct), "strong"),
                )
                + _claim_note(
                    _claim(
                        r,
                        "hbm_peak_mean_change_pct",
                        {"baseline": p.baseline, "candidate": p.candidate},
                    )
                )
            )
        )
    peaks = t.peaks[:MAX_ROWS]
    if peaks:
        blocks.append(
            Table(
                ("arm", "server", "device", "peak MB", "samples"),
                tuple(
                    (
                        cell(p.arm),
                        cell(p.server),
                        cell(p.device),
                        cell(_n(p.peak_mb), num=True),
                        cell(str(p.samples), num=True),
                    )
                    for p in peaks
                ),
                caption="Peak per (server, device)",
                omitted=f"{len(t.peaks) - len(peaks)} more devices not listed."
                if len(t.peaks) > len(peaks)
                else "",
                detail=True,
                table_id="peaks-table",
            )
        )
    return Section("telemetry", "Telemetry: peak HBM", tuple(blocks), r.limits("telemetry"))


# ----------------------------------------------------------------------------- scorer


def _scorer(r: ReplayResult, facts: BundleFacts, media: Mapping[str, Any] | None) -> Section:
    s = r.quality.scorer
    external = {str(e.get("sha256")): e for e in facts.external}
    limits = [
        "The scorer identity is what the author recorded (scorer.json): the weights' SHA-256 "
        "and sizes. Statistical replay does not load or hash the weights; a media replay with "
        "--scorer-weights does.",
    ]
    if s is None:
        return Section(
            "scorer",
            "Scorer identity",
            (
                Para(
                    rich(
                        "ABSENT: the bundle records no scorer identity (scorer.json). Every "
                        "verdict that depends on a learned scorer (LPIPS) is unattested, never "
                        "PASS."
                    ),
                    "bad",
                ),
            ),
            tuple(limits),
            "absent",
            "bad",
        )
    raw = s.get("weights")
    weights: list[Mapping[str, Any]] = (
        [w for w in raw if isinstance(w, Mapping)] if isinstance(raw, list) else []
    )
    rows = []
    for w in weights:
        ext = external.get(str(w.get("sha256")))
        rows.append(
            (
                cell(str(w.get("role", ""))),
                cell(Span(str(w.get("file", "")), "code")),
                cell(Span(str(w.get("sha256", "")), "code")),
                cell(_bytes(w.get("bytes")), num=True),
                cell(
                    str(ext.get("availability")) if ext else "not listed among external artifacts",
                    "" if ext else "warn",
                ),
            )
        )
    blocks: list[Block] = [
        Para(
            rich(
                "Scorer ",
                Span(f"{s.get('name')} {s.get('version')}", "strong"),
                f", network {s.get('net', '-')}, identified by the SHA-256 of "
                f"{len(weights)} weight file(s).",
            )
        ),
        Table(
            ("role", "file", "SHA-256", "bytes", "availability"),
            tuple(rows),
            caption="Weights of the scorer",
            table_id="scorer-table",
        ),
    ]
    status, style = "recorded", "good"
    if media is not None and isinstance(media.get("scorer"), Mapping):
        ms = media["scorer"]
        status = str(ms.get("status", "?"))
        style = "good" if status == "attested" else "warn"
        blocks.append(
            Para(
                rich(f"Media replay: scorer {status}. ", str(ms.get("reason", ""))),
                style,
            )
        )
    return Section("scorer", "Scorer identity", tuple(blocks), tuple(limits), status, style)


# ----------------------------------------------------------------------------- signatures


def _signatures(r: ReplayResult, facts: BundleFacts) -> Section:
    i = r.integrity
    rows = tuple(
        (
            cell(str(s.index), num=True),
            cell(Span(s.keyid_hint or "-", "code")),
            cell("valid" if s.valid else "not verified", "good" if s.valid else "warn"),
            cell(Span(s.verified_by, "code") if s.verified_by else "no trusted key given for it"),
        )
        for s in facts.signatures
    )
    env_rows = tuple(
        (
            cell(k),
            cell(str(facts.environment.get(k, "-"))),
            cell(
                i.environment_now.get(k, "-"),
                "warn"
                if k in i.environment_now
                and facts.environment.get(k) not in (None, i.environment_now[k])
                else "",
            ),
        )
        for k in sorted(facts.environment)
    )
    by_rule = Counter[str]()
    for row in facts.scrubbed:
        by_rule[str(row.get("rule"))] += int(row.get("count", 0) or 0)
    trusted = i.trusted
    blocks: list[Block] = [
        Para(
            rich(
                f"Signature {i.signature_status}" + (" by " if i.verified_by else "") + "",
                *_join_code(i.verified_by),
                f". Format {i.format_version}; {i.members} members, each matching its SHA-256 "
                f"in the signed manifest; {i.external} external artifact(s) bound by hash in the "
                "signed statement.",
            ),
            "good" if trusted else "bad",
        ),
        Table(
            ("#", "key id (as the envelope names it)", "signature", "verified by trusted key"),
            rows,
            caption="Signatures and signers",
            table_id="signatures-table",
        ),
        Para(
            rich(
                "The key id an envelope names is a hint anyone can write; a signer is established "
                "only by a valid signature under a key the reader trusts (--key / --trusted-keys)."
            ),
            "note",
        ),
        Table(
            ("component", "at seal", "this replay"),
            env_rows,
            caption="Environment",
            detail=True,
            table_id="environment-table",
        ),
    ]
    if by_rule:
        blocks.append(
            Para(
                rich(
                    f"Sanitized at seal: {sum(by_rule.values())} value(s) scrubbed ("
                    + ", ".join(f"{k} {v}" for k, v in sorted(by_rule.items()))
                    + f"); {len(facts.unscrubbed)} finding(s) left unscrubbed in carried files."
                )
            )
        )
    return Section(
        "signatures",
        "Signatures and integrity",
        tuple(blocks),
        r.limits("integrity"),
        i.signature_status,
        "good" if trusted else "bad",
    )


# ----------------------------------------------------------------------------- artifacts


def _media_locations(media: Mapping[str, Any] | None) -> dict[str, str]:
    """sha256 -> what the media replay found for that file."""
    out: dict[str, str] = {}
    if media is None:
        return out
    for c in media.get("comparisons") or []:
        if not isinstance(c, Mapping):
            continue
        for role in ("baseline", "candidate"):
            arm = c.get(role)
            if not isinstance(arm, Mapping):
                continue
            loc = arm.get("location")
            sha = arm.get("sha256")
            if isinstance(loc, Mapping) and sha:
                out[str(sha)] = str(loc.get("status", "?"))
    return out


def _artifacts(facts: BundleFacts, media: Mapping[str, Any] | None) -> Section:
    found = _media_locations(media)
    ext = list(facts.external)
    rows = []
    for e in ext[:MAX_ROWS]:
        seen = found.get(str(e.get("sha256")))
        rows.append(
            (
                cell(Span(str(e.get("path", "")), "code")),
                cell(str(e.get("kind", ""))),
                cell(_bytes(e.get("bytes")), num=True),
                cell(Span(str(e.get("sha256", "")), "code")),
                cell(str(e.get("availability", ""))),
                cell(
                    f"media replay: {seen}" if seen else "external: not looked for",
                    "good"
                    if seen in ("ok", "verified")
                    else "bad"
                    if seen == "mismatch"
                    else "muted",
                ),
            )
        )
    kinds = Counter(str(e.get("kind")) for e in ext)
    avail = Counter(str(e.get("availability")) for e in ext)
    blocks: list[Block] = [
        Para(
            rich(
                f"{len(ext)} external artifact(s) ("
                + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                + "): known by SHA-256 and size, bound by the signature, never inside the "
                "bundle. An absent external artifact is its normal state, not a missing file."
            )
        )
    ]
    if avail:
        blocks.append(
            Table(
                ("availability", "artifacts"),
                tuple((cell(k), cell(str(v), num=True)) for k, v in sorted(avail.items())),
                caption="Availability, as the author states it",
                table_id="availability-table",
            )
        )
    if ext:
        blocks.append(
            Table(
                ("path", "kind", "bytes", "SHA-256", "availability", "checked by this report"),
                tuple(rows),
                caption="Every external artifact",
                omitted=f"{len(ext) - len(rows)} more not listed." if len(ext) > len(rows) else "",
                detail=True,
                table_id="artifacts-table",
            )
        )
    limits = (
        "External artifacts are bound by hash only; this report does not read them. "
        "bundle verify --media DIR hashes the ones at hand; a media replay decodes and "
        "re-scores them.",
    )
    return Section("artifacts", "External artifacts", tuple(blocks), limits)


# ----------------------------------------------------------------------------- not claimed


def _not_claimed(r: ReplayResult) -> Section:
    nc = r.claims.not_claimed
    blocks: list[Block]
    if nc:
        blocks = [
            Para(rich("The author explicitly does not claim:")),
            Table(
                ("not claimed", "why"),
                tuple((cell(Span(n.what, "strong")), cell(n.note or "-")) for n in nc),
                table_id="not-claimed-table",
            ),
        ]
    else:
        blocks = [Para(rich("The bundle lists nothing as explicitly not claimed."), "warn")]
    limits = (
        "Replay never invents claims: only the claims table is checked. A figure that is "
        "neither claimed nor listed here is simply not asserted by this bundle.",
    )
    return Section("not-claimed", "What is not claimed", tuple(blocks), limits)


# ----------------------------------------------------------------------------- the report


def build_model(
    result: ReplayResult,
    facts: BundleFacts,
    *,
    media: Mapping[str, Any] | None = None,
    rerun: Mapping[str, Any] | None = None,
    charts: bool = True,
    generator: str = "reprobundle",
) -> Report:
    """The report's view model.

    Args:
        result: the replay of the bundle.
        facts: what else the report shows, read from the same opened bundle.
        media: a media replay's JSON form (``MediaReplayResult.to_dict()``), if one was done.
        rerun: a rerun comparison's JSON form (``RerunComparison.to_dict()``), if one was done.
        charts: draw the SVG charts (needs matplotlib); False for the Markdown form.
        generator: the "generated by" line (no date: the output must be reproducible).

    Raises:
        CouldNotRunError: ``charts`` and matplotlib is missing.
    """
    camp = result.campaign
    comparison_ids = {c.comparison_id for c in result.quality.checks}
    sections = [
        _headline(result, facts),
        _trials(result, facts, charts),
        _quality(result),
        _claims(result),
        _sources(result, facts),
        _attempts(result, facts),
        _conformance(result),
        _lifecycle(result),
        _telemetry(result),
        _scorer(result, facts, media),
        _signatures(result, facts),
        _artifacts(facts, media),
        _not_claimed(result),
    ]
    if media is not None:
        sections.append(media_section(media, comparison_ids))
    if rerun is not None:
        sections.append(rerun_section(rerun, str(camp.get("id"))))
    return Report(
        title=f"Replay report: {camp.get('title') or camp.get('id')}",
        subtitle=f"campaign {camp.get('id')} ({camp.get('kind')}), bundle {facts.file_name}",
        outcome=result.outcome,
        exit_code=result.exit_code,
        sections=tuple(sections),
        generator=generator,
    )
