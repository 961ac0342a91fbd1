"""Find closing syntax in summary text: a closing keyword directly before an issue or PR reference.

GitHub closes the referenced issue when a pull request body says e.g.
"fixes #9241" (keywords close/closes/closed, fix/fixes/fixed,
resolve/resolves/resolved, case-insensitive, optionally followed by a colon)
followed by ``#N``, ``owner/repo#N`` or an issue/pull URL. The seed's summary
closed the wrong thing that way; generated summaries must cite sources
without it ("multi-video correction (vLLM-Omni PR 9241)").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ClosingReference", "find_closing_references"]

_KEYWORDS = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_REF = (
    r"(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+"
    r"|https?://[^\s/]+/[^\s/]+/[^\s/]+/(?:issues|pull)/\d+"
)
_PATTERN = re.compile(rf"\b({_KEYWORDS})(?::)?\s+(?:\[)?({_REF})", re.IGNORECASE)


@dataclass(frozen=True)
class ClosingReference:
    """One closing keyword before a reference: where it is and what it says."""

    line: int
    column: int
    keyword: str
    reference: str
    text: str


def find_closing_references(text: str) -> list[ClosingReference]:
    """Every closing-keyword reference in ``text``, with 1-based line and column."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        for m in _PATTERN.finditer(line):
            out.append(ClosingReference(n, m.start() + 1, m.group(1), m.group(2), m.group(0)))
    return out
