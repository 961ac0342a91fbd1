"""The external-artifacts section: what the bundle binds by hash but does not carry.

Raw media, weights and host logs are known by SHA-256 and size, bound by the
signature, never inside the bundle; an absent one is its normal state. When a
media replay was done, each row says what it found for that file.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from replay.engine.verdicts import FileStatus
from replay.report.html.facts import BundleFacts
from replay.report.html.sections.common import MAX_ROWS, _bytes, not_applicable
from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich

if TYPE_CHECKING:  # the media package loads numpy and scipy; a report without it does not
    from replay.media.result import MediaReplayResult

__all__ = ["artifacts_section"]


def _media_locations(media: MediaReplayResult | None) -> dict[str, FileStatus]:
    """sha256 -> what the media replay found for that file."""
    out: dict[str, FileStatus] = {}
    if media is None:
        return out
    for c in media.comparisons:
        for arm in c.arms:
            if arm.location is not None and arm.sha256:
                out[arm.sha256] = arm.location.status
    return out


def artifacts_section(facts: BundleFacts, media: MediaReplayResult | None) -> Section:
    """The external-artifacts section; ``media`` is the media re-score, if one was done."""
    found = _media_locations(media)
    ext = list(facts.external)
    rows = []
    for e in ext[:MAX_ROWS]:
        seen = found.get(e.sha256)
        rows.append(
            (
                cell(Span(e.path, "code")),
                cell(e.kind),
                cell(_bytes(e.bytes), num=True),
                cell(Span(e.sha256, "code")),
                cell(e.availability),
                cell(
                    f"media replay: {seen}" if seen else "external: not looked for",
                    "good"
                    if seen == FileStatus.OK
                    else "bad"
                    if seen == FileStatus.MISMATCH
                    else "muted",
                ),
            )
        )
    kinds = Counter(e.kind for e in ext)
    avail = Counter(e.availability for e in ext)
    if not ext:
        return not_applicable(
            "artifacts",
            "External artifacts",
            "not applicable: the bundle binds no external artifact (raw media, weights, logs "
            "kept outside it).",
        )
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
