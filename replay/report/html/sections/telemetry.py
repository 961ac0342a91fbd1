"""The telemetry section: sampled peak HBM per arm, and the change each pair claims.

The peaks and their means are :mod:`replay.sections.telemetry`'s; the change between
two arms is printed next to the claim that states it, if any.
"""

from __future__ import annotations

from replay.report.fmt import exact_text, float_text
from replay.report.html.sections.claim_notes import _claim, _claim_note
from replay.report.html.sections.common import MAX_ROWS, NOT_EVIDENCED, _pct, not_applicable
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult
from replay.sections.telemetry import TelemetryResult

__all__ = ["telemetry_section"]


def _peaks_table(t: TelemetryResult) -> Table | None:
    """Every (server, device) peak, up to :data:`MAX_ROWS`; None when there is none."""
    peaks = t.peaks[:MAX_ROWS]
    if not peaks:
        return None
    return Table(
        ("arm", "server", "device", "peak MB", "samples"),
        tuple(
            (
                cell(p.arm),
                cell(p.server),
                cell(p.device),
                cell(exact_text(p.peak_mb), num=True),
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


def telemetry_section(r: ReplayResult) -> Section:
    """The telemetry section ("not evidenced" when the bundle records no sample)."""
    t = r.telemetry
    if (why := r.not_applicable("telemetry")) is not None:
        return not_applicable("telemetry", "Telemetry: peak HBM", why)
    if not r.evidenced("telemetry"):
        return Section(
            "telemetry",
            "Telemetry: peak HBM",
            (Para(rich("Not evidenced: the bundle records no telemetry sample.")),),
            r.limits("telemetry"),
            NOT_EVIDENCED,
            "",
        )
    rows = tuple(
        (
            cell(a.arm),
            cell(str(a.servers), num=True),
            cell(str(a.devices), num=True),
            cell(str(a.samples), num=True),
            cell(Span(exact_text(a.mean_peak_mb), "strong"), num=True),
            cell(exact_text(a.max_peak_mb), num=True),
        )
        for a in t.arms
    )
    blocks: list[Block] = [
        Para(
            rich(
                f"Sampled by {t.source or 'an unrecorded source'}"
                + (f" every {float_text(t.interval_s)} s" if t.interval_s else "")
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
    peaks = _peaks_table(t)
    if peaks is not None:
        blocks.append(peaks)
    return Section("telemetry", "Telemetry: peak HBM", tuple(blocks), r.limits("telemetry"))
