"""The not-claimed section: what the author explicitly does not claim, and why.

Replay never invents claims: a figure neither claimed nor listed here is
simply not asserted by the bundle.
"""

from __future__ import annotations

from replay.report.html.view import Block, Para, Section, Span, Table, cell, rich
from replay.result import ReplayResult

__all__ = ["not_claimed_section"]


def not_claimed_section(r: ReplayResult) -> Section:
    """The not-claimed section (amber when the bundle lists nothing)."""
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
