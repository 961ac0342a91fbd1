"""The Markdown report (``--markdown FILE``): the terminal report's sections as Markdown."""

from __future__ import annotations

from replay.report_model import Section, Table, sections
from replay.result import ReplayResult

__all__ = ["render_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _table(t: Table) -> list[str]:
    return [
        "| " + " | ".join(map(_cell, t.headers)) + " |",
        "|" + "|".join(" --- " for _ in t.headers) + "|",
        *("| " + " | ".join(map(_cell, row)) + " |" for row in t.rows),
    ]


def _section(s: Section, level: str) -> list[str]:
    out = [f"{level} {s.title}", ""]
    for b in s.blocks:
        out += [*_table(b), ""] if isinstance(b, Table) else [b.strip(), ""]
    if s.limits:
        out += ["Evidence limits:", "", *(f"- {x}" for x in s.limits), ""]
    return out


def render_markdown(result: ReplayResult) -> str:
    """The whole report as Markdown (first section as the document title)."""
    secs = sections(result)
    title = f"Replay of {result.campaign.get('id')}"
    lines = [f"# {title}", ""]
    for b in secs[0].blocks:
        lines += [f"{b}".strip(), ""]
    for s in secs[1:]:
        lines += _section(s, "##")
    return "\n".join(lines).rstrip() + "\n"
