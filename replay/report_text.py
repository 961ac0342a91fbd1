"""The terminal report: sections of aligned plain-text tables, headline first."""

from __future__ import annotations

from replay.report_model import Section, Table, sections
from replay.result import ReplayResult

__all__ = ["render_text"]


def _table(t: Table, indent: str = "  ") -> list[str]:
    widths = [len(h) for h in t.headers]
    for row in t.rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        return indent + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(t.headers), indent + "  ".join("-" * w for w in widths), *map(line, t.rows)]


def _section(s: Section) -> list[str]:
    out = [s.title.upper()]
    for b in s.blocks:
        out += _table(b) if isinstance(b, Table) else [f"  {b}"]
    out += [f"  limit: {x}" for x in s.limits]
    return out


def render_text(result: ReplayResult) -> str:
    """The whole report as terminal text."""
    parts = ["\n".join(_section(s)) for s in sections(result)]
    return "\n\n".join(parts) + "\n"
