"""PSNR of 8-bit luma, as FFmpeg's ``psnr`` filter summarizes it (``psnr/y-mse-mean-db``).

Per frame: MSE = mean over every pixel of the Y plane of ``(a − b)²``, in exact
integers. Over the video: PSNR = ``10 · log10(255² / mean over frames of
MSE)`` — the PSNR of the mean MSE, as FFmpeg's ``PSNR y:`` summary line
(``get_psnr(mse_sum, nb_frames, max)``), not the mean of per-frame PSNRs. A
mean MSE of 0 (identical planes) is ``+inf``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["PEAK_8BIT", "psnr_from_mses", "sse_y"]

PEAK_8BIT = 255


def sse_y(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> int:
    """Sum of squared differences of two uint8 planes, exact.

    Raises:
        ValueError: the planes differ in shape.
    """
    if a.shape != b.shape:
        raise ValueError(f"planes differ in shape: {a.shape} vs {b.shape}")
    d = a.astype(np.int32) - b.astype(np.int32)
    return int((d * d).sum(dtype=np.int64))


def psnr_from_mses(mses: Sequence[float], peak: int = PEAK_8BIT) -> float:
    """PSNR in dB of the mean of per-frame MSEs; ``inf`` when that mean is 0.

    Raises:
        ValueError: no frames.
    """
    if not mses:
        raise ValueError("no frames")
    mean = math.fsum(mses) / len(mses)
    if mean == 0:
        return math.inf
    return 10.0 * math.log10(peak * peak / mean)
