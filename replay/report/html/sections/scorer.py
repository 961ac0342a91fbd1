"""The scorer section: which learned scorer the quality verdicts rest on, by weight hash.

The identity is what the author recorded (scorer.json); statistical replay
never loads the weights. A media replay, when done, says whether the weights
at hand matched (attested) or not.
"""

from __future__ import annotations

from collections.abc import Sequence

from bundler.format.plan_model import ScorerWeight
from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import _bytes, not_applicable
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult

__all__ = ["scorer_section"]

_LIMITS = (
    "The scorer identity is what the author recorded (scorer.json): the weights' SHA-256 "
    "and sizes. Statistical replay does not load or hash the weights; a media replay with "
    "--scorer-weights does.",
)


def _absent() -> Section:
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
        _LIMITS,
        "absent",
        "bad",
    )


def _weights_table(weights: Sequence[ScorerWeight], facts: BundleFacts) -> Table:
    """One row per weight file, with its availability as an external artifact."""
    external = {e.sha256: e for e in facts.external}
    rows = []
    for w in weights:
        ext = external.get(w.sha256)
        rows.append(
            (
                cell(w.role),
                cell(Span(w.file, "code")),
                cell(Span(w.sha256, "code")),
                cell(_bytes(w.bytes), num=True),
                cell(
                    ext.availability if ext else "not listed among external artifacts",
                    "" if ext else "warn",
                ),
            )
        )
    return Table(
        ("role", "file", "SHA-256", "bytes", "availability"),
        tuple(rows),
        caption="Weights of the scorer",
        table_id="scorer-table",
    )


def scorer_section(r: ReplayResult, facts: BundleFacts) -> Section:
    """The scorer section; with the media re-score's scorer identity when one was done."""
    s = r.quality.scorer
    if s is None and (why := r.not_applicable("scorer")) is not None:
        return not_applicable("scorer", "Scorer identity", why)
    if s is None:
        return _absent()
    blocks: list[Block] = [
        Para(
            rich(
                "Scorer ",
                Span(f"{s.name} {s.version}", "strong"),
                f", network {'-' if s.net is None else s.net}, identified by the SHA-256 of "
                f"{len(s.weights)} weight file(s).",
            )
        ),
        _weights_table(s.weights, facts),
    ]
    status, style = "recorded", "good"
    ms = None if r.media is None else r.media.scorer
    if ms is not None:
        status = ms.status
        style = "good" if ms.attested else "warn"
        blocks.append(Para(rich(f"Media replay: scorer {status}. ", ms.reason), style))
    return Section("scorer", "Scorer identity", tuple(blocks), _LIMITS, status, style)
