"""Write the ``media-mini`` sample: four small real MP4s and a campaign that rescores them.

Media (H.264 + AAC, 160×90, 48 frames at 24 fps = 2 s, stereo 32 kHz):

- ``media/baseline-00.mp4``: the reference rendering;
- ``media/candidate-00.mp4``: differs slightly (±2 levels of per-frame
  noise; audio 3 % quieter with a little noise and a phase shift on one
  partial);
- ``media/candidate-trunc-00.mp4``: the candidate's video with only the first
  0.5 s of its audio;
- ``media/baseline-trunc-00.mp4``: the baseline's video with only 0.5 s of
  audio. Compared with the truncated candidate, both arms carry the same
  truncated audio: equal PCM shapes, a high spectral cosine, every recorded
  gate passing — and the coverage checks must FAIL.

Everything is deterministic: RGB pictures and PCM are computed in numpy (RGB
→ BT.601 limited-range YUV 4:2:0 in numpy too), x264 runs with ``asm=0`` and
one thread (x264's SIMD paths gave different bytes per run on an AVX-512
machine), so two runs write the same bytes. The MP4s are committed.

The recorded metrics are computed here independently of ``replay.media``:
SSIM and PSNR by FFmpeg's own ``ssim``/``psnr`` filters through PyAV's filter
graph, the spectral cosine with ``scipy.signal.stft``, LPIPS with a bare
``lpips.LPIPS`` loaded by hand from the test weights of
``make_test_weights.py`` (the real AlexNet backbone cannot be had here).

Usage::

    python samples/media-mini/make_media_mini.py [--out DIR] [--media-only]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
W, H, FPS, N_FRAMES = 160, 90, 24, 48
SR = 32_000
SECONDS = 2
TRUNC_SAMPLES = SR // 2  # 0.5 s
BASELINE_COMMIT = "1111111111111111111111111111111111111111"
CANDIDATE_COMMIT = "2222222222222222222222222222222222222222"

U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]


# ---------------------------------------------------------------- content


def _rgb(i: int, candidate: bool) -> U8:
    """Frame ``i``: moving colour gradients, a fixed texture and a ball."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64)
    t = i / FPS
    r = 128 + 80 * np.sin(2 * np.pi * (xx / W + 0.5 * t))
    g = 128 + 80 * np.sin(2 * np.pi * (1.5 * yy / H - 0.3 * t))
    b = 128 + 60 * np.cos(2 * np.pi * ((xx + yy) / (W + H) + t))
    tex = np.random.default_rng(1).integers(-6, 7, (H, W)).astype(np.float64)
    img = np.stack([r, g, b], axis=-1) + tex[..., None]
    cx = 20 + 120 * i / (N_FRAMES - 1)
    cy = 45 + 25 * math.sin(2 * math.pi * t)
    ball = (xx - cx) ** 2 + (yy - cy) ** 2 <= 12**2
    img[ball] = (240, 220, 40)
    if candidate:
        img += np.random.default_rng(100 + i).integers(-2, 3, (H, W, 1)).astype(np.float64)
    out: U8 = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def _yuv420p(rgb: U8) -> U8:
    """BT.601 limited range, chroma averaged over 2×2; PyAV's yuv420p ndarray layout."""
    x = rgb.astype(np.float64)
    kr, kb = 0.299, 0.114
    kg = 1 - kr - kb
    ey = kr * x[..., 0] + kg * x[..., 1] + kb * x[..., 2]
    y = 16 + 219 / 255 * ey
    cb = 128 + 224 / 255 * (x[..., 2] - ey) / (2 * (1 - kb))
    cr = 128 + 224 / 255 * (x[..., 0] - ey) / (2 * (1 - kr))

    def sub(c: F64) -> U8:
        avg = c.reshape(H // 2, 2, W // 2, 2).mean(axis=(1, 3))
        out: U8 = np.clip(np.rint(avg), 0, 255).astype(np.uint8)
        return out

    y8 = np.clip(np.rint(y), 0, 255).astype(np.uint8)
    chroma = np.concatenate([sub(cb).ravel(), sub(cr).ravel()]).reshape(-1, W)
    out: U8 = np.concatenate([y8, chroma])
    return out


def _pcm(candidate: bool) -> npt.NDArray[np.float32]:
    """Stereo PCM for the whole 2 s: two partials per channel under a slow envelope."""
    n = SECONDS * SR
    t = np.arange(n) / SR
    env = 0.6 + 0.4 * np.sin(2 * np.pi * 1.5 * t)
    shift = 0.6 if candidate else 0.0
    noise = np.random.default_rng(7).standard_normal((2, n))
    left = 0.25 * env * np.sin(2 * np.pi * 440 * t) + 0.12 * np.sin(2 * np.pi * 660 * t + shift)
    right = 0.25 * env * np.sin(2 * np.pi * 440 * t + 0.3) + 0.10 * np.sin(2 * np.pi * 880 * t)
    pcm = np.stack([left, right]) + 0.01 * noise
    if candidate:
        pcm = 0.97 * pcm + 0.02 * np.random.default_rng(8).standard_normal((2, n))
    return pcm.astype(np.float32)


def encode(frames: Iterator[U8], pcm: npt.NDArray[np.float32]) -> bytes:
    """H.264 (x264, asm=0, one thread) + AAC in MP4, into bytes."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        v = out.add_stream(
            "libx264", rate=FPS, options={"x264-params": "asm=0:threads=1", "crf": "23"}
        )
        v.width, v.height, v.pix_fmt = W, H, "yuv420p"
        a = out.add_stream("aac", rate=SR, layout="stereo")
        for i, yuv in enumerate(frames):
            f = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
            f.pts = i
            f.time_base = Fraction(1, FPS)
            out.mux(v.encode(f))
        out.mux(v.encode(None))
        for s in range(0, pcm.shape[1], 1024):
            af = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(pcm[:, s : s + 1024]), format="fltp", layout="stereo"
            )
            af.sample_rate = SR
            af.pts = s
            af.time_base = Fraction(1, SR)
            out.mux(a.encode(af))
        out.mux(a.encode(None))
    return buf.getvalue()


def media_files() -> dict[str, bytes]:
    """The four MP4s, by path relative to the campaign directory."""

    def frames(candidate: bool) -> Iterator[U8]:
        return (_yuv420p(_rgb(i, candidate)) for i in range(N_FRAMES))

    base_pcm, cand_pcm = _pcm(False), _pcm(True)
    return {
        "media/baseline-00.mp4": encode(frames(False), base_pcm),
        "media/candidate-00.mp4": encode(frames(True), cand_pcm),
        "media/candidate-trunc-00.mp4": encode(frames(True), cand_pcm[:, :TRUNC_SAMPLES]),
        "media/baseline-trunc-00.mp4": encode(frames(False), base_pcm[:, :TRUNC_SAMPLES]),
    }


# ---------------------------------------------------------------- the "author's scorer"


def _decode(data: bytes) -> tuple[list[Any], npt.NDArray[np.float32], int]:
    """Video frames (PyAV), audio [channels, samples] and the audio sample rate."""
    import av

    frames: list[Any] = []
    chunks: list[npt.NDArray[np.float32]] = []
    rate = 0
    with av.open(io.BytesIO(data), mode="r") as c:
        for fr in c.decode(c.streams.video[0], c.streams.audio[0]):
            if isinstance(fr, av.VideoFrame):
                frames.append(fr)
            elif isinstance(fr, av.AudioFrame):
                rate = fr.sample_rate
                chunks.append(np.asarray(fr.to_ndarray(), dtype=np.float32))
    return frames, np.concatenate(chunks, axis=1), rate


def _ffmpeg_filter(name: str, a: Sequence[Any], b: Sequence[Any]) -> list[dict[str, str]]:
    """Run FFmpeg's two-input filter ``name`` over frame pairs; per-frame metadata."""
    import av

    g = av.filter.Graph()
    s0 = g.add_buffer(
        width=W, height=H, format=av.VideoFormat("yuv420p"), time_base=Fraction(1, FPS)
    )
    s1 = g.add_buffer(
        width=W, height=H, format=av.VideoFormat("yuv420p"), time_base=Fraction(1, FPS)
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


def _spectral_cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """scipy.signal.stft with reflect ("even") boundary, Hann, hop n/4; zero-pad the shorter."""
    from scipy.signal import stft

    n = max(a.shape[1], b.shape[1])
    pa = np.zeros((a.shape[0], n))
    pb = np.zeros((b.shape[0], n))
    pa[:, : a.shape[1]] = a
    pb[:, : b.shape[1]] = b
    vals = []
    for nfft in (512, 1024, 2048):
        for ch in range(pa.shape[0]):
            kw: dict[str, Any] = {
                "window": "hann",
                "nperseg": nfft,
                "noverlap": nfft - nfft // 4,
                "boundary": "even",
                "padded": False,
            }
            ma = np.abs(stft(pa[ch], **kw)[2]).ravel()
            mb = np.abs(stft(pb[ch], **kw)[2]).ravel()
            vals.append(float(ma @ mb) / float(np.linalg.norm(ma) * np.linalg.norm(mb)))
    return sum(vals) / len(vals)


def _lpips_scorer(weights: dict[str, bytes]) -> Callable[[Sequence[Any], Sequence[Any]], float]:
    """A bare lpips.LPIPS with the given weights; returns mean LPIPS over frame pairs."""
    import warnings

    import lpips
    import torch

    # 160×90 frames: one thread is faster than OpenMP's fork/join, and it keeps
    # this script quick on a busy 2-core machine.
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = lpips.LPIPS(net="alex", pretrained=False, pnet_rand=True, verbose=False)
    bb = torch.load(io.BytesIO(weights["backbone"]), weights_only=True)
    lin = torch.load(io.BytesIO(weights["linear"]), weights_only=True, map_location="cpu")
    convs = {0: 1, 3: 2, 6: 3, 8: 4, 10: 5}
    trunk = model.get_submodule("net")  # (spelled so: a dotted ".net" reads as a host name)
    trunk.load_state_dict(
        {
            f"slice{s}.{i}.{p}": bb[f"features.{i}.{p}"]
            for i, s in convs.items()
            for p in ("weight", "bias")
        }
    )
    for k in range(5):
        model.lins[k].model[1].weight.data.copy_(lin[f"lin{k}.model.1.weight"])
    model.eval()

    def rgb(fr: Any) -> Any:
        # BT.601 limited range, chroma repeated 2×2, rounded and clipped to 8 bits.
        arr = fr.to_ndarray()
        y = arr[:H].astype(np.float64)
        rest = arr[H:].ravel()
        cu = rest[: (W // 2) * (H // 2)].reshape(H // 2, W // 2).astype(np.float64) - 128
        cv = rest[(W // 2) * (H // 2) :].reshape(H // 2, W // 2).astype(np.float64) - 128
        u = np.kron(cu, np.ones((2, 2)))
        v = np.kron(cv, np.ones((2, 2)))
        yl = (y - 16) * 255 / 219
        r = yl + 255 / 224 * 1.402 * v
        g = yl - 255 / 224 * (1.772 * 0.114 / 0.587 * u + 1.402 * 0.299 / 0.587 * v)
        b = yl + 255 / 224 * 1.772 * u
        img = np.clip(np.rint(np.stack([r, g, b])), 0, 255)
        return torch.from_numpy((img / 127.5 - 1).astype(np.float32))

    def score(a: Sequence[Any], b: Sequence[Any]) -> float:
        with torch.no_grad():
            d = [float(model(rgb(x)[None], rgb(y)[None])) for x, y in zip(a, b, strict=True)]
        return sum(d) / len(d)

    return score


def _load_weights_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_test_weights", HERE / "make_test_weights.py"
    )
    if spec is None or spec.loader is None:
        raise ImportError("make_test_weights.py not found next to this script")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def recorded_metrics(
    media: dict[str, bytes], weights: dict[str, bytes]
) -> dict[str, dict[str, float]]:
    """What the campaign's scorer recorded, per comparison id."""
    decoded = {p: _decode(d) for p, d in media.items()}
    lp = _lpips_scorer(weights)
    out: dict[str, dict[str, float]] = {}
    for cid, base, cand in COMPARISONS:
        fa, pa, _ = decoded[f"media/{base}.mp4"]
        fb, pb, rate = decoded[f"media/{cand}.mp4"]
        ssim = [float(m["lavfi.ssim.Y"]) for m in _ffmpeg_filter("ssim", fa, fb)]
        mse = [float(m["lavfi.psnr.mse.y"]) for m in _ffmpeg_filter("psnr", fa, fb)]
        rms_a = math.sqrt(float(np.mean(pa.astype(np.float64) ** 2)))
        rms_b = math.sqrt(float(np.mean(pb.astype(np.float64) ** 2)))
        out[cid] = {
            "ssim": round(sum(ssim) / len(ssim), 4),
            "psnr": round(10 * math.log10(255**2 / (sum(mse) / len(mse))), 2),
            "lpips": round(lp(fa, fb), 4),
            "audio_spectral_cosine": round(_spectral_cosine(pa, pb), 6),
            # RMS over each arm's own samples; the zero padding of the shorter arm
            # in the replay's definition scales its RMS by sqrt(len / padded len).
            "audio_rms_ratio": round(
                rms_b
                * math.sqrt(pb.shape[1] / max(pa.shape[1], pb.shape[1]))
                / (rms_a * math.sqrt(pa.shape[1] / max(pa.shape[1], pb.shape[1]))),
                4,
            ),
            "audio_sample_rate": rate,
            "frame_count": len(fb),
            "audio_samples": int(pb.shape[1]),
        }
    return out


# ---------------------------------------------------------------- campaign


COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("cmp-01", "baseline-00", "candidate-00"),
    ("cmp-02", "baseline-00", "candidate-trunc-00"),
    ("cmp-03", "baseline-trunc-00", "candidate-trunc-00"),
)
REQUESTS: tuple[tuple[str, str, int], ...] = (
    ("baseline-00", "baseline", 0),
    ("candidate-00", "candidate", 0),
    ("candidate-trunc-00", "candidate", 1),
    ("baseline-trunc-00", "baseline", 1),
)


def _doc(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _jsonl(rows: Sequence[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def campaign_files(media: dict[str, bytes], weights: dict[str, bytes]) -> dict[str, bytes]:
    """Every file of the campaign directory except the MP4s."""
    wmod = _load_weights_module()
    files: dict[str, bytes] = {}
    files["campaign.json"] = _doc(
        {
            "layout_version": "1",
            "id": "media-mini",
            "title": "Media replay sample: three comparisons of tiny real MP4s",
            "kind": "campaign",
            "hardware": {"accelerator": "none (synthetic media)", "count": 0},
            "arms": [
                {"id": "baseline", "role": "baseline", "runtime_commit": BASELINE_COMMIT},
                {"id": "candidate", "role": "candidate", "runtime_commit": CANDIDATE_COMMIT},
            ],
            "plan": "plans/media-mini.json",
            "summary": "Synthetic sample for bundle replay --media: 160x90, 2 s, H.264 + AAC.",
        }
    )
    files["plans/media-mini.json"] = _doc(
        {
            "plan_version": "1",
            "id": "media-mini",
            "arm_order": ["baseline", "candidate", "candidate", "baseline"],
            "warmups_per_server": 0,
            "measured_per_server": 1,
            "request": {
                "api": "videos-sync",
                "timing_boundary": "post_to_response",
                "payload": {
                    "seconds": SECONDS,
                    "fps": FPS,
                    "num_frames": N_FRAMES,
                    "size": f"{W}x{H}",
                },
            },
            "timeouts": {"request_s": 600, "wave_s": 900},
            "startup_budget_s": 60,
            "reservation": {"hard_limit_s": 7200, "soft_term_s": 6000, "kill_grace_s": 120},
            "teardown": {
                "baseline": {"term_wait_s": 30, "kill_wait_s": 60},
                "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
            },
            "media": {
                "seconds": SECONDS,
                "fps": FPS,
                "num_frames": N_FRAMES,
                "audio_sample_rate": SR,
                "audio_padding_tolerance_samples": 2048,
                "av_sync_tolerance_s": 0.1,
            },
        }
    )
    files["attempts.jsonl"] = _jsonl(
        [
            {
                "attempt_id": "run-1",
                "status": "accepted",
                "plan": "plans/media-mini.json",
                "start": "2026-03-01T10:00:00.000Z",
                "end": "2026-03-01T10:10:00.000Z",
            }
        ]
    )
    receipts = []
    for k, (rid, arm, seq) in enumerate(REQUESTS):
        start = 10 * 60 + k * 60
        receipts.append(
            {
                "request_id": rid,
                "attempt_id": "run-1",
                "arm": arm,
                "server": f"{arm}-1",
                "phase": "quality",
                "seq": seq,
                "start": f"2026-03-01T10:{start // 60:02d}:00.000Z",
                "end": f"2026-03-01T10:{start // 60:02d}:30.000Z",
                "e2e_s": 30.0,
                "status": "ok",
                "http_status": 200,
                "output_sha256": _sha(media[f"media/{rid}.mp4"]),
            }
        )
    files["receipts.jsonl"] = _jsonl(receipts)
    metrics = recorded_metrics(media, weights)
    files["comparisons.jsonl"] = _jsonl(
        [
            {
                "comparison_id": cid,
                "attempt_id": "run-1",
                "baseline_request_id": base,
                "candidate_request_id": cand,
                "baseline_sha256": _sha(media[f"media/{base}.mp4"]),
                "candidate_sha256": _sha(media[f"media/{cand}.mp4"]),
                "metrics": metrics[cid],
            }
            for cid, base, cand in COMPARISONS
        ]
    )
    files["gates.json"] = _doc(
        [
            {
                "gate_id": "lpips-max",
                "metric": "lpips",
                "op": "<=",
                "threshold": 0.2,
                "definition": "lpips/alex-v0.1-frame-mean",
                "warn_within": 0.05,
            },
            {
                "gate_id": "ssim-min",
                "metric": "ssim",
                "op": ">=",
                "threshold": 0.97,
                "definition": "ssim/ffmpeg-y-frame-mean",
                "warn_within": 0.01,
            },
            {
                "gate_id": "audio-cosine-min",
                "metric": "audio_spectral_cosine",
                "op": ">=",
                "threshold": 0.8,
                "definition": "audio/stft-cosine-512-1024-2048",
                "warn_within": 0.02,
            },
            {
                "gate_id": "audio-rms-ratio-min",
                "metric": "audio_rms_ratio",
                "op": ">=",
                "threshold": 0.5,
                "definition": "audio/rms-ratio",
                "warn_within": None,
            },
            {
                "gate_id": "audio-rms-ratio-max",
                "metric": "audio_rms_ratio",
                "op": "<=",
                "threshold": 2.0,
                "definition": "audio/rms-ratio",
                "warn_within": None,
            },
            {
                "gate_id": "audio-sample-rate",
                "metric": "audio_sample_rate",
                "op": "==",
                "threshold": SR,
                "definition": "audio/decoded-sample-rate-hz",
                "warn_within": None,
            },
            {
                "gate_id": "frame-count",
                "metric": "frame_count",
                "op": "==",
                "threshold": N_FRAMES,
                "definition": "video/decoded-frame-count",
                "warn_within": None,
            },
        ]
    )
    passed = sum(
        1
        for cid, _, _ in COMPARISONS
        if metrics[cid]["lpips"] <= 0.2
        and metrics[cid]["ssim"] >= 0.97
        and metrics[cid]["audio_spectral_cosine"] >= 0.8
        and 0.5 <= metrics[cid]["audio_rms_ratio"] <= 2.0
        and metrics[cid]["audio_sample_rate"] == SR
        and metrics[cid]["frame_count"] == N_FRAMES
    )
    files["claims.json"] = _doc(
        [
            {
                "claim_id": "comparisons-total",
                "statistic": "comparisons_total",
                "params": {},
                "value": str(len(COMPARISONS)),
                "unit": "count",
                "decimals": 0,
            },
            {
                "claim_id": "comparisons-passed",
                "statistic": "comparisons_passed",
                "params": {},
                "value": str(passed),
                "unit": "count",
                "decimals": 0,
                "text": "as recorded: the recorded metrics pass every gate in these comparisons",
            },
        ]
    )
    backbone_sha, linear_sha = _sha(weights["backbone"]), _sha(weights["linear"])
    files["scorer.json"] = _doc(
        {
            "name": "lpips",
            "version": "0.1.4",
            "net": "alex",
            "weights": [
                {
                    "role": "backbone",
                    "file": f"weights/{wmod.BACKBONE_NAME}",
                    "sha256": backbone_sha,
                    "bytes": len(weights["backbone"]),
                },
                {
                    "role": "linear",
                    "file": "lpips/weights/v0.1/alex.pth",
                    "sha256": linear_sha,
                    "bytes": len(weights["linear"]),
                },
            ],
            "note": "test backbone generated by make_test_weights.py (not ImageNet AlexNet)",
        }
    )
    artifacts = [
        {
            "path": path,
            "sha256": _sha(data),
            "bytes": len(data),
            "kind": "media",
            "availability": "committed next to this campaign (samples/media-mini/media)",
            "uri": None,
        }
        for path, data in media.items()
    ]
    artifacts += [
        {
            "path": f"weights/{wmod.BACKBONE_NAME}",
            "sha256": backbone_sha,
            "bytes": len(weights["backbone"]),
            "kind": "weights",
            "availability": "generated: python samples/media-mini/make_test_weights.py --out DIR",
            "uri": None,
        },
        {
            "path": "lpips/weights/v0.1/alex.pth",
            "sha256": linear_sha,
            "bytes": len(weights["linear"]),
            "kind": "weights",
            "availability": "ships inside the lpips 0.1.4 Python package",
            "uri": None,
        },
    ]
    files["artifacts.jsonl"] = _jsonl(artifacts)
    return files


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE, help="campaign directory (default: here)")
    ap.add_argument(
        "--media-only", action="store_true", help="write only the MP4s (needs PyAV, not torch)"
    )
    args = ap.parse_args(argv)
    media = media_files()
    files = dict(media)
    if not args.media_only:
        wmod = _load_weights_module()
        weights = {"backbone": wmod.backbone_bytes(), "linear": wmod.linear_bytes()}
        files.update(campaign_files(media, weights))
    for rel, data in sorted(files.items()):
        p = args.out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        print(f"{rel}: {len(data)} bytes sha256 {_sha(data)}", file=sys.stdout)


if __name__ == "__main__":
    main()
