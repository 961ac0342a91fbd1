"""The terminal report: the verdict first, then a summary; every table only when verbose.

The default output fits one screen: the headline (outcome, what kind of check it
is, failures and gaps, the effect), one line per section, and where to look
next. ``verbose`` adds every section's aligned plain-text tables and its
evidence limits. Both come from the one :class:`~replay.result.ReplayResult`.

The report is a list of plain lines with the author's text (claim ids, reasons,
server names) in them as it is: ``bundle replay`` prints them through the CLI's
one output path (:func:`reprobundle.cli.common.say`), which escapes each line,
and :func:`render_text` escapes them the same way. A line break, CR or escape
sequence inside a value therefore never starts a line of its own.
"""

from __future__ import annotations

from bundler._internal.textsafe import safe
from replay.engine.verdicts import ClaimStatus
from replay.report.model import TextSection, TextTable, headline, sections, with_unit
from replay.report.summaries import section_summaries
from replay.result import UNTRUSTED_NOTE, ReplayResult

__all__ = ["render_lines", "render_text"]


def _table(t: TextTable, indent: str = "  ") -> list[str]:
    if not t.rows:
        return [f"{indent}none"]
    # Cells are measured (and so padded) as printed: escaped, four characters per control.
    rows = [tuple(map(safe, row)) for row in t.rows]
    widths = [len(h) for h in t.headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        return indent + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(t.headers), indent + "  ".join("-" * w for w in widths), *map(line, rows)]


def _section(s: TextSection) -> list[str]:
    out = [s.title.upper()]
    for b in s.blocks:
        out += _table(b) if isinstance(b, TextTable) else [f"  {b}"]
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
    return _section(TextSection("Replay", headline(r)))


def _contradicted(r: ReplayResult) -> list[str]:
    """Every contradicted claim by id, claimed and recomputed value: the reason for exit 4.

    Shown in the default view too, so a reader learns which claim failed without -v.
    """
    out = []
    for c in r.claims.checks:
        if c.status is not ClaimStatus.CONTRADICTED:
            continue
        recomputed = (
            "nothing" if c.recomputed is None else with_unit(c.recomputed, c.unit, c.statistic)
        )
        why = f" ({c.explanation})" if c.explanation else ""
        out.append(
            f"  ✗ claim {c.claim_id} ({c.statistic}): claimed "
            f"{with_unit(c.claimed, c.unit, c.statistic)}, recomputed {recomputed}{why}"
        )
    return ["CONTRADICTED CLAIMS", *out] if out else []


def render_lines(result: ReplayResult, *, verbose: bool = False) -> list[str]:
    """The report as plain terminal lines (author text unescaped: print them escaped).

    Args:
        result: the one replay result.
        verbose: every section's tables and evidence limits, not the one-line summaries.
    """
    parts = [_headline(result)]
    if not verbose and (contradicted := _contradicted(result)):
        parts.append(contradicted)
    if verbose:
        parts += [_section(s) for s in sections(result)[1:]]
    else:
        parts.append(_summary(result))
    out: list[str] = []
    for i, lines in enumerate(parts):
        out += ([""] if i else []) + lines
    return out


def render_text(result: ReplayResult, *, verbose: bool = False) -> str:
    """The report as terminal text, each line escaped: verdict and summary, or every section.

    Args:
        result: the one replay result.
        verbose: every section's tables and evidence limits, not the one-line summaries.
    """
    return "".join(safe(line) + "\n" for line in render_lines(result, verbose=verbose))
