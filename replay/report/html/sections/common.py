"""Formatting shared by the section builders: numbers, status styles, code spans.

Every figure is printed the same way in every section: exact values rounded
half to even for display only (:func:`~replay.report.fmt.exact_text`), floats
in their shortest form (:func:`~replay.report.fmt.float_text`), gate margins as
signed decimals (:func:`_margin`). The names here keep
their leading underscore: they are helpers of :mod:`replay.report.html.sections`, not
API of the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from replay.engine.exact import Exact, is_negative
from replay.report.fmt import exact_text
from replay.report.html.view import Span
from replay.result import Outcome
from replay.sections.claims import CONFIRMED, CONTRADICTED, UNVERIFIABLE

__all__ = [
    "MAX_ROWS",
    "NOT_EVIDENCED",
    "_OUTCOME_STYLE",
    "_STATUS_STYLE",
    "_bytes",
    "_join_code",
    "_margin",
    "_pct",
    "_status_span",
]

MAX_ROWS = 200
"""Longest table the report prints in full; longer ones show the rows that matter."""

_STATUS_STYLE = {CONFIRMED: "good", CONTRADICTED: "bad", UNVERIFIABLE: "warn"}
_OUTCOME_STYLE = {
    Outcome.CONFIRMED: "good",
    Outcome.CONTRADICTED: "bad",
    Outcome.INTEGRITY_FAILED: "bad",
    Outcome.UNVERIFIED: "warn",
    Outcome.NOT_EVIDENCED: "",  # neutral: nothing evidenced is neither a pass nor a failure
    "CONFIRMED": "good",
    "CONTRADICTED": "bad",
    "UNVERIFIED": "warn",
}
NOT_EVIDENCED = "not evidenced"


# ----------------------------------------------------------------------------- numbers


def _margin(m: Fraction) -> str:
    """A margin as a signed decimal of at most 6 places (the exact value is a binary one)."""
    text = f"{float(m):+.6f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "-0", "+0") else text


def _bytes(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def _pct(value: Exact | None) -> str:
    if value is None:
        return "-"
    sign = "" if is_negative(value) else "+"
    return f"{sign}{exact_text(value)} %"


# ----------------------------------------------------------------------------- spans


def _status_span(status: str) -> Span:
    return Span(status, _STATUS_STYLE.get(status, ""))


def _join_code(items: Iterable[str]) -> list[str | Span]:
    out: list[str | Span] = []
    for i, x in enumerate(items):
        if i:
            out.append(", ")
        out.append(Span(x, "code"))
    return out
