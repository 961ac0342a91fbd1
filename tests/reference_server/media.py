"""Real, tiny MP4 files (MPEG-4 Part 2 video + AAC audio) made with PyAV.

The picture and the tone depend on the seed, the prompt and the input
reference, so different requests give different bytes and the same request
gives the same bytes (the native ``mpeg4`` and ``aac`` encoders are
deterministic; no x264, whose assembly paths were not).
"""

from __future__ import annotations

import hashlib
import io

import av
import numpy as np

__all__ = ["make_mp4"]


def make_mp4(
    seed: int,
    prompt: str,
    *,
    reference: bytes = b"",
    width: int = 64,
    height: int = 64,
    seconds: float = 1.0,
    fps: int = 8,
    sample_rate: int = 32_000,
) -> bytes:
    """Encode a ``width`` x ``height`` clip of ``seconds`` with a stereo tone; return the MP4."""
    key = hashlib.sha256(f"{seed}\0{prompt}\0".encode() + reference).digest()
    base, step, tone = key[0], 1 + key[1] % 31, 220 + 10 * (key[2] % 50)
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as out:
        video = out.add_stream("mpeg4", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        audio = out.add_stream("aac", rate=sample_rate)
        audio.layout = "stereo"
        frames = round(fps * seconds)
        ramp = np.arange(width, dtype=np.int64)[None, :] * 4
        for i in range(frames):
            # yuv420p built in numpy: luma ramp moving with the frame index, neutral chroma.
            img = np.full((height * 3 // 2, width), 128, dtype=np.uint8)
            img[:height] = ((ramp + base + i * step) % 220 + 16).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(img, format="yuv420p")
            frame.pts = i
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
        total = round(sample_rate * seconds)
        t = np.arange(total) / sample_rate
        pcm = (0.2 * np.sin(2 * np.pi * tone * t)).astype(np.float32)
        stereo = np.stack([pcm, pcm])
        for start in range(0, total, 1024):
            chunk = np.ascontiguousarray(stereo[:, start : start + 1024])
            aframe = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            aframe.sample_rate = sample_rate
            aframe.pts = start
            for packet in audio.encode(aframe):
                out.mux(packet)
        for packet in audio.encode(None):
            out.mux(packet)
    return buf.getvalue()
