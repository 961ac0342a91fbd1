"""Decoded video frames to LPIPS input: 8-bit YUV 4:2:0 (BT.601 limited range) to RGB in [−1, 1]."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["yuv420p_to_rgb"]


def yuv420p_to_rgb(
    y: npt.NDArray[np.uint8], u: npt.NDArray[np.uint8], v: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """8-bit BT.601 limited-range 4:2:0 to LPIPS input: float32 ``[3, H, W]`` in [−1, 1].

    Chroma is upsampled by repeating each sample 2×2 (cropped to H×W); the
    matrix is BT.601 limited range (Kr 0.299, Kb 0.114; Y 16–235, C 16–240);
    RGB is rounded half to even, clipped to 0–255 as an 8-bit RGB decode
    would, then scaled by ``x / 127.5 − 1`` (``lpips.im2tensor``).
    """
    h, w = y.shape
    ch, cw = u.shape
    kr, kb = 0.299, 0.114
    kg = 1.0 - kr - kb
    ys = np.float32(255.0 / 219.0)
    cs = 255.0 / 224.0
    r_v = np.float32(cs * 2 * (1 - kr))
    b_u = np.float32(cs * 2 * (1 - kb))
    g_u = np.float32(cs * 2 * (1 - kb) * kb / kg)
    g_v = np.float32(cs * 2 * (1 - kr) * kr / kg)
    cu = u.astype(np.float32) - np.float32(128)
    cv = v.astype(np.float32) - np.float32(128)
    # Chroma terms at chroma resolution, then added 2×2 by broadcasting (no
    # upsampled copies): the same float32 operations per pixel as repeating first.
    terms = (r_v * cv, -(g_u * cu + g_v * cv), b_u * cu)
    full = np.empty((3, 2 * ch, 2 * cw), np.float32)
    yf = (y.astype(np.float32) - np.float32(16)) * ys
    for c in range(3):
        full[c, :h, :w] = yf
        view = full[c].reshape(ch, 2, cw, 2)
        view += terms[c][:, None, :, None]
    out = full[:, :h, :w]
    np.rint(out, out=out)
    np.clip(out, 0, 255, out=out)
    out *= np.float32(1 / 127.5)
    out -= np.float32(1)
    return np.ascontiguousarray(out)
