"""The one verdict vocabulary of replay: every word a section decides, and the precedence.

Each enum's values are exactly the strings the outputs (JSON, text, Markdown,
HTML) have always carried, so a member prints, compares and serialises as its
word. Sections decide with these members; views only spell them for display
(:mod:`replay.report.verdict_words`).

- :class:`Outcome`: the one verdict of a replay, or of one section judged alone
  (:func:`decide`), with its exit code.
- :class:`GateVerdict`: a gate on one value (``pass``/``fail``/``unattested``), plus
  the reasons a media re-score has no value to judge (``not-recorded``,
  ``not-computed``, ``unsupported-definition``).
- :class:`ClaimStatus`: a claim recomputed from the tables.
- :class:`MediaVerdict`: a re-scored comparison, and the media section's word for its
  :class:`Outcome`.
- :class:`Reproduction`: a rerun's effect against the sealed one.
- :class:`CoverageStatus`: an audio/video coverage check of one arm (media).
- :class:`FileStatus`: where a file a replay needs was found (media outputs, LPIPS weights).
- :class:`Agreement`: a re-derived metric against the recorded one (media).
- :class:`ScorerStatus`: whether the LPIPS scorer a replay used was attested.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from bundler.errors import (
    EXIT_CLAIM_CONTRADICTED,
    EXIT_INTEGRITY,
    EXIT_OK,
    EXIT_UNVERIFIABLE,
)

__all__ = [
    "Agreement",
    "ClaimStatus",
    "CoverageStatus",
    "FileStatus",
    "GateVerdict",
    "MediaVerdict",
    "Outcome",
    "Reproduction",
    "ScorerStatus",
    "decide",
]


class Outcome(enum.StrEnum):
    """The one-word verdict of a replay, in precedence order (first wins)."""

    INTEGRITY_FAILED = "INTEGRITY FAILED"
    CONTRADICTED = "CONTRADICTED"
    UNVERIFIED = "UNVERIFIED"
    NOT_EVIDENCED = "NOT EVIDENCED"
    CONFIRMED = "CONFIRMED"

    @property
    def exit_code(self) -> int:
        """The process exit code of this outcome (``docs/exit-codes.md``)."""
        return _EXIT[self]


_EXIT = {
    Outcome.INTEGRITY_FAILED: EXIT_INTEGRITY,
    Outcome.CONTRADICTED: EXIT_CLAIM_CONTRADICTED,
    Outcome.UNVERIFIED: EXIT_UNVERIFIABLE,
    Outcome.NOT_EVIDENCED: EXIT_UNVERIFIABLE,
    Outcome.CONFIRMED: EXIT_OK,
}


def decide(
    integrity_failures: Sequence[str], failures: Sequence[str], gaps: Sequence[str]
) -> Outcome:
    """The outcome of reasons, most severe first: integrity (1) > failed (4) > gap (5) > 0.

    The replay's outcome is this over every section (plus NOT EVIDENCED, which only
    the whole result can tell); a section judged alone (the media re-score) is this
    over its own reasons.
    """
    if integrity_failures:
        return Outcome.INTEGRITY_FAILED
    if failures:
        return Outcome.CONTRADICTED
    if gaps:
        return Outcome.UNVERIFIED
    return Outcome.CONFIRMED


class GateVerdict(enum.StrEnum):
    """A gate's verdict on one value (``specs/gates.md``); the last three only in media."""

    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    UNATTESTED = "unattested"
    NOT_RECORDED = "not-recorded"
    """No recorded value to judge."""
    NOT_COMPUTED = "not-computed"
    """No re-derived value to judge."""
    UNSUPPORTED = "unsupported-definition"
    """The gate's definition is not implemented: nothing to re-derive it by."""


class ClaimStatus(enum.StrEnum):
    """A claim recomputed from the bundle's tables."""

    CONFIRMED = "confirmed"
    CONTRADICTED = "contradicted"
    UNVERIFIABLE = "unverifiable"


class MediaVerdict(enum.StrEnum):
    """A re-scored comparison's verdict, most severe first; also the media section's word."""

    MISMATCH = "MISMATCH"
    FAIL = "FAIL"
    INCOMPLETE = "INCOMPLETE"
    PASS = "PASS"  # noqa: S105 - a verdict, not a password

    @classmethod
    def of(cls, outcome: Outcome) -> MediaVerdict:
        """The media section's word for its outcome (``specs/gates.md``)."""
        return _MEDIA_WORD[outcome]


_MEDIA_WORD = {
    Outcome.INTEGRITY_FAILED: MediaVerdict.MISMATCH,
    Outcome.CONTRADICTED: MediaVerdict.FAIL,
    Outcome.UNVERIFIED: MediaVerdict.INCOMPLETE,
    Outcome.CONFIRMED: MediaVerdict.PASS,
}


class Reproduction(enum.StrEnum):
    """Whether a rerun reproduced the sealed effect (``RerunComparison.reproduced``)."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "NOT reproduced"
    NOT_JUDGED = "not judged"

    @classmethod
    def of(cls, reproduced: bool | None) -> Reproduction:
        """The word for ``True`` / ``False`` / ``None`` (could not be judged)."""
        if reproduced is None:
            return cls.NOT_JUDGED
        return cls.REPRODUCED if reproduced else cls.NOT_REPRODUCED


class CoverageStatus(enum.StrEnum):
    """An audio/video coverage check of one arm against the plan (``specs/metrics.md``)."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    FAIL = "FAIL"
    NOT_FROZEN = "not-frozen"
    """The plan freezes no value to check against."""
    NOT_COMPUTED = "not-computed"
    """The value could not be measured (a stream is missing)."""


class FileStatus(enum.StrEnum):
    """Where a file the replay needs was found, by its SHA-256; the last three only for weights."""

    OK = "ok"
    ABSENT = "absent"
    MISMATCH = "mismatch"
    NOT_ATTESTED = "not-attested"
    """The bundle lists no such digest: the file is not part of what it attests."""
    UNREADABLE = "unreadable"
    BAD_LAYOUT = "bad-layout"
    """An LPIPS weights file that does not load as the layout the scorer needs."""
    UNUSED = "unused"
    """An LPIPS weights file of a role the scorer does not read."""
    NOT_LOOKED_FOR = "not-looked-for"
    """An LPIPS weights file the replay refused before looking for it."""


class Agreement(enum.StrEnum):
    """A re-derived media metric against the recorded one, within the gate's tolerance."""

    AGREE = "agree"
    DISAGREE = "disagree"


class ScorerStatus(enum.StrEnum):
    """Whether the LPIPS scorer a replay used is the one the bundle attests."""

    ATTESTED = "attested"
    UNATTESTED = "unattested"
