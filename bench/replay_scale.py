"""Benchmark: ``bundle replay --json`` on campaigns of 10k, 100k and 1M requests.

For each size, generates a campaign shaped like the seed (A/B/B/A, two servers
per arm, two warmups per server, the rest measured; a rejected attempt, 32
worker exits, 14 comparisons, HBM telemetry, honest claims), seals it with
``bundler.seal.seal_campaign`` (the real path: validation, sanitizing,
Parquet, zstd, signature) and times the replay CLI in a fresh process, wall
clock (median and best of ``--repeat`` runs), CPU time (user + system, which
other load on the machine does not inflate) and peak RSS (the child's ``ru_maxrss``).
The seal time is printed too: sealing is not what this bench measures
(``bench/seal_scale.py`` does). Every peer here (numpy, cryptography, the
``bundle`` command run from this checkout) is a core dependency, so nothing
optional can be missing.

Target (issue 3): 1M requests in <= 3 s wall and <= 1 GiB peak RSS on a
2-core machine, cost growing linearly.

Run: ``.venv/bin/python bench/replay_scale.py [--sizes 10000 100000 1000000]
[--repeat 3] [--workdir DIR] [--keep] [--json]``. Progress goes to stderr, the
table (or ``--json``) to stdout. Exit status 0 whatever the speed; 1 if a
replay did not exit 0 (the generated claims are honest, so it must).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.seal import seal_campaign

ORDER = ("baseline", "candidate", "candidate", "baseline")
SERVERS = ("baseline-1", "candidate-1", "candidate-2", "baseline-2")
CENTERS = {"baseline-1": 396.30, "candidate-1": 106.66, "candidate-2": 109.58, "baseline-2": 418.24}
WARMUPS = 2
DEVICES = 8
SAMPLES_PER_DEVICE = 50
T0_NS = 1_772_352_000 * 10**9  # 2026-03-01T08:00:00Z
GAP_NS = 2 * 10**9
SEED = 20_260_301
MIB = 1 << 20

# The replay run in a fresh process, reporting its own wall time and its child's peak RSS.
_TIMER = """
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, u.ru_maxrss, r.returncode, u.ru_utime + u.ru_stime)
"""


def note(msg: str) -> None:
    """Progress on stderr; stdout holds only the result."""
    print(msg, file=sys.stderr, flush=True)


def _ts(ns: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """RFC 3339 UTC text, vectorized (numpy's ISO format with a Z suffix)."""
    return np.char.add(np.datetime_as_string(ns.astype("datetime64[ns]"), unit="ms"), "Z")


def _receipts_csv(
    path: Path, n: int, rng: np.random.Generator
) -> tuple[dict[str, list[float]], int]:
    """Write ``n`` accepted receipts as CSV; return measured values per server and the end."""
    per = n // len(SERVERS)
    measured: dict[str, list[float]] = {}
    t = T0_NS
    with path.open("w", encoding="utf-8") as fh:
        fh.write("request_id,attempt_id,arm,server,phase,seq,start,end,e2e_s,status\n")
        for k, (server, arm) in enumerate(zip(SERVERS, ORDER, strict=True)):
            count = per if k < len(SERVERS) - 1 else n - per * (len(SERVERS) - 1)
            # Centi-second values around the server's published mean.
            cents = np.round(CENTERS[server] * 100) + rng.integers(-150, 151, count)
            e2e = cents / 100
            e2e[:WARMUPS] += 100.0  # warmups are slower
            dur = np.rint(e2e * 1e9).astype(np.int64)
            starts = t + np.concatenate([[0], np.cumsum(dur[:-1] + GAP_NS)])
            ends = starts + dur
            t = int(ends[-1]) + 60 * 10**9
            seq = np.arange(count)
            phase = np.where(seq < WARMUPS, "warmup", "measured")
            lines = [
                f"r{k}-{i},final-2,{arm},{server},{p},{i},{s},{e},{v!r},ok\n"
                for i, p, s, e, v in zip(
                    seq.tolist(),
                    phase.tolist(),
                    _ts(starts).tolist(),
                    _ts(ends).tolist(),
                    e2e.tolist(),
                    strict=True,
                )
            ]
            fh.writelines(lines)
            measured[server] = e2e[WARMUPS:].tolist()
        # A rejected attempt, a day earlier, kept out of the accepted statistics.
        for i in range(5):
            s = T0_NS - 86_400 * 10**9 + i * 100 * 10**9
            fh.write(
                f"rej-{i},rejected-1,candidate,candidate-r,measured,{i},"
                f"{_ts(np.array([s]))[0]},{_ts(np.array([s + 90 * 10**9]))[0]},90.0,ok\n"
            )
    return measured, t


def _claims(measured: dict[str, list[float]], n: int) -> list[dict[str, Any]]:
    """Honest claims, from exactly rounded means (math.fsum) of the generated values."""
    server_mean = {s: math.fsum(v) / len(v) for s, v in measured.items()}
    arm = {
        a: statistics.fmean([server_mean[s] for s, o in zip(SERVERS, ORDER, strict=True) if o == a])
        for a in ("baseline", "candidate")
    }
    pair = {"baseline": "baseline", "candidate": "candidate"}
    out = [
        {
            "claim_id": f"mean-{s}",
            "statistic": "server_mean_s",
            "params": {"arm": o, "server": s},
            "value": f"{server_mean[s]:.2f}",
            "unit": "s",
        }
        for s, o in zip(SERVERS, ORDER, strict=True)
    ]
    out += [
        {
            "claim_id": f"arm-{a}",
            "statistic": "arm_mean_s",
            "params": {"arm": a},
            "value": f"{m:.2f}",
            "unit": "s",
        }
        for a, m in arm.items()
    ]
    lower = (1 - arm["candidate"] / arm["baseline"]) * 100
    out += [
        {
            "claim_id": "lower",
            "statistic": "percent_lower",
            "params": pair,
            "value": f"{lower:.2f}",
            "unit": "%",
        },
        {
            "claim_id": "requests",
            "statistic": "requests_total",
            "params": {},
            "value": str(n),
            "unit": "count",
        },
        {
            "claim_id": "exits",
            "statistic": "worker_exits_clean",
            "params": {},
            "value": str(len(SERVERS) * DEVICES),
            "unit": "count",
        },
        {
            "claim_id": "cmp",
            "statistic": "comparisons_passed",
            "params": {},
            "value": "14",
            "unit": "count",
        },
    ]
    return out


def write_campaign(root: Path, n: int) -> None:
    """A seed-shaped campaign of ``n`` accepted requests under ``root``."""
    rng = np.random.default_rng(SEED)
    (root / "plans").mkdir(parents=True)
    measured, t_end = _receipts_csv(root / "receipts.csv", n, rng)
    per = n // len(SERVERS)
    doc = {
        "layout_version": "1",
        "id": f"scale-{n}",
        "title": f"replay scale bench, {n} requests",
        "kind": "campaign",
        "hardware": {"accelerator": "bench", "count": DEVICES},
        "arms": [
            {"id": "baseline", "role": "baseline", "runtime_commit": "c7f56f0"},
            {"id": "candidate", "role": "candidate", "runtime_commit": "098b51f"},
        ],
        "plan": "plans/scale.json",
    }
    plan = {
        "plan_version": "1",
        "id": "scale",
        "arm_order": list(ORDER),
        "warmups_per_server": WARMUPS,
        "measured_per_server": per - WARMUPS,
        "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
        "timeouts": {"request_s": 3600},
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
        },
        "telemetry": {"interval_s": 5, "source": "npu-smi"},
    }
    if n % len(SERVERS):
        raise SystemExit(f"--sizes must be multiples of {len(SERVERS)}")
    (root / "campaign.json").write_text(json.dumps(doc), "utf-8")
    (root / "plans" / "scale.json").write_text(json.dumps(plan), "utf-8")
    ts0 = _ts(np.array([T0_NS - 60 * 10**9]))[0]
    ts1 = _ts(np.array([t_end]))[0]
    rej0 = _ts(np.array([T0_NS - 86_500 * 10**9]))[0]
    rej1 = _ts(np.array([T0_NS - 80_000 * 10**9]))[0]
    tables: dict[str, list[dict[str, Any]]] = {
        "attempts": [
            {
                "attempt_id": "rejected-1",
                "status": "rejected",
                "reason": "failed RPC attempt",
                "start": rej0,
                "end": rej1,
            },
            {
                "attempt_id": "final-2",
                "status": "accepted",
                "plan": "plans/scale.json",
                "start": ts0,
                "end": ts1,
            },
        ],
        "worker_exits": [
            {
                "attempt_id": "final-2",
                "arm": o,
                "server": s,
                "worker": f"npu{d}",
                "exit_code": 0,
                "signal": None,
                "exit_s": 5.0 + d,
                "killed": False,
            }
            for s, o in zip(SERVERS, ORDER, strict=True)
            for d in range(DEVICES)
        ],
        "telemetry": [
            {
                "attempt_id": "final-2",
                "arm": o,
                "server": s,
                "device": f"npu:{d}",
                "time": ts0,
                "hbm_used_mb": float(40_000 + 10 * i + d),
            }
            for s, o in zip(SERVERS, ORDER, strict=True)
            for d in range(DEVICES)
            for i in range(SAMPLES_PER_DEVICE)
        ],
        "gates": [
            {
                "gate_id": "ssim-min",
                "metric": "ssim",
                "op": ">=",
                "threshold": 0.97,
                "definition": "ssim/ffmpeg-y-frame-mean",
                "warn_within": 0.01,
            },
            {
                "gate_id": "cos-min",
                "metric": "audio_spectral_cosine",
                "op": ">=",
                "threshold": 0.8,
                "definition": "audio/stft-cosine-512-1024-2048",
            },
        ],
        "comparisons": [
            {
                "comparison_id": f"cmp-{i:02d}",
                "attempt_id": "final-2",
                "baseline_request_id": f"r0-{WARMUPS + i}",
                "candidate_request_id": f"r1-{WARMUPS + i}",
                "metrics": {"ssim": 0.98, "audio_spectral_cosine": 0.85},
            }
            for i in range(14)
        ],
        "claims": _claims(measured, n + 0),
        "not_claimed": [{"what": "throughput"}],
    }
    # requests_total counts the accepted attempt's receipts only (the rejected 5 are apart).
    for name, rows in tables.items():
        with (root / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)


@dataclass(frozen=True)
class Row:
    """One size's figures."""

    requests: int
    generate_s: float
    seal_s: float
    bundle_mib: float
    replay_wall_s: float
    replay_walls_s: list[float]
    replay_cpu_s: float
    peak_rss_mib: float
    exit_code: int


def _replay_cmd(bundle: Path, pub: Path) -> list[str]:
    exe = Path(sys.executable).with_name("bundle")
    probe = subprocess.run([str(exe), "replay", "--help"], capture_output=True, check=False)
    if probe.returncode == 0:
        return [str(exe), "replay", str(bundle), "--key", str(pub), "--json"]
    # The installed `bundle` command, run as a module from this checkout.
    return [
        sys.executable,
        "-m",
        "reprobundle.cli",
        "replay",
        str(bundle),
        "--key",
        str(pub),
        "--json",
    ]


def measure(n: int, work: Path, key: Ed25519PrivateKey, pub: Path, repeat: int) -> Row:
    """Generate, seal and replay one size."""
    camp = work / f"campaign-{n}"
    note(f"[{n:>9,}] generating")
    t = time.perf_counter()
    write_campaign(camp, n)
    gen = time.perf_counter() - t
    bundle = work / f"scale-{n}.bundle"
    note(f"[{n:>9,}] sealing")
    t = time.perf_counter()
    seal_campaign(camp, bundle, keys=[key], force=True)
    seal_s = time.perf_counter() - t
    shutil.rmtree(camp)
    cmd = _replay_cmd(bundle, pub)
    walls, cpus, rss, code = [], [], 0, 0
    for i in range(repeat):
        note(f"[{n:>9,}] replay {i + 1}/{repeat}")
        out = subprocess.run(
            [sys.executable, "-c", _TIMER, *cmd], capture_output=True, text=True, check=True
        ).stdout.split()
        walls.append(float(out[0]))
        cpus.append(float(out[3]))
        rss = max(rss, int(out[1]))
        code = max(code, int(out[2]))
    return Row(
        requests=n,
        generate_s=round(gen, 2),
        seal_s=round(seal_s, 2),
        bundle_mib=round(bundle.stat().st_size / MIB, 2),
        replay_wall_s=round(statistics.median(walls), 3),
        replay_walls_s=[round(w, 3) for w in walls],
        replay_cpu_s=round(statistics.median(cpus), 3),
        peak_rss_mib=round(rss / 1024, 1),  # ru_maxrss is KiB on Linux
        exit_code=code,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the table or JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="replay-scale-", dir=args.workdir))
    key = Ed25519PrivateKey.generate()
    pub = work / "bench.pub"
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    try:
        rows = [measure(n, work, key, pub, args.repeat) for n in args.sizes]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    if args.json:
        print(json.dumps({"environment": env, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(f"replay --json: median and best wall of {args.repeat}, median CPU; {env}")
        load = os.getloadavg()[0]
        print(f"load average at the end: {load:.2f} (wall time is shared with whatever else runs)")
        print(
            f"{'requests':>10} {'seal s':>8} {'bundle MiB':>10} {'replay s':>9} {'best s':>7} "
            f"{'CPU s':>7} {'peak RSS MiB':>12} {'exit':>4}"
        )
        for r in rows:
            print(
                f"{r.requests:>10,} {r.seal_s:>8.2f} {r.bundle_mib:>10.2f} "
                f"{r.replay_wall_s:>9.3f} {min(r.replay_walls_s):>7.3f} {r.replay_cpu_s:>7.2f} "
                f"{r.peak_rss_mib:>12.1f} {r.exit_code:>4}"
            )
    return 1 if any(r.exit_code for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
