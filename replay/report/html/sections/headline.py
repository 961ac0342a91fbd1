"""The headline: the one verdict, the key figures, and how the published figures were derived.

Every figure shown is the replay's (never recomputed here): the derivation
prints the server means, arm means, percent lower and speedup that
:mod:`replay.sections.latency` derived exactly, next to the status of the claim that
states each one.
"""

from __future__ import annotations

from dataclasses import replace

from replay.engine.exact import display
from replay.engine.verdicts import MediaVerdict
from replay.report.fmt import exact_text
from replay.report.html.facts import BundleFacts
from replay.report.html.sections.claim_notes import _claim, _claim_note
from replay.report.html.sections.common import (
    _OUTCOME_STYLE,
    NOT_EVIDENCED,
    _join_code,
    _pct,
)
from replay.report.html.view import (
    Block,
    Cell,
    KeyFigure,
    KeyFigures,
    Para,
    Rich,
    Section,
    Span,
    Steps,
    Table,
    cell,
    rich,
)
from replay.report.serving_fmt import (
    NOT_REDERIVABLE,
    change_text,
    figure_text,
    request_totals,
    serving_headline,
)
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE
from replay.serving.summary import ServingDelta

__all__ = ["headline_section"]


def _requests_line(r: ReplayResult, facts: BundleFacts) -> str:
    row = next(a for a in r.attempts.attempts if a.attempt_id == r.accepted_attempt)
    phases = ", ".join(f"{k} {v}" for k, v in sorted(row.receipts_by_phase.items()))
    ok = facts.status_by_attempt.get(r.accepted_attempt, {}).get("ok", 0)
    return (
        f"{row.receipts} requests" + (f" ({phases})" if phases else "") + f", {ok} with status ok"
    )


def _attempt_line(r: ReplayResult, facts: BundleFacts) -> str:
    if r.serving_campaign and r.latency.samples_used == 0:
        arms = sorted({p.arm for p in r.serving})
        points = sorted({p.load_point for p in r.serving})
        return (
            f"Accepted attempt {r.accepted_attempt}: {len(r.serving)} benchmark run(s), "
            f"{len(points)} load point(s) × {len(arms)} arm(s); the requests are the benchmark "
            "tool's records, not per-server receipts."
        )
    return (
        f"Accepted attempt {r.accepted_attempt}: {_requests_line(r, facts)}; "
        f"{r.latency.samples_used} latency samples (measured, status ok)."
    )


# ----------------------------------------------------------------------------- key figures


def _latency_figures(r: ReplayResult) -> list[KeyFigure]:
    items: list[KeyFigure] = []
    for p in r.latency.pairs:
        b, c = r.latency.arm(p.baseline), r.latency.arm(p.candidate)
        items.append(
            KeyFigure(
                f"{p.baseline} → {p.candidate}, mean of server means",
                f"{exact_text(b.mean_s if b else None)} → {exact_text(c.mean_s if c else None)} s",
            )
        )
        items.append(KeyFigure("lower latency", f"{exact_text(p.percent_lower)} %"))
        items.append(KeyFigure("inverse-latency speedup", f"{exact_text(p.speedup)}×"))
    return items


def _evidence_figures(r: ReplayResult, facts: BundleFacts) -> list[KeyFigure]:
    """Requests ok, quality comparisons passing, clean worker exits: each "of how many"."""
    items: list[KeyFigure] = []
    ok = facts.status_by_attempt.get(r.accepted_attempt, {}).get("ok", 0)
    row = next(a for a in r.attempts.attempts if a.attempt_id == r.accepted_attempt)
    items.append(
        KeyFigure(
            "requests with status ok",
            f"{ok} / {row.receipts}" if row.receipts else NOT_EVIDENCED,
            style=("good" if ok == row.receipts else "bad") if row.receipts else "",
        )
    )
    q = r.quality
    items.append(
        KeyFigure(
            "quality comparisons passing",
            f"{q.comparisons_passed} / {q.comparisons_total}"
            if r.evidenced("quality")
            else NOT_EVIDENCED,
            style=_ratio_style(q.comparisons_passed, q.comparisons_total)
            if r.evidenced("quality")
            else "",
        )
    )
    lc = r.lifecycle
    items.append(
        KeyFigure(
            "worker exits clean",
            f"{lc.clean} / {lc.total}" if r.evidenced("lifecycle") else NOT_EVIDENCED,
            style=_ratio_style(lc.clean, lc.total) if r.evidenced("lifecycle") else "",
        )
    )
    return items


def _optional_figures(r: ReplayResult) -> list[KeyFigure]:
    """The media re-score and the rerun comparison, when they were done."""
    items: list[KeyFigure] = []
    media = r.media_outcome()
    if media is not None:
        items.append(
            KeyFigure("media re-scored", str(MediaVerdict.of(media)), style=_OUTCOME_STYLE[media])
        )
    if r.against is not None:
        items.append(
            KeyFigure(
                "rerun reproduced the effect",
                "yes" if not r.against.failures() and not r.against.gaps() else "no",
                style="good" if not r.against.failures() and not r.against.gaps() else "bad",
            )
        )
    return items


def _serving_figures(r: ReplayResult) -> list[KeyFigure]:
    """A serving campaign's evidence: the requests the benchmark tool completed."""
    requests, completed, left_out = request_totals(r.serving)
    label = "requests completed (benchmark tool)"
    if left_out:
        label += f"; {left_out} run(s) without per-request records left out"
    return [
        KeyFigure(
            label,
            f"{completed} / {requests}" if requests else NOT_EVIDENCED,
            style=_ratio_style(completed, requests) if requests else "",
        )
    ]


def _serving_table(r: ReplayResult) -> list[Block]:
    """Per load point, baseline → candidate with the change, from the one serving result.

    One column per load point and one row per figure: a phone shows two or three load
    points side by side, each cell wrapping onto two lines.
    """
    out: list[Block] = []
    pairs = dict.fromkeys((c.baseline, c.candidate) for c in r.serving_changes)
    for b, c in pairs:
        changes = [x for x in r.serving_changes if (x.baseline, x.candidate) == (b, c)]
        rows = tuple(
            (
                cell(f"{m.label} ({m.unit})"),
                *(_delta_cell(x.deltas[k]) for x in changes),
            )
            for k, m in enumerate(changes[0].deltas)
        )
        out.append(
            Table(
                ("load point", *(x.load_point for x in changes)),
                rows,
                caption=f"Serving result, {b} → {c} (change)",
                table_id=f"serving-headline-{len(out) + 1}",
            )
        )
    if not out and r.serving_campaign:
        out.append(Para(rich(serving_headline(r)[0]), "warn"))
    return out


def _delta_cell(d: ServingDelta) -> Cell:
    if d.baseline is None and d.candidate is None:
        return cell(NOT_REDERIVABLE, "muted")
    style = "" if d.better is None else "good" if d.better else "bad"
    change = (
        rich(" (", Span(change_text(d.change_pct), style), ")") if d.change_pct is not None else ()
    )
    # Not a "num" cell: those never wrap, and a phone needs this one on two lines.
    return cell(rich(f"{figure_text(d.baseline)} → {figure_text(d.candidate)}", *change))


def _key_figures(r: ReplayResult, facts: BundleFacts) -> KeyFigures:
    if r.serving_campaign and r.latency.samples_used == 0:
        # The sections that do not apply (no receipts, gates or worker exits) show no card.
        evidence = [
            *_serving_figures(r),
            *(f for f in _evidence_figures(r, facts)[1:] if not _inapplicable(r, f)),
        ]
        return KeyFigures(tuple([*evidence, *_optional_figures(r)]))
    effect = _latency_figures(r)
    evidence = [*_evidence_figures(r, facts), *_optional_figures(r)]
    if effect and evidence:
        # The effect on one row, the evidence under it: no card is left to wrap alone.
        evidence[0] = replace(evidence[0], new_row=True)
    items = [*effect, *evidence]
    items += [
        KeyFigure(f"mean sampled peak HBM, {t.baseline} → {t.candidate}", _pct(t.change_pct))
        for t in r.telemetry.pairs
        if t.change_pct is not None
    ]
    return KeyFigures(tuple(items))


def _inapplicable(r: ReplayResult, f: KeyFigure) -> bool:
    section = {"quality comparisons passing": "quality", "worker exits clean": "lifecycle"}
    return r.not_applicable(section.get(f.label, "")) is not None


def _ratio_style(good: int, total: int) -> str:
    return "good" if good == total else "bad"


# ----------------------------------------------------------------------------- derivation


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
                        Span(f"{exact_text(s.mean_s)} s", "strong"),
                    )
                    + _claim_note(_claim(r, "server_mean_s", {"server": s.server, "arm": arm.arm}))
                )
        for arm in (b, c):
            if len(arm.servers) == 1:
                # "(1.79) / 1" would dress a single server up as an average of several.
                head = rich(
                    f"Arm mean of {arm.arm}: its one server's mean = ",
                    Span(f"{exact_text(arm.mean_s)} s", "strong"),
                    " (one server: no spread across servers can be measured)",
                )
            else:
                means = " + ".join(exact_text(m) for m in arm.server_means)
                head = rich(
                    f"Arm mean of {arm.arm}: mean of its {len(arm.servers)} server means, "
                    f"({means}) / {len(arm.servers)} = ",
                    Span(f"{exact_text(arm.mean_s)} s", "strong"),
                    " (not the mean of pooled requests: requests on one server are not "
                    "independent trials)",
                )
            steps.append(head + _claim_note(_claim(r, "arm_mean_s", {"arm": arm.arm})))
        pair = {"baseline": p.baseline, "candidate": p.candidate}
        steps.append(
            rich(
                f"Percent lower: (1 − {exact_text(c.mean_s)} / {exact_text(b.mean_s)}) × 100 = ",
                Span(f"{exact_text(p.percent_lower)} %", "strong"),
                f" (exact {display(p.percent_lower) if p.percent_lower is not None else '-'})",
            )
            + _claim_note(_claim(r, "percent_lower", pair))
        )
        steps.append(
            rich(
                f"Inverse-latency speedup: {exact_text(b.mean_s)} / {exact_text(c.mean_s)} = ",
                Span(f"{exact_text(p.speedup)}×", "strong"),
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


# ----------------------------------------------------------------------------- the section


def _verdict(r: ReplayResult, style: str) -> list[Block]:
    """The outcome badge, the claim counts, and every failure, gap and unevidenced section."""
    c = r.claims
    counts = (
        f"{c.count(CONFIRMED)} of {len(c.checks)} claims confirmed, "
        f"{c.count(CONTRADICTED)} contradicted, {c.count(UNVERIFIABLE)} unverifiable."
        if c.checks
        else "the bundle states no claim: nothing to confirm."
    )
    return [
        Para(
            # The badge, and right beside it, as large and as bold, what kind of check this
            # is: a confirmed re-derivation is not an independent reproduction.
            rich(
                Span(f"{r.outcome} (exit {r.exit_code})", f"badge {style}".strip()),
                Span(f" — {'; '.join(r.checks_done())}", "strong"),
            ),
            f"verdict {style}".strip(),
        ),
        Para(rich(counts)),
        *(Para(rich("✗ ", why), "bad") for why in r.integrity_failures()),
        *(Para(rich("✗ ", why), "bad") for why in r.failures()),
        *(Para(rich("? ", why), "warn") for why in r.gaps()),
        *(
            [Para(rich("Not evidenced: ", "; ".join(r.not_evidenced()), "."))]
            if r.not_evidenced()
            else []
        ),
    ]


def _signed_by(r: ReplayResult, facts: BundleFacts) -> Para:
    """Who signed the bundle, and which file (by SHA-256) this report describes."""
    if r.integrity.trusted:
        return Para(
            rich(
                "Signature verified by ",
                *_join_code(r.integrity.verified_by),
                f"; bundle {facts.file_name}, SHA-256 ",
                Span(facts.sha256, "code"),
                ".",
            )
        )
    return Para(
        rich(
            f"UNSIGNED/UNTRUSTED: signature {r.integrity.signature_status}; no trusted "
            f"key verified this bundle (--allow-unsigned). Bundle {facts.file_name}, "
            "SHA-256 ",
            Span(facts.sha256, "code"),
            ".",
        ),
        "bad",
    )


def _evidence_limits(r: ReplayResult) -> tuple[str, ...]:
    if r.serving_campaign and r.latency.samples_used == 0:
        return r.limits("serving")
    return r.limits("latency")


def headline_section(r: ReplayResult, facts: BundleFacts) -> Section:
    """The headline section: verdict, key figures, derivation, accepted attempt, signer."""
    style = _OUTCOME_STYLE[r.outcome]
    blocks: list[Block] = [
        *_verdict(r, style),
        _key_figures(r, facts),
        *_serving_table(r),
        *_derivation(r),
        Para(rich(_attempt_line(r, facts))),
        _signed_by(r, facts),
    ]
    return Section(
        "headline",
        "Headline",
        tuple(blocks),
        # The headline is as strong as the receipts (or a serving campaign's tool files)
        # under it and the claims it restates.
        tuple(dict.fromkeys((*_evidence_limits(r), *r.claims.limits[:1]))),
        # No second badge on the title: the verdict line below is the badge.
        summary=True,
    )
