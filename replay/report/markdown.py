"""The report as Markdown, meant to be pasted into a pull-request body.

Same view model as the HTML form, without the charts (the per-request table
stands in for them). Sized for a pull-request body: the headline (verdict and
what kind of check it is, key figures, derivation, evidence limits) and the
quality gates are open; every other section folds into a ``<details>`` block,
except one that found a failure, which stays open. Every string goes through
:func:`replay.report.escape.markdown_text`: Markdown-active characters are
escaped, ``@mentions`` and the references of closing syntax are shown as code
(code is never linked, so pasting this closes nothing and notifies no one),
and each neutralized reference is marked. Long tables are folded in
``<details>`` blocks (GitHub renders them).
"""

from __future__ import annotations

from replay.report.escape import (
    NEUTRALIZED_NOTE,
    markdown_code,
    markdown_escape,
    markdown_line_start,
    markdown_text,
    one_line,
)
from replay.report.html.view import (
    Block,
    Cell,
    Chart,
    KeyFigures,
    Para,
    Report,
    Rich,
    Section,
    Steps,
    Table,
    folds,
)

__all__ = ["MD_LISTING_ROWS", "render_markdown"]

MD_LISTING_ROWS = 8
"""Rows of a long listing (a ``detail`` table) a PR body shows; the HTML form shows all."""


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.neutralized = 0

    def text(self, s: str) -> str:
        out, n = markdown_text(s)
        self.neutralized += n
        return out

    def rich(self, r: Rich, in_table: bool = False) -> str:
        out = []
        bold: list[str] = []  # adjacent bold spans become one "**...**" ("****" breaks it)
        for span in r:
            if span.style in ("strong", "bad") or span.style.startswith("badge"):
                bold.append(self.text(span.text))
                continue
            if bold:
                out.append(f"**{''.join(bold)}**")
                bold = []
            if span.style == "code":
                seg = self.text(span.text)
                # A code span cannot hold neutralized markup; fall back to escaped text then.
                code = markdown_code(span.text)
                if in_table:  # GFM splits cells at "|" even inside code spans
                    code = code.replace("|", "\\|")
                out.append(code if seg == _plain(span.text) else seg)
            else:
                out.append(self.text(span.text))
        if bold:
            out.append(f"**{''.join(bold)}**")
        return "".join(out)


def _plain(s: str) -> str:
    """What :func:`markdown_text` gives for text with nothing to neutralize or mention."""
    return markdown_escape(one_line(s))


def _cell(w: _Writer, c: Cell) -> str:
    text = w.rich(c.text, in_table=True) or " "
    if c.style == "closest":
        return f"**{text}** ◀"
    if c.style in ("close", "bad", "warn"):
        return f"**{text}**"
    return text


def _table(w: _Writer, t: Table) -> None:
    if not t.rows:  # a header row alone would read as a broken table
        caption = f"*{w.text(t.caption)}*: " if t.caption else ""
        w.lines += [caption + w.text(t.empty), ""]
        return
    out = []
    out.append("| " + " | ".join(w.text(h) or " " for h in t.headers) + " |")
    out.append(
        "|" + "|".join(" ---: " if _numeric(t, i) else " --- " for i in range(len(t.headers))) + "|"
    )
    rows = t.rows[:MD_LISTING_ROWS] if t.detail else t.rows
    out += ["| " + " | ".join(_cell(w, c) for c in row) + " |" for row in rows]
    fold = folds(t)
    if fold:
        summary = f"{t.caption or 'details'} ({len(t.rows)} rows)"
        w.lines += [f"<details><summary>{w.text(summary)}</summary>", ""]
    elif t.caption:
        w.lines += [f"*{w.text(t.caption)}*", ""]
    w.lines += [*out, ""]
    if len(rows) < len(t.rows):
        cut = len(t.rows) - len(rows)
        w.lines += [w.text(f"… and {cut} more rows, listed in the HTML form of this report."), ""]
    if t.omitted:
        w.lines += [w.text(t.omitted), ""]
    if fold:
        w.lines += ["</details>", ""]


def _numeric(t: Table, i: int) -> bool:
    return bool(t.rows) and all(row[i].num for row in t.rows if i < len(row))


def _block(w: _Writer, b: Block) -> None:
    if isinstance(b, Para):
        w.lines += [markdown_line_start(w.rich(b.text)), ""]
    elif isinstance(b, Table):
        _table(w, b)
    elif isinstance(b, Steps):
        w.lines += [
            f"{i}. {w.rich(item)}" if b.ordered else f"- {w.rich(item)}"
            for i, item in enumerate(b.items, 1)
        ]
        w.lines.append("")
    elif isinstance(b, KeyFigures):
        w.lines += [f"- **{w.text(k.value)}** {w.text(k.label)}" for k in b.items]
        w.lines.append("")
    elif isinstance(b, Chart):
        caption = (
            w.rich(b.caption) + " " + w.text("(The chart is in the HTML form of this report.)")
        )
        w.lines += [markdown_line_start(caption), ""]


def _open(s: Section) -> bool:
    """Shown open in a PR body: the summary sections, and any section that found a failure."""
    return s.summary or s.status_style == "bad"


def _section(w: _Writer, s: Section) -> None:
    # The headline's status note is its first line, in the same bold: not repeated here.
    status = f" ({w.text(s.status)})" if s.status else ""
    if _open(s):
        w.lines += [f"## {w.text(s.title)}{status}", ""]
    else:
        # GitHub renders Markdown inside <details> when blank lines surround it.
        w.lines += [f"<details><summary><b>{w.text(s.title)}</b>{status}</summary>", ""]
    for b in s.blocks:
        _block(w, b)
    if s.limits:
        w.lines += ["Evidence limit:", ""]
        w.lines += [f"- {w.text(x)}" for x in s.limits]
        w.lines.append("")
    if not _open(s):
        w.lines += ["</details>", ""]


def render_markdown(report: Report) -> str:
    """The whole report as Markdown text (deterministic; passes ``bundle lint-text``)."""
    w = _Writer()
    w.lines += [f"# {w.text(report.title)}", "", markdown_line_start(w.text(report.subtitle)), ""]
    opened = [s for s in report.sections if _open(s)]
    folded = [s for s in report.sections if not _open(s)]
    for s in opened:
        _section(w, s)
    if folded:
        w.lines += [
            "## Everything else",
            "",
            w.text(
                "Each section below is folded: open it for its tables and its evidence limit. "
                "The HTML form of this report has the same sections, with charts."
            ),
            "",
        ]
    for s in folded:
        _section(w, s)
    if w.neutralized:
        w.lines += [
            w.text(
                f"{w.neutralized} closing reference(s) in the bundle's text are shown as code "
                f"and marked {NEUTRALIZED_NOTE}: the author's words are unchanged, but this "
                "report never carries closing syntax."
            ),
            "",
        ]
    w.lines += [w.text(f"Generated by {report.generator} from the bundle alone, offline."), ""]
    return "\n".join(w.lines).rstrip() + "\n"
