"""Audio/video coverage checks, judged on each arm by itself.

Two arms with equally truncated audio have equal PCM shapes and a perfect
spectral cosine; only checking each arm against the plan catches that. The
parameters are frozen in the bundle's plan in force (``media`` object);
defaults are in ``specs/metrics.md`` ("Coverage") and apply only to what the
plan leaves out. Each check records where its parameter came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Final

from replay.engine.verdicts import CoverageStatus
from replay.media.probe import AudioInfo, MediaProbe, VideoInfo

__all__ = [
    "DEFAULT_AV_TOLERANCE_S",
    "DEFAULT_PADDING_TOLERANCE_SAMPLES",
    "CoverageCheck",
    "CoverageParams",
    "check_coverage",
    "coverage_params",
]

DEFAULT_PADDING_TOLERANCE_SAMPLES = 2048
"""Two AAC frames: AAC rounds up to whole 1024-sample frames and pads the end."""
DEFAULT_AV_TOLERANCE_S = 0.1
"""Audio and video start (and end) times may differ by at most this."""

# Names this module's checks use; the words are :class:`CoverageStatus`'s.
PASS: Final = CoverageStatus.PASS
FAIL: Final = CoverageStatus.FAIL
NOT_FROZEN: Final = CoverageStatus.NOT_FROZEN
NOT_COMPUTED: Final = CoverageStatus.NOT_COMPUTED


def _fraction(x: Any) -> Fraction | None:
    if x is None or isinstance(x, bool) or not isinstance(x, int | float):
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return Fraction(x)


@dataclass(frozen=True)
class CoverageParams:
    """The frozen coverage parameters and where each came from."""

    num_frames: int | None
    fps: Fraction | None
    seconds: Fraction | None
    sample_rate: int | None
    padding_tolerance_samples: int
    av_tolerance_s: float
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def expected_seconds(self) -> Fraction | None:
        """Requested duration: ``num_frames / fps`` when both are frozen, else ``seconds``.

        The frame count is what the video delivers (124 frames at 24 fps are
        5.167 s for a 5-s request), so audio is held to the same span.
        """
        if self.num_frames is not None and self.fps:
            return Fraction(self.num_frames) / self.fps
        return self.seconds

    @property
    def expected_seconds_from(self) -> str:
        """Which plan fields gave :attr:`expected_seconds`."""
        if self.num_frames is not None and self.fps:
            return "num_frames/fps"
        return "seconds" if self.seconds is not None else "none"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        exp = self.expected_seconds
        return {
            "num_frames": self.num_frames,
            "fps": float(self.fps) if self.fps is not None else None,
            "seconds": float(self.seconds) if self.seconds is not None else None,
            "expected_seconds": float(exp) if exp is not None else None,
            "expected_seconds_from": self.expected_seconds_from,
            "sample_rate": self.sample_rate,
            "padding_tolerance_samples": self.padding_tolerance_samples,
            "av_tolerance_s": self.av_tolerance_s,
            "sources": dict(self.sources),
        }


def coverage_params(plan: Mapping[str, Any] | None) -> CoverageParams:
    """Read the coverage parameters from the plan in force's ``media`` object.

    Keys: ``num_frames``, ``fps``, ``seconds``, ``audio_sample_rate``,
    ``audio_padding_tolerance_samples`` and ``av_sync_tolerance_s``. The last
    two default to :data:`DEFAULT_PADDING_TOLERANCE_SAMPLES` and
    :data:`DEFAULT_AV_TOLERANCE_S`.
    """
    media = (plan or {}).get("media") or {}
    sources: dict[str, str] = {}

    def get(key: str) -> Any:
        v = media.get(key)
        if v is not None:
            sources[key] = "plan"
        return v

    num_frames = get("num_frames")
    fps = _fraction(get("fps"))
    seconds = _fraction(get("seconds"))
    rate = get("audio_sample_rate")
    tol = get("audio_padding_tolerance_samples")
    if tol is None:
        tol = DEFAULT_PADDING_TOLERANCE_SAMPLES
        sources["audio_padding_tolerance_samples"] = "default"
    av_tol = get("av_sync_tolerance_s")
    if av_tol is None:
        av_tol = DEFAULT_AV_TOLERANCE_S
        sources["av_sync_tolerance_s"] = "default"
    return CoverageParams(
        num_frames=int(num_frames) if isinstance(num_frames, int) else None,
        fps=fps,
        seconds=seconds,
        sample_rate=int(rate) if isinstance(rate, int) else None,
        padding_tolerance_samples=int(tol),
        av_tolerance_s=float(av_tol),
        sources=sources,
    )


@dataclass(frozen=True)
class CoverageCheck:
    """One coverage check on one arm's media."""

    check: str
    arm: str
    status: CoverageStatus
    observed: float | int | str | None
    expected: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


def _frame_count(v: VideoInfo | None, params: CoverageParams, arm: str) -> CoverageCheck:
    """Decoded frames equal the plan's ``num_frames``."""
    if v is None:
        return CoverageCheck("video/frame-count", arm, FAIL, None, "a video stream")
    if params.num_frames is None:
        return CoverageCheck(
            "video/frame-count", arm, NOT_FROZEN, v.frames, "plan media.num_frames"
        )
    ok = v.frames == params.num_frames
    return CoverageCheck(
        "video/frame-count", arm, PASS if ok else FAIL, v.frames, f"== {params.num_frames}"
    )


def _sample_rate(a: AudioInfo, params: CoverageParams, arm: str) -> CoverageCheck:
    if params.sample_rate is None:
        return CoverageCheck(
            "audio/sample-rate", arm, NOT_FROZEN, a.sample_rate, "plan media.audio_sample_rate"
        )
    ok = a.sample_rate == params.sample_rate
    return CoverageCheck(
        "audio/sample-rate", arm, PASS if ok else FAIL, a.sample_rate, f"== {params.sample_rate}"
    )


def _samples_cover(a: AudioInfo, params: CoverageParams, arm: str) -> CoverageCheck:
    """Decoded samples in [expected, expected + padding tolerance] per channel."""
    exp_s = params.expected_seconds
    rate = params.sample_rate or a.sample_rate
    if exp_s is None:
        return CoverageCheck(
            "audio/samples-cover-duration",
            arm,
            NOT_FROZEN,
            a.samples,
            "plan media.num_frames and fps, or seconds",
        )
    lo = exp_s * rate
    hi = lo + params.padding_tolerance_samples
    ok = lo <= a.samples <= hi
    detail = (
        f"{params.expected_seconds_from} = {float(exp_s):.6g} s × {rate} Hz; "
        f"{a.samples - float(lo):+.1f} samples against the expected"
    )
    return CoverageCheck(
        "audio/samples-cover-duration",
        arm,
        PASS if ok else FAIL,
        a.samples,
        f"[{float(lo):.1f}, {float(hi):.1f}]",
        detail,
    )


def _av_agree(
    v: VideoInfo | None, a: AudioInfo, params: CoverageParams, arm: str
) -> list[CoverageCheck]:
    """Audio and video start (and end) within the A/V tolerance."""
    out: list[CoverageCheck] = []
    tol = params.av_tolerance_s
    for name, vt, at in (
        ("av/start-agree", v.start_s if v else None, a.start_s),
        ("av/end-agree", v.end_s if v else None, a.end_s),
    ):
        if vt is None or at is None:
            out.append(CoverageCheck(name, arm, NOT_COMPUTED, None, f"|audio − video| <= {tol} s"))
            continue
        diff = at - vt
        out.append(
            CoverageCheck(
                name,
                arm,
                PASS if abs(diff) <= tol else FAIL,
                round(diff, 6),
                f"|audio − video| <= {tol} s",
                f"video {vt:.6f} s, audio {at:.6f} s",
            )
        )
    return out


def check_coverage(probe: MediaProbe, params: CoverageParams, arm: str) -> list[CoverageCheck]:
    """Check one arm's decoded media against the frozen plan.

    Checks: ``video/frame-count``, ``audio/present``, ``audio/sample-rate``,
    ``audio/samples-cover-duration``, ``av/start-agree``, ``av/end-agree``.
    """
    v, a = probe.video, probe.audio
    out = [_frame_count(v, params, arm)]
    if a is None:
        audio_expected = params.sample_rate is not None
        out.append(
            CoverageCheck(
                "audio/present",
                arm,
                FAIL if audio_expected else NOT_FROZEN,
                None,
                "an audio stream" if audio_expected else "plan media.audio_sample_rate",
            )
        )
        return out
    out.append(CoverageCheck("audio/present", arm, PASS, a.channels, "an audio stream"))
    out.append(_sample_rate(a, params, arm))
    out.append(_samples_cover(a, params, arm))
    return out + _av_agree(v, a, params, arm)
