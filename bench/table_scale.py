"""Benchmark: sealing a campaign with a large telemetry table, column-wise vs per-row vs pyarrow.

Telemetry sampled every 100 ms per device over a long campaign (npu-smi) reaches a
million rows; issue 22 asks that such a table, like receipts, be read column-wise.
The campaign is ``bench/replay_scale.py``'s with few receipts (``--receipts``) and its
``telemetry`` table replaced by ``--rows`` samples in the npu-smi shape: every
optional field, ``aicore_pct`` null on one row in nine, ``source`` absent on one in
five, and one field beyond the schema (``temp_c``, absent on odd rows, null on one in
ten). Paths, each in a fresh process timed whole (imports included), alternating:

- ``columnar``: ``bundler.seal.seal_campaign`` as shipped (unsigned);
- ``per-row``: the same with ``REPROBUNDLE_SEAL_PER_ROW=1``;
- ``peer``: ``pyarrow.json.read_json`` (or ``pyarrow.csv.read_csv``) of the telemetry
  file, then ``pyarrow.parquet.write_table(compression="zstd")``.

The two seal paths must write the same bundle (SHA-256 compared). Reports wall, CPU
seconds and peak RSS of each, and the seal/peer wall ratio (the seal also reads,
checks and writes the rest of the campaign: the ratio is an upper bound on the
table's own cost).

Run: ``.venv/bin/python bench/table_scale.py [--rows 200000] [--formats jsonl csv]
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
from replay_scale import DEVICES, ORDER, SERVERS, T0_NS, write_campaign  # sibling bench scripts
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


def generate(camp: Path, receipts: int, rows: int, fmt: str) -> None:
    """The replay_scale campaign with ``rows`` telemetry samples in ``fmt``."""
    write_campaign(camp, receipts)
    (camp / "telemetry.jsonl").unlink()
    write_telemetry(camp / f"telemetry.{fmt}", rows, fmt)


def run_once(path: str, camp: Path, out: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, bundle SHA-256 or '-') of one fresh process."""
    env = dict(os.environ)
    env.pop(PER_ROW_ENV, None)
    if path == "per-row":
        env[PER_ROW_ENV] = "1"
    if path == "peer":
        src = next(camp.glob("telemetry.*"))
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
            note(f"[{args.rows:,} telemetry {fmt}] generating")
            # A spawned child: this process stays small (children inherit ru_maxrss).
            ctx = multiprocessing.get_context("spawn")
            gen = ctx.Process(target=generate, args=(camp, args.receipts, args.rows, fmt))
            gen.start()
            gen.join()
            if gen.exitcode != 0:
                raise SystemExit(f"generating {camp} failed")
            runs: dict[str, list[tuple[float, float, float, str]]] = {p: [] for p in args.paths}
            for i in range(args.repeat):
                for p in args.paths:
                    note(f"[{args.rows:,} telemetry {fmt}] {p} {i + 1}/{args.repeat}")
                    runs[p].append(run_once(p, camp, work / "out.bin"))
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
        f"{args.rows:,} telemetry rows, {args.receipts:,} receipts; fresh process each; "
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
