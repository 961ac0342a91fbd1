"""Benchmark: sealing 250k, 500k and 1M receipts, per-row path against the columnar path.

For each size and receipts format (CSV, JSON Lines), generates the seed-shaped
campaign of ``bench/replay_scale.py`` and seals it twice, each time in a fresh
process through ``bundler.seal.seal_campaign`` (unsigned, no media): once with
``REPROBUNDLE_SEAL_PER_ROW=1`` (the per-row path every seal took before issue 11)
and once as shipped (columnar). Reports wall clock, CPU seconds and peak RSS
(``ru_maxrss`` of the child) of each, their ratio, and whether both bundles
have the same SHA-256 (they must: same campaign, same bytes).

Target (issue 11 item 5): 1M receipts in <= 8 s wall and <= 1.5 GiB peak RSS,
cost growing linearly.

Run: ``.venv/bin/python bench/seal_scale.py [--sizes 250000 500000 1000000]
[--formats csv jsonl] [--repeat 1] [--workdir DIR] [--json]``. Progress goes
to stderr, the table (or ``--json``) to stdout. Exit status 0 whatever the
speed; 1 if a seal failed or the two paths wrote different bytes.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_scale import write_campaign  # a sibling bench script

MIB = 1 << 20
# bundler.campaign.columnar.PER_ROW_ENV, not imported: no import cost
PER_ROW_ENV = "REPROBUNDLE_SEAL_PER_ROW"

# One seal in a fresh process: wall, peak RSS (KiB), CPU seconds and the bundle's SHA-256.
_CHILD = """
import hashlib, resource, sys, time
from pathlib import Path
t = time.perf_counter()
from bundler.seal import seal_campaign
r = seal_campaign(Path(sys.argv[1]), Path(sys.argv[2]), force=True)
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
print(wall, u.ru_maxrss, u.ru_utime + u.ru_stime, r.bundle_sha256)
"""


def note(msg: str) -> None:
    """Progress on stderr; stdout holds only the result."""
    print(msg, file=sys.stderr, flush=True)


def to_jsonl(csv_path: Path, out: Path) -> None:
    """The same receipts as JSON Lines: integers and doubles as JSON numbers, exactly."""
    with csv_path.open(encoding="utf-8", newline="") as src, out.open("w", encoding="utf-8") as fh:
        for row in csv.DictReader(src):
            rec: dict[str, object] = dict(row)
            rec["seq"] = int(row["seq"])
            rec["e2e_s"] = float(row["e2e_s"])
            fh.write(json.dumps(rec) + "\n")


@dataclass(frozen=True)
class Row:
    """One size and format: both paths."""

    receipts: int
    fmt: str
    per_row_s: float
    per_row_cpu_s: float
    per_row_rss_mib: float
    columnar_s: float
    columnar_cpu_s: float
    columnar_rss_mib: float
    speedup: float
    same_bytes: bool


def seal_once(camp: Path, out: Path, per_row: bool) -> tuple[float, float, float, str]:
    """(wall s, peak RSS MiB, CPU s, bundle SHA-256) of one seal in a fresh process."""
    env = dict(os.environ)
    env.pop(PER_ROW_ENV, None)
    if per_row:
        env[PER_ROW_ENV] = "1"
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, str(camp), str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if res.returncode != 0:
        raise SystemExit(f"seal of {camp} failed:\n{res.stderr}")
    wall, rss, cpu, sha = res.stdout.split()
    out.unlink(missing_ok=True)
    return float(wall), int(rss) / 1024, float(cpu), sha


def measure(n: int, fmt: str, work: Path, repeat: int) -> Row:
    """Generate one campaign, seal it per-row and columnar ``repeat`` times, interleaved."""
    camp = work / f"campaign-{n}-{fmt}"
    note(f"[{n:>9,} {fmt}] generating")
    write_campaign(camp, n)
    if fmt == "jsonl":
        to_jsonl(camp / "receipts.csv", camp / "receipts.jsonl")
        (camp / "receipts.csv").unlink()
    runs: dict[bool, list[tuple[float, float, float, str]]] = {True: [], False: []}
    for i in range(repeat):
        for per_row in (True, False):
            note(f"[{n:>9,} {fmt}] {'per-row' if per_row else 'columnar'} {i + 1}/{repeat}")
            runs[per_row].append(seal_once(camp, work / "out.bundle", per_row))
    shutil.rmtree(camp)

    def med(per_row: bool, k: int) -> float:
        return statistics.median(float(r[k]) for r in runs[per_row])

    shas = {r[3] for rs in runs.values() for r in rs}
    return Row(
        receipts=n,
        fmt=fmt,
        per_row_s=round(med(True, 0), 2),
        per_row_cpu_s=round(med(True, 2), 2),
        per_row_rss_mib=round(max(r[1] for r in runs[True]), 1),
        columnar_s=round(med(False, 0), 2),
        columnar_cpu_s=round(med(False, 2), 2),
        columnar_rss_mib=round(max(r[1] for r in runs[False]), 1),
        speedup=round(med(True, 0) / med(False, 0), 1),
        same_bytes=len(shas) == 1,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the table or JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 500_000, 1_000_000])
    ap.add_argument("--formats", nargs="+", choices=["csv", "jsonl"], default=["csv", "jsonl"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="seal-scale-", dir=args.workdir))
    load0 = os.getloadavg()[0]
    try:
        rows = [measure(n, f, work, args.repeat) for f in args.formats for n in args.sizes]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "load_average_start": round(load0, 2),
        "load_average_end": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps({"environment": env, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(f"seal_campaign, unsigned, fresh process each; median of {args.repeat}; {env}")
        print("(wall time is shared with whatever else runs; CPU s is our own)")
        print(
            f"{'receipts':>10} {'fmt':>5} {'per-row s':>9} {'CPU s':>6} {'RSS MiB':>8} "
            f"{'columnar s':>10} {'CPU s':>6} {'RSS MiB':>8} {'speedup':>7} {'same bytes':>10}"
        )
        for r in rows:
            same = "yes" if r.same_bytes else "NO"
            print(
                f"{r.receipts:>10,} {r.fmt:>5} {r.per_row_s:>9.2f} {r.per_row_cpu_s:>6.2f} "
                f"{r.per_row_rss_mib:>8.0f} {r.columnar_s:>10.2f} {r.columnar_cpu_s:>6.2f} "
                f"{r.columnar_rss_mib:>8.0f} {r.speedup:>6.1f}x {same:>10}"
            )
    return 0 if all(r.same_bytes for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
