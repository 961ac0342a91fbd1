"""Benchmark: import + seal + replay of a vLLM serving sweep, beside a plain numpy script.

Generates ``--load-points`` load points × 2 arms × ``--requests`` requests in the
``vllm bench serve --save-detailed`` shape (vectorized; TTFT, ITL gaps,
latencies; 2-12 output tokens per request), then runs in child processes:

- **ours**: ``import_campaign`` (parse + checks + write), ``seal_campaign``
  (unsigned), ``replay`` of the sealed bundle (verify, parse the carried
  sources, re-derive every imported claim exactly);
- **numpy**: ``json.load`` of each file and the same statistics with numpy
  (mean, median, population SD, p50/p90/p95/p99/p99.9 of TTFT, TPOT, ITL, E2EL;
  the three throughputs), in floating point.

Each side's wall time, CPU time (user + system of its child, every thread, and of the
worker processes it waited for) and peak RSS (``ru_maxrss`` of the child, by ``wait4``)
are printed for each round and as medians over ``--rounds`` (default 3) pairs, the
order alternating (numpy first in odd rounds, ours first in even ones), with the
ratios, and ours per stage (wall and CPU inside the process). Each child starts after
``--settle`` seconds of idle (default 10): on the 2-core VM the import of the first
child right after the generator had run took ~0.4 s longer than after a pause.
Targets: replay within 2x of numpy, peak RSS <= 1.5 GiB (issue 10); the whole child
(import + seal + replay) within 2x of numpy's (issue 22).
Run: ``python bench/serving_scale.py [--requests 50000] [--load-points 10] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PCTS = (50.0, 90.0, 95.0, 99.0, 99.9)


def _stats(out: dict[str, Any], name: str, v: np.ndarray[Any, Any]) -> None:
    out[f"mean_{name}_ms"] = float(np.mean(v) * 1000)
    out[f"median_{name}_ms"] = float(np.median(v) * 1000)
    out[f"std_{name}_ms"] = float(np.std(v) * 1000)
    for p in PCTS:
        word = str(int(p)) if int(p) == p else str(p)
        out[f"p{word}_{name}_ms"] = float(np.percentile(v, p) * 1000)


def generate(path: Path, seed: int, n: int, conc: int) -> None:
    """One result file, vectorized (synthetic numbers, the writer's keys)."""
    rng = np.random.default_rng(seed)
    inp = rng.integers(64, 512, n)
    out = rng.integers(2, 13, n)
    ttft = 0.02 + 0.0001 * inp + rng.exponential(0.005, n)
    gaps = 0.01 + rng.exponential(0.002, int(out.sum() - n))
    ends = np.cumsum(out - 1)
    lat = ttft + np.add.reduceat(gaps, np.r_[0, ends[:-1]]) + 0.0005
    split = np.split(gaps, ends[:-1])
    dur = float(lat.sum() / conc)
    doc: dict[str, Any] = {
        "date": "20251201-101500",
        "backend": "vllm",
        "model_id": "synthetic",
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": conc,
        "duration": dur,
        "completed": n,
        "failed": 0,
        "total_input_tokens": int(inp.sum()),
        "total_output_tokens": int(out.sum()),
        "request_throughput": n / dur,
        "request_goodput": None,
        "output_throughput": int(out.sum()) / dur,
        "total_token_throughput": int(inp.sum() + out.sum()) / dur,
        "input_lens": inp.tolist(),
        "output_lens": out.tolist(),
        "ttfts": ttft.tolist(),
        "itls": [g.tolist() for g in split],
        "latencies": lat.tolist(),
        "errors": [""] * n,
    }
    tpot = (lat - ttft) / (out - 1)
    for name, v in (("ttft", ttft), ("tpot", tpot), ("itl", gaps), ("e2el", lat)):
        _stats(doc, name, v)
    path.write_text(json.dumps(doc), encoding="utf-8")


def side_numpy(files: list[Path]) -> int:
    """The peer: plain json + numpy over every file."""
    results = []
    for f in files:
        d = json.loads(f.read_bytes())
        ok = np.array([not e for e in d["errors"]])
        ttft = np.array(d["ttfts"])[ok]
        lat = np.array(d["latencies"])[ok]
        outl = np.array(d["output_lens"])
        itl = np.array([g for gs, k in zip(d["itls"], ok, strict=True) if k for g in gs])
        many = ok & (outl > 1)
        tpot = (np.array(d["latencies"])[many] - np.array(d["ttfts"])[many]) / (outl[many] - 1)
        r: dict[str, Any] = {}
        for name, v in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2el", lat)):
            _stats(r, name, v)
        dur = d["duration"]
        r["request_throughput"] = int(ok.sum()) / dur
        r["output_throughput"] = int(outl.sum()) / dur
        r["total_token_throughput"] = (
            int(np.array(d["input_lens"])[ok].sum()) + int(outl.sum())
        ) / dur
        results.append(r)
    return len(results)


def side_ours(files: list[Path], work: Path) -> int:
    """Import, seal, replay; returns the replay's exit code."""
    from bundler.format.trust import Trust
    from bundler.importers.write import import_campaign
    from bundler.seal import seal_campaign
    from replay.api import replay_bundle

    sources = [(f.name.split("-")[0], f) for f in files]
    t0, c0 = time.perf_counter(), time.process_time()
    import_campaign("vllm", sources, work / "camp", {"baseline": "a" * 7, "candidate": "b" * 7})
    t1, c1 = time.perf_counter(), time.process_time()
    seal_campaign(work / "camp", work / "x.bundle")
    t2, c2 = time.perf_counter(), time.process_time()
    res = replay_bundle(work / "x.bundle", trust=Trust.allow_unsigned())
    t3, c3 = time.perf_counter(), time.process_time()
    print(
        f"  ours: import {t1 - t0:.2f} s ({c1 - c0:.2f} CPU), seal {t2 - t1:.2f} s "
        f"({c2 - c1:.2f} CPU), replay {t3 - t2:.2f} s ({c3 - c2:.2f} CPU); "
        f"{res.claims.count('confirmed')}/{len(res.claims.checks)} claims confirmed",
        file=sys.stderr,
    )
    phases = {
        "import": t1 - t0,
        "seal": t2 - t1,
        "replay": t3 - t2,
        "import_cpu": c1 - c0,
        "seal_cpu": c2 - c1,
        "replay_cpu": c3 - c2,
    }
    (work / "phases.json").write_text(json.dumps(phases), encoding="utf-8")
    return res.exit_code


def _child(args: list[str]) -> tuple[float, float, float, int]:
    """Wall s, CPU s (user + system) and peak RSS GiB of one child (its own, by ``wait4``;
    CPU includes the worker processes it waited for), and its exit code."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 / 1024, proc.returncode


def _clean(d: Path) -> None:
    """Remove what the previous child wrote (ours refuses an existing campaign folder)."""
    for leftover in ("camp", "x.bundle", "phases.json", "numpy.json"):
        path = d / leftover
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--load-points", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="numpy/ours pairs, order alternating")
    ap.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds of idle before each child (the generator's and the previous child's "
        "aftermath, e.g. a VM returning freed memory to its host, must not land on either)",
    )
    ap.add_argument("--side", choices=["ours", "numpy"])
    ap.add_argument("--dir", type=Path)
    a = ap.parse_args()
    if a.side:
        files = sorted((a.dir / "results").glob("*.json"))
        if a.side == "numpy":
            t0 = time.perf_counter()
            side_numpy(files)
            (a.dir / "numpy.json").write_text(json.dumps({"compute": time.perf_counter() - t0}))
            return 0
        return side_ours(files, a.dir)
    rows: dict[str, list[tuple[float, float, float]]] = {"numpy": [], "ours": []}
    phase_rows: list[dict[str, float]] = []
    numpy_inner: list[float] = []
    code = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "results").mkdir()
        for i, arm in enumerate(("baseline", "candidate")):
            for lp in range(a.load_points):
                generate(d / "results" / f"{arm}-c{lp + 1}.json", 100 * i + lp, a.requests, lp + 1)
        total = sum(f.stat().st_size for f in (d / "results").iterdir())
        # The generated files' write-back to disk is neither side's cost: done before both.
        os.sync()
        print(
            f"{2 * a.load_points * a.requests:,} requests in {total / 2**20:.0f} MiB of JSON; "
            f"load {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
        )
        for r in range(a.rounds):
            order = ("numpy", "ours") if r % 2 == 0 else ("ours", "numpy")
            for side in order:
                _clean(d)
                time.sleep(a.settle)
                wall, cpu, rss, rc = _child(["--side", side, "--dir", str(d)])
                rows[side].append((wall, cpu, rss))
                if side == "ours":
                    code = code or rc
                    phase_rows.append(json.loads((d / "phases.json").read_text()))
                else:
                    numpy_inner.append(json.loads((d / "numpy.json").read_text())["compute"])
            nw, ow = rows["numpy"][-1][0], rows["ours"][-1][0]
            print(
                f"round {r + 1} ({' then '.join(order)}): numpy {nw:.2f} s, ours {ow:.2f} s, "
                f"ratio {ow / nw:.2f}; load {os.getloadavg()[0]:.2f}",
                file=sys.stderr,
            )
    med = {side: tuple(_median([row[k] for row in rows[side]]) for k in range(3)) for side in rows}
    print(f"medians of {a.rounds} rounds ({a.settle:g} s settle before each child)")
    print(f"{'side':<8}{'wall s':>10}{'CPU s':>10}{'peak RSS GiB':>15}")
    for side in ("numpy", "ours"):
        w, c, m = med[side]
        print(f"{side:<8}{w:>10.2f}{c:>10.2f}{m:>15.2f}")
    ratios = [o[0] / n[0] for n, o in zip(rows["numpy"], rows["ours"], strict=True)]
    print(
        f"ratio ours/numpy: wall {med['ours'][0] / med['numpy'][0]:.2f} "
        f"(per round {', '.join(f'{x:.2f}' for x in ratios)}), "
        f"CPU {med['ours'][1] / med['numpy'][1]:.2f}  (target <= 2; replay exit {code})"
    )
    if phase_rows:
        ph = {k: _median([p[k] for p in phase_rows]) for k in phase_rows[0]}
        print(
            "ours in-process (medians): "
            + ", ".join(
                f"{k} {ph[k]:.2f} s ({ph[k + '_cpu']:.2f} CPU)"
                for k in ("import", "seal", "replay")
            )
        )
        # The target: the replay (the re-derivation) against the script, both timed
        # inside their process (no interpreter start or imports on either side).
        inner = _median(numpy_inner)
        print(
            f"replay {ph['replay']:.2f} s vs numpy script {inner:.2f} s (in-process): "
            f"ratio {ph['replay'] / inner:.2f}  (target <= 2, peak RSS <= 1.5 GiB)"
        )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
