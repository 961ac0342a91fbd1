"""The terminal report: the verdict first, then a summary; every table only when verbose.

The default output fits one screen: the headline (outcome, what kind of check it
is, failures and gaps, the effect), one line per section, and where to look
next. ``verbose`` adds every section's aligned plain-text tables and its
evidence limits. Both come from the one :class:`~replay.result.ReplayResult`.
"""

from __future__ import annotations

from replay.report_model import Section, Table, headline, section_summaries, sections
from replay.result import UNTRUSTED_NOTE, ReplayResult

__all__ = ["render_text"]


def _table(t: Table, indent: str = "  ") -> list[str]:
    if not t.rows:
        return [f"{indent}none"]
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


def _summary(r: ReplayResult) -> list[str]:
    rows = section_summaries(r)
    width = max(len(name) for name, _ in rows)
    out = ["SECTIONS", *(f"  {name.ljust(width)}  {what}" for name, what in rows)]
    if not r.integrity.trusted:  # the one limit that weakens every section: said once here
        out.append(f"  limit: {UNTRUSTED_NOTE}")
    out.append(
        "every table and each section's evidence limit: add -v; "
        "charts: bundle report BUNDLE -o report.html"
    )
    return out


def _headline(r: ReplayResult) -> list[str]:
    """The verdict on the line under the title; the headline's other lines under it."""
    return _section(Section("Replay", headline(r)))


def render_text(result: ReplayResult, *, verbose: bool = False) -> str:
    """The report as terminal text: verdict and summary, or (``verbose``) every section.

    Args:
        result: the one replay result.
        verbose: every section's tables and evidence limits, not the one-line summaries.
    """
    top = "\n".join(_headline(result))
    if verbose:
        rest = ["\n".join(_section(s)) for s in sections(result)[1:]]
    else:
        rest = ["\n".join(_summary(result))]
    return "\n\n".join([top, *rest]) + "\n"
