"""Media replay: re-score quality comparisons from raw media (issue 4).

Importing this package loads numpy and scipy only; PyAV is imported when media
is decoded, and torch/torchvision/lpips (the ``[lpips]`` extra) only when an
LPIPS scorer is built (:mod:`replay.media.lpips_attested`).

Entry point: :func:`rescore_bundle`; text rendering: :func:`format_report`.
"""

from replay.media.lpips_attested import DeviceError
from replay.media.rescore import (
    MediaProgress,
    MediaReplayResult,
    PairScores,
    format_report,
    rescore_bundle,
    score_pair,
)

__all__ = [
    "DeviceError",
    "MediaProgress",
    "MediaReplayResult",
    "PairScores",
    "format_report",
    "rescore_bundle",
    "score_pair",
]
