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
from collections.abc import Iterable, Iterator
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
    "MediaUnsupportedError",
    "VideoInfo",
    "YuvFrame",
    "ffmpeg_reason",
    "prefetch",
    "probe",
]

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
T = TypeVar("T")

# Pixel formats whose first plane is 8-bit luma at full resolution with 2×2 chroma.
_YUV420_8BIT = frozenset({"yuv420p", "yuvj420p"})


class MediaDecodeError(Exception):
    """The file cannot be decoded: not a media container, or a packet FFmpeg rejects."""


class MediaUnsupportedError(MediaDecodeError):
    """The file decodes, but not as the frozen definitions need (pixel format, chroma)."""


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


def ffmpeg_reason(exc: BaseException) -> str:
    """FFmpeg's reason for ``exc`` without the file name PyAV appends.

    Decoding from memory, PyAV names the file ``'<none>'``; the caller names the
    arm, request and file instead.
    """
    reason = getattr(exc, "strerror", None)
    return str(reason) if reason else str(exc)


class _VideoTrack:
    """The first video stream's frames: counted, timed and (when asked) converted."""

    def __init__(self, stream: Any, *, convert: bool, chroma: bool, threads: int) -> None:
        self.stream = stream
        self.convert = convert
        self.chroma = chroma
        stream.thread_type = "AUTO"
        stream.thread_count = threads
        self.count = 0
        self.first: int | None = None
        self.last: int | None = None
        self.last_dur: int | None = None
        self.fmt = ""

    def add(self, frame: Any) -> YuvFrame | None:
        """Account for ``frame``; its planes when converting."""
        self.fmt = frame.format.name
        if self.fmt not in _YUV420_8BIT:
            raise MediaUnsupportedError(
                f"pixel format {self.fmt}: the frozen definitions need 8-bit 4:2:0 (yuv420p)"
            )
        if self.first is None:
            self.first = frame.pts
        self.last = frame.pts
        self.last_dur = frame.duration or None
        idx = self.count
        self.count += 1
        if not self.convert:
            return None
        h = frame.height
        arr: U8 = np.asarray(frame.to_ndarray(), dtype=np.uint8)
        u: U8 | None = None
        v: U8 | None = None
        if self.chroma:
            cw, ch = (frame.width + 1) // 2, (h + 1) // 2
            rest = arr[h:].reshape(-1)
            u = rest[: cw * ch].reshape(ch, cw)
            v = rest[cw * ch : 2 * cw * ch].reshape(ch, cw)
        return YuvFrame(idx, frame.pts, arr[:h], u, v)

    def info(self) -> VideoInfo:
        """What decoding established (timing from the decoded pts, never the header)."""
        s = self.stream
        tb = Fraction(s.time_base) if s.time_base else None
        rate = _frac(s.average_rate) or _frac(s.guessed_rate)
        start = end = None
        if tb is not None and self.first is not None and self.last is not None:
            start = float(self.first * tb)
            dur: Fraction | None
            if self.last_dur:
                dur = self.last_dur * tb
            elif rate:
                dur = 1 / rate
            else:
                dur = None
            end = float(self.last * tb + dur) if dur is not None else None
        cc = s.codec_context
        return VideoInfo(
            codec=cc.name,
            width=int(cc.width),
            height=int(cc.height),
            pix_fmt=self.fmt or str(cc.pix_fmt),
            frames=self.count,
            fps=float(rate) if rate else None,
            time_base=str(tb),
            start_s=start,
            end_s=end,
        )


class _AudioTrack:
    """The first audio stream's PCM as float32 planes, with its decoded span."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.chunks: list[F32] = []
        self.count = 0
        self.first: int | None = None
        self.last_end: Fraction | None = None
        self.tb: Fraction | None = None
        self.resampler: Any = None

    def _keep(self, frames: Iterable[Any]) -> None:
        for cf in frames:
            pcm = cf.to_ndarray().astype(np.float32, copy=False)
            self.chunks.append(pcm)
            self.count += pcm.shape[1]

    def add(self, frame: Any) -> None:
        """Keep ``frame``'s samples (resampled to planar float when they are not)."""
        import av

        if frame.format.name != "fltp" or frame.format.is_packed:
            if self.resampler is None:
                self.resampler = av.AudioResampler(
                    format="fltp", layout=frame.layout.name, rate=frame.sample_rate
                )
            converted = list(self.resampler.resample(frame))
        else:
            converted = [frame]
        ftb = frame.time_base
        if frame.pts is not None and ftb is not None:
            if self.first is None:
                self.first = frame.pts
                self.tb = Fraction(ftb)
            self.last_end = Fraction(frame.pts) * Fraction(ftb) + Fraction(
                frame.samples, frame.sample_rate
            )
        self._keep(converted)

    def finish(self) -> tuple[AudioInfo, F32]:
        """Flush the resampler; the stream's info and its PCM ``[channels, samples]``."""
        if self.resampler is not None:
            self._keep(self.resampler.resample(None) or [])
        acc = self.stream.codec_context
        channels = len(acc.layout.channels)
        audio = (
            np.concatenate(self.chunks, axis=1)
            if self.chunks
            else np.zeros((channels, 0), np.float32)
        )
        first, tb = self.first, self.tb
        info = AudioInfo(
            codec=acc.name,
            sample_rate=int(acc.sample_rate),
            channels=int(audio.shape[0]),
            layout=acc.layout.name,
            samples=int(self.count),
            start_s=float(first * tb) if first is not None and tb is not None else None,
            end_s=float(self.last_end) if self.last_end is not None else None,
        )
        return info, audio


def _decoded_frames(container: Any, streams: list[Any]) -> Iterator[Any]:
    """Every decoded frame of ``streams``; a failure names the packet and stream."""
    import av

    packets = container.demux(*streams)
    n = 0
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.FFmpegError as exc:
            raise MediaDecodeError(
                f"demuxing failed after {n} packet(s): {ffmpeg_reason(exc)}"
            ) from exc
        n += 1
        try:
            frames = packet.decode()
        except av.FFmpegError as exc:
            raise MediaDecodeError(
                f"{packet.stream.type} packet {n} (pts {packet.pts}) does not decode: "
                f"{ffmpeg_reason(exc)}"
            ) from exc
        yield from frames


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

    def frames(self) -> Iterator[YuvFrame]:
        """Yield every decoded video frame; fills :attr:`result` when exhausted.

        Raises:
            MediaUnsupportedError: a pixel format the definitions do not cover.
            MediaDecodeError: the file cannot be opened, or a packet does not decode.
        """
        if self._done:
            raise RuntimeError("a MediaReader decodes once")
        self._done = True
        import av

        try:
            container = _open(self._source)
        except (av.FFmpegError, OSError) as exc:
            raise MediaDecodeError(f"cannot open: {ffmpeg_reason(exc)}") from exc
        with container:
            vs = container.streams.video[0] if container.streams.video else None
            as_ = container.streams.audio[0] if container.streams.audio else None
            video = (
                _VideoTrack(vs, convert=self._video, chroma=self._chroma, threads=self._threads)
                if vs is not None
                else None
            )
            audio = _AudioTrack(as_) if as_ is not None else None
            try:
                for frame in _decoded_frames(container, [s for s in (vs, as_) if s is not None]):
                    if video is not None and isinstance(frame, av.VideoFrame):
                        yuv = video.add(frame)
                        if yuv is not None:
                            yield yuv
                    elif audio is not None and isinstance(frame, av.AudioFrame):
                        audio.add(frame)
                audio_out = audio.finish() if audio is not None else None
            except av.FFmpegError as exc:  # converting or resampling, after decoding
                raise MediaDecodeError(f"decode failed: {ffmpeg_reason(exc)}") from exc
            self.result = DecodedMedia(
                MediaProbe(
                    container.format.name,
                    video.info() if video is not None else None,
                    audio_out[0] if audio_out is not None else None,
                ),
                audio_out[1] if audio_out is not None else None,
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
