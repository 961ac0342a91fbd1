"""Score one (baseline, candidate) pair: decode both files once, in lockstep, and measure.

Each arm is decoded on its own thread and guarded on its own: a packet that
does not decode stops that arm only, and the other arm is still decoded to
the end (its probe is still reported). Metrics are published only when both
arms decoded completely; otherwise every metric says which arm did not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, Final

from replay.engine.verdicts import GateVerdict
from replay.media.audio import rms_ratio, spectral_cosine
from replay.media.colour import yuv420p_to_rgb
from replay.media.definitions import canonical
from replay.media.lpips_identity import LPIPS_DEFINITION
from replay.media.lpips_net import AttestedLpips
from replay.media.probe import (
    DecodedMedia,
    MediaDecodeError,
    MediaProbe,
    MediaReader,
    MediaUnsupportedError,
    YuvFrame,
    prefetch,
)
from replay.media.psnr import psnr_from_mses
from replay.media.ssim import ssim_ffmpeg_y_with_sse, ssim_wang_y

__all__ = [
    "COSINE",
    "PSNR",
    "RMS",
    "SSIM_FFMPEG",
    "SSIM_WANG",
    "Computed",
    "PairScores",
    "score_pair",
]

SSIM_FFMPEG: Final = "ssim/ffmpeg-y-frame-mean"
SSIM_WANG: Final = "ssim/wang-gaussian-y-frame-mean"
PSNR: Final = "psnr/y-mse-mean-db"
COSINE: Final = "audio/stft-cosine-512-1024-2048"
RMS: Final = "audio/rms-ratio"
_PROBE_RATE: Final = "audio/decoded-sample-rate-hz"
_PROBE_SAMPLES: Final = "audio/decoded-samples-per-channel"
_PROBE_FRAMES: Final = "video/decoded-frame-count"


@dataclass
class Computed:
    """Re-derived values by definition id, and why the others were not computed."""

    values: dict[str, float] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


class _FrameScores:
    """Per-frame video metrics of one comparison, fed pair by pair in decode order."""

    def __init__(self, defs: set[str], scorer: AttestedLpips | None) -> None:
        self.scorer = scorer if LPIPS_DEFINITION in defs else None
        self.wang = SSIM_WANG in defs
        self.per_frame: dict[str, list[float]] = {SSIM_FFMPEG: [], "mse/y": []}
        if self.wang:
            self.per_frame[SSIM_WANG] = []
        if self.scorer is not None:
            self.per_frame[LPIPS_DEFINITION] = []
        self._a: list[Any] = []
        self._b: list[Any] = []
        self.problem: str | None = None

    @property
    def frames(self) -> int:
        return len(self.per_frame[SSIM_FFMPEG])

    def add(self, fa: YuvFrame, fb: YuvFrame) -> None:
        if self.problem is not None:
            return
        if fa.y.shape != fb.y.shape:
            self.problem = f"resolutions differ: baseline {fa.y.shape}, candidate {fb.y.shape}"
            return
        s, sse = ssim_ffmpeg_y_with_sse(fa.y, fb.y)
        self.per_frame[SSIM_FFMPEG].append(s)
        self.per_frame["mse/y"].append(sse / fa.y.size)
        if self.wang:
            self.per_frame[SSIM_WANG].append(ssim_wang_y(fa.y, fb.y))
        if self.scorer is not None:
            if fa.u is None or fa.v is None or fb.u is None or fb.v is None:
                raise MediaUnsupportedError("chroma planes missing for LPIPS")
            self._a.append(yuv420p_to_rgb(fa.y, fa.u, fa.v))
            self._b.append(yuv420p_to_rgb(fb.y, fb.u, fb.v))
            if len(self._a) >= self.scorer.batch_for(*fa.y.shape):
                self.flush()

    def flush(self) -> None:
        if self.scorer is not None and self._a:
            self.per_frame[LPIPS_DEFINITION].extend(self.scorer.distances(self._a, self._b))
            self._a.clear()
            self._b.clear()

    def into(self, out: Computed, defs: set[str]) -> None:
        self.flush()
        for d in (SSIM_FFMPEG, SSIM_WANG, LPIPS_DEFINITION):
            if d != SSIM_FFMPEG and d not in defs:
                continue
            vals = self.per_frame.get(d)
            if d == LPIPS_DEFINITION and vals is None:
                out.why[d] = GateVerdict.UNATTESTED
            elif self.problem or not vals:
                out.why[d] = self.problem or "no frame to compare"
            else:
                out.values[d] = math.fsum(vals) / len(vals)
        mses = self.per_frame["mse/y"]
        if mses and not self.problem:
            out.values[PSNR] = psnr_from_mses(mses)
        else:
            out.why[PSNR] = self.problem or "no frame to compare"


class _GuardedArm:
    """One arm's reader whose decode failure is kept, not raised, so the other arm goes on."""

    def __init__(self, source: bytes | Path, *, chroma: bool, threads: int) -> None:
        self.reader = MediaReader(source, chroma=chroma, threads=threads)
        self.error: MediaDecodeError | None = None

    def frames(self) -> Iterator[YuvFrame]:
        try:
            yield from self.reader.frames()
        except MediaDecodeError as exc:
            self.error = exc

    def decoded(self) -> DecodedMedia | None:
        return None if self.error is not None else self.reader.finish()


@dataclass
class PairScores:
    """Every metric of one (baseline, candidate) pair, from one decode of each file."""

    values: dict[str, float]
    """definition id -> value."""
    why: dict[str, str]
    """definition id -> why it was not computed."""
    per_frame: dict[str, list[float]]
    frames_compared: int
    baseline: DecodedMedia | None
    """None when the baseline did not decode (see ``errors``)."""
    candidate: DecodedMedia | None
    problems: list[str]
    errors: dict[str, MediaDecodeError] = field(default_factory=dict)
    """``baseline``/``candidate`` -> why that arm did not decode."""


def score_pair(
    baseline: bytes | Path,
    candidate: bytes | Path,
    *,
    definitions: Iterable[str] = (SSIM_FFMPEG, PSNR, COSINE, RMS),
    scorer: AttestedLpips | None = None,
    threads: int = 0,
    on_frame: Callable[[int], None] | None = None,
) -> PairScores:
    """Decode both files once, in lockstep on two threads, and score them.

    FFmpeg-definition SSIM and PSNR are always computed; Wang SSIM and LPIPS
    when their definition ids are asked for (LPIPS needs ``scorer``); audio
    and probe metrics always. Frames only one file has are counted (see the
    probes) but never scored. An arm that does not decode is reported in
    ``errors`` (the other arm is still decoded to the end) and no metric is
    published.

    Args:
        baseline: the baseline file's verified bytes (or a path).
        candidate: the candidate's.
        definitions: definition ids to compute (see ``specs/metrics.md``).
        scorer: an attested LPIPS scorer, or None.
        threads: FFmpeg decoder threads per file (0: FFmpeg chooses).
        on_frame: called with the number of frame pairs decoded so far.

    Raises:
        MediaUnsupportedError: LPIPS was asked for and a frame lacks chroma planes.
    """
    defs = {c for d in definitions if (c := canonical(d))}
    scores = _FrameScores(defs, scorer)
    chroma = scores.scorer is not None
    arms = {
        "baseline": _GuardedArm(baseline, chroma=chroma, threads=threads),
        "candidate": _GuardedArm(candidate, chroma=chroma, threads=threads),
    }
    pairs = zip_longest(*(prefetch(a.frames()) for a in arms.values()))
    for n, (fa, fb) in enumerate(pairs, start=1):
        if fa is not None and fb is not None:
            scores.add(fa, fb)
        if on_frame is not None:
            on_frame(n)
    da, db = arms["baseline"].decoded(), arms["candidate"].decoded()
    errors = {role: a.error for role, a in arms.items() if a.error is not None}
    out = Computed()
    if da is None or db is None:
        why = " and ".join(f"the {role} does not decode" for role in errors)
        for d in (
            *defs,
            SSIM_FFMPEG,
            PSNR,
            COSINE,
            RMS,
            _PROBE_RATE,
            _PROBE_SAMPLES,
            _PROBE_FRAMES,
        ):
            out.why[d] = why
        return PairScores(out.values, out.why, {}, 0, da, db, [], errors)
    scores.into(out, defs)
    _audio_metrics(out, da, db)
    _probe_metrics(out, db.probe)
    return PairScores(
        out.values,
        out.why,
        {k: v for k, v in scores.per_frame.items() if v},
        scores.frames,
        da,
        db,
        [scores.problem] if scores.problem else [],
    )


def _audio_metrics(out: Computed, da: DecodedMedia, db: DecodedMedia) -> None:
    if da.audio is None or db.audio is None:
        out.why[COSINE] = out.why[RMS] = "an arm has no audio stream"
        return
    try:
        out.values[COSINE] = spectral_cosine(da.audio, db.audio)
        out.values[RMS] = rms_ratio(da.audio, db.audio)
    except ValueError as exc:
        out.why[COSINE] = out.why[RMS] = str(exc)


def _probe_metrics(out: Computed, cand: MediaProbe) -> None:
    if cand.audio is not None:
        out.values[_PROBE_RATE] = float(cand.audio.sample_rate)
        out.values[_PROBE_SAMPLES] = float(cand.audio.samples)
    else:
        out.why[_PROBE_RATE] = out.why[_PROBE_SAMPLES] = "the candidate has no audio stream"
    if cand.video is not None:
        out.values[_PROBE_FRAMES] = float(cand.video.frames)
    else:
        out.why[_PROBE_FRAMES] = "the candidate has no video stream"
