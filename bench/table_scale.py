"""Benchmark: sealing a campaign with a large telemetry or comparisons table, column-wise vs
per-row vs pyarrow.

Telemetry sampled every 100 ms per device over a long campaign (npu-smi) reaches a
million rows; issue 22 asks that such a table, like receipts, be read column-wise.
The campaign is ``bench/replay_scale.py``'s with few receipts (``--receipts``) and its
``telemetry`` table replaced by ``--rows`` samples in the npu-smi shape: every
optional field, ``aicore_pct`` null on one row in nine, ``source`` absent on one in
five, and one field beyond the schema (``temp_c``, absent on odd rows, null on one in
ten). With ``--table comparisons``, its ``comparisons`` table is replaced instead by
``--rows`` quality comparisons (one per compared request pair): three metrics
(``ssim``, ``audio_spectral_cosine``, and ``lpips`` absent on one row in seven; in CSV
every ``metrics.<name>`` column is filled), ``baseline_sha256`` on even rows,
``candidate_sha256`` null on one row in three. Paths, each in a fresh process timed
whole (imports included), alternating:

- ``columnar``: ``bundler.seal.seal_campaign`` as shipped (unsigned);
- ``per-row``: the same with ``REPROBUNDLE_SEAL_PER_ROW=1``;
- ``peer``: ``pyarrow.json.read_json`` (or ``pyarrow.csv.read_csv``) of the table's
  file, then ``pyarrow.parquet.write_table(compression="zstd")``.

The two seal paths must write the same bundle (SHA-256 compared). Reports wall, CPU
seconds and peak RSS of each, and the seal/peer wall ratio (the seal also reads,
checks and writes the rest of the campaign: the ratio is an upper bound on the
table's own cost).

Run: ``.venv/bin/python bench/table_scale.py [--table telemetry|comparisons] [--rows 200000]
[--formats jsonl csv]
[--paths columnar per-row peer] [--repeat 1] [--receipts 1000] [--workdir DIR]``.
Exit status 0 whatever the speed; 1 if the seal paths wrote different bytes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_scale import (  # sibling bench scripts
    DEVICES,
    ORDER,
    SERVERS,
    T0_NS,
    WARMUPS,
    write_campaign,
)
from seal_scale import _CHILD, _PEER, PER_ROW_ENV, note

PATHS = ("columnar", "per-row", "peer")
_COLUMNS = (
    "attempt_id",
    "arm",
    "server",
    "device",
    "time",
    "hbm_used_mb",
    "hbm_total_mb",
    "aicore_pct",
    "source",
    "temp_c",
)


def _times(n: int) -> np.ndarray[Any, Any]:
    """One sample per device every 100 ms from T0, as RFC 3339 UTC text (ms)."""
    ns = T0_NS + (np.arange(n, dtype=np.int64) // (len(SERVERS) * DEVICES)) * 100_000_000
    return np.char.add(np.datetime_as_string(ns.astype("datetime64[ns]"), unit="ms"), "Z")


def write_telemetry(path: Path, n: int, fmt: str) -> None:
    """``n`` npu-smi shaped telemetry rows of the bench campaign's accepted attempt."""
    rng = np.random.default_rng(11)
    used = np.round(rng.uniform(30_000, 60_000, n), 1).tolist()
    core = rng.integers(0, 101, n).tolist()
    temp = np.round(rng.uniform(35, 80, n), 2).tolist()
    times = _times(n).tolist()
    per_server = len(SERVERS) * DEVICES
    with path.open("w", encoding="utf-8") as fh:
        if fmt == "csv":
            fh.write(",".join(_COLUMNS) + "\n")
        for i in range(n):
            slot = i % per_server
            s = slot // DEVICES
            row: dict[str, object] = {
                "attempt_id": "final-2",
                "arm": ORDER[s],
                "server": SERVERS[s],
                "device": f"npu:{slot % DEVICES}",
                "time": times[i],
                "hbm_used_mb": used[i],
                "hbm_total_mb": 65536.0,
                "aicore_pct": None if i % 9 == 0 else core[i],
            }
            if i % 5:
                row["source"] = "npu-smi"
            if i % 2 == 0:
                row["temp_c"] = None if i % 10 == 0 else temp[i]
            if fmt == "jsonl":
                fh.write(json.dumps(row) + "\n")
            else:
                cells = ["" if row.get(c) is None else str(row[c]) for c in _COLUMNS]
                fh.write(",".join(cells) + "\n")


_METRICS = ("ssim", "audio_spectral_cosine", "lpips")


def write_comparisons(path: Path, n: int, fmt: str, receipts: int) -> None:
    """``n`` comparisons of the bench campaign's measured request pairs."""
    rng = np.random.default_rng(12)
    values = np.round(rng.uniform(0.8, 1.0, (n, len(_METRICS))), 4).tolist()
    pairs = receipts // len(SERVERS) - WARMUPS
    known = [
        "comparison_id",
        "attempt_id",
        "baseline_request_id",
        "candidate_request_id",
        "baseline_sha256",
        "candidate_sha256",
    ]
    with path.open("w", encoding="utf-8") as fh:
        if fmt == "csv":
            fh.write(",".join([*known, *(f"metrics.{m}" for m in _METRICS)]) + "\n")
        for i in range(n):
            seq = WARMUPS + i % pairs
            row: dict[str, object] = {
                "comparison_id": f"cmp-{i}",
                "attempt_id": "final-2",
                "baseline_request_id": f"r0-{seq}",
                "candidate_request_id": f"r1-{seq}",
            }
            if i % 2 == 0:
                row["baseline_sha256"] = f"{i:064x}"
            if i % 3 == 0:
                row["candidate_sha256"] = None
            metrics = dict(zip(_METRICS, values[i], strict=True))
            if fmt == "jsonl":
                if i % 7 == 0:
                    del metrics["lpips"]
                row["metrics"] = metrics
                fh.write(json.dumps(row) + "\n")
            else:
                cells = ["" if row.get(c) is None else str(row[c]) for c in known]
                fh.write(",".join([*cells, *(str(v) for v in metrics.values())]) + "\n")


def generate(camp: Path, receipts: int, rows: int, fmt: str, table: str = "telemetry") -> None:
    """The replay_scale campaign with ``rows`` rows of ``table`` in ``fmt``."""
    write_campaign(camp, receipts)
    (camp / f"{table}.jsonl").unlink()
    if table == "telemetry":
        write_telemetry(camp / f"telemetry.{fmt}", rows, fmt)
    else:
        write_comparisons(camp / f"comparisons.{fmt}", rows, fmt, receipts)


def run_once(
    path: str, camp: Path, out: Path, table: str = "telemetry"
) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, bundle SHA-256 or '-') of one fresh process."""
    env = dict(os.environ)
    env.pop(PER_ROW_ENV, None)
    if path == "per-row":
        env[PER_ROW_ENV] = "1"
    if path == "peer":
        src = next(camp.glob(f"{table}.*"))
        argv = [sys.executable, "-c", _PEER, str(src), str(out)]
    else:
        argv = [sys.executable, "-c", _CHILD, str(camp), str(out)]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    stdout, stderr = proc.communicate()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{path} on {camp} failed:\n{stderr.decode(errors='replace')}")
    rss, sha = stdout.decode().split()
    out.unlink(missing_ok=True)
    return wall, usage.ru_utime + usage.ru_stime, int(rss) / 1024, sha


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--table", choices=["telemetry", "comparisons"], default="telemetry")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--receipts", type=int, default=1_000)
    ap.add_argument("--formats", nargs="+", choices=["csv", "jsonl"], default=["jsonl"])
    ap.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="table-scale-", dir=args.workdir))
    load0 = os.getloadavg()
    results: list[tuple[str, str, float, float, float, str]] = []
    try:
        for fmt in args.formats:
            camp = work / f"campaign-{fmt}"
            tag = f"[{args.rows:,} {args.table} {fmt}]"
            note(f"{tag} generating")
            # A spawned child: this process stays small (children inherit ru_maxrss).
            ctx = multiprocessing.get_context("spawn")
            gen = ctx.Process(
                target=generate, args=(camp, args.receipts, args.rows, fmt, args.table)
            )
            gen.start()
            gen.join()
            if gen.exitcode != 0:
                raise SystemExit(f"generating {camp} failed")
            runs: dict[str, list[tuple[float, float, float, str]]] = {p: [] for p in args.paths}
            for i in range(args.repeat):
                for p in args.paths:
                    note(f"{tag} {p} {i + 1}/{args.repeat}")
                    runs[p].append(run_once(p, camp, work / "out.bin", args.table))
            shutil.rmtree(camp)
            for p, rs in runs.items():
                shas = {r[3] for r in rs}
                results.append(
                    (
                        fmt,
                        p,
                        statistics.median(r[0] for r in rs),
                        statistics.median(r[1] for r in rs),
                        max(r[2] for r in rs),
                        shas.pop() if len(shas) == 1 else "differs",
                    )
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in load0],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        f"{args.rows:,} {args.table} rows, {args.receipts:,} receipts; fresh process each; "
        f"median of {args.repeat}; {env}"
    )
    print(f"{'fmt':>5} {'path':>8} {'wall s':>8} {'CPU s':>7} {'RSS MiB':>8} {'x peer':>6}")
    peers = {fmt: wall for fmt, p, wall, *_ in results if p == "peer"}
    for fmt, p, wall, cpu, rss, _ in results:
        ratio = f"{wall / peers[fmt]:.2f}" if fmt in peers and p != "peer" else ""
        print(f"{fmt:>5} {p:>8} {wall:>8.2f} {cpu:>7.2f} {rss:>8.0f} {ratio:>6}")
    seals: dict[str, set[str]] = {}
    for fmt, p, *_, sha in results:
        if p != "peer":
            seals.setdefault(fmt, set()).add(sha)
    same = all(len(v) == 1 and "differs" not in v for v in seals.values())
    print("seal paths wrote the same bytes" if same else "SEAL PATHS WROTE DIFFERENT BYTES")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
