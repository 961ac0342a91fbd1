"""The media-replay section: the recorded quality values next to the re-scored ones.

From the media replay's JSON form (:mod:`replay.report.html.jsonform`): the verdict,
each gate's verdict from the recorded and from the recomputed values, where
the two differ, and every re-scored comparison. A media result that names
comparisons this bundle lacks says so: it may be the replay of another bundle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replay.report.html.jsonform import _json_text, _list
from replay.report.html.sections.common import MAX_ROWS
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich

__all__ = ["MEDIA_LIMITS", "media_section"]

MEDIA_LIMITS = (
    "Media replay re-decodes and re-scores the raw media files the reader supplied, found "
    "by SHA-256; a file not at hand leaves its comparison INCOMPLETE, never passed.",
    "LPIPS is attested only when the scorer's weight files were supplied and match the "
    "recorded SHA-256; otherwise its verdicts stay unattested.",
)


def _verdict_style(v: str) -> str:
    v = v.upper()
    if v in ("PASS", "AGREE", "REPRODUCED", "OK", "ATTESTED"):
        return "good"
    if v in ("FAIL", "MISMATCH", "DISAGREE", "NOT REPRODUCED"):
        return "bad"
    return "warn"


def _gates_table(gates: list[Mapping[str, Any]]) -> Table:
    rows = []
    for g in gates:
        counts = g.get("counts")
        counts_text = (
            ", ".join(f"{k} {_json_text(v)}" for k, v in sorted(counts.items()))
            if isinstance(counts, Mapping)
            else "-"
        )
        rv = _json_text(g.get("recomputed_verdict"))
        rows.append(
            (
                cell(Span(_json_text(g.get("gate_id")), "code")),
                cell(
                    f"{_json_text(g.get('metric'))} {_json_text(g.get('op'))} "
                    f"{_json_text(g.get('threshold'))}"
                ),
                cell(_json_text(g.get("recorded_verdict"))),
                cell(rv, _verdict_style(rv)),
                cell(counts_text),
            )
        )
    return Table(
        ("gate", "rule", "recorded", "recomputed", "per comparison"),
        tuple(rows),
        caption="Gates: verdict from the recorded values and from the recomputed ones",
        table_id="media-gates-table",
    )


def _disagreements(dis: list[Mapping[str, Any]]) -> Block:
    if not dis:
        return Para(rich("No disagreement between the record and the replay."))
    return Table(
        ("comparison", "kind", "what", "recorded", "recomputed", "detail"),
        tuple(
            (
                cell(Span(_json_text(d.get("comparison_id")), "code")),
                cell(_json_text(d.get("kind"))),
                cell(_json_text(d.get("name"))),
                cell(_json_text(d.get("recorded"))),
                cell(_json_text(d.get("recomputed")), "bad"),
                cell(_json_text(d.get("detail"))),
            )
            for d in dis[:MAX_ROWS]
        ),
        caption="Where the record and the replay differ",
        row_styles=tuple("bad" for _ in dis[:MAX_ROWS]),
        omitted=f"{len(dis) - MAX_ROWS} more." if len(dis) > MAX_ROWS else "",
        table_id="media-disagreements-table",
    )


def _comparisons_table(comps: list[Mapping[str, Any]]) -> Table:
    rows = []
    for c in comps[:MAX_ROWS]:
        cov = _list(c.get("coverage"))
        failed = [x for x in cov if _json_text(x.get("status")).upper() == "FAIL"]
        v = _json_text(c.get("verdict"))
        rows.append(
            (
                cell(Span(_json_text(c.get("comparison_id")), "code")),
                cell(v, _verdict_style(v)),
                cell(_json_text(c.get("frames_compared")), num=True),
                cell(
                    "ok"
                    if cov and not failed
                    else "-"
                    if not cov
                    else "FAIL: "
                    + ", ".join(
                        f"{_json_text(x.get('check'))} [{_json_text(x.get('arm'))}]" for x in failed
                    ),
                    "bad" if failed else "",
                ),
                cell("; ".join(_json_text(p) for p in (c.get("problems") or [])[:5]) or "-"),
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


def media_section(media: Mapping[str, Any], comparison_ids: set[str]) -> Section:
    """The media replay section (recorded vs recomputed, per gate and per comparison)."""
    verdict = _json_text(media.get("verdict"))
    blocks: list[Block] = [
        Para(
            rich(
                "Media replay verdict ",
                Span(verdict, _verdict_style(verdict)),
                f" (exit {_json_text(media.get('exit_code'))}), "
                f"on device {_json_text(media.get('device'))}.",
            ),
            _verdict_style(verdict),
        )
    ]
    comps = _list(media.get("comparisons"))
    foreign = sorted({_json_text(c.get("comparison_id")) for c in comps} - comparison_ids)
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
    gates = _list(media.get("gates"))
    if gates:
        blocks.append(_gates_table(gates))
    blocks.append(_disagreements(_list(media.get("disagreements"))))
    if comps:
        blocks.append(_comparisons_table(comps))
    problems = media.get("problems")
    if isinstance(problems, list) and problems:
        blocks.append(
            Table(
                ("problem",),
                tuple((cell(_json_text(p)),) for p in problems[:MAX_ROWS]),
                caption="What could not be re-scored",
                row_styles=tuple("warn" for _ in problems[:MAX_ROWS]),
            )
        )
    return Section(
        "media", "Media replay", tuple(blocks), MEDIA_LIMITS, verdict, _verdict_style(verdict)
    )
