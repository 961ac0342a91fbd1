"""Write the sample campaigns ``h3-ref2va-5s`` and ``h3-ref2va-kv-pilot``.

The samples rebuild the seed campaign (the team's product brief): every
published figure is reproduced exactly, and every value the seed does not
publish (timestamps, single request latencies, per-comparison metrics, HBM
samples, exit times) is synthesized here by hand-written arithmetic. There is
no randomness, so two runs write the same bytes; ``tests/test_samples.py``
re-runs this script into a temporary directory and compares byte for byte with
the checked-in directories.

Usage::

    python samples/make_samples.py [--out DIR]   # default: the samples/ directory
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

FIVE_S = "h3-ref2va-5s"
KV_PILOT = "h3-ref2va-kv-pilot"

# Published in the seed (product.md): runtime commits of the two arms.
BASELINE_COMMIT = "c7f56f0155953c7d4a77276a2f4fcbd844ab0da2"
CANDIDATE_COMMIT = "098b51f6b96dd160a0959e74e8822422527ff06d"

ACCEPTED = "final-2"
HOSTNAME = "npu-host-07"
WORKERS = tuple(f"npu{i}" for i in range(8))
DEVICES = tuple(f"npu:{i}" for i in range(8))
HBM_TOTAL_MB = 65536
GAP_MS = 3_000  # client pause between two requests on one server
COOLDOWN_MS = 75_000  # device release between two server slots
TERM_AFTER_MS = 5_000  # last request end -> teardown TERM

# Seed sentences quoted by claims (PR body and the merge review), citation syntax removed.
HEADLINE = (
    "407.27 → 108.12 s HTTP E2E, 73.45% lower (3.77× inverse-latency speedup) "
    "on eight Ascend 910B1 NPUs."
)
REVIEW_MEANS = (
    "The headline matches the retained values: the server means of 396.30 s and 418.24 s "
    "(baseline) and 106.66 s and 109.58 s (candidate) give 407.27 → 108.12 s, 73.45% lower."
)
COUNTS_TEXT = "All 26 requests, 14 quality comparisons and 32 actual worker exits pass."
SD_TEXT = "Sample SD is across server means, not six independent trials."
HBM_TEXT = "Mean sampled peak HBM rises 3.10%."
COSINE_TEXT = (
    "The family audio cosine of 0.813411 is close to the 0.80 gate; this is lossy caching, "
    "not semantic-quality certification."
)
MARGINS_TEXT = (
    "The closest margins are audio spectral cosine 0.813 (gate 0.80, disclosed in the PR body) "
    "and SSIM 0.976 (gate 0.97)."
)
LPIPS_TEXT = "The largest recorded LPIPS is 0.026 against the 0.20 gate."
PILOT_TEXT = (
    "the optional device-KV single-pair pilot (44.86% lower latency, not enabled in final profile)"
)
SUMMARY = (
    "Deliver the MiniMax-H3 Ref2VA Ascend campaign: 407.27 → 108.12 s HTTP E2E, 73.45% lower "
    "(3.77× inverse-latency speedup) on eight Ascend 910B1 NPUs. All 26 requests, 14 quality "
    "comparisons and 32 actual worker exits pass. Fifteen-second qualification is explicitly "
    "deferred."
)


# ---------------------------------------------------------------- encoding helpers


def _sha(label: str) -> str:
    """A deterministic stand-in digest: the SHA-256 of a label (the real bytes are external)."""
    return hashlib.sha256(label.encode("utf-8")).hexdigest()


def _ms(value: str) -> int:
    """Milliseconds of a decimal-seconds string, exactly."""
    ms = Decimal(value) * 1000
    if ms != ms.to_integral_value():
        raise ValueError(f"{value} s is not a whole number of milliseconds")
    return int(ms)


def _epoch_ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp()) * 1000


def _ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds."""
    secs, rest = divmod(ms, 1000)
    stamp = dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{rest:03d}Z"


def _num(value: str) -> float | int:
    """A JSON number for a decimal string (an int when it has no fraction)."""
    d = Decimal(value)
    return int(d) if d == d.to_integral_value() and "." not in value else float(d)


def _doc(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _jsonl(rows: Sequence[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> bytes:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: "" if r.get(c) is None else r[c] for c in columns})
    return buf.getvalue().encode("utf-8")


# ---------------------------------------------------------------- request scheduling


@dataclass(frozen=True)
class ServerSpec:
    """One server slot of an attempt and the e2e seconds of its requests, in run order."""

    attempt: str
    server: str
    arm: str
    startup_ms: int
    # (phase, e2e seconds as decimal text, status, prompt id or None, extra fields)
    requests: tuple[tuple[str, str, str, str | None, dict[str, Any]], ...]


@dataclass(frozen=True)
class ServerRun:
    """Where a server slot landed in time, and its receipts."""

    spec: ServerSpec
    launch_ms: int
    ready_ms: int
    last_end_ms: int
    receipts: tuple[dict[str, Any], ...]


def _run_server(spec: ServerSpec, launch_ms: int, campaign: str) -> ServerRun:
    ready = launch_ms + spec.startup_ms
    t = ready + 4_000
    rows: list[dict[str, Any]] = []
    for seq, (phase, e2e, status, prompt, extra) in enumerate(spec.requests):
        rid = f"{spec.attempt}-{spec.server}-{seq:02d}"
        end = t + _ms(e2e)
        row: dict[str, Any] = {
            "request_id": rid,
            "attempt_id": spec.attempt,
            "arm": spec.arm,
            "server": spec.server,
            "phase": phase,
            "seq": seq,
            "start": _ts(t),
            "end": _ts(end),
            "e2e_s": _num(e2e),
            "status": status,
            "timeout_level": None,
            "http_status": 200 if status == "ok" else None,
            "output_sha256": _sha(f"{campaign}/{rid}.mp4") if status == "ok" else None,
            "error": None,
        }
        if prompt is not None:
            row["prompt_id"] = prompt
        row.update(extra)
        rows.append(row)
        t = end + GAP_MS
    return ServerRun(spec, launch_ms, ready, t - GAP_MS, tuple(rows))


# ---------------------------------------------------------------- the five-second campaign

# Synthesized single requests. Measured values are chosen so each server's mean is
# exactly the published server mean (product.md): 396.30, 106.66, 109.58, 418.24 s.
_W, _M, _Q = "warmup", "measured", "quality"
FINAL_SERVERS: tuple[tuple[str, str, int, tuple[tuple[str, str, str | None], ...]], ...] = (
    (
        "baseline-1",
        "baseline",
        418_300,
        (
            (_W, "612.84", None),
            (_W, "431.57", None),
            (_M, "394.62", None),
            (_M, "398.05", None),
            (_M, "396.23", None),
            (_Q, "398.42", "q1"),
            (_Q, "394.87", "q2"),
        ),
    ),
    (
        "candidate-1",
        "candidate",
        402_700,
        (
            (_W, "241.66", None),
            (_W, "128.45", None),
            (_M, "105.92", None),
            (_M, "107.31", None),
            (_M, "106.75", None),
            (_Q, "107.15", "q1"),
            (_Q, "106.02", "q2"),
        ),
    ),
    (
        "candidate-2",
        "candidate",
        399_100,
        (
            (_W, "236.09", None),
            (_W, "131.72", None),
            (_M, "110.12", None),
            (_M, "108.87", None),
            (_M, "109.75", None),
            (_Q, "110.21", "q1"),
            (_Q, "108.93", "q2"),
        ),
    ),
    (
        "baseline-2",
        "baseline",
        421_900,
        (
            (_W, "598.31", None),
            (_W, "440.12", None),
            (_M, "417.06", None),
            (_M, "419.51", None),
            (_M, "418.15", None),
        ),
    ),
)
PUBLISHED_SERVER_MEANS = {
    "baseline-1": "396.30",
    "candidate-1": "106.66",
    "candidate-2": "109.58",
    "baseline-2": "418.24",
}

# Synthesized sampled HBM peaks (MB) per server, devices npu:0..7. Rank 0 also holds the
# VAE and audio decoder, so it peaks higher. Means: baseline 40000.00, candidate 41240.00
# MB, i.e. +3.10 % (published).
HBM_PEAKS: dict[str, tuple[int, ...]] = {
    "baseline-1": (57480, 37602, 37588, 37611, 37579, 37596, 37604, 37590),
    "candidate-1": (59356, 38660, 38648, 38655, 38641, 38662, 38650, 38648),
    "candidate-2": (59290, 38670, 38655, 38662, 38649, 38668, 38657, 38669),
    "baseline-2": (57512, 37410, 37398, 37415, 37402, 37396, 37411, 37406),
}
# Fraction of the peak at each of the six retained samples; the peak sample is set to 1.
_HBM_SHAPE = ("0.714", "0.962", "0.987", "0.975", "0.953", "0.941")
_AICORE = (3, 88, 91, 86, 90, 12)

# Synthesized per-comparison metrics. Extremes are the published ones: largest LPIPS
# 0.026, smallest SSIM 0.976, smallest audio spectral cosine 0.813411.
# Timed pairs: candidate-k seq j vs baseline-k seq j, k = 1, 2 and j = 0..4.
TIMED_METRICS = (
    # lpips, ssim, audio_spectral_cosine, audio_rms_ratio
    ("0.018", "0.984", "0.861204", "0.982"),
    ("0.021", "0.981", "0.874519", "1.014"),
    ("0.017", "0.986", "0.852337", "0.991"),
    ("0.019", "0.983", "0.869102", "1.006"),
    ("0.022", "0.980", "0.858846", "0.975"),
    ("0.020", "0.982", "0.866731", "1.021"),
    ("0.016", "0.987", "0.871955", "0.988"),
    ("0.023", "0.979", "0.849618", "1.003"),
    ("0.018", "0.985", "0.863470", "0.969"),
    ("0.021", "0.981", "0.857092", "1.011"),
)
# Quality pairs: (prompt, candidate server) vs the baseline-1 rendering of the prompt.
QUALITY_METRICS = (
    ("q1", "candidate-1", ("0.024", "0.978", "0.821557", "0.947")),
    ("q1", "candidate-2", ("0.026", "0.976", "0.813411", "0.938")),
    ("q2", "candidate-1", ("0.019", "0.983", "0.884263", "1.032")),
    ("q2", "candidate-2", ("0.022", "0.981", "0.879140", "1.027")),
)
# Published: 165,888 samples per channel at 32 kHz; 124 frames at 24 fps.
AV_METRICS = {"audio_sample_rate": 32000, "frame_count": 124, "audio_samples": 165888}

PAYLOAD = {
    "model": "MiniMax-H3-Ref2VA",
    "prompt": "A street violinist plays a short phrase at dusk; the camera slowly pushes in.",
    "input_reference": "inputs/ref2va-reference.png",
    "seconds": 5,
    "fps": 24,
    "num_frames": 124,
    "size": "1280x720",
    "num_inference_steps": 30,
    "seed": 42,
    "generate_sound": True,
}
MEDIA = {
    "seconds": 5,
    "fps": 24,
    "num_frames": 124,
    "audio_sample_rate": 32000,
    "audio_padding_tolerance_samples": 2048,
}
TEARDOWN = {
    "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
    "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
}
RESERVATION_SOFT_TERM_S = 9900


def _final_plan() -> dict[str, Any]:
    return {
        "plan_version": "1",
        "id": "final-5s",
        "description": (
            "Frozen plan of the final five-second A/B/B/A campaign: two independent servers "
            "per arm, two warmups plus three measured requests per server, then the fixed-seed "
            "quality set on baseline-1, candidate-1 and candidate-2."
        ),
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "servers": ["baseline-1", "candidate-1", "candidate-2", "baseline-2"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {
            "api": "videos-async",
            "timing_boundary": "post_to_delete",
            "timing_boundary_detail": (
                "clock starts before POST /v1/videos and stops after GET /v1/videos/{id}/content "
                "and DELETE /v1/videos/{id}; polling GET /v1/videos/{id} every poll_interval_s "
                "is inside the number"
            ),
            "poll_interval_s": 5,
            "payload": PAYLOAD,
        },
        "quality": {
            "prompts": [
                {
                    "id": "q1",
                    "prompt": "A child laughs and claps in a sunlit kitchen; handheld camera.",
                    "seed": 1234,
                },
                {
                    "id": "q2",
                    "prompt": "Waves break on a rocky shore at night; a foghorn sounds twice.",
                    "seed": 5678,
                },
            ],
            "render_on": ["baseline-1", "candidate-1", "candidate-2"],
            "reference_server": "baseline-1",
        },
        "timeouts": {"request_s": 1200, "wave_s": 3600},
        "timeouts_note": (
            "a wave is the whole request sequence of one server (warmups, measured, quality); "
            "request_s <= wave_s, and startup_budget_s + wave_s + the TERM/KILL budgets + "
            "kill_grace_s fit inside soft_term_s"
        ),
        "startup_budget_s": 900,
        "reservation": {
            "hard_limit_s": 10800,
            "soft_term_s": RESERVATION_SOFT_TERM_S,
            "kill_grace_s": 180,
            "watchdog_is_failure_boundary": False,
            "unfinished_arm_evidence": (
                "a request ended by any deadline gets a receipt with status timeout and the "
                "timeout_level that fired; server slots that never started are named in the "
                "attempt's note"
            ),
        },
        "teardown": TEARDOWN,
        "telemetry": {"interval_s": 5, "source": "npu-smi"},
        "media": MEDIA,
        "launch": {
            "baseline": {"args": ["--model", "MiniMax-H3-Ref2VA", "--tensor-parallel-size", "8"]},
            "candidate": {
                "args": [
                    "--model",
                    "MiniMax-H3-Ref2VA",
                    "--tensor-parallel-size",
                    "8",
                    "--cache-backend",
                    "cache_dit",
                ]
            },
        },
    }


def _schedule(
    specs: Sequence[ServerSpec], start: str, campaign: str
) -> tuple[list[ServerRun], dict[str, int], dict[str, list[tuple[str, Decimal]]]]:
    """Run server slots back to back; return runs, TERM times and worker exit seconds."""
    runs: list[ServerRun] = []
    term: dict[str, int] = {}
    exits: dict[str, list[tuple[str, Decimal]]] = {}
    t = _epoch_ms(start)
    for spec in specs:
        run = _run_server(spec, t, campaign)
        runs.append(run)
        term[spec.server] = run.last_end_ms + TERM_AFTER_MS
        exits[spec.server] = _clean_exits(spec.arm, spec.server)
        longest = max(s for _, s in exits[spec.server])
        t = term[spec.server] + _ms(str(longest)) + COOLDOWN_MS
    return runs, term, exits


# Synthesized spread of TERM-to-exit seconds across the eight workers of one server.
_EXIT_SPREAD = ("0.0", "2.7", "5.9", "8.4", "11.6", "14.2", "17.9", "21.5")


def _clean_exits(arm: str, server: str) -> list[tuple[str, Decimal]]:
    base = Decimal("21.3") if arm == "baseline" else Decimal("4.6")
    scale = Decimal(1) if arm == "baseline" else Decimal("0.4")
    offset = Decimal("1.4") if server.endswith("-2") else Decimal(0)
    out = []
    for w, spread in zip(WORKERS, _EXIT_SPREAD, strict=True):
        s = (base + scale * Decimal(spread) + offset).quantize(Decimal("0.1"))
        budget = TEARDOWN[arm]["term_wait_s"]
        if s > budget:
            raise AssertionError(f"{server} {w}: exit {s} s beyond the TERM budget {budget} s")
        out.append((w, s))
    return out


def _final_specs() -> list[ServerSpec]:
    specs = []
    for server, arm, startup, reqs in FINAL_SERVERS:
        measured = [Decimal(e) for phase, e, _ in reqs if phase == _M]
        mean = sum(measured, Decimal(0)) / len(measured)
        if mean != Decimal(PUBLISHED_SERVER_MEANS[server]):
            raise AssertionError(f"{server}: mean {mean} is not the published one")
        specs.append(
            ServerSpec(
                ACCEPTED,
                server,
                arm,
                startup,
                tuple((phase, e, "ok", prompt, {}) for phase, e, prompt in reqs),
            )
        )
    return specs


def _other_attempt_specs() -> list[tuple[str, ServerSpec]]:
    """The retained attempts that must not be mixed into the accepted result."""
    timeout = {
        "timeout_level": "reservation",
        "error": "reservation soft TERM reached while the request was in flight",
    }
    rpc = {"http_status": 500, "error": "worker RPC to npu3 failed: deadline exceeded"}
    audio = {
        "http_status": 500,
        "error": "audio decode owner exited before the PCM buffer was handed over",
    }
    return [
        (
            "2026-02-03T02:05:00Z",
            ServerSpec(
                "audio-own-1",
                "candidate-ao",
                "candidate",
                388_400,
                (
                    (_W, "229.84", "ok", None, {}),
                    (_W, "93.18", "ok", None, {}),
                    (_M, "92.41", "ok", None, {}),
                    (_M, "14.20", "failed", None, audio),
                    (_M, "91.87", "ok", None, {}),
                ),
            ),
        ),
        (
            "2026-02-05T06:40:00Z",
            ServerSpec(
                "rpc-1",
                "candidate-rpc",
                "candidate",
                396_200,
                (
                    (_W, "301.55", "ok", None, {}),
                    (_W, "48.31", "failed", None, rpc),
                    (_M, "163.92", "ok", None, {}),
                    (_M, "61.07", "failed", None, rpc),
                    (_M, "158.66", "ok", None, {}),
                ),
            ),
        ),
        (
            "2026-02-09T07:30:00Z",
            ServerSpec(
                "final-1",
                "baseline-1",
                "baseline",
                425_800,
                (
                    (_W, "618.20", "ok", None, {}),
                    (_W, "433.05", "ok", None, {}),
                    (_M, "452.61", "ok", None, {}),
                    (_M, "447.38", "ok", None, {}),
                    (_M, "312.40", "timeout", None, timeout),
                ),
            ),
        ),
    ]


def _telemetry(runs: Sequence[ServerRun]) -> list[dict[str, Any]]:
    rows = []
    step = 5_000  # the plan's telemetry interval: samples sit on its grid
    for run in runs:
        server = run.spec.server
        span = run.last_end_ms - run.ready_ms
        offsets = [
            -(-(run.ready_ms - run.launch_ms + k * span // 5) // step) * step for k in range(5)
        ]
        offsets.append((run.last_end_ms - run.launch_ms) // step * step)
        for d, (device, peak) in enumerate(zip(DEVICES, HBM_PEAKS[server], strict=True)):
            at_peak = 2 + d % 3
            for k, off in enumerate(offsets):
                frac = Decimal(1) if k == at_peak else Decimal(_HBM_SHAPE[k])
                rows.append(
                    {
                        "attempt_id": run.spec.attempt,
                        "arm": run.spec.arm,
                        "server": server,
                        "device": device,
                        "time": _ts(run.launch_ms + off),
                        "hbm_used_mb": int((Decimal(peak) * frac).quantize(Decimal(1))),
                        "hbm_total_mb": HBM_TOTAL_MB,
                        "aicore_pct": _AICORE[k],
                        "source": "npu-smi",
                    }
                )
    return rows


def _check_hbm() -> None:
    def arm_mean(arm: str) -> Decimal:
        peaks = [p for s, v in HBM_PEAKS.items() if s.startswith(arm) for p in v]
        return Decimal(sum(peaks)) / len(peaks)

    b, c = arm_mean("baseline"), arm_mean("candidate")
    change = ((c / b - 1) * 100).quantize(Decimal("0.01"))
    if (b, c, change) != (Decimal(40000), Decimal(41240), Decimal("3.10")):
        raise AssertionError(f"HBM peaks give {b}, {c}, {change} %")


def _comparisons(receipts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {(r["server"], r["seq"]): r for r in receipts if r["attempt_id"] == ACCEPTED}
    by_prompt = {
        (r["server"], r["prompt_id"]): r
        for r in receipts
        if r["attempt_id"] == ACCEPTED and r["phase"] == _Q
    }
    pairs: list[tuple[dict[str, Any], dict[str, Any], tuple[str, ...], str]] = []
    for n, (k, j) in enumerate((k, j) for k in (1, 2) for j in range(5)):
        base, cand = by_key[(f"baseline-{k}", j)], by_key[(f"candidate-{k}", j)]
        pairs.append((base, cand, TIMED_METRICS[n], "slot-matched"))
    for prompt, server, metrics in QUALITY_METRICS:
        pairs.append(
            (by_prompt[("baseline-1", prompt)], by_prompt[(server, prompt)], metrics, "quality")
        )
    rows = []
    for n, (base, cand, (lp, ss, cos, rms), kind) in enumerate(pairs, start=1):
        rows.append(
            {
                "comparison_id": f"{ACCEPTED}-cmp-{n:02d}",
                "attempt_id": ACCEPTED,
                "baseline_request_id": base["request_id"],
                "candidate_request_id": cand["request_id"],
                "baseline_sha256": base["output_sha256"],
                "candidate_sha256": cand["output_sha256"],
                "metrics": {
                    "lpips": float(lp),
                    "ssim": float(ss),
                    "audio_spectral_cosine": float(cos),
                    "audio_rms_ratio": float(rms),
                    **AV_METRICS,
                },
                "pairing": kind,
                "prompt_id": cand.get("prompt_id", "timed"),
            }
        )
    return rows


GATES = [
    {
        "gate_id": "lpips-max",
        "metric": "lpips",
        "op": "<=",
        "threshold": 0.20,
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
        "threshold": 0.80,
        "definition": "audio/stft-cosine-512-1024-2048",
        "warn_within": 0.02,
    },
    {
        "gate_id": "audio-rms-ratio-min",
        "metric": "audio_rms_ratio",
        "op": ">=",
        "threshold": 0.5,
        "definition": "audio/rms-ratio-candidate-over-baseline",
        "warn_within": None,
    },
    {
        "gate_id": "audio-rms-ratio-max",
        "metric": "audio_rms_ratio",
        "op": "<=",
        "threshold": 2.0,
        "definition": "audio/rms-ratio-candidate-over-baseline",
        "warn_within": None,
    },
    {
        "gate_id": "audio-sample-rate",
        "metric": "audio_sample_rate",
        "op": "==",
        "threshold": 32000,
        "definition": "audio/decoded-sample-rate-hz",
        "warn_within": None,
    },
    {
        "gate_id": "frame-count",
        "metric": "frame_count",
        "op": "==",
        "threshold": 124,
        "definition": "video/decoded-frame-count",
        "warn_within": None,
    },
]

SCORER: dict[str, Any] = {
    "name": "lpips",
    "version": "0.1.4",
    "net": "alex",
    "weights": [
        {
            "role": "backbone",
            "file": "alexnet-owt-7be5be79.pth",
            "sha256": "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02",
            "bytes": 244408911,
        },
        {
            "role": "linear",
            "file": "lpips/weights/v0.1/alex.pth",
            "sha256": "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0",
            "bytes": 6009,
        },
    ],
}


def _worker_exit_rows(
    runs: Sequence[ServerRun], exits: dict[str, list[tuple[str, Decimal]]]
) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        s = run.spec
        for worker, secs in exits[s.server]:
            rows.append(
                {
                    "attempt_id": s.attempt,
                    "arm": s.arm,
                    "server": s.server,
                    "worker": worker,
                    "exit_code": 0,
                    "signal": None,
                    "exit_s": float(secs),
                    "killed": False,
                    "term_wait_s": TEARDOWN[s.arm]["term_wait_s"],
                }
            )
    # final-1: the reservation watchdog stopped baseline-1; two workers needed SIGKILL.
    for i, worker in enumerate(WORKERS):
        killed = worker in ("npu3", "npu6")
        rows.append(
            {
                "attempt_id": "final-1",
                "arm": "baseline",
                "server": "baseline-1",
                "worker": worker,
                "exit_code": None,
                "signal": "SIGKILL" if killed else "SIGTERM",
                "exit_s": 180.4 if killed else float(Decimal("9.8") + Decimal("3.3") * i),
                "killed": killed,
                "term_wait_s": TEARDOWN["baseline"]["term_wait_s"],
            }
        )
    return rows


def _final_span(runs: Sequence[ServerRun], term: dict[str, int]) -> tuple[int, int]:
    """First launch and end (one minute after the last TERM) of the accepted attempt, in ms."""
    start, end = runs[0].launch_ms, term[runs[-1].spec.server] + 60_000
    if (end - start) / 1000 > RESERVATION_SOFT_TERM_S:
        raise AssertionError("the accepted campaign does not fit its reservation")
    return start, end


def _attempts(
    final_runs: Sequence[ServerRun],
    final_term: dict[str, int],
    others: Sequence[ServerRun],
) -> list[dict[str, Any]]:
    def span(run: ServerRun) -> tuple[str, str]:
        return _ts(run.launch_ms), _ts(run.last_end_ms + TERM_AFTER_MS)

    ao, rpc, f1 = others
    f2_start, f2_end = _final_span(final_runs, final_term)
    return [
        {
            "attempt_id": "audio-own-1",
            "status": "rejected",
            "reason": (
                "audio ownership change rejected: the audio decode owner exited before handing "
                "over the PCM buffer (one failed request) and the change was withdrawn"
            ),
            "plan": None,
            "start": span(ao)[0],
            "end": span(ao)[1],
            "note": "exploratory candidate-only run, not a paired campaign; samples retained",
        },
        {
            "attempt_id": "rpc-1",
            "status": "rejected",
            "reason": "failed RPC attempt: worker RPC deadline exceeded on two requests",
            "plan": None,
            "start": span(rpc)[0],
            "end": span(rpc)[1],
            "note": "exploratory candidate-only run, not a paired campaign; samples retained",
        },
        {
            "attempt_id": "final-1",
            "status": "interrupted",
            "reason": (
                "the first final campaign was interrupted during A1 (baseline-1): it had been "
                "started in a device reservation already partly used by set-up, and the "
                "reservation soft TERM fired during measured request seq 4; the whole paired "
                "campaign was restarted as final-2 rather than resumed"
            ),
            "plan": "plans/final-5s.json",
            "start": span(f1)[0],
            "end": _ts(f1.last_end_ms + 180_400),
            "note": "server slots candidate-1, candidate-2 and baseline-2 never started",
        },
        {
            "attempt_id": ACCEPTED,
            "status": "accepted",
            "reason": None,
            "plan": "plans/final-5s.json",
            "start": _ts(f2_start),
            "end": _ts(f2_end),
            "note": "complete A/B/B/A campaign in a fresh reservation",
        },
    ]


def _claim(
    cid: str,
    statistic: str,
    params: dict[str, str],
    value: str,
    unit: str,
    *,
    text: str | None,
    **extra: Any,
) -> dict[str, Any]:
    exp = Decimal(value).as_tuple().exponent
    decimals = -exp if isinstance(exp, int) else 0
    return {
        "claim_id": cid,
        "statistic": statistic,
        "params": params,
        "value": value,
        "unit": unit,
        "decimals": decimals,
        "text": text,
        **extra,
    }


def _final_claims() -> list[dict[str, Any]]:
    sd_note = (
        "sample addition: the seed says the SD is across server means but publishes no "
        "value; |a - b| / sqrt(2) of the two published server means, derived by hand"
    )
    pair = {"baseline": "baseline", "candidate": "candidate"}
    return [
        _claim(
            "server-mean-baseline-1",
            "server_mean_s",
            {"arm": "baseline", "server": "baseline-1"},
            "396.30",
            "s",
            text=REVIEW_MEANS,
        ),
        _claim(
            "server-mean-baseline-2",
            "server_mean_s",
            {"arm": "baseline", "server": "baseline-2"},
            "418.24",
            "s",
            text=REVIEW_MEANS,
        ),
        _claim(
            "server-mean-candidate-1",
            "server_mean_s",
            {"arm": "candidate", "server": "candidate-1"},
            "106.66",
            "s",
            text=REVIEW_MEANS,
        ),
        _claim(
            "server-mean-candidate-2",
            "server_mean_s",
            {"arm": "candidate", "server": "candidate-2"},
            "109.58",
            "s",
            text=REVIEW_MEANS,
        ),
        _claim(
            "arm-mean-baseline", "arm_mean_s", {"arm": "baseline"}, "407.27", "s", text=HEADLINE
        ),
        _claim(
            "arm-mean-candidate", "arm_mean_s", {"arm": "candidate"}, "108.12", "s", text=HEADLINE
        ),
        _claim("percent-lower", "percent_lower", pair, "73.45", "%", text=HEADLINE),
        _claim("speedup", "speedup", pair, "3.77", "x", text=HEADLINE),
        _claim("requests-passed", "requests_passed", {}, "26", "count", text=COUNTS_TEXT),
        _claim("comparisons-passed", "comparisons_passed", {}, "14", "count", text=COUNTS_TEXT),
        _claim("worker-exits-clean", "worker_exits_clean", {}, "32", "count", text=COUNTS_TEXT),
        _claim("hbm-peak-change", "hbm_peak_mean_change_pct", pair, "3.10", "%", text=HBM_TEXT),
        _claim(
            "closest-audio-cosine",
            "closest_to_gate",
            {"metric": "audio_spectral_cosine"},
            "0.813411",
            "1",
            text=COSINE_TEXT,
        ),
        _claim("ssim-min", "metric_min", {"metric": "ssim"}, "0.976", "1", text=MARGINS_TEXT),
        _claim("lpips-max", "metric_max", {"metric": "lpips"}, "0.026", "1", text=LPIPS_TEXT),
        _claim(
            "sd-server-means-baseline",
            "arm_sd_server_means_s",
            {"arm": "baseline"},
            "15.51",
            "s",
            text=SD_TEXT,
            note=sd_note,
        ),
        _claim(
            "sd-server-means-candidate",
            "arm_sd_server_means_s",
            {"arm": "candidate"},
            "2.06",
            "s",
            text=SD_TEXT,
            note=sd_note,
        ),
    ]


NOT_CLAIMED = [
    ("p95/p99 latency", "with three measured requests per server no tail percentile is claimed"),
    ("throughput", "single-request latency only; no concurrent load was measured"),
    ("CUDA result", "only Ascend 910B1 NPUs were measured"),
    ("15-second result", "Fifteen-second qualification is explicitly deferred."),
    ("global optimum", "the profile is qualified against one baseline, not proven optimal"),
]
_NOT_CLAIMED_QUOTE = "No global optimum, p95/p99, throughput, CUDA or 15-second result is claimed."


def _sources() -> list[dict[str, Any]]:
    return [
        {
            "source_id": "cache-dit-profile",
            "optimization": "Cache-DiT caching profile for the Ref2VA diffusion transformer",
            "origin": "vipshop/cache-dit via vLLM-Omni --cache-backend cache_dit",
            "adopted": True,
            "evidence": "the final A/B/B/A campaign (attempt final-2): 407.27 -> 108.12 s",
            "evidence_limit": (
                "lossy caching: the frozen quality gates bound drift from the baseline output; "
                "they are not semantic-quality certification"
            ),
            "effect_pct": None,
        },
        {
            "source_id": "consolidated-engine-changes",
            "optimization": "downstream engine changes of the candidate runtime",
            "origin": "vLLM-Omni PR 9698",
            "adopted": True,
            "evidence": "the final A/B/B/A campaign, as part of the whole candidate profile",
            "evidence_limit": "measured only together with the rest of the candidate profile",
            "effect_pct": None,
        },
        {
            "source_id": "device-kv-pilot",
            "optimization": "device-resident reference KV (kvdevice2 against kv2)",
            "origin": "downstream reference-KV residency pilot runtime (sample: synthesized)",
            "adopted": False,
            "evidence": "single-pair pilot h3-ref2va-kv-pilot: 44.86 % lower",
            "evidence_limit": "one pair, not enabled in the final profile",
            "effect_pct": 44.86,
        },
        {
            "source_id": "multi-video-correction",
            "optimization": "INT8/RainFusion multi-video correction",
            "origin": "vLLM-Omni PR 9241",
            "adopted": False,
            "evidence": "cited for attribution in the source/benefit table",
            "evidence_limit": "not measured on its own in this campaign; no effect is claimed",
            "effect_pct": None,
        },
    ]


_MEDIA_AVAILABILITY = "external: retained by the author, not redistributed; hashes public"


def _artifacts(receipts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in receipts:
        if r["attempt_id"] != ACCEPTED:
            continue
        sha = r["output_sha256"]
        rows.append(
            {
                "path": f"media/{ACCEPTED}/{r['request_id']}.mp4",
                "sha256": sha,
                "bytes": 2_310_000 + int(sha[:6], 16) % 900_000,
                "kind": "media",
                "availability": _MEDIA_AVAILABILITY,
                "uri": None,
                "request_id": r["request_id"],
            }
        )
    notes = {
        "backbone": (
            "external: not redistributed; torchvision's published ImageNet AlexNet weights "
            "(AlexNet_Weights.IMAGENET1K_V1), which lpips 0.1.4 loads as its backbone"
        ),
        "linear": (
            "external: not redistributed here; ships inside the lpips 0.1.4 Python package "
            "as lpips/weights/v0.1/alex.pth"
        ),
    }
    for w in SCORER["weights"]:
        rows.append(
            {
                "path": w["file"],
                "sha256": w["sha256"],
                "bytes": w["bytes"],
                "kind": "weights",
                "availability": notes[w["role"]],
                "uri": None,
            }
        )
    for i, (server, *_rest) in enumerate(FINAL_SERVERS):
        rows.append(
            {
                "path": f"host-logs/{ACCEPTED}/{server}.log",
                "sha256": _sha(f"{FIVE_S}/host-logs/{ACCEPTED}/{server}.log"),
                "bytes": 1_184_233 + 97_531 * i,
                "kind": "log",
                "availability": (
                    "external: full host logs retained by the author, not redistributed (they "
                    "name hosts, users and addresses); short excerpts are in logs/"
                ),
                "uri": None,
            }
        )
    return rows


def _host_log(run: ServerRun, term_ms: int, exits: list[tuple[str, Decimal]]) -> bytes:
    """A short raw host-log excerpt, with the identifying details the sanitizer must scrub."""
    s = run.spec
    port = 8091 if s.arm == "baseline" else 8092
    commit = BASELINE_COMMIT if s.arm == "baseline" else CANDIDATE_COMMIT
    workdir = f"/home/h3user/runs/{s.attempt}/{s.server}"
    lines = [
        f"{_ts(run.launch_ms)} INFO launcher: host {HOSTNAME} (10.20.30.40) "
        f"reserving npu:0-7 for {s.server}",
        f"{_ts(run.launch_ms + 412)} INFO launcher: cwd {workdir}",
        f"{_ts(run.launch_ms + 1_007)} INFO launcher: vLLM-Omni {commit[:12]} serve "
        f"--port {port} {' '.join(_final_plan()['launch'][s.arm]['args'])}",
        f"{_ts(run.ready_ms)} INFO api_server: ready on http://10.20.30.40:{port}",
    ]
    for r in run.receipts:
        lines.append(
            f"{r['start']} DEBUG client: POST /v1/videos seq={r['seq']} phase={r['phase']} "
            "Authorization: Bearer 3f9c2e7a1b8d4c60a5e2f7b9d1c3e8a2"
        )
        lines.append(
            f"{r['end']} INFO client: DELETE /v1/videos/video-{_sha(r['request_id'])[:16]} "
            f"done request_id={r['request_id']} e2e_s={r['e2e_s']}"
        )
    lines.append(f"{_ts(term_ms)} INFO launcher: TERM sent to {len(exits)} workers")
    longest = max(secs for _, secs in exits)
    lines.append(
        f"{_ts(term_ms + _ms(str(longest)))} INFO launcher: all workers exited with code 0 "
        f"within {longest} s; logs kept under {workdir}/logs"
    )
    return ("\n".join(lines) + "\n").encode("utf-8")


CLIENT_PY = '''\
"""Time one vLLM-Omni video request from POST to DELETE (the plan's post_to_delete boundary).

Carried as evidence of how the receipts were timed; the sample never runs it.
Usage: python client.py BASE_URL PAYLOAD.json OUT.mp4
(reference paths in PAYLOAD.json are relative to the folder holding it)
"""

from __future__ import annotations

import json
import mimetypes
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

POLL_INTERVAL_S = 5.0
TIMEOUT_S = 1200.0


def _call(method: str, url: str, body: bytes | None = None, ctype: str | None = None) -> bytes:
    # The URL comes from the operator's command line (http to the local server).
    req = urllib.request.Request(url, data=body, method=method)  # noqa: S310
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310
        data: bytes = resp.read()
    return data


FILE_FIELDS = ("input_reference", "input_references")
# Integer fields of vLLM-Omni's form (seconds must match ^[1-9]\\d*$: "5.0" is HTTP 400).
INT_FIELDS = ("seconds", "width", "height", "num_frames", "num_inference_steps", "seed")


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool | dict | list):
        return json.dumps(value)
    if name in INT_FIELDS and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _status(url: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(_call("GET", url))
    except urllib.error.HTTPError as exc:
        # A failed job is polled with its error's own status (400/500) and its record.
        doc = json.loads(exc.read())
        if doc.get("status") != "failed":
            raise
    return doc


def _multipart(fields: dict[str, Any], base: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        if value is None:
            continue  # the form's default; str(None) would send the text "None"
        if name in FILE_FIELDS:
            # The server takes references as file uploads only (a text part is HTTP 400);
            # several references are repeated parts under one name.
            for rel in [value] if isinstance(value, str) else value:
                path = base / rel
                ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                head = (
                    f'Content-Disposition: form-data; name="{name}"; filename="{path.name}"'
                    f"\\r\\nContent-Type: {ctype}"
                )
                parts.append(
                    f"--{boundary}\\r\\n{head}\\r\\n\\r\\n".encode() + path.read_bytes() + b"\\r\\n"
                )
            continue
        head = f'Content-Disposition: form-data; name="{name}"'
        text = _text(name, value)
        parts.append(f"--{boundary}\\r\\n{head}\\r\\n\\r\\n{text}\\r\\n".encode())
    parts.append(f"--{boundary}--\\r\\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def run(base: str, payload: dict[str, Any], out: str, files: Path) -> dict[str, Any]:
    """POST, poll every POLL_INTERVAL_S, download, DELETE; return the receipt fields.

    Reference paths in ``payload`` are relative to ``files``.
    """
    body, ctype = _multipart(payload, files)
    t0 = time.monotonic()
    job = json.loads(_call("POST", f"{base}/v1/videos", body, ctype))
    doc: dict[str, Any] = job
    status = job.get("status", "queued")
    while status not in ("completed", "failed"):
        if time.monotonic() - t0 > TIMEOUT_S:
            status = "timeout"
            break
        time.sleep(POLL_INTERVAL_S)
        doc = _status(f"{base}/v1/videos/{job['id']}")
        status = doc["status"]
    if status == "completed":
        with Path(out).open("wb") as fh:
            fh.write(_call("GET", f"{base}/v1/videos/{job['id']}/content"))
    # DELETE is inside the timing boundary, and a timed-out job is cleaned up too.
    _call("DELETE", f"{base}/v1/videos/{job['id']}")
    receipt: dict[str, Any] = {
        "status": "ok" if status == "completed" else status,
        "e2e_s": round(time.monotonic() - t0, 2),
    }
    if status == "timeout":
        receipt["timeout_level"] = "request"
    if status == "failed":
        receipt["error"] = (doc.get("error") or {}).get("message")
    return receipt


if __name__ == "__main__":
    with Path(sys.argv[2]).open(encoding="utf-8") as fh:
        payload = json.load(fh)
    receipt = run(sys.argv[1].rstrip("/"), payload, sys.argv[3], Path(sys.argv[2]).parent)
    print(json.dumps(receipt))
'''

NOTE_MD = f"""\
# Five-second delivery (seed summary, quoted)

Quoted from the seed pull request, with its citations rewritten as plain
references (the original cited the request issue and a PR by bare number).

{SUMMARY}

This adds frozen plans, portable client/coverage/validator scripts, source
attribution, raw-value sanitized receipts, an integrity manifest and
repeated-trial charts. The final A/B/B/A campaign uses two independent servers
per arm, two warmups plus three measured requests per server. Sample SD is
across server means, not six independent trials. Mean sampled peak HBM rises
3.10%. The family audio cosine of 0.813411 is close to the 0.80 gate; this is
lossy caching, not semantic-quality certification.

Final report and source/benefit table distinguishes the qualified existing
Cache-DiT profile from {PILOT_TEXT}. Every adopted optimization has an origin
and evidence limit. Rejected audio ownership, failed RPC attempts and the
interrupted first final campaign are retained without mixing their samples into
the accepted result.

All downstream engine changes are consolidated in vLLM-Omni PR 9698. Measured
runtime: {CANDIDATE_COMMIT}; baseline: {BASELINE_COMMIT}. Baseline teardown uses
matched diagnostic 60/90-second budgets; candidate uses native production
budgets.

Raw media, model weights and host logs stay external, with public hashes and
explicit availability limits. {_NOT_CLAIMED_QUOTE}
"""


def _final_readme(used_s: int) -> str:
    return f"""\
# Sample campaign `{FIVE_S}`

Generated by `samples/make_samples.py`; do not edit by hand (a test regenerates
it and compares byte for byte). It rebuilds the seed campaign, as the team's
product brief publishes it (a document outside this repository): MiniMax-H3
Ref2VA five-second video+audio generation on eight Ascend 910B1 NPUs,
vLLM-Omni runtime, A/B/B/A.

## Published (from the product brief and the seed text)

- Arms and runtime commits: baseline `{BASELINE_COMMIT}`, candidate
  `{CANDIDATE_COMMIT}`; eight Ascend 910B1; vLLM-Omni.
- Design: A/B/B/A, two servers per arm, two warmups plus three measured requests
  per server; 5 s at 24 fps, 124 frames, with sound.
- Server means 396.30 / 418.24 s (baseline) and 106.66 / 109.58 s (candidate);
  arm means 407.27 and 108.12 s; 73.45 % lower; 3.77× speedup.
- 26 requests, 14 quality comparisons, 32 worker exits, all passing.
- Gates LPIPS <= 0.20, SSIM >= 0.97, audio spectral cosine >= 0.80, audio
  sample rate 32 kHz; largest LPIPS 0.026, smallest SSIM 0.976, smallest audio
  cosine 0.813411. (The RMS-ratio gates [0.5, 2.0] follow vLLM-Omni's MiniMax-H3
  quality test as described in metrics.md; the frame-count gate is the
  published 124 frames; the gate ids and metric definition ids are this
  sample's own names.)
- Audio 165,888 samples per channel at 32 kHz (5.184 s) against 124 frames at
  24 fps (5.167 s): 165,888 - 124/24 × 32,000 = 554.7 samples of codec padding,
  inside the plan's 2,048-sample tolerance.
- Mean sampled peak HBM +3.10 %.
- Baseline teardown budgets 60/90 s ("matched diagnostic").
- LPIPS scorer identity: AlexNet backbone and linear-layer SHA-256 and sizes.
- Retained, unmixed attempts: rejected audio ownership, failed RPC, the
  interrupted first final campaign (restarted as a whole).
- Sources: Cache-DiT profile adopted; device-KV pilot 44.86 % lower, one pair,
  not enabled; multi-video correction cited as vLLM-Omni PR 9241; engine changes
  consolidated in vLLM-Omni PR 9698.
- Not claimed: p95/p99, throughput, CUDA, 15-second result, global optimum.

## Synthesized (not in the seed)

- Every timestamp, every single request latency (measured values chosen so each
  server mean is exactly the published one; warmups slower: first-request
  compilation), start-up times, the quality-set prompts and seeds, the payload's
  prompt, size and step count.
- Per-comparison metrics (only the extremes above are published), RMS ratios.
- HBM samples: peaks per (server, device) chosen so the arm means of the peaks
  are 40,000.00 and 41,240.00 MB (+3.10 %). The plan samples every 5 s; this
  sample keeps six samples per device on that 5-s grid, spread over each
  server's serving window, to stay small. Sampled peak = largest `hbm_used_mb`
  of one (server, device); arm figure = mean over the arm's 16 peaks.
- Worker exit times (all within the arm's TERM budget) and the candidate's
  teardown budgets (30/60 s: "native production budgets" is published, the
  numbers are not).
- The retained attempts' receipts and reasons (`final-1`, `audio-own-1`,
  `rpc-1`): their latencies differ enough that mixing them in would move the
  means visibly (final-1's baseline-1 alone would lift that server mean above
  417 s).
- Output hashes: SHA-256 of a label, because the media stay external. External
  artifact sizes.
- The two `arm_sd_server_means_s` claims (15.51 and 2.06 s = |a - b| / sqrt(2)):
  the seed only says the SD is across server means, not its value.
- `logs/`: one short raw host-log excerpt per server, carrying an address, a
  host name listed in `campaign.json` `sanitize.hostnames`, a home path and an
  Authorization header credential, so that sealing shows the scrubbing.
- `scripts/client.py` (carried, never run) and `notes/five-second-delivery.md`
  (the seed's summary quoted, citations rewritten without closing syntax).

## How the 26 requests and 14 comparisons split (attempt `final-2`)

| server | order | warmup (seq 0-1) | measured (seq 2-4) | quality (seq 5-6) |
| --- | --- | --- | --- | --- |
| baseline-1 | A1 | 2 | 3 | 2 (q1, q2) |
| candidate-1 | B1 | 2 | 3 | 2 (q1, q2) |
| candidate-2 | B2 | 2 | 3 | 2 (q1, q2) |
| baseline-2 | A2 | 2 | 3 | 0 |

20 timed requests + 6 quality renders = 26. Comparisons: 10 slot-matched timed
pairs (candidate-k seq j against baseline-k seq j, k = 1, 2, j = 0..4) plus 4
quality pairs (q1 and q2 on candidate-1 and candidate-2, each against the
baseline-1 rendering) = 14.

## Plan

`plans/final-5s.json`: request timeout 1,200 s and wave timeout 3,600 s (a wave is
one server's whole request sequence) inside a 10,800 s reservation with soft
TERM at 9,900 s and 180 s kill grace; start-up budget 900 s. The accepted run
spanned {used_s:,} s from its first server launch to its end, inside the soft
TERM.

`bundle seal` and `bundle plan check` warn `worst-case-exceeds-reservation` on
this plan, and the warning stays: if all four arm positions used their whole
budgets (900 s start-up + 3,600 s wave + TERM/KILL waits each, 18,480 s in
all), the soft TERM at 9,900 s would cut candidate-2 and baseline-2. It is a
risk the seed campaign took, not a failure: the accepted attempt `final-2`
finished in 9,238 s. (The interrupted `final-1` shows the risk is real: it
started in a reservation already partly used by set-up.) The plan is the one
that was frozen and run, so the sample keeps it as published; changing the
wave budget now would make the bundle describe a plan nobody ran. The warning's
first remedy does not apply here: it offers `timeouts.wave_s` of at most
1,455 s, but baseline-1's seven requests in `final-2` took 3,026.6 s (sum of
their `e2e_s` in `receipts.jsonl`), so that wave budget would cut the baseline.
A new campaign with these timings needs the other remedy: a soft TERM of at
least 18,480 s (a longer reservation), or its four servers split over two
reservations.

Two more warnings come from what vLLM-Omni 0.30.0's request model does with this
payload, and they stay for the same reason (the plan is the one that ran):
`h3-canvas` (H3 floors the canvas to a multiple of 32, so `size` 1280x720 renders
1280x704) and `task-implicit` (the payload names no `extra_params.task`, so a
combined H3 checkpoint would run FL2VA on an image-only reference unless the
server was started Ref2VA-only). Seal prints the plan's warnings in one line;
`bundle plan check plans/final-5s.json` explains each.

## External artifacts

The 26 output MP4s of `final-2`, the two LPIPS weight files and the four full
host logs are listed in `artifacts.jsonl` with SHA-256, size and availability;
none is present here, and none is needed to seal or verify.
"""


def five_second_campaign() -> dict[str, bytes]:
    """Every file of the ``h3-ref2va-5s`` campaign directory, by relative path."""
    _check_hbm()
    final_runs, term, exits = _schedule(_final_specs(), "2026-02-10T01:12:00Z", FIVE_S)
    other_runs = [
        _run_server(spec, _epoch_ms(start), FIVE_S) for start, spec in _other_attempt_specs()
    ]
    receipts = [r for run in (*other_runs, *final_runs) for r in run.receipts]
    f2_start, f2_end = _final_span(final_runs, term)
    used_s = (f2_end - f2_start) // 1000
    campaign = {
        "layout_version": "1",
        "id": FIVE_S,
        "title": "MiniMax-H3 Ref2VA five-second delivery on eight Ascend 910B1 NPUs",
        "kind": "campaign",
        "hardware": {"accelerator": "Ascend 910B1", "count": 8},
        "runtime": {"name": "vLLM-Omni"},
        "model": "MiniMax-H3 Ref2VA",
        "arms": [
            {
                "id": "baseline",
                "role": "baseline",
                "runtime_commit": BASELINE_COMMIT,
                "description": "baseline runtime; matched diagnostic 60/90-second teardown",
            },
            {
                "id": "candidate",
                "role": "candidate",
                "runtime_commit": CANDIDATE_COMMIT,
                "description": "measured runtime with the Cache-DiT profile; native teardown",
            },
        ],
        "plan": "plans/final-5s.json",
        "summary": SUMMARY,
        "sanitize": {"hostnames": [HOSTNAME]},
        "sample": "synthesized sample; see README.md for published and synthesized values",
    }
    files: dict[str, bytes] = {
        "campaign.json": _doc(campaign),
        "plans/final-5s.json": _doc(_final_plan()),
        "scorer.json": _doc(SCORER),
        "attempts.jsonl": _jsonl(_attempts(final_runs, term, other_runs)),
        "receipts.jsonl": _jsonl(receipts),
        "worker_exits.jsonl": _jsonl(_worker_exit_rows(final_runs, exits)),
        "telemetry.csv": _csv(
            _telemetry(final_runs),
            (
                "attempt_id",
                "arm",
                "server",
                "device",
                "time",
                "hbm_used_mb",
                "hbm_total_mb",
                "aicore_pct",
                "source",
            ),
        ),
        "gates.json": _doc(GATES),
        "comparisons.jsonl": _jsonl(_comparisons(receipts)),
        "sources.jsonl": _jsonl(_sources()),
        "claims.json": _doc(_final_claims()),
        "not_claimed.jsonl": _jsonl(
            [{"what": w, "note": n, "text": _NOT_CLAIMED_QUOTE} for w, n in NOT_CLAIMED]
        ),
        "artifacts.jsonl": _jsonl(_artifacts(receipts)),
        "scripts/client.py": CLIENT_PY.encode("utf-8"),
        "notes/five-second-delivery.md": NOTE_MD.encode("utf-8"),
        "README.md": _final_readme(used_s).encode("utf-8"),
    }
    for run in final_runs:
        files[f"logs/{ACCEPTED}/{run.spec.server}.log"] = _host_log(
            run, term[run.spec.server], exits[run.spec.server]
        )
    return files


# ---------------------------------------------------------------- the device-KV pilot


def _synth_commit(label: str) -> str:
    return _sha(f"synthesized runtime commit {label}")[:40]


def _pilot_plan() -> dict[str, Any]:
    return {
        "plan_version": "1",
        "id": "kv-residency-pilot",
        "description": (
            "Reference-KV residency pilot as first frozen: two warmups and one measured "
            "request per arm. Its request and wave timeouts (4 h) exceed the shared 3 h "
            "reservation; kept as frozen so that a plan check can flag it."
        ),
        "arm_order": ["kv2", "kvdevice2"],
        "servers": ["kv2-1", "kvdevice2-1"],
        "warmups_per_server": 2,
        "measured_per_server": 1,
        "request": {
            "api": "videos-async",
            "timing_boundary": "post_to_delete",
            "poll_interval_s": 5,
            "payload": PAYLOAD,
        },
        "timeouts": {"request_s": 14400, "wave_s": 14400},
        "startup_budget_s": 900,
        "reservation": {"hard_limit_s": 10800, "soft_term_s": 9900, "kill_grace_s": 180},
        "teardown": {
            "kv2": {"term_wait_s": 60, "kill_wait_s": 90},
            "kvdevice2": {"term_wait_s": 60, "kill_wait_s": 90},
        },
        "telemetry": {"interval_s": 5, "source": "npu-smi"},
        "media": MEDIA,
    }


def _pilot_readme() -> str:
    return f"""\
# Sample pilot `{KV_PILOT}`

Generated by `samples/make_samples.py`; do not edit by hand.

The device-KV single-pair pilot of the seed: reference KV kept on device
(`kvdevice2`, candidate) against the default (`kv2`, baseline), one server per
arm, two warmups and one measured request each.

## Published

- "{PILOT_TEXT}": (1 - 110.28 / 200.00) × 100 = 44.86 % lower.
- The first pilot plan ran two warmups and one measured request per arm.
- The first pilot plan set the per-request and per-wave timeouts to 14,400 s
  (4 h) inside a shared 3 h hard reservation with soft TERM at 165 minutes.

## Synthesized

- Both runtime commit IDs (SHA-256 of a label, cut to 40 hex digits), every
  latency (only the 44.86 % is published: 200.00 and 110.28 s measured, slower
  warmups), every timestamp, the 180 s kill grace and the 60/90 s teardown
  budgets of both arms, output hashes.
- The seed's plan also named a third arm (`kvdevice8`); this sample keeps the
  single pair only.

## The plan fails the timeout hierarchy on purpose

`plans/kv-residency-pilot.json` is valid against `plan.schema.json`, but its
`request_s` and `wave_s` (14,400 s) exceed the reservation's `hard_limit_s`
(10,800 s) and `soft_term_s` (9,900 s): a stuck request would be ended by the
reservation watchdog, not by its own timeout, and later arms would get no
samples. The plan check of a later issue must flag it; the sample keeps it as
frozen because that is what the pilot ran under.
"""


def kv_pilot() -> dict[str, bytes]:
    """Every file of the ``h3-ref2va-kv-pilot`` directory, by relative path."""
    attempt = "pilot-1"
    specs = [
        ServerSpec(
            attempt,
            "kv2-1",
            "kv2",
            404_600,
            (
                (_W, "318.52", "ok", None, {}),
                (_W, "214.77", "ok", None, {}),
                (_M, "200.00", "ok", None, {}),
            ),
        ),
        ServerSpec(
            attempt,
            "kvdevice2-1",
            "kvdevice2",
            411_300,
            (
                (_W, "176.40", "ok", None, {}),
                (_W, "118.93", "ok", None, {}),
                (_M, "110.28", "ok", None, {}),
            ),
        ),
    ]
    runs = []
    t = _epoch_ms("2026-01-27T03:20:00Z")
    for spec in specs:
        run = _run_server(spec, t, KV_PILOT)
        runs.append(run)
        t = run.last_end_ms + TERM_AFTER_MS + 40_000 + COOLDOWN_MS
    campaign = {
        "layout_version": "1",
        "id": KV_PILOT,
        "title": "MiniMax-H3 Ref2VA device-KV single-pair pilot (five-second request)",
        "kind": "pilot",
        "hardware": {"accelerator": "Ascend 910B1", "count": 8},
        "runtime": {"name": "vLLM-Omni"},
        "arms": [
            {
                "id": "kv2",
                "role": "baseline",
                "runtime_commit": _synth_commit("kv2"),
                "description": "reference KV in the default placement (commit synthesized)",
            },
            {
                "id": "kvdevice2",
                "role": "candidate",
                "runtime_commit": _synth_commit("kvdevice2"),
                "description": "reference KV resident on device (commit synthesized)",
            },
        ],
        "plan": "plans/kv-residency-pilot.json",
        "summary": (
            "Device-KV single-pair pilot: 44.86% lower latency, not enabled in final profile."
        ),
        "sample": "synthesized sample; see README.md for published and synthesized values",
    }
    pair = {"baseline": "kv2", "candidate": "kvdevice2"}
    pilot_quote = (
        "Final report and source/benefit table distinguishes the qualified existing Cache-DiT "
        f"profile from {PILOT_TEXT}."
    )
    claims = [
        _claim("percent-lower", "percent_lower", pair, "44.86", "%", text=pilot_quote),
        _claim("arm-mean-kv2", "arm_mean_s", {"arm": "kv2"}, "200.00", "s", text=None),
        _claim("arm-mean-kvdevice2", "arm_mean_s", {"arm": "kvdevice2"}, "110.28", "s", text=None),
    ]
    claims[1]["note"] = claims[2]["note"] = "synthesized value; only the 44.86 % is published"
    return {
        "campaign.json": _doc(campaign),
        "plans/kv-residency-pilot.json": _doc(_pilot_plan()),
        "attempts.jsonl": _jsonl(
            [
                {
                    "attempt_id": attempt,
                    "status": "accepted",
                    "reason": None,
                    "plan": "plans/kv-residency-pilot.json",
                    "start": _ts(runs[0].launch_ms),
                    "end": _ts(runs[-1].last_end_ms + TERM_AFTER_MS + 40_000),
                    "note": "one pair: one server per arm",
                }
            ]
        ),
        "receipts.jsonl": _jsonl([r for run in runs for r in run.receipts]),
        "sources.jsonl": _jsonl(
            [
                {
                    "source_id": "device-kv",
                    "optimization": "device-resident reference KV (kvdevice2 against kv2)",
                    "origin": "downstream reference-KV residency pilot runtime (synthesized)",
                    "adopted": False,
                    "evidence": "this single-pair pilot: 44.86 % lower",
                    "evidence_limit": "one pair, not enabled in the final profile",
                    "effect_pct": 44.86,
                }
            ]
        ),
        "claims.json": _doc(claims),
        "not_claimed.jsonl": _jsonl(
            [
                {"what": "repeatability", "note": "one measured request per arm, one pair"},
                {"what": "final-profile effect", "note": "device KV is not enabled in final"},
            ]
        ),
        "README.md": _pilot_readme().encode("utf-8"),
    }


# ---------------------------------------------------------------- writing


def build() -> dict[str, bytes]:
    """Every generated file, keyed by its path relative to the samples directory."""
    out: dict[str, bytes] = {}
    for name, files in ((FIVE_S, five_second_campaign()), (KV_PILOT, kv_pilot())):
        out.update({f"{name}/{rel}": data for rel, data in files.items()})
    return out


def write(root: Path, files: dict[str, bytes]) -> list[Path]:
    """Write ``files`` under ``root``; delete stale files in the generated directories.

    Returns the stale files removed.
    """
    removed = []
    for name in (FIVE_S, KV_PILOT):
        base = root / name
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.relative_to(root).as_posix() not in files:
                p.unlink()
                removed.append(p)
    for rel, data in sorted(files.items()):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    """Generate both sample directories under ``--out`` (default: this script's directory)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    files = build()
    removed = write(args.out, files)
    for p in removed:
        print(f"removed stale {p}")
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
