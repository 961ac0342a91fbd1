"""The claim that states a figure, and the note printed next to that figure.

The headline's derivation and the telemetry section print a figure the replay
derived, then the status of the claim (if any) that states it: confirmed, or
contradicted with the claimed and recomputed values side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replay.report.html.sections.common import _status_span
from replay.report.html.view import Rich, Span, rich
from replay.report.model import with_unit
from replay.result import ReplayResult
from replay.sections.claims import CONFIRMED, ClaimCheck

__all__ = ["_claim", "_claim_note", "_with_unit"]


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
        f": claimed {_with_unit(c.claimed, c.unit, c.statistic)}",
    )
    if c.recomputed is not None:
        out += rich(f", recomputed {c.recomputed}")
    return out


def _with_unit(value: str, unit: str, statistic: str = "") -> str:
    """A claimed value with its unit, as people write it (no "1" unit; "26 requests")."""
    return with_unit(value, unit, statistic)
