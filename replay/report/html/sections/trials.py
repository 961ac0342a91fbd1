"""The repeated-trials section: every request of the accepted attempt, charted and tabled.

Warmups are drawn but are never samples; a server's mean is over its measured
requests with status ok, and an arm's mean is the mean of its server means
(requests on one server are not independent trials). The figures are
:mod:`replay.sections.latency`'s; the chart is :mod:`replay.report.html.charts`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.engine.exact import is_negative, to_double
from replay.report.fmt import exact_text, float_text
from replay.report.html.charts.distribution import distribution_chart
from replay.report.html.charts.latency import latency_chart
from replay.report.html.charts.marks import ArmPanel, Effect, ServerPoints
from replay.report.html.charts.svg import undrawable
from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import MAX_ROWS, not_applicable
from replay.report.html.view import Block, Chart, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.latency import LatencyResult

__all__ = ["trials_section"]


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
    shown = ", ".join(float_text(x) for x in xs[:limit])
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


def _effects(r: ReplayResult) -> list[Effect]:
    """The change of each pair, worded from the replay's own figures (never recomputed)."""
    out = []
    for p in r.latency.pairs:
        if p.percent_lower is None or p.speedup is None:
            continue
        # The sign from the exact value: a valid but absurd one may be beyond a double.
        lower = p.percent_lower
        sign = "+" if is_negative(lower) or lower == 0 else "−"
        label = f"{sign}{exact_text(abs(p.percent_lower))} %  ·  {exact_text(p.speedup)}×"
        out.append(Effect(p.baseline, p.candidate, label))
    return out


def _chart(r: ReplayResult, panels: Sequence[ArmPanel], charts: bool) -> list[Block]:
    """The repeated-trial chart and the per-request distribution, or why there are none."""
    n_measured = sum(len(s.measured_ok) for p in panels for s in p.servers)
    n_warm = sum(len(s.warmups) for p in panels for s in p.servers)
    caption = rich(
        f"All arms on one latency axis starting at zero. Each dot is one measured request "
        f"with status ok ({n_measured}), each cross a measured request that failed; the black "
        "bar is the server mean, the dashed line the arm mean (the mean of its server means); "
        "the arrow is the change the replay derived"
        + "".join(f" ({e.baseline} → {e.candidate}: {e.label})" for e in _effects(r))
        + ". Servers grouped by arm, in run order within each arm. The warmups "
        f"({n_warm}, never samples) are on a small axis of their own scale (to the right; "
        "below it on a phone)."
    )
    if not any(s.warmups or s.measured_ok or s.measured_failed for p in panels for s in p.servers):
        return [
            Para(
                rich(
                    f"The accepted attempt {r.accepted_attempt} has no timed warmup or "
                    "measured request: there is nothing to chart."
                ),
                "warn",
            )
        ]
    dist_caption = rich(
        "Per-request distribution: for each arm, the fraction of its measured requests "
        "(status ok, all servers pooled) that took at most x seconds; dashed lines are the "
        "arm means. Pooled requests are shown for their spread only: the arm mean and its "
        "SD are over server means."
    )
    if not charts:
        return [Chart("latency", None, caption, "Repeated-trial chart")]
    huge = undrawable(
        y
        for p in panels
        for s in p.servers
        for y in (*s.warmups, *s.measured_ok, *s.measured_failed, s.mean_s, p.mean_s)
    )
    if huge is not None:
        return [
            Para(
                rich(
                    f"No chart: a latency of {huge!r} s is beyond what a chart axis can draw "
                    "(over 1e300 s); the tables below list every value."
                ),
                "warn",
            )
        ]
    chart = latency_chart(panels, effects=_effects(r))
    phone = latency_chart(panels, "latency-phone", _effects(r), phone=True)
    if not chart.individual:
        caption += rich(
            " With this many requests the marks are drawn as one embedded image (too many "
            "for one SVG element each); every request is still one dot."
        )
    out: list[Block] = [
        Chart(
            "latency",
            chart.svg,
            caption,
            "Repeated-trial chart",
            dict(chart.marks),
            phone.svg,
        )
    ]
    if n_measured:
        dist = distribution_chart(panels)
        dist_phone = distribution_chart(panels, "distribution-phone", phone=True)
        if not dist.individual:
            dist_caption += rich(" Arms with many requests are drawn as a step line only.")
        out.append(
            Chart(
                "distribution",
                dist.svg,
                dist_caption,
                "Per-request distribution",
                dict(dist.marks),
                dist_phone.svg,
            )
        )
    return out


def _arms_table(lat: LatencyResult) -> Table:
    arms = tuple(
        (
            cell(a.arm),
            cell(a.role),
            cell(str(len(a.servers)), num=True),
            cell(str(a.n_requests), num=True),
            cell(Span(exact_text(a.mean_s), "strong"), num=True),
            cell(exact_text(a.sd_server_means_s), num=True),
            cell(exact_text(a.cv_server_means, 4), num=True),
            cell(exact_text(a.sd_requests_s), "muted", num=True),
            cell(exact_text(a.pooled_mean_s), "muted", num=True),
        )
        for a in lat.arms
    )
    return Table(
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


def trials_section(r: ReplayResult, facts: BundleFacts, charts: bool) -> Section:
    """The repeated-trials section; ``charts`` draws the SVG chart (needs matplotlib)."""
    if (why := r.not_applicable("latency")) is not None:
        return not_applicable("trials", "Repeated trials and latency", why)
    panels = _panels(r, facts)
    untimed = sum(t.untimed for t in facts.trials)
    blocks: list[Block] = [*_chart(r, panels, charts), _trials_table(panels)]
    if untimed:
        blocks.append(
            Para(rich(f"{untimed} request(s) without an end-to-end time not drawn."), "warn")
        )
    lat = r.latency
    blocks.append(_arms_table(lat))
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
        blocks.append(
            Para(
                rich(
                    f"{p.baseline} − {p.candidate}, detectable difference: {p.detectable.statement}"
                ),
                "note",
            )
        )
    return Section("trials", "Repeated trials and latency", tuple(blocks), r.limits("latency"))
