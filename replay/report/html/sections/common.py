"""Formatting shared by the section builders: numbers, status styles, code spans.

Every figure is printed the same way in every section: exact values rounded
half to even for display only (:func:`~replay.report.fmt.exact_text`), floats
in their shortest form (:func:`~replay.report.fmt.float_text`), gate margins as
signed decimals (:func:`_margin`). The names here keep
their leading underscore: they are helpers of :mod:`replay.report.html.sections`, not
API of the report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from replay.engine.exact import Exact, is_negative
from replay.report.fmt import exact_text
from replay.report.html.view import Para, Section, Span, rich
from replay.report.words import CLAIM_STYLE, OUTCOME_STYLE

__all__ = [
    "MAX_ROWS",
    "NOT_APPLICABLE",
    "NOT_EVIDENCED",
    "_OUTCOME_STYLE",
    "_STATUS_STYLE",
    "_bytes",
    "_join_code",
    "_margin",
    "_pct",
    "_plain",
    "_status_span",
    "not_applicable",
]

MAX_ROWS = 200
"""Longest table the report prints in full; longer ones show the rows that matter."""

_STATUS_STYLE = CLAIM_STYLE
_OUTCOME_STYLE = OUTCOME_STYLE
NOT_EVIDENCED = "not evidenced"
NOT_APPLICABLE = "not applicable"


def not_applicable(section_id: str, title: str, why: str) -> Section:
    """A section that does not apply to this campaign, collapsed to the one line saying why.

    Neutral (no colour, no badge colour): nothing was expected there, and nothing there
    is a pass either.
    """
    return Section(section_id, title, (Para(rich(why), "note"),), (), NOT_APPLICABLE, "")


# ----------------------------------------------------------------------------- numbers


def _plain(value: str | float | None) -> str:
    """A value as short text: ``-`` when missing, a float in 6 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


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
