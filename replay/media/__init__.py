"""Media replay: re-score quality comparisons from raw media (issue 4).

Importing this package loads numpy and scipy only; PyAV is imported when media
is decoded, and torch/torchvision/lpips (the ``[lpips]`` extra) only when an
LPIPS scorer is built (:mod:`replay.media.lpips_attested`).

Entry point: :func:`rescore_bundle` (takes a :class:`bundler.verified.VerifiedBundle`);
text rendering: :func:`format_report`. Modules: ``bundle_read`` (reading the
bundle), ``scoring`` (one pair), ``judge`` (metrics and gates, by
:mod:`replay.sections.gates`), ``result`` (result types and verdict), ``format`` (text),
``pipeline`` (one comparison), ``executors`` (local threads or Ray tasks),
``rescore`` (orchestration). LPIPS: ``lpips_attested`` (building the scorer from
attested weights), ``lpips_weights`` (finding and checking the weight files),
``lpips_net`` (the network and its forward pass), ``lpips_batch`` (frames per pass),
``lpips_identity`` (what the result records), ``device`` (the torch device),
``colour`` (YUV frames to LPIPS input).
"""

from replay.media.device import DeviceError
from replay.media.format import format_report
from replay.media.rescore import rescore_bundle
from replay.media.result import MediaProgress, MediaReplayResult
from replay.media.scoring import PairScores, score_pair

__all__ = [
    "DeviceError",
    "MediaProgress",
    "MediaReplayResult",
    "PairScores",
    "format_report",
    "rescore_bundle",
    "score_pair",
]
