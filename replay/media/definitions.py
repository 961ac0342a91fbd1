"""The metric definitions the media replay implements, by frozen id (``specs/metrics.md``).

A gate names its metric's definition; a recorded metric with no gate gets the
default definition of its name. An id not listed here is reported as
``unsupported-definition``: the replay never guesses what a gate meant.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALIASES",
    "DEFAULT_DEFINITION",
    "DEFINITIONS",
    "Definition",
    "canonical",
]


@dataclass(frozen=True)
class Definition:
    """One frozen metric definition."""

    id: str
    metric: str
    """The metric name it is usually recorded under in ``comparisons.metrics``."""
    kind: str
    """``video``, ``lpips``, ``audio`` or ``probe``: which part of the decode it needs."""
    tolerance: float
    """Recorded and recomputed values agree when ``|recorded − recomputed| <= tolerance``."""
    summary: str


_DEFS = (
    Definition(
        "ssim/ffmpeg-y-frame-mean",
        "ssim",
        "video",
        1e-3,
        "FFmpeg vf_ssim on the raw Y plane: 4×4 block sums, overlapping 8×8 windows step 4, "
        "per-frame mean over windows, mean over the frames both arms have",
    ),
    Definition(
        "ssim/wang-gaussian-y-frame-mean",
        "ssim",
        "video",
        1e-3,
        "Wang et al. 2004 on the raw Y plane: 11×11 Gaussian σ 1.5, K1 0.01, K2 0.03, "
        "L 255, population covariances, map cropped by 5 px, mean over frames",
    ),
    Definition(
        "psnr/y-mse-mean-db",
        "psnr",
        "video",
        0.05,
        "10·log10(255² / mean over frames of the Y-plane MSE) (FFmpeg psnr's y average); "
        "inf for identical planes",
    ),
    Definition(
        "lpips/alex-v0.1-frame-mean",
        "lpips",
        "lpips",
        2e-3,
        "lpips 0.1.4 AlexNet v0.1 on full-resolution BT.601 RGB in [−1, 1], per frame, "
        "mean over frames; attested weights only",
    ),
    Definition(
        "audio/stft-cosine-512-1024-2048",
        "audio_spectral_cosine",
        "audio",
        1e-3,
        "per channel cosine of |STFT| (periodic Hann, hop n_fft/4, reflect-centred), "
        "mean over n_fft ∈ {512, 1024, 2048} × channels",
    ),
    Definition(
        "audio/rms-ratio",
        "audio_rms_ratio",
        "audio",
        2e-3,
        "RMS(candidate) / max(RMS(baseline), 1e-12) over all channels and samples",
    ),
    Definition(
        "audio/decoded-sample-rate-hz",
        "audio_sample_rate",
        "probe",
        0.0,
        "the candidate's decoded audio sample rate in Hz",
    ),
    Definition(
        "audio/decoded-samples-per-channel",
        "audio_samples",
        "probe",
        0.0,
        "the candidate's decoded PCM samples per channel (AAC end padding included)",
    ),
    Definition(
        "video/decoded-frame-count",
        "frame_count",
        "probe",
        0.0,
        "the candidate's video frames counted by decoding",
    ),
)

DEFINITIONS: dict[str, Definition] = {d.id: d for d in _DEFS}

ALIASES: dict[str, str] = {
    # The seed campaign spells the RMS ratio's id out; same definition.
    "audio/rms-ratio-candidate-over-baseline": "audio/rms-ratio",
}

DEFAULT_DEFINITION: dict[str, str] = {
    "ssim": "ssim/ffmpeg-y-frame-mean",
    "psnr": "psnr/y-mse-mean-db",
    "lpips": "lpips/alex-v0.1-frame-mean",
    "audio_spectral_cosine": "audio/stft-cosine-512-1024-2048",
    "audio_rms_ratio": "audio/rms-ratio",
    "audio_sample_rate": "audio/decoded-sample-rate-hz",
    "audio_samples": "audio/decoded-samples-per-channel",
    "frame_count": "video/decoded-frame-count",
}
"""Definition of a recorded metric that no gate names."""


def canonical(definition_id: str) -> str | None:
    """The implemented definition id for ``definition_id`` (aliases resolved), or None."""
    d = ALIASES.get(definition_id, definition_id)
    return d if d in DEFINITIONS else None
