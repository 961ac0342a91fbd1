"""Media metrics on real encoded media, each checked against an independent second method.

- SSIM (FFmpeg definition) against FFmpeg's own ``ssim`` filter run through
  PyAV's filter graph (``lavfi.ssim.Y``, printed with 6 decimals);
- SSIM (Wang) against a brute-force window-by-window computation written here;
- PSNR against FFmpeg's ``psnr`` filter (``lavfi.psnr.mse.y``);
- the audio spectral cosine against ``scipy.signal.stft``, plus the sanity
  cases of metrics.md (90° phase shift passes, 440 → 3000 Hz fails);
- probe and coverage figures derived by hand from the plan (AAC rounds up to
  whole 1024-sample frames).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("av")

import av

from replay.media.audio import rms_ratio, spectral_cosine, stft_magnitude
from replay.media.coverage import (
    DEFAULT_AV_TOLERANCE_S,
    DEFAULT_PADDING_TOLERANCE_SAMPLES,
    CoverageParams,
    check_coverage,
    coverage_params,
)
from replay.media.probe import AudioInfo, MediaProbe, MediaReader, VideoInfo, probe
from replay.media.psnr import psnr_from_mses, sse_y
from replay.media.ssim import ssim_ffmpeg_y, ssim_ffmpeg_y_with_sse, ssim_wang_y

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "media-mini"
MEDIA = SAMPLE / "media"
U8 = npt.NDArray[np.uint8]


def lumas(path: Path) -> list[U8]:
    return [f.y.copy() for f in MediaReader(path.read_bytes()).frames()]


def yuv_frames(path: Path) -> list[Any]:
    with av.open(str(path)) as c:
        return list(c.decode(video=0))


def ffmpeg_filter(name: str, a: list[Any], b: list[Any]) -> list[dict[str, str]]:
    """FFmpeg's two-input filter over frame pairs: per-frame metadata (the second method)."""
    w, h = a[0].width, a[0].height
    g = av.filter.Graph()
    s0 = g.add_buffer(
        width=w, height=h, format=av.VideoFormat("yuv420p"), time_base=Fraction(1, 24)
    )
    s1 = g.add_buffer(
        width=w, height=h, format=av.VideoFormat("yuv420p"), time_base=Fraction(1, 24)
    )
    f = g.add(name)
    sink = g.add("buffersink")
    s0.link_to(f, 0, 0)
    s1.link_to(f, 0, 1)
    f.link_to(sink)
    g.configure()
    out: list[dict[str, str]] = []
    for i, (fa, fb) in enumerate(zip(a, b, strict=True)):
        fa.pts = fb.pts = i
        s0.push(fa)
        s1.push(fb)
        while True:
            try:
                out.append(dict(sink.pull().metadata))
            except (av.BlockingIOError, av.EOFError):
                break
    return out


def frame_of(y: U8) -> Any:
    """A yuv420p frame with luma ``y`` and flat chroma."""
    h, w = y.shape
    chroma = np.full(((h + 1) // 2) * ((w + 1) // 2) * 2, 128, np.uint8).reshape(-1, w)
    return av.VideoFrame.from_ndarray(np.concatenate([y, chroma]), format="yuv420p")


# ---------------------------------------------------------------- SSIM


def test_ssim_of_identical_media_is_exactly_one() -> None:
    ys = lumas(MEDIA / "baseline-00.mp4")
    assert len(ys) == 48
    assert all(ssim_ffmpeg_y(y, y) == 1.0 for y in ys)
    assert all(ssim_wang_y(y, y) == pytest.approx(1.0, abs=1e-12) for y in ys)


def test_ssim_matches_ffmpeg_filter_on_the_encoded_sample_pair() -> None:
    a, b = yuv_frames(MEDIA / "baseline-00.mp4"), yuv_frames(MEDIA / "candidate-00.mp4")
    ours = [
        ssim_ffmpeg_y(fa.to_ndarray()[: fa.height], fb.to_ndarray()[: fb.height])
        for fa, fb in zip(a, b, strict=True)
    ]
    theirs = [float(m["lavfi.ssim.Y"]) for m in ffmpeg_filter("ssim", a, b)]
    assert len(theirs) == 48
    # FFmpeg prints 6 decimals and accumulates in float: within 5e-7 + float error.
    assert max(abs(x - y) for x, y in zip(ours, theirs, strict=True)) <= 1e-6
    assert math.fsum(ours) / 48 == pytest.approx(math.fsum(theirs) / 48, abs=1e-6)
    # The pair really differs: this is not the identical case in disguise.
    assert min(ours) < 0.99


@pytest.mark.parametrize(("w", "h"), [(70, 50), (64, 36), (38, 22)])
def test_ssim_matches_ffmpeg_filter_on_known_perturbations(w: int, h: int) -> None:
    # Sizes not multiples of 4 exercise the ignored right/bottom strips.
    rng = np.random.default_rng(w * h)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.clip(128 + 60 * np.sin(xx / 5.0) * np.cos(yy / 7.0), 0, 255).astype(np.uint8)
    perturbed = [
        np.clip(base.astype(int) + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8),
        np.roll(base, 1, axis=1),
        np.where(base > 128, 255, 0).astype(np.uint8),
        np.full_like(base, 17),
    ]
    meta = ffmpeg_filter(
        "ssim", [frame_of(base) for _ in perturbed], [frame_of(p) for p in perturbed]
    )
    for p, m in zip(perturbed, meta, strict=True):
        assert ssim_ffmpeg_y(base, p) == pytest.approx(float(m["lavfi.ssim.Y"]), abs=1e-6)


def test_ssim_integer_bounds_at_the_extremes_match_ffmpeg() -> None:
    # Largest sums the 8-bit definition can produce: 255 against 0, and a 0/255
    # checkerboard (largest variance) against its inverse.
    yy, xx = np.mgrid[0:32, 0:48]
    checker = np.where((xx + yy) % 2 == 0, 255, 0).astype(np.uint8)
    pairs = [
        (np.full((32, 48), 255, np.uint8), np.zeros((32, 48), np.uint8)),
        (np.full((32, 48), 255, np.uint8), np.full((32, 48), 255, np.uint8)),
        (checker, 255 - checker),
        (checker, checker),
    ]
    meta = ffmpeg_filter("ssim", [frame_of(x) for x, _ in pairs], [frame_of(y) for _, y in pairs])
    for (x, y), m in zip(pairs, meta, strict=True):
        assert ssim_ffmpeg_y(x, y) == pytest.approx(float(m["lavfi.ssim.Y"]), abs=1e-6)


def wang_brute_force(a: U8, b: U8) -> float:
    """Wang SSIM written out window by window: 11×11 normalized Gaussian, σ 1.5."""
    r = 5
    k = np.arange(-r, r + 1, dtype=np.float64)
    g1 = np.exp(-(k**2) / (2 * 1.5**2))
    win = np.outer(g1, g1)
    win /= win.sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    x, y = a.astype(np.float64), b.astype(np.float64)
    vals = []
    for i in range(r, a.shape[0] - r):
        for j in range(r, a.shape[1] - r):
            px, py = (
                x[i - r : i + r + 1, j - r : j + r + 1],
                y[i - r : i + r + 1, j - r : j + r + 1],
            )
            mx, my = (win * px).sum(), (win * py).sum()
            vx = (win * (px - mx) ** 2).sum()
            vy = (win * (py - my) ** 2).sum()
            cxy = (win * (px - mx) * (py - my)).sum()
            vals.append(
                ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
            )
    return float(np.mean(vals))


def test_wang_ssim_matches_a_window_by_window_computation() -> None:
    a = lumas(MEDIA / "baseline-00.mp4")[10][20:50, 40:84]
    b = lumas(MEDIA / "candidate-00.mp4")[10][20:50, 40:84]
    assert ssim_wang_y(a, b) == pytest.approx(wang_brute_force(a, b), abs=1e-10)


def test_the_two_ssim_definitions_differ_so_gates_must_name_one() -> None:
    ya, yb = lumas(MEDIA / "baseline-00.mp4"), lumas(MEDIA / "candidate-00.mp4")
    ff = np.mean([ssim_ffmpeg_y(a, b) for a, b in zip(ya, yb, strict=True)])
    wang = np.mean([ssim_wang_y(a, b) for a, b in zip(ya, yb, strict=True)])
    assert abs(ff - wang) > 1e-3


def test_ssim_refuses_mismatched_or_tiny_planes() -> None:
    with pytest.raises(ValueError, match="shape"):
        ssim_ffmpeg_y(np.zeros((8, 8), np.uint8), np.zeros((8, 12), np.uint8))
    with pytest.raises(ValueError, match="8×8"):
        ssim_ffmpeg_y(np.zeros((7, 40), np.uint8), np.zeros((7, 40), np.uint8))


# ---------------------------------------------------------------- PSNR


def test_psnr_matches_ffmpeg_psnr_filter() -> None:
    a, b = yuv_frames(MEDIA / "baseline-00.mp4"), yuv_frames(MEDIA / "candidate-00.mp4")
    ours = []
    for fa, fb in zip(a, b, strict=True):
        ya, yb = fa.to_ndarray()[: fa.height], fb.to_ndarray()[: fb.height]
        _, sse = ssim_ffmpeg_y_with_sse(ya, yb)
        assert sse == sse_y(ya, yb)
        ours.append(sse / ya.size)
    theirs = [float(m["lavfi.psnr.mse.y"]) for m in ffmpeg_filter("psnr", a, b)]
    assert max(abs(x - y) for x, y in zip(ours, theirs, strict=True)) <= 1e-6
    # FFmpeg's average: 10·log10(255² / (Σ mse / n)).
    want = 10 * math.log10(255**2 / (sum(theirs) / len(theirs)))
    assert psnr_from_mses(ours) == pytest.approx(want, abs=1e-4)
    assert psnr_from_mses([0.0, 0.0]) == math.inf


def test_sse_of_the_strips_outside_whole_blocks_is_counted() -> None:
    a = np.zeros((10, 10), np.uint8)
    b = a.copy()
    b[9, 9] = 3  # outside every whole 4×4 block (rows/cols 8–9)
    b[0, 0] = 2
    assert ssim_ffmpeg_y_with_sse(a, b)[1] == 9 + 4


# ---------------------------------------------------------------- audio


def tone(freq: float, phase: float = 0.0, seconds: float = 1.0, rate: int = 32_000) -> Any:
    t = np.arange(int(seconds * rate)) / rate
    ch = np.sin(2 * np.pi * freq * t + phase)
    return np.stack([ch, 0.5 * ch]).astype(np.float32)


def test_spectral_cosine_sanity_cases_of_the_field_test() -> None:
    base = tone(440)
    assert spectral_cosine(base, tone(440, np.pi / 2)) >= 0.80  # 90° phase shift passes
    assert spectral_cosine(base, tone(3000)) < 0.80  # 440 Hz -> 3000 Hz fails
    assert spectral_cosine(base, base) == pytest.approx(1.0, abs=1e-12)


def test_stft_matches_scipy_with_reflect_boundary() -> None:
    from scipy.signal import stft

    x = np.random.default_rng(3).standard_normal(5000)
    for n in (512, 1024, 2048):
        _, _, z = stft(
            x, window="hann", nperseg=n, noverlap=n - n // 4, boundary="even", padded=False
        )
        # scipy scales by 1 / sum(window); the periodic Hann's sum is n / 2.
        np.testing.assert_allclose(stft_magnitude(x, n) / (n / 2), np.abs(z), atol=1e-12)


def test_spectral_cosine_equals_an_independent_scipy_computation() -> None:
    from scipy.signal import stft

    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 8000)).astype(np.float32)
    b = (a + 0.5 * rng.standard_normal((2, 8000))).astype(np.float32)
    vals = []
    for n in (512, 1024, 2048):
        for ch in range(2):
            kw: dict[str, Any] = dict(
                window="hann", nperseg=n, noverlap=n - n // 4, boundary="even", padded=False
            )
            ma = np.abs(stft(a[ch].astype(np.float64), **kw)[2]).ravel()
            mb = np.abs(stft(b[ch].astype(np.float64), **kw)[2]).ravel()
            vals.append(ma @ mb / (np.linalg.norm(ma) * np.linalg.norm(mb)))
    assert spectral_cosine(a, b) == pytest.approx(float(np.mean(vals)), abs=1e-9)


def test_rms_ratio_by_hand() -> None:
    ones = np.ones((2, 1000), np.float32)
    # RMS of a constant c is |c|: 0.5 / 1.0.
    assert rms_ratio(ones, 0.5 * ones) == pytest.approx(0.5)
    # A candidate half as long counts its missing half as silence: sqrt(1/2).
    assert rms_ratio(ones, ones[:, :500]) == pytest.approx(math.sqrt(0.5))
    # A silent baseline divides by 1e-12, never by zero.
    assert rms_ratio(0 * ones, ones) == pytest.approx(1e12)
    with pytest.raises(ValueError, match="channel"):
        rms_ratio(ones, ones[:1])


# ---------------------------------------------------------------- probe and coverage


def test_probe_by_decoding() -> None:
    p = probe(MEDIA / "baseline-00.mp4")
    assert p.video is not None and p.audio is not None
    assert (p.video.codec, p.video.width, p.video.height, p.video.frames) == ("h264", 160, 90, 48)
    assert p.video.fps == 24
    # 48 frames at 24 fps: 0 .. 2 s.
    assert (p.video.start_s, p.video.end_s) == (0.0, 2.0)
    assert (p.audio.codec, p.audio.sample_rate, p.audio.channels) == ("aac", 32_000, 2)
    # 2 s × 32 kHz = 64,000 samples, rounded up to whole 1024-sample AAC frames: 63 × 1024.
    assert p.audio.samples == 63 * 1024
    assert p.audio.start_s == 0.0
    assert p.audio.end_s == pytest.approx(64_512 / 32_000)
    # Truncated: 16,000 samples -> 16 AAC frames.
    t = probe(MEDIA / "candidate-trunc-00.mp4")
    assert t.audio is not None and t.audio.samples == 16 * 1024


def test_luma_is_the_raw_y_plane_never_the_gray_conversion() -> None:
    with av.open(str(MEDIA / "baseline-00.mp4")) as c:
        frame = next(iter(c.decode(video=0)))
        plane = frame.planes[0]
        raw = np.frombuffer(bytes(plane), np.uint8).reshape(90, plane.line_size)[:, :160]
        gray = frame.to_ndarray(format="gray")
    y = next(iter(MediaReader(MEDIA / "baseline-00.mp4").frames())).y
    assert np.array_equal(y, raw)
    # "gray" rescales TV range to full range: it moves values.
    assert not np.array_equal(y, gray)
    assert int(np.abs(y.astype(int) - gray.astype(int)).max()) > 5


PLAN = {"media": {"seconds": 2, "fps": 24, "num_frames": 48, "audio_sample_rate": 32_000}}


def statuses(checks: list[Any]) -> dict[str, str]:
    return {c.check: c.status for c in checks}


def test_coverage_passes_full_media_and_fails_truncated_audio() -> None:
    params = coverage_params(PLAN)
    assert params.sources["audio_padding_tolerance_samples"] == "default"
    assert params.padding_tolerance_samples == DEFAULT_PADDING_TOLERANCE_SAMPLES == 2048
    assert params.av_tolerance_s == DEFAULT_AV_TOLERANCE_S
    full = check_coverage(probe(MEDIA / "baseline-00.mp4"), params, "baseline")
    assert set(statuses(full).values()) == {"PASS"}
    trunc = statuses(check_coverage(probe(MEDIA / "baseline-trunc-00.mp4"), params, "baseline"))
    # 16,384 decoded samples against [64,000, 66,048]; audio ends at 0.512 s, video at 2 s.
    assert trunc["audio/samples-cover-duration"] == "FAIL"
    assert trunc["av/end-agree"] == "FAIL"
    assert trunc["av/start-agree"] == "PASS"
    assert trunc["video/frame-count"] == "PASS"


def seed_probe(frames: int, samples: int) -> MediaProbe:
    return MediaProbe(
        "mov,mp4,m4a,3gp,3g2,mj2",
        VideoInfo("h264", 1280, 720, "yuv420p", frames, 24.0, "1/12288", 0.0, frames / 24),
        AudioInfo("aac", 32_000, 2, "stereo", samples, 0.0, samples / 32_000),
    )


def test_coverage_of_the_seed_figures_uses_frames_over_fps() -> None:
    # The seed's plan: seconds 5, but 124 frames at 24 fps (5.167 s); audio 165,888 samples.
    seed = {
        "media": {
            "seconds": 5,
            "fps": 24,
            "num_frames": 124,
            "audio_sample_rate": 32_000,
            "audio_padding_tolerance_samples": 2048,
        }
    }
    params = coverage_params(seed)
    assert params.expected_seconds == Fraction(124, 24)
    # 124/24 × 32,000 = 165,333.3 <= 165,888 <= 167,381.3.
    assert set(statuses(check_coverage(seed_probe(124, 165_888), params, "c")).values()) == {"PASS"}
    # One sample short of 165,333.3 fails; so does one past the tolerance.
    assert (
        statuses(check_coverage(seed_probe(124, 165_333), params, "c"))[
            "audio/samples-cover-duration"
        ]
        == "FAIL"
    )
    assert (
        statuses(check_coverage(seed_probe(124, 167_382), params, "c"))[
            "audio/samples-cover-duration"
        ]
        == "FAIL"
    )
    # Without num_frames the plan's 5 s rule applies: 160,000 + 2,048 < 165,888.
    only_seconds = CoverageParams(None, None, Fraction(5), 32_000, 2048, 0.1)
    assert (
        statuses(check_coverage(seed_probe(124, 165_888), only_seconds, "c"))[
            "audio/samples-cover-duration"
        ]
        == "FAIL"
    )
    assert (
        statuses(check_coverage(seed_probe(100, 165_888), params, "c"))["video/frame-count"]
        == "FAIL"
    )


def test_missing_audio_fails_when_the_plan_expects_it() -> None:
    p = MediaProbe("mp4", seed_probe(124, 1).video, None)
    checks = statuses(
        check_coverage(p, coverage_params({"media": {"audio_sample_rate": 32000}}), "c")
    )
    assert checks["audio/present"] == "FAIL"
    checks = statuses(check_coverage(p, coverage_params({}), "c"))
    assert checks["audio/present"] == "not-frozen"
    assert checks["video/frame-count"] == "not-frozen"
