"""The optional sections, under their former names: a media replay and a rerun comparison.

Kept so that ``from replay.html.extras import ...`` works: the sections now
live next to the others (:mod:`replay.html.sections.media`,
:mod:`replay.html.sections.rerun`), and the checks of their untrusted JSON
forms in :mod:`replay.html.jsonform`.
"""

from __future__ import annotations

from replay.html.jsonform import normalize_media, normalize_rerun
from replay.html.sections.media import MEDIA_LIMITS, media_section
from replay.html.sections.rerun import RERUN_LIMITS, rerun_section

__all__ = [
    "MEDIA_LIMITS",
    "RERUN_LIMITS",
    "media_section",
    "normalize_media",
    "normalize_rerun",
    "rerun_section",
]
