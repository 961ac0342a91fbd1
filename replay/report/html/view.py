"""The report's view-model types: sections of paragraphs, tables, steps, figures and charts.

Plain frozen data, no behaviour beyond tiny constructors: :mod:`replay.report.html.model`
fills it from a replay, :mod:`replay.report.html.html` and :mod:`replay.report.markdown`
draw it, so the two forms can never say different things. Every string is
plain text (possibly from the untrusted bundle); renderers escape it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "FOLD_ROWS",
    "Block",
    "Cell",
    "Chart",
    "KeyFigure",
    "KeyFigures",
    "Para",
    "Report",
    "Rich",
    "Section",
    "Span",
    "Steps",
    "Table",
    "cell",
    "folds",
    "rich",
]


@dataclass(frozen=True)
class Span:
    """A run of text; ``style`` is "" (plain), "code", "strong", "good", "bad", "warn", or
    "badge" plus one of those colours (the verdict's badge)."""

    text: str
    style: str = ""


Rich = tuple[Span, ...]


def rich(*parts: str | Span) -> Rich:
    """A rich text from plain strings and spans."""
    return tuple(p if isinstance(p, Span) else Span(p) for p in parts if p != "")


@dataclass(frozen=True)
class Para:
    """A paragraph; ``style`` is "", "good", "bad", "warn" or "note"."""

    text: Rich
    style: str = ""


@dataclass(frozen=True)
class Cell:
    """A table cell; ``style`` marks it ("closest", "close", "good", "bad", "warn", "muted")."""

    text: Rich
    style: str = ""
    num: bool = False


def cell(text: str | Span | Rich, style: str = "", num: bool = False) -> Cell:
    """A cell from a string, a span or a rich text."""
    if isinstance(text, tuple):
        return Cell(text, style, num)
    return Cell(rich(text), style, num)


@dataclass(frozen=True)
class Table:
    """A table. ``detail`` tables are folded away in the Markdown form (long lists)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    row_styles: tuple[str, ...] = ()
    omitted: str = ""  # what was left out, said under the table
    detail: bool = False
    table_id: str = ""
    empty: str = "none"  # said, full width, instead of a table without rows


FOLD_ROWS = 10
"""Tables longer than this fold into <details>, unless a row or cell is marked bad or warn."""
_ALARM = ("bad", "warn")


def folds(t: Table) -> bool:
    """Whether ``t`` is drawn folded (``detail``, or long with nothing alarming in it)."""
    if t.detail:
        return True
    if len(t.rows) <= FOLD_ROWS:
        return False
    # A failure must never hide behind a click.
    return not any(s in _ALARM for s in t.row_styles) and not any(
        c.style in _ALARM for row in t.rows for c in row
    )


@dataclass(frozen=True)
class Steps:
    """A numbered (or bulleted) list of rich lines."""

    items: tuple[Rich, ...]
    ordered: bool = True


@dataclass(frozen=True)
class KeyFigure:
    """One headline number with its label."""

    label: str
    value: str
    note: str = ""
    style: str = ""
    new_row: bool = False  # starts a row of cards of its own (HTML), not left to wrap


@dataclass(frozen=True)
class KeyFigures:
    """The headline numbers, shown as a row of cards (a list in Markdown)."""

    items: tuple[KeyFigure, ...]


@dataclass(frozen=True)
class Chart:
    """An inline SVG chart (None when charts were not drawn: the Markdown form).

    ``marks`` counts the marks drawn per kind (ids ``<chart_id>-<kind>-NNNN`` in the SVG).
    ``phone_svg``, when drawn, is the same chart laid out for a phone's screen (ids
    ``<chart_id>-phone-...``): the page shows one of the two by its width.
    """

    chart_id: str
    svg: str | None
    caption: Rich
    alt: str
    marks: Mapping[str, int] = field(default_factory=dict)
    phone_svg: str | None = None


Block = Para | Table | Steps | KeyFigures | Chart


@dataclass(frozen=True)
class Section:
    """A titled part of the report, its blocks, and the limits of its evidence."""

    id: str
    title: str
    blocks: tuple[Block, ...]
    limits: tuple[str, ...] = ()
    status: str = ""  # a word shown next to the title ("confirmed", "FAIL", ...)
    status_style: str = ""
    summary: bool = False  # shown open in the Markdown form (the rest folds into <details>)


@dataclass(frozen=True)
class Report:
    """The whole report."""

    title: str
    subtitle: str
    outcome: str
    exit_code: int
    sections: tuple[Section, ...]
    generator: str

    def section(self, section_id: str) -> Section:
        """The section called ``section_id``."""
        return next(s for s in self.sections if s.id == section_id)
