"""SSIM of one 8-bit luma plane, in the two definitions frozen in ``specs/metrics.md``.

- ``ssim/ffmpeg-y-frame-mean``: FFmpeg's ``ssim`` filter (libavfilter/vf_ssim.c,
  from x264): 4×4 block sums, combined into overlapping 8×8 windows stepped by
  4, uniform weights, the (N−1) variance of x264's constant ``C2 · 63``; rows
  and columns past the last whole 4×4 block are ignored; per-frame value =
  mean over the windows.
- ``ssim/wang-gaussian-y-frame-mean``: Wang et al. 2004 with an 11×11 Gaussian
  (σ = 1.5, truncated at 3.5σ), K1 = 0.01, K2 = 0.03, L = 255, population
  (co)variances, mean over the map cropped by the 5-pixel window radius —
  scikit-image's ``structural_similarity(gaussian_weights=True, sigma=1.5,
  use_sample_covariance=False, data_range=255)``.

The frame mean over a video is taken by the caller (:mod:`replay.media.rescore`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "FFMPEG_C1",
    "FFMPEG_C2",
    "ssim_ffmpeg_y",
    "ssim_ffmpeg_y_with_sse",
    "ssim_wang_y",
]

U8 = npt.NDArray[np.uint8]
I32 = npt.NDArray[np.int32]

# vf_ssim.c: ssim_c1 = (int)(.01*.01*255*255*64 + .5), ssim_c2 = (int)(.03*.03*255*255*64*63 + .5).
FFMPEG_C1 = int(0.01 * 0.01 * 255 * 255 * 64 + 0.5)
FFMPEG_C2 = int(0.03 * 0.03 * 255 * 255 * 64 * 63 + 0.5)

_WANG_C1 = (0.01 * 255) ** 2
_WANG_C2 = (0.03 * 255) ** 2
_WANG_SIGMA = 1.5
_WANG_TRUNCATE = 3.5  # radius int(3.5 * 1.5 + 0.5) = 5: an 11×11 window
_WANG_RADIUS = int(_WANG_TRUNCATE * _WANG_SIGMA + 0.5)


def _check(a: U8, b: U8) -> None:
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"planes differ in shape: {a.shape} vs {b.shape}")
    if a.dtype != np.uint8 or b.dtype != np.uint8:
        raise ValueError("planes must be uint8")


def _rows4(x: npt.NDArray[np.uint16], h4: int, dtype: type[np.unsignedinteger]) -> npt.NDArray:  # type: ignore[type-arg]
    """Sums of each group of 4 rows (block rows), accumulated as ``dtype``."""
    out: npt.NDArray = x.reshape(h4, 4, -1).sum(axis=1, dtype=dtype)  # type: ignore[type-arg]
    return out


def _windows(rows: npt.NDArray) -> I32:  # type: ignore[type-arg]
    """From block-row sums to 8×8 window sums stepped by 4 (2×2 adjacent blocks)."""
    c = (rows[:, 0::4] + rows[:, 1::4] + rows[:, 2::4] + rows[:, 3::4]).astype(np.int32)
    out: I32 = c[:-1, :-1] + c[1:, :-1] + c[:-1, 1:] + c[1:, 1:]
    return out


def ssim_ffmpeg_y_with_sse(a: U8, b: U8) -> tuple[float, int]:
    """FFmpeg-definition SSIM of one plane, plus the plane's sum of squared differences.

    The sum of squared errors (the whole plane, every pixel) comes almost free
    from the same block sums and feeds PSNR.

    Raises:
        ValueError: shapes differ, not uint8, or smaller than 8×8.
    """
    _check(a, b)
    h, w = a.shape
    h4, w4 = h // 4, w // 4
    if h4 < 2 or w4 < 2:
        raise ValueError(f"plane {w}x{h} is smaller than one 8×8 window")
    a16 = a[: h4 * 4, : w4 * 4].astype(np.uint16)
    b16 = b[: h4 * 4, : w4 * 4].astype(np.uint16)
    # Exact integers like the C code. Bounds for 8-bit input: squares fit uint16;
    # 4-row sums of squares fit uint32; 8×8 window sums s1, s2 <= 16,320 and
    # ss <= 8,323,200, so every int term below (64·ss, s1², …) is < 2^31: int32.
    s1r = _rows4(a16, h4, np.uint16)
    s2r = _rows4(b16, h4, np.uint16)
    ssr = _rows4(a16 * a16, h4, np.uint32)
    ssr += _rows4(b16 * b16, h4, np.uint32)
    s12r = _rows4(a16 * b16, h4, np.uint32)
    s1 = _windows(s1r)
    s2 = _windows(s2r)
    ss = _windows(ssr)
    s12 = _windows(s12r)
    m = s1 * s2
    q = s1 * s1
    q += s2 * s2
    # vars = 64·ss − s1² − s2², covar = 64·s12 − s1·s2; products of the two factors in float64.
    num = (2 * m + FFMPEG_C1).astype(np.float64)
    num *= 2 * (64 * s12 - m) + FFMPEG_C2
    den = (q + FFMPEG_C1).astype(np.float64)
    den *= 64 * ss - q + FFMPEG_C2
    num /= den
    ssim = float(num.mean())
    sse = int(ssr.sum(dtype=np.int64)) - 2 * int(s12r.sum(dtype=np.int64))
    if h4 * 4 < h:
        d = a[h4 * 4 :].astype(np.int32) - b[h4 * 4 :]
        sse += int((d * d).sum(dtype=np.int64))
    if w4 * 4 < w:
        d = a[: h4 * 4, w4 * 4 :].astype(np.int32) - b[: h4 * 4, w4 * 4 :]
        sse += int((d * d).sum(dtype=np.int64))
    return ssim, sse


def ssim_ffmpeg_y(a: U8, b: U8) -> float:
    """FFmpeg ``ssim`` filter's per-frame value on one 8-bit plane (``lavfi.ssim.Y``).

    Raises:
        ValueError: shapes differ, not uint8, or smaller than 8×8.
    """
    return ssim_ffmpeg_y_with_sse(a, b)[0]


def ssim_wang_y(a: U8, b: U8) -> float:
    """Wang et al. Gaussian SSIM of one 8-bit plane (scikit-image's Wang settings).

    Raises:
        ValueError: shapes differ, not uint8, or too small for one 11×11 window.
    """
    from scipy.ndimage import gaussian_filter

    _check(a, b)
    r = _WANG_RADIUS
    if min(a.shape) <= 2 * r:
        raise ValueError(f"plane {a.shape} is smaller than one 11×11 window")
    x = a.astype(np.float64)
    y = b.astype(np.float64)

    def g(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        out: npt.NDArray[np.float64] = gaussian_filter(
            z, sigma=_WANG_SIGMA, truncate=_WANG_TRUNCATE, mode="reflect"
        )
        return out

    mx, my = g(x), g(y)
    vx = g(x * x) - mx * mx
    vy = g(y * y) - my * my
    vxy = g(x * y) - mx * my
    s = ((2 * mx * my + _WANG_C1) * (2 * vxy + _WANG_C2)) / (
        (mx * mx + my * my + _WANG_C1) * (vx + vy + _WANG_C2)
    )
    # The crop equals the window radius, so the border mode never reaches the mean.
    return float(s[r:-r, r:-r].mean(dtype=np.float64))
