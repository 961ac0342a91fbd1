"""How the views spell and colour the verdict words of :mod:`replay.engine.verdicts`.

The sections decide with the enums; every view (terminal, Markdown, HTML) shows
them through here, so a word is shouted or coloured the same way everywhere.
"""

from __future__ import annotations

from replay.engine.verdicts import ClaimStatus, GateVerdict, MediaVerdict, Outcome, Reproduction

__all__ = [
    "CLAIM_STYLE",
    "OUTCOME_STYLE",
    "VERDICT_STYLE",
    "reproduction_style",
    "shout",
    "verdict_style",
]

OUTCOME_STYLE: dict[Outcome, str] = {
    Outcome.CONFIRMED: "good",
    Outcome.CONTRADICTED: "bad",
    Outcome.INTEGRITY_FAILED: "bad",
    Outcome.UNVERIFIED: "warn",
    Outcome.NOT_EVIDENCED: "",  # neutral: nothing evidenced is neither a pass nor a failure
}
CLAIM_STYLE: dict[str, str] = {
    ClaimStatus.CONFIRMED: "good",
    ClaimStatus.CONTRADICTED: "bad",
    ClaimStatus.UNVERIFIABLE: "warn",
}
VERDICT_STYLE: dict[str, str] = {
    GateVerdict.PASS: "good",
    GateVerdict.FAIL: "bad",
    MediaVerdict.PASS: "good",
    MediaVerdict.FAIL: "bad",
    MediaVerdict.MISMATCH: "bad",
}
"""Gate and media verdicts; any other word (unattested, not-computed, INCOMPLETE) is a
warning: never shown as a pass."""

_REPRODUCTION_STYLE = {
    Reproduction.REPRODUCED: "good",
    Reproduction.NOT_REPRODUCED: "bad",
    Reproduction.NOT_JUDGED: "warn",
}


def verdict_style(word: str) -> str:
    """The style of a gate or media verdict (``good``, ``bad``, else ``warn``)."""
    return VERDICT_STYLE.get(word, "warn")


def reproduction_style(word: Reproduction) -> str:
    """The style of a rerun's reproduction word."""
    return _REPRODUCTION_STYLE[word]


def shout(verdict: str) -> str:
    """A verdict as the terminal and Markdown lists print it (``fail`` → ``FAIL``)."""
    return verdict.upper()
