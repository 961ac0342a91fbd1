"""Benchmark: sealing 1M and 10M receipts against a plain pyarrow read + write of the file.

For each size, receipts format (CSV, JSON Lines) and shape, generates the
campaign of ``bench/replay_scale.py`` and runs, alternating, each in a fresh
process timed whole (interpreter start and imports included):

- ``columnar``: ``bundler.seal.seal_campaign`` as shipped (unsigned, no media);
- ``per-row``: the same with ``REPROBUNDLE_SEAL_PER_ROW=1`` (the per-row path every
  seal took before issue 11; slow, off by default);
- ``peer``: the plain pyarrow script a user would write, ``pyarrow.json.read_json``
  (or ``pyarrow.csv.read_csv``) of the receipts file, then
  ``pyarrow.parquet.write_table(compression="zstd")``;
- ``peer-jemalloc``: the same script with ``ARROW_DEFAULT_MEMORY_POOL=jemalloc``.
  pyarrow's default pool (mimalloc) spent 2-4.6 s of system time on this VM,
  touching fresh pages for its whole-file table, where jemalloc spent 0.5 s: the
  fastest peer we know how to run, for an honest ratio (printed against ``peer``).

Shapes: ``exact`` (the schema's required fields only), ``seed`` (the bundled
sample's shape: every optional field, explicit nulls, a ``prompt_id`` beyond the
schema on one row in eight), ``extra`` (several unknown fields of each JSON
scalar type, some absent, some explicitly null, one unique per row) and
``objects`` (JSON Lines only: the seed shape with an object-valued unknown field
``usage`` on every row, holding integers and a nested object).

Reports wall clock, CPU seconds (the child's, all threads, from ``wait4``; user and
system apart too: the peer's system time, page faults of its whole-file table,
varies between machines and days) and peak RSS (``ru_maxrss`` of that child) of
each, the seal/peer wall ratio, and whether the seal paths wrote the same bundle
bytes.

Targets (issue 22): 1M rows within 1.5x the peer's wall time, peak <= 1 GiB;
10M rows peak <= 1.5 GiB.

Run: ``.venv/bin/python bench/seal_scale.py [--sizes 1000000 10000000]
[--formats jsonl csv] [--shapes seed extra] [--paths columnar peer] [--repeat 1]
[--workdir DIR] [--json]``. Progress goes to stderr, the table (or ``--json``)
to stdout. Exit status 0 whatever the speed; 1 if a run failed or two seal
paths wrote different bytes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_scale import write_campaign  # a sibling bench script

MIB = 1 << 20
# bundler.campaign.columnar.PER_ROW_ENV, not imported: no import cost
PER_ROW_ENV = "REPROBUNDLE_SEAL_PER_ROW"

# One seal in a fresh process: peak RSS (KiB) and the bundle's SHA-256.
_CHILD = """
import resource, sys
from pathlib import Path
from bundler.seal import seal_campaign
r = seal_campaign(Path(sys.argv[1]), Path(sys.argv[2]), force=True)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, r.bundle_sha256)
"""

# The plain pyarrow peer: read the receipts file, write it as zstd Parquet.
_PEER = """
import resource, sys
import pyarrow.csv, pyarrow.json, pyarrow.parquet as pq
src = sys.argv[1]
table = (pyarrow.json.read_json if src.endswith(".jsonl") else pyarrow.csv.read_csv)(src)
pq.write_table(table, sys.argv[2], compression="zstd")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "-")
"""

PATHS = ("columnar", "per-row", "peer", "peer-jemalloc")
SHAPES = ("exact", "seed", "extra", "objects")


def note(msg: str) -> None:
    """Progress on stderr; stdout holds only the result."""
    print(msg, file=sys.stderr, flush=True)


class _Hexes:
    """``n`` random SHA-256-like hex digests, made one at a time from the raw bytes
    (10M as Python strings would hold ~1 GiB in the generator)."""

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    def __getitem__(self, i: int) -> str:
        return self._raw[32 * i : 32 * i + 32].hex()


def reshape(csv_path: Path, out: Path, fmt: str, shape: str) -> None:
    """The receipts of ``csv_path`` (schema-exact CSV) in ``fmt`` and ``shape``.

    Integers and doubles keep their text, so both formats carry the same values.
    """
    rng = np.random.default_rng(7)
    with csv_path.open(encoding="utf-8") as src:
        n = sum(1 for _ in src) - 1
    # Rows are read again one at a time (10M rows as lists of cells would need ~7 GiB).
    src = csv_path.open(encoding="utf-8")
    src.readline()
    cells = (line.rstrip("\n").split(",") for line in src)
    shas = _Hexes(rng.bytes(32 * n) if shape != "exact" else b"")
    tokens = rng.integers(1, 4000, n).tolist()
    names = ["request_id", "attempt_id", "arm", "server", "phase", "seq", "start", "end"]
    names += ["e2e_s", "status"]
    if fmt == "csv" and shape == "objects":
        raise SystemExit("the objects shape is JSON Lines only (CSV cells are text)")
    with out.open("w", encoding="utf-8") as fh:
        if fmt == "csv":
            extra = {
                "exact": "",
                "seed": ",timeout_level,http_status,output_sha256,error,prompt_id",
                "extra": ",timeout_level,http_status,output_sha256,error,"
                "prompt_id,tokens_in,ttft_s,cache_hit,trace_id",
            }[shape]
            fh.write(",".join(names) + extra + "\n")
        for i, c in enumerate(cells):
            if fmt == "csv":
                fh.write(",".join(c) + _csv_tail(shape, i, shas, tokens) + "\n")
                continue
            head = (
                f'{{"request_id": "{c[0]}", "attempt_id": "{c[1]}", "arm": "{c[2]}", '
                f'"server": "{c[3]}", "phase": "{c[4]}", "seq": {c[5]}, "start": "{c[6]}", '
                f'"end": "{c[7]}", "e2e_s": {c[8]}, "status": "{c[9]}"'
            )
            fh.write(head + _json_tail(shape, i, shas, tokens) + "}\n")
    src.close()


def _json_tail(shape: str, i: int, shas: _Hexes, tokens: list[int]) -> str:
    if shape == "exact":
        return ""
    tail = (
        f', "timeout_level": null, "http_status": 200, "output_sha256": "{shas[i]}", "error": null'
    )
    if shape == "seed":
        return tail + (f', "prompt_id": "q{i % 50}"' if i % 8 == 0 else "")
    if shape == "objects":
        cached = "true" if i % 3 else "false"
        return tail + (
            f', "usage": {{"prompt_tokens": {tokens[i]}, "completion_tokens": {i % 97}, '
            f'"cache": {{"hit": {cached}, "kind": "prefix"}}}}'
        )
    tail += f', "prompt_id": "q{i % 50}", "tokens_in": {tokens[i]}'
    tail += ', "ttft_s": null' if i % 7 == 0 else f', "ttft_s": {tokens[i] / 1000!r}'
    if i % 3:
        tail += f', "cache_hit": {"true" if i % 2 else "false"}'
    return tail + f', "trace_id": "t{i:x}-{shas[i][:8]}"'


def _csv_tail(shape: str, i: int, shas: _Hexes, tokens: list[int]) -> str:
    if shape == "exact":
        return ""
    tail = f",,200,{shas[i]},"
    if shape == "seed":
        return tail + (f",q{i % 50}" if i % 8 == 0 else ",")
    ttft = "" if i % 7 == 0 else repr(tokens[i] / 1000)
    hit = ("true" if i % 2 else "false") if i % 3 else ""
    return tail + f",q{i % 50},{tokens[i]},{ttft},{hit},t{i:x}-{shas[i][:8]}"


def generate(camp: Path, n: int, fmt: str, shape: str) -> None:
    """The campaign of ``bench/replay_scale.py`` with its receipts in ``fmt`` and ``shape``."""
    write_campaign(camp, n)
    reshape(camp / "receipts.csv", camp / f"receipts.new.{fmt}", fmt, shape)
    (camp / "receipts.csv").unlink()
    (camp / f"receipts.new.{fmt}").rename(camp / f"receipts.{fmt}")


@dataclass(frozen=True)
class Run:
    """One path on one campaign: medians of wall and CPU, the worst peak."""

    receipts: int
    fmt: str
    shape: str
    path: str
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    rss_mib: float
    sha256: str


def run_once(path: str, camp: Path, out: Path) -> tuple[float, float, float, float, str]:
    """(wall s, user CPU s, system CPU s, peak RSS MiB, bundle SHA-256) of one fresh
    process, timed whole."""
    env = dict(os.environ)
    env.pop(PER_ROW_ENV, None)
    if path == "per-row":
        env[PER_ROW_ENV] = "1"
    if path.startswith("peer"):
        if path == "peer-jemalloc":
            env["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
        src = next(camp.glob("receipts.*"))
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
    return wall, usage.ru_utime, usage.ru_stime, int(rss) / 1024, sha


def measure(  # noqa: PLR0917
    n: int, fmt: str, shape: str, paths: list[str], work: Path, repeat: int
) -> list[Run]:
    """Generate one campaign, run every path ``repeat`` times, alternating."""
    camp = work / f"campaign-{n}-{fmt}-{shape}"
    note(f"[{n:>10,} {fmt} {shape}] generating")
    # Generated in a child of its own: Linux carries a forking parent's RSS high-water
    # mark into its children's ru_maxrss, so this process must stay small.
    gen = multiprocessing.get_context("spawn").Process(target=generate, args=(camp, n, fmt, shape))
    gen.start()
    gen.join()
    if gen.exitcode != 0:
        raise SystemExit(f"generating {camp} failed")
    runs: dict[str, list[tuple[float, float, float, float, str]]] = {p: [] for p in paths}
    for i in range(repeat):
        for p in paths:
            note(f"[{n:>10,} {fmt} {shape}] {p} {i + 1}/{repeat}")
            runs[p].append(run_once(p, camp, work / "out.bin"))
    shutil.rmtree(camp)
    return [
        Run(
            receipts=n,
            fmt=fmt,
            shape=shape,
            path=p,
            wall_s=round(statistics.median(r[0] for r in rs), 2),
            cpu_s=round(statistics.median(r[1] + r[2] for r in rs), 2),
            user_s=round(statistics.median(r[1] for r in rs), 2),
            sys_s=round(statistics.median(r[2] for r in rs), 2),
            rss_mib=round(max(r[3] for r in rs), 1),
            sha256=rs[0][4] if len({r[4] for r in rs}) == 1 else "differs",
        )
        for p, rs in runs.items()
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the table or JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--formats", nargs="+", choices=["csv", "jsonl"], default=["jsonl"])
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=["seed", "extra"])
    ap.add_argument("--paths", nargs="+", choices=PATHS, default=["columnar", "peer"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="seal-scale-", dir=args.workdir))
    load0 = os.getloadavg()
    try:
        runs = [
            r
            for n in args.sizes
            for f in args.formats
            for sh in args.shapes
            for r in measure(n, f, sh, args.paths, work, args.repeat)
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "load_average_start": [round(x, 2) for x in load0],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "bench_parent_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }

    def by_key(path: str) -> dict[tuple[int, str, str], Run]:
        return {(r.receipts, r.fmt, r.shape): r for r in runs if r.path == path}

    peers, jemalloc = by_key("peer"), by_key("peer-jemalloc")
    seals: dict[tuple[int, str, str], set[str]] = {}
    for r in runs:
        if not r.path.startswith("peer"):
            seals.setdefault((r.receipts, r.fmt, r.shape), set()).add(r.sha256)
    same = all(len(v) == 1 and "differs" not in v for v in seals.values())
    if args.json:
        print(json.dumps({"environment": env, "runs": [asdict(r) for r in runs]}, indent=2))
        return 0 if same else 1
    print(f"fresh process each, timed whole; median of {args.repeat}; {env}")
    print(
        f"{'receipts':>10} {'fmt':>5} {'shape':>5} {'path':>13} {'wall s':>8} {'CPU s':>7} "
        f"{'user s':>7} {'sys s':>6} {'RSS MiB':>8} {'x peer':>6} {'x peer-jemalloc':>15}"
    )

    def ratio(r: Run, against: dict[tuple[int, str, str], Run]) -> str:
        other = against.get((r.receipts, r.fmt, r.shape))
        return f"{r.wall_s / other.wall_s:.2f}" if other and not r.path.startswith("peer") else ""

    for r in runs:
        print(
            f"{r.receipts:>10,} {r.fmt:>5} {r.shape:>5} {r.path:>13} {r.wall_s:>8.2f} "
            f"{r.cpu_s:>7.2f} {r.user_s:>7.2f} {r.sys_s:>6.2f} {r.rss_mib:>8.0f} "
            f"{ratio(r, peers):>6} {ratio(r, jemalloc):>15}"
        )
    print("seal paths wrote the same bytes" if same else "SEAL PATHS WROTE DIFFERENT BYTES")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
