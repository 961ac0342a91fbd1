"""The optional sections, under their former names: a media replay and a rerun comparison.

Kept so that ``from replay.report.html.extras import ...`` works: the sections now
live next to the others (:mod:`replay.report.html.sections.media`,
:mod:`replay.report.html.sections.rerun`), and the checks of their untrusted JSON
forms in :mod:`replay.report.html.jsonform`.
"""

from __future__ import annotations

from replay.report.html.jsonform import normalize_media, normalize_rerun
from replay.report.html.sections.media import MEDIA_LIMITS, media_section
from replay.report.html.sections.rerun import RERUN_LIMITS, rerun_section

__all__ = [
    "MEDIA_LIMITS",
    "RERUN_LIMITS",
    "media_section",
    "normalize_media",
    "normalize_rerun",
    "rerun_section",
]
