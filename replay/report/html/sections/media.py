"""The media-replay section: the recorded quality values next to the re-scored ones.

From the media re-score of the one result (:class:`~replay.media.result.MediaReplayResult`)
and its verdict (:meth:`~replay.result.ReplayResult.media_outcome`): each gate's verdict
from the recorded and from the recomputed values, where the two differ, and every
re-scored comparison. A media result that names comparisons this bundle lacks says
so: it may be the replay of another bundle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replay.engine.verdicts import MediaVerdict, Outcome
from replay.report.html.sections.common import MAX_ROWS, _plain
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.report.words import verdict_style

if TYPE_CHECKING:  # the media package loads numpy and scipy; a report without it does not
    from replay.media.result import (
        ComparisonReplay,
        Disagreement,
        MediaGateSummary,
        MediaReplayResult,
    )

__all__ = ["MEDIA_LIMITS", "media_section"]

MEDIA_LIMITS = (
    "Media replay re-decodes and re-scores the raw media files the reader supplied, found "
    "by SHA-256; a file not at hand leaves its comparison INCOMPLETE, never passed.",
    "LPIPS is attested only when the scorer's weight files were supplied and match the "
    "recorded SHA-256; otherwise its verdicts stay unattested.",
)


def _gates_table(gates: list[MediaGateSummary]) -> Table:
    rows = []
    for g in gates:
        counts_text = ", ".join(f"{k} {_plain(v)}" for k, v in sorted(g.counts.items()))
        rv = g.recomputed_verdict
        rows.append(
            (
                cell(Span(g.gate_id, "code")),
                cell(f"{g.metric} {g.op} {_plain(g.threshold)}"),
                cell(str(g.recorded_verdict)),
                cell(str(rv), verdict_style(rv)),
                cell(counts_text),
            )
        )
    return Table(
        ("gate", "rule", "recorded", "recomputed", "per comparison"),
        tuple(rows),
        caption="Gates: verdict from the recorded values and from the recomputed ones",
        table_id="media-gates-table",
    )


def _disagreements(dis: list[Disagreement]) -> Block:
    if not dis:
        return Para(rich("No disagreement between the record and the replay."))
    return Table(
        ("comparison", "kind", "what", "recorded", "recomputed", "detail"),
        tuple(
            (
                cell(Span(d.comparison_id, "code")),
                cell(d.kind),
                cell(d.name),
                cell(d.recorded),
                cell(d.recomputed, "bad"),
                cell(d.detail),
            )
            for d in dis[:MAX_ROWS]
        ),
        caption="Where the record and the replay differ",
        row_styles=tuple("bad" for _ in dis[:MAX_ROWS]),
        omitted=f"{len(dis) - MAX_ROWS} more." if len(dis) > MAX_ROWS else "",
        table_id="media-disagreements-table",
    )


def _coverage_text(c: ComparisonReplay) -> str:
    if not c.coverage:
        return "-"
    failed = c.coverage_failures
    if not failed:
        return "ok"
    return "FAIL: " + ", ".join(f"{x.check} [{x.arm}]" for x in failed)


def _comparisons_table(comps: list[ComparisonReplay]) -> Table:
    rows = []
    for c in comps[:MAX_ROWS]:
        v = c.verdict
        rows.append(
            (
                cell(Span(c.comparison_id, "code")),
                cell(str(v), verdict_style(v)),
                cell(str(c.frames_compared), num=True),
                cell(_coverage_text(c), "bad" if c.coverage_failures else ""),
                cell("; ".join(c.problems[:5]) or "-"),
            )
        )
    return Table(
        ("comparison", "verdict", "frames", "A/V coverage", "problems"),
        tuple(rows),
        caption="Every re-scored comparison",
        omitted=f"{len(comps) - MAX_ROWS} more." if len(comps) > MAX_ROWS else "",
        detail=True,
        table_id="media-comparisons-table",
    )


def media_section(media: MediaReplayResult, outcome: Outcome, comparison_ids: set[str]) -> Section:
    """The media replay section (recorded vs recomputed, per gate and per comparison).

    ``outcome`` is the media section's verdict as the one result decided it
    (:meth:`replay.result.ReplayResult.media_outcome`).
    """
    verdict = str(MediaVerdict.of(outcome))
    style = verdict_style(verdict)
    blocks: list[Block] = [
        Para(
            rich(
                "Media replay verdict ",
                Span(verdict, style),
                f" (exit {outcome.exit_code}), on device {media.device}.",
            ),
            style,
        )
    ]
    comps = media.comparisons
    foreign = sorted({c.comparison_id for c in comps} - comparison_ids)
    if foreign:
        blocks.append(
            Para(
                rich(
                    f"{len(foreign)} comparison(s) of this media result are not comparisons of "
                    "this bundle's accepted attempt (e.g. "
                    + ", ".join(foreign[:3])
                    + "): it may be the replay of another bundle."
                ),
                "bad",
            )
        )
    if media.gates:
        blocks.append(_gates_table(media.gates))
    blocks.append(_disagreements(media.disagreements))
    if comps:
        blocks.append(_comparisons_table(comps))
    problems = media.problems
    if problems:
        blocks.append(
            Table(
                ("problem",),
                tuple((cell(p),) for p in problems[:MAX_ROWS]),
                caption="What could not be re-scored",
                row_styles=tuple("warn" for _ in problems[:MAX_ROWS]),
            )
        )
    return Section("media", "Media replay", tuple(blocks), MEDIA_LIMITS, verdict, style)
