"""The report as one self-contained HTML file: inline CSS, inline SVG, no script, no network.

Every string from the model is escaped with :func:`html.escape` (via
:func:`replay.report.escape.html_text`, which also neutralizes closing syntax);
the only unescaped markup is ours and the SVG that :mod:`replay.report.html.charts`
produced (glyphs as paths, comments stripped, so bundle text never reaches it
as markup). A Content-Security-Policy of ``default-src 'none'`` makes the
browser refuse any fetch even if something slipped through, and no ``href``
or ``src`` outside the page is ever written.
"""

from __future__ import annotations

import html

from replay.report.escape import NEUTRALIZED_NOTE, html_text
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

__all__ = ["CSP", "render_html"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
:root { --fg: #1d1d1f; --muted: #6b6b70; --line: #d9d9de; --bg: #ffffff; --panel: #f6f6f8;
  --good: #1b7a3a; --good-bg: #e7f5eb; --bad: #b3261e; --bad-bg: #fbe9e7; --warn: #8a5a00;
  --warn-bg: #fff4d6; --close-bg: #fff1c2; --closest-bg: #ffd97a; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font: 14px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; }
header.top { padding: 20px 32px 12px; border-bottom: 1px solid var(--line);
  background: var(--panel); }
header.top h1 { margin: 0 0 4px; font-size: 22px; }
header.top .sub { color: var(--muted); }
nav.toc { margin-top: 10px; font-size: 12.5px; }
nav.toc a { color: #2b5b9a; text-decoration: none; margin-right: 12px; white-space: nowrap; }
main { padding: 8px 32px 32px; max-width: 1400px; }
section { margin: 22px 0 10px; }
section > h2 { font-size: 18px; margin: 0 0 8px; padding-bottom: 4px;
  border-bottom: 2px solid var(--line); }
.badge { display: inline-block; font-size: 12px; font-weight: 600; padding: 1px 8px;
  margin-left: 8px; border-radius: 10px; vertical-align: middle; background: var(--panel);
  color: var(--muted); }
.badge.good { background: var(--good-bg); color: var(--good); }
.badge.bad { background: var(--bad-bg); color: var(--bad); }
.badge.warn { background: var(--warn-bg); color: var(--warn); }
p { margin: 6px 0; }
p.verdict { font-size: 17px; font-weight: 700; margin: 8px 0 10px; line-height: 1.6; }
p.verdict .badge { font-size: 17px; font-weight: 700; margin: 0; padding: 1px 10px;
  border-radius: 12px; }
p.verdict strong { font-weight: 700; }
p.empty { margin: 8px 0; color: var(--muted); }
p.good { color: var(--good); }
p.bad { color: var(--bad); }
p.warn { color: var(--warn); }
p.note { color: var(--muted); font-size: 13px; }
span.good { color: var(--good); font-weight: 600; white-space: nowrap; }
span.bad { color: var(--bad); font-weight: 600; white-space: nowrap; }
span.warn { color: var(--warn); font-weight: 600; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px;
  background: var(--panel); padding: 0 3px; border-radius: 3px; overflow-wrap: break-word; }
code.neutralized { background: var(--warn-bg); }
span.flag { color: var(--warn); font-size: 11.5px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 150px;
  background: var(--bg); }
.card .v { font-size: 22px; font-weight: 700; white-space: nowrap; }
.card .l { color: var(--muted); font-size: 12px; }
.card.good .v { color: var(--good); }
.card.bad .v { color: var(--bad); }
ol.steps, ul.steps { margin: 4px 0 8px; padding-left: 26px; }
ol.steps li, ul.steps li { margin: 3px 0; }
.tablewrap { overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: 12.5px; }
caption { text-align: left; font-weight: 600; padding: 2px 0 4px; color: var(--muted); }
th, td { border: 1px solid var(--line); padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: var(--panel); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.good td:first-child { box-shadow: inset 3px 0 var(--good); }
tr.bad td { background: var(--bad-bg); }
tr.warn td { background: var(--warn-bg); }
tr.close td { background: #fffaf0; }
tr.muted td { color: var(--muted); }
td.closest { background: var(--closest-bg); font-weight: 700; }
td.close { background: var(--close-bg); }
td.bad { color: var(--bad); font-weight: 600; }
td.good { color: var(--good); }
td.warn { color: var(--warn); }
td.muted { color: var(--muted); }
p.omitted { color: var(--muted); font-size: 12px; margin-top: 2px; }
td:first-child code { white-space: nowrap; }
details { margin: 8px 0; }
summary { cursor: pointer; color: var(--muted); font-weight: 600; font-size: 12.5px; }
figure { margin: 8px 0; }
figure svg { max-width: 100%; height: auto; }
figure .phone { display: none; }
svg * { stroke-linejoin: round; stroke-linecap: butt; }
figcaption { color: var(--muted); font-size: 12.5px; max-width: 900px; }
.limits { border-left: 3px solid var(--line); background: var(--panel); padding: 4px 12px;
  margin: 10px 0 0; font-size: 12.5px; color: #3c3c43; }
.limits h3 { font-size: 12px; margin: 2px 0; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
.limits ul { margin: 2px 0 4px; padding-left: 18px; }
footer { color: var(--muted); font-size: 12px; padding: 12px 32px 24px;
  border-top: 1px solid var(--line); }
@media (max-width: 640px) {
  header.top, main, footer { padding-left: 12px; padding-right: 12px; }
  header.top h1 { font-size: 19px; }
  .card { min-width: 0; flex: 1 1 140px; padding: 6px 10px; }
  .card .v { font-size: 18px; white-space: normal; }
  /* A wide chart shrunk to a phone's width is unreadable, and one that scrolls hides arms:
     the phone layout of each chart (drawn narrow, its text >= 10 px here) instead. */
  figure .wide { display: none; }
  figure .phone { display: block; }
}
@media print { nav.toc { display: none; } .tablewrap { overflow: visible; } }
"""


class _Writer:
    """Collects HTML and counts neutralized closing references."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.neutralized = 0

    def text(self, s: str) -> str:
        out, n = html_text(s)
        self.neutralized += n
        return out

    def rich(self, r: Rich) -> str:
        out = []
        for span in r:
            t = self.text(span.text)
            if span.style == "code":
                out.append(f"<code>{t}</code>")
            elif span.style == "strong":
                out.append(f"<strong>{t}</strong>")
            elif span.style:
                out.append(f'<span class="{span.style}">{t}</span>')
            else:
                out.append(t)
        return "".join(out)

    def add(self, s: str) -> None:
        self.parts.append(s)


def _cls(style: str) -> str:
    return f' class="{style}"' if style else ""


def _cell(w: _Writer, c: Cell) -> str:
    classes = " ".join(x for x in (c.style, "num" if c.num else "") if x)
    return f"<td{_cls(classes)}>{w.rich(c.text)}</td>"


def _table(w: _Writer, t: Table) -> None:
    tid = f' id="{t.table_id}"' if t.table_id else ""
    if not t.rows:
        # A header row with no body would squeeze the caption into one narrow column.
        caption = f"<strong>{w.text(t.caption)}</strong>: " if t.caption else ""
        w.add(f'<p class="empty"{tid}>{caption}{w.text(t.empty)}</p>')
        return
    fold = folds(t)
    if fold:  # long lists fold away; <details> needs no script
        summary = f"{t.caption or 'Details'} ({len(t.rows)} rows)"
        w.add(f"<details><summary>{w.text(summary)}</summary>")
    w.add(f'<div class="tablewrap"><table{tid}>')
    if t.caption:
        w.add(f"<caption>{w.text(t.caption)}</caption>")
    w.add("<thead><tr>" + "".join(f"<th>{w.text(h)}</th>" for h in t.headers) + "</tr></thead>")
    w.add("<tbody>")
    for i, row in enumerate(t.rows):
        style = t.row_styles[i] if i < len(t.row_styles) else ""
        w.add(f"<tr{_cls(style)}>" + "".join(_cell(w, c) for c in row) + "</tr>")
    w.add("</tbody></table></div>")
    if t.omitted:
        w.add(f'<p class="omitted">{w.text(t.omitted)}</p>')
    if fold:
        w.add("</details>")


def _block(w: _Writer, b: Block) -> None:
    if isinstance(b, Para):
        w.add(f"<p{_cls(b.style)}>{w.rich(b.text)}</p>")
    elif isinstance(b, Table):
        _table(w, b)
    elif isinstance(b, Steps):
        tag = "ol" if b.ordered else "ul"
        w.add(f'<{tag} class="steps">')
        w.add("".join(f"<li>{w.rich(item)}</li>" for item in b.items))
        w.add(f"</{tag}>")
    elif isinstance(b, KeyFigures):
        w.add('<div class="cards">')
        for k in b.items:
            if k.new_row:
                w.add('</div><div class="cards">')
            note = f'<div class="l">{w.text(k.note)}</div>' if k.note else ""
            w.add(
                f'<div class="card{" " + k.style if k.style else ""}"><div class="v">'
                f'{w.text(k.value)}</div><div class="l">{w.text(k.label)}</div>{note}</div>'
            )
        w.add("</div>")
    elif isinstance(b, Chart):
        w.add(f'<figure id="{b.chart_id}-figure">')
        if b.svg is not None and b.phone_svg is not None:
            w.add(f'<div class="wide">{b.svg}</div><div class="phone">{b.phone_svg}</div>')
        elif b.svg is not None:
            w.add(b.svg)
        w.add(f"<figcaption>{w.rich(b.caption)}</figcaption></figure>")


def _section(w: _Writer, s: Section) -> None:
    w.add(f'<section id="{s.id}">')
    badge = f' <span class="badge {s.status_style}">{w.text(s.status)}</span>' if s.status else ""
    w.add(f"<h2>{w.text(s.title)}{badge}</h2>")
    for b in s.blocks:
        _block(w, b)
    if s.limits:
        w.add('<div class="limits"><h3>Evidence limit</h3><ul>')
        w.add("".join(f"<li>{w.text(x)}</li>" for x in s.limits))
        w.add("</ul></div>")
    w.add("</section>")


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8 text, deterministic)."""
    w = _Writer()
    w.add("<!DOCTYPE html>")
    w.add('<html lang="en"><head><meta charset="utf-8">')
    w.add(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">')
    w.add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    w.add('<meta name="referrer" content="no-referrer">')
    w.add(f"<title>{w.text(report.title)}</title>")
    w.add(f"<style>{_CSS}</style></head><body>")
    w.add('<header class="top">')
    w.add(f"<h1>{w.text(report.title)}</h1>")
    w.add(f'<div class="sub">{w.text(report.subtitle)}</div>')
    w.add('<nav class="toc">')
    w.add("\n".join(f'<a href="#{s.id}">{w.text(s.title)}</a>' for s in report.sections))
    w.add("</nav></header><main>")
    for s in report.sections:
        _section(w, s)
    w.add("</main><footer>")
    if w.neutralized:
        w.add(
            f"<p>{w.neutralized} closing reference(s) in the bundle's text are shown as code "
            f"and marked {html.escape(NEUTRALIZED_NOTE)}: the author's words are unchanged, "
            "but this report never carries closing syntax.</p>"
        )
    w.add(
        f"<p>Generated by {w.text(report.generator)} from the bundle alone, offline. "
        "This page loads nothing: no script, no font, no image from outside it.</p>"
    )
    w.add("</footer></body></html>\n")
    return "\n".join(w.parts)
