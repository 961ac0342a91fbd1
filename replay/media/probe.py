"""Decode one media file once with PyAV: raw planes, PCM, and what a probe reports.

Everything is established by decoding, never by trusting container headers: an
MP4's ``frames`` field may be 0, its durations are rounded to the movie
timescale, and AAC's end padding is only visible in the decoded samples
(``specs/metrics.md``, "Decoding").

Luma is the raw Y plane of the decoded ``yuv420p`` frame
(``frame.to_ndarray()`` rows ``[:H]``). ``to_ndarray(format="gray")`` is never
used: it rescales TV range to full range and moves values by up to 20 levels.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "AudioInfo",
    "DecodedMedia",
    "MediaDecodeError",
    "MediaProbe",
    "MediaReader",
    "VideoInfo",
    "YuvFrame",
    "prefetch",
    "probe",
]

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
T = TypeVar("T")

# Pixel formats whose first plane is 8-bit luma at full resolution with 2×2 chroma.
_YUV420_8BIT = frozenset({"yuv420p", "yuvj420p"})


class MediaDecodeError(Exception):
    """The file cannot be decoded as the frozen definitions require (codec, pixel format)."""


@dataclass(frozen=True)
class VideoInfo:
    """The first video stream, as decoded."""

    codec: str
    width: int
    height: int
    pix_fmt: str
    frames: int
    fps: float | None
    time_base: str
    start_s: float | None
    end_s: float | None


@dataclass(frozen=True)
class AudioInfo:
    """The first audio stream, as decoded."""

    codec: str
    sample_rate: int
    channels: int
    layout: str
    samples: int
    start_s: float | None
    end_s: float | None


@dataclass(frozen=True)
class MediaProbe:
    """What decoding one file established."""

    container: str
    video: VideoInfo | None
    audio: AudioInfo | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class YuvFrame:
    """One decoded picture: raw 8-bit planes, never range-converted."""

    index: int
    pts: int | None
    y: U8
    u: U8 | None = None
    v: U8 | None = None


@dataclass
class DecodedMedia:
    """The probe plus the whole decoded audio, float32 ``[channels, samples]``."""

    probe: MediaProbe
    audio: F32 | None = field(repr=False, default=None)


def _open(source: bytes | Path) -> Any:
    import av

    if isinstance(source, bytes | bytearray | memoryview):
        return av.open(io.BytesIO(bytes(source)), mode="r")
    return av.open(str(source), mode="r")


def _frac(x: Any) -> Fraction | None:
    if x is None:
        return None
    f = Fraction(x)
    return f if f > 0 else None


class MediaReader:
    """Decode one file in a single pass.

    Iterate :meth:`frames` for the video frames (in decode output order, which
    is presentation order); audio is decoded and kept on the way. After the
    iteration (or :meth:`finish`), :attr:`result` holds the probe and the PCM.

    Args:
        source: the file's bytes (preferred: the bytes whose SHA-256 was
            verified) or a path.
        chroma: also return the U and V planes (LPIPS needs RGB).
        video: yield video frames; False still decodes them (to count them and
            time them) but converts none (a probe).
        threads: decoder threads for the video codec; 0 lets FFmpeg choose.
    """

    def __init__(
        self,
        source: bytes | Path,
        *,
        chroma: bool = False,
        video: bool = True,
        threads: int = 0,
    ) -> None:
        self._source = source
        self._chroma = chroma
        self._video = video
        self._threads = threads
        self._done = False
        self.result: DecodedMedia | None = None

    def finish(self) -> DecodedMedia:
        """Decode whatever :meth:`frames` has not consumed and return the result."""
        if self.result is None:
            for _ in self.frames():
                pass
        assert self.result is not None
        return self.result

    def frames(self) -> Iterator[YuvFrame]:  # noqa: C901, PLR0912, PLR0915 - one decode loop, kept whole
        """Yield every decoded video frame; fills :attr:`result` when exhausted.

        Raises:
            MediaDecodeError: an unsupported pixel format, or a decode failure.
        """
        if self._done:
            raise RuntimeError("a MediaReader decodes once")
        self._done = True
        import av

        try:
            container = _open(self._source)
        except (av.FFmpegError, OSError) as exc:
            raise MediaDecodeError(f"cannot open: {exc}") from exc
        with container:
            vstream = container.streams.video[0] if container.streams.video else None
            astream = container.streams.audio[0] if container.streams.audio else None
            streams = [s for s in (vstream, astream) if s is not None]
            if vstream is not None:
                vstream.thread_type = "AUTO"
                vstream.thread_count = self._threads
            v_count = 0
            v_first: int | None = None
            v_last: int | None = None
            v_last_dur: int | None = None
            v_fmt = ""
            a_chunks: list[F32] = []
            a_count = 0
            a_first: int | None = None
            a_last_end: Fraction | None = None
            a_tb: Fraction | None = None
            resampler: Any = None
            try:
                for packet in container.demux(*streams):
                    for frame in packet.decode():
                        if isinstance(frame, av.VideoFrame):
                            v_fmt = frame.format.name
                            if v_fmt not in _YUV420_8BIT:
                                raise MediaDecodeError(
                                    f"pixel format {v_fmt}: the frozen definitions need "
                                    "8-bit 4:2:0 (yuv420p)"
                                )
                            if v_first is None:
                                v_first = frame.pts
                            v_last = frame.pts
                            v_last_dur = frame.duration or None
                            idx = v_count
                            v_count += 1
                            if not self._video:
                                continue
                            h = frame.height
                            arr: U8 = np.asarray(frame.to_ndarray(), dtype=np.uint8)
                            y = arr[:h]
                            u: U8 | None = None
                            v: U8 | None = None
                            if self._chroma:
                                cw, ch = (frame.width + 1) // 2, (h + 1) // 2
                                rest = arr[h:].reshape(-1)
                                u = rest[: cw * ch].reshape(ch, cw)
                                v = rest[cw * ch : 2 * cw * ch].reshape(ch, cw)
                            yield YuvFrame(idx, frame.pts, y, u, v)
                        elif isinstance(frame, av.AudioFrame):
                            if frame.format.name != "fltp" or frame.format.is_packed:
                                if resampler is None:
                                    resampler = av.AudioResampler(
                                        format="fltp",
                                        layout=frame.layout.name,
                                        rate=frame.sample_rate,
                                    )
                                converted = list(resampler.resample(frame))
                            else:
                                converted = [frame]
                            ftb = frame.time_base
                            if frame.pts is not None and ftb is not None:
                                if a_first is None:
                                    a_first = frame.pts
                                    a_tb = Fraction(ftb)
                                a_last_end = Fraction(frame.pts) * Fraction(ftb) + Fraction(
                                    frame.samples, frame.sample_rate
                                )
                            for cf in converted:
                                pcm = cf.to_ndarray().astype(np.float32, copy=False)
                                a_chunks.append(pcm)
                                a_count += pcm.shape[1]
                if resampler is not None:
                    for cf in resampler.resample(None) or []:
                        pcm = cf.to_ndarray().astype(np.float32, copy=False)
                        a_chunks.append(pcm)
                        a_count += pcm.shape[1]
            except av.FFmpegError as exc:
                raise MediaDecodeError(f"decode failed: {exc}") from exc

            video_info: VideoInfo | None = None
            if vstream is not None:
                tb = Fraction(vstream.time_base) if vstream.time_base else None
                rate = _frac(vstream.average_rate) or _frac(vstream.guessed_rate)
                start = end = None
                if tb is not None and v_first is not None and v_last is not None:
                    start = float(v_first * tb)
                    dur: Fraction | None
                    if v_last_dur:
                        dur = v_last_dur * tb
                    elif rate:
                        dur = 1 / rate
                    else:
                        dur = None
                    end = float(v_last * tb + dur) if dur is not None else None
                cc = vstream.codec_context
                video_info = VideoInfo(
                    codec=cc.name,
                    width=int(cc.width),
                    height=int(cc.height),
                    pix_fmt=v_fmt or str(cc.pix_fmt),
                    frames=v_count,
                    fps=float(rate) if rate else None,
                    time_base=str(tb),
                    start_s=start,
                    end_s=end,
                )
            audio_info: AudioInfo | None = None
            audio: F32 | None = None
            if astream is not None:
                acc = astream.codec_context
                channels = len(acc.layout.channels)
                audio = (
                    np.concatenate(a_chunks, axis=1)
                    if a_chunks
                    else np.zeros((channels, 0), np.float32)
                )
                audio_info = AudioInfo(
                    codec=acc.name,
                    sample_rate=int(acc.sample_rate),
                    channels=int(audio.shape[0]),
                    layout=acc.layout.name,
                    samples=int(a_count),
                    start_s=float(a_first * a_tb)
                    if a_first is not None and a_tb is not None
                    else None,
                    end_s=float(a_last_end) if a_last_end is not None else None,
                )
            self.result = DecodedMedia(
                MediaProbe(container.format.name, video_info, audio_info), audio
            )


def probe(source: bytes | Path) -> MediaProbe:
    """Decode ``source`` fully and report codecs, frame count, sample count and timing.

    Raises:
        MediaDecodeError: the file cannot be decoded.
    """
    return MediaReader(source, video=False).finish().probe


_END = object()


def prefetch(it: Iterator[T], depth: int = 4) -> Iterator[T]:
    """Run ``it`` on a background thread, ``depth`` items ahead.

    PyAV decodes and numpy reduces with the GIL released, so decoding the next
    frames of both files overlaps the metric work on the current pair.
    Exceptions of ``it`` are re-raised in the consumer; a consumer that stops
    early stops the producer.
    """
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_END)
        except BaseException as exc:  # handed to the consumer, re-raised there
            q.put(exc)

    t = threading.Thread(target=run, name="media-decode", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(timeout=0.05)
