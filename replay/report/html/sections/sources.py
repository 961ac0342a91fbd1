"""The sources section: where each optimization came from, and whether it was adopted.

Sources are the author's attribution, printed as sealed: only the adopted
profile's effect is re-derived (in the claims), never a source's own
``effect_pct``.
"""

from __future__ import annotations

from replay.report.fmt import float_text
from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import not_applicable
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult

__all__ = ["sources_section"]

_SOURCE_LIMITS = (
    "Sources are the author's attribution: origin, adoption and evidence are as sealed, not "
    "checked against the upstream projects. Only the adopted profile's effect is re-derived "
    "here (the claims); an effect_pct of a source not adopted (a pilot) comes from other "
    "evidence, which this bundle does not hold.",
)


def sources_section(r: ReplayResult, facts: BundleFacts) -> Section:
    """The sources section: one row per row of the bundle's sources table."""
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
                    f"{float_text(float(effect))} % lower"
                    if isinstance(effect, int | float)
                    else "-",
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
    if not facts.sources and r.serving_campaign:
        return not_applicable(
            "sources",
            "Sources and benefit",
            "not applicable: serving campaign: the import states no optimization source; "
            "the benchmark tool's files are listed in the claims and the serving section",
        )
    if not facts.sources:
        blocks = [Para(rich("The bundle has no sources table rows."), "warn")]
    return Section("sources", "Sources and benefit", tuple(blocks), _SOURCE_LIMITS)
