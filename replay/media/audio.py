"""Audio spectral cosine and RMS ratio (``audio/stft-cosine-512-1024-2048``, ``audio/rms-ratio``).

Definitions (frozen in ``specs/metrics.md``), on float32 PCM ``[channels,
samples]`` decoded from each arm:

- STFT of one channel for ``n_fft``: periodic Hann window of length ``n_fft``,
  hop ``n_fft / 4``, the signal reflect-padded by ``n_fft / 2`` on both sides
  (``torch.stft``'s ``center=True, pad_mode="reflect"``; scipy's
  ``boundary="even"``), frames ``1 + samples // hop``, one-sided ``rfft``,
  magnitudes. Computed in float64.
- Spectral cosine for one channel and ``n_fft``: flatten both magnitude
  arrays; ``dot / (max(‖a‖, 1e-12) · max(‖b‖, 1e-12))``
  (``torch.nn.functional.cosine_similarity(eps=1e-12)``).
- The metric: arithmetic mean over ``n_fft`` in {512, 1024, 2048} × channels.
- RMS ratio: ``rms(candidate) / max(rms(baseline), 1e-12)``, RMS over every
  sample of every channel.

Both arms must have the same channel count. When their lengths differ, the
shorter is zero-padded to the longer: missing audio counts as silence, so a
truncated arm lowers both metrics instead of being compared over a flattering
common prefix. Lengths are judged on their own by the coverage checks
(:mod:`replay.media.coverage`); equal lengths prove nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["EPS", "N_FFTS", "rms", "rms_ratio", "spectral_cosine", "stft_magnitude"]

N_FFTS: tuple[int, ...] = (512, 1024, 2048)
EPS = 1e-12

F64 = npt.NDArray[np.float64]


def _hann(n: int) -> F64:
    # Periodic Hann (torch.hann_window's default, scipy.signal.get_window("hann")).
    k = np.arange(n, dtype=np.float64)
    w: F64 = 0.5 - 0.5 * np.cos(2.0 * np.pi * k / n)
    return w


def _frames_magnitude(sig: F64, n_fft: int) -> F64:
    """|STFT| as ``[frames, n_fft // 2 + 1]``, C-contiguous (cheap to flatten)."""
    import scipy.fft

    half = n_fft // 2
    if sig.shape[0] <= half:
        raise ValueError(f"{sig.shape[0]} samples are too few to reflect-pad for n_fft {n_fft}")
    padded = np.pad(sig, half, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[:: n_fft // 4]
    mag: F64 = np.abs(scipy.fft.rfft(frames * _hann(n_fft), axis=1))
    return mag


def stft_magnitude(x: npt.NDArray[np.floating], n_fft: int) -> F64:
    """|STFT| of one channel: ``[n_fft // 2 + 1, 1 + len // hop]``, float64.

    Raises:
        ValueError: ``n_fft`` not a positive multiple of 4, or a signal too short
            to reflect-pad (at most ``n_fft // 2`` samples).
    """
    if n_fft <= 0 or n_fft % 4:
        raise ValueError(f"n_fft {n_fft} must be a positive multiple of 4")
    return _frames_magnitude(np.asarray(x, dtype=np.float64), n_fft).T


def _cosine(a: F64, b: F64) -> float:
    # numpy's pairwise sums, not BLAS (np.dot, np.linalg.norm): BLAS splits a long dot
    # product by thread count, so the last bit would depend on OMP_NUM_THREADS, and a
    # Ray task (one thread) would not reproduce the local executor bit for bit.
    na = max(math.sqrt(float(np.multiply(a, a).sum())), EPS)
    nb = max(math.sqrt(float(np.multiply(b, b).sum())), EPS)
    return float(np.multiply(a, b).sum()) / (na * nb)


def _common(
    baseline: npt.NDArray[np.floating],
    candidate: npt.NDArray[np.floating],
) -> tuple[F64, F64]:
    if baseline.ndim != 2 or candidate.ndim != 2:
        raise ValueError("audio must be [channels, samples]")
    if baseline.shape[0] != candidate.shape[0]:
        raise ValueError(
            f"channel counts differ: baseline {baseline.shape[0]}, candidate {candidate.shape[0]}"
        )
    n = max(baseline.shape[1], candidate.shape[1])

    def padded(x: npt.NDArray[np.floating]) -> F64:
        out = np.zeros((x.shape[0], n), dtype=np.float64)
        out[:, : x.shape[1]] = x
        return out

    return padded(baseline), padded(candidate)


def spectral_cosine(
    baseline: npt.NDArray[np.floating],
    candidate: npt.NDArray[np.floating],
    n_ffts: Sequence[int] = N_FFTS,
) -> float:
    """Mean over ``n_ffts`` × channels of the cosine of STFT magnitudes.

    Raises:
        ValueError: channel counts differ, or the audio is too short to pad.
    """
    a, b = _common(baseline, candidate)
    for n in n_ffts:
        if n <= 0 or n % 4:
            raise ValueError(f"n_fft {n} must be a positive multiple of 4")
    values = [
        _cosine(_frames_magnitude(a[c], n), _frames_magnitude(b[c], n))
        for n in n_ffts
        for c in range(a.shape[0])
    ]
    return math.fsum(values) / len(values)


def rms(x: npt.NDArray[np.floating]) -> float:
    """Root mean square over every sample of every channel (0 for no samples)."""
    v = np.asarray(x, dtype=np.float64)
    if v.size == 0:
        return 0.0
    return math.sqrt(float(np.mean(v * v)))


def rms_ratio(
    baseline: npt.NDArray[np.floating],
    candidate: npt.NDArray[np.floating],
) -> float:
    """``rms(candidate) / max(rms(baseline), 1e-12)``, the shorter arm zero-padded.

    Raises:
        ValueError: channel counts differ.
    """
    a, b = _common(baseline, candidate)
    return rms(b) / max(rms(a), EPS)
