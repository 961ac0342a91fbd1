"""Untrusted text, made safe to print in HTML and to paste as Markdown.

Every string of a report may come from the bundle (ids, reasons, evidence,
derivations naming servers), and the bundle is untrusted input. Both renderers
split each string with :func:`segments` first:

- a closing reference (a keyword such as "fixes" or "closes" directly before
  ``#9241``, ``owner/repo#12`` or an issue/pull URL) keeps the author's words,
  but the reference itself is marked ``ref``: the renderers show it as code,
  followed by a visible note.
  Code is never linked by GitHub, so pasting the report into a pull request
  closes nothing, and the raw text no longer has a keyword directly before a
  reference, so ``bundle lint-text`` passes it. The author's text is not
  rewritten silently: the characters are all there, and the note says why
  they look different.
- in Markdown, an ``@name`` is shown as code too (a pasted report must not
  notify people the bundle names), and so is a bare ``http://``, ``https://``,
  ``ftp://`` or ``www.`` link (GitHub would turn it into a live link); every
  other Markdown-active character is backslash-escaped (:func:`markdown_escape`).
  GitHub mentions anyone whose ``@name`` follows a character other than an ASCII
  letter, digit or underscore (a backtick, escaped or not, or a non-ASCII letter
  too), so only those three keep an ``@`` plain.
- in HTML, everything is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from bundler._internal.textsafe import drop_unsafe
from bundler.lint_text import find_closing_references

__all__ = [
    "NEUTRALIZED_NOTE",
    "Segment",
    "html_text",
    "markdown_code",
    "markdown_escape",
    "markdown_line_start",
    "markdown_text",
    "one_line",
    "segments",
]

NEUTRALIZED_NOTE = "[closing syntax: reference shown as code]"
"""Printed after every neutralized reference, in both forms."""

# What GitHub would turn into a notification or a link, wherever it stands in a line:
# an @name (or @org/team) not preceded by an ASCII word character (GitHub's mention
# filter tests ASCII \w, so "é@bob" and "`@bob" notify bob), and the extended
# autolinks of GitHub-flavoured Markdown (a scheme URL, or one that starts "www.").
# A link stops before whitespace and the characters that would end a code span or
# a table cell; what follows is escaped as usual.
_LIVE = re.compile(
    r"(?<![A-Za-z0-9_])@[A-Za-z0-9](?:[A-Za-z0-9-]|/)*"
    r"|(?i:(?:https?|ftp)://|www\.)[^\s|`<>]*"
)
# Characters that start or change Markdown markup anywhere in a line (GitHub flavour:
# emphasis, code, links, raw HTML, tables, strikethrough, entities, headings).
_MD_ACTIVE = re.compile(r"([\\`*_\[\]<>|~&#])")
# ... and those that matter only at the start of a line (lists, quotes, rules, headings).
_MD_LEADING = re.compile(r"^(\s*)([-+=>]|\d+(?=[.)]))")
_BREAKS = re.compile("[\n\r\t\u2028\u2029]")


@dataclass(frozen=True)
class Segment:
    """A piece of a string: plain text, or a reference that follows a closing keyword."""

    text: str
    ref: bool = False


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` on one line, cut at ``limit`` characters.

    Line breaks (``\\n``, ``\\r``, U+2028, U+2029) and tabs become spaces; every other
    control, bidi or invisible format character is dropped
    (:func:`bundler._internal.textsafe.drop_unsafe`), so that a pasted report
    reads in the order its characters are stored.
    """
    flat = drop_unsafe(_BREAKS.sub(" ", text))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def segments(text: str) -> list[Segment]:
    """Split ``text`` (one line) around the references of its closing syntax."""
    out: list[Segment] = []
    pos = 0
    for found in find_closing_references(text):
        start = found.column - 1 + len(found.text) - len(found.reference)
        if start < pos:  # overlapping match: already covered
            continue
        if start > pos:
            out.append(Segment(text[pos:start]))
        out.append(Segment(found.reference, ref=True))
        pos = start + len(found.reference)
    if pos < len(text):
        out.append(Segment(text[pos:]))
    return out


def html_text(text: str) -> tuple[str, int]:
    """``text`` as escaped HTML, and how many closing references it neutralized."""
    parts = []
    n = 0
    for s in segments(one_line(text)):
        if s.ref:
            n += 1
            parts.append(
                f'<code class="neutralized">{html.escape(s.text)}</code> '
                f'<span class="flag">{html.escape(NEUTRALIZED_NOTE)}</span>'
            )
        else:
            parts.append(html.escape(s.text))
    return "".join(parts), n


def markdown_code(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds."""
    text = one_line(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_escape(text: str) -> str:
    """Backslash-escape every Markdown-active character of ``text`` (no neutralizing)."""
    return _MD_ACTIVE.sub(r"\\\1", text)


def markdown_line_start(line: str) -> str:
    """``line`` made safe to start a Markdown line: no list, quote, rule or setext marker."""
    line = line.lstrip()  # four leading spaces would make an indented code block
    m = _MD_LEADING.match(line)
    if m is None:
        return line
    if m.group(2)[0].isdigit():
        end = m.end()
        return f"{line[:end]}\\{line[end:]}"
    return f"{m.group(1)}\\{line[m.start(2) :]}"


def markdown_text(text: str) -> tuple[str, int]:
    """``text`` as inert Markdown, and how many closing references it neutralized."""
    parts = []
    n = 0
    for s in segments(one_line(text)):
        if s.ref:
            n += 1
            parts.append(f"{markdown_code(s.text)} {markdown_escape(NEUTRALIZED_NOTE)}")
            continue
        pos = 0
        for m in _LIVE.finditer(s.text):
            parts.append(markdown_escape(s.text[pos : m.start()]))
            parts.append(markdown_code(m.group(0)))
            pos = m.end()
        parts.append(markdown_escape(s.text[pos:]))
    return "".join(parts), n
